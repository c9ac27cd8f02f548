"""Differential conformance: the same request scripts against the emulator and a real server.

The emulator is only as good as its agreement with kube-apiserver. A :class:`Script` is a
sequence of HTTP requests (with ``${var}`` placeholders filled from earlier responses, such as
a list's resourceVersion or continue token); :func:`run_script` plays it against one server in
a namespace of its own and records every response; :func:`normalise` masks what legitimately
differs between two runs (uids, timestamps, resourceVersions, continue tokens, random name
suffixes); :func:`compare` lists the JSON paths where the two records still differ and
separates the differences an :class:`Allowed` entry explains (with its reason) from the rest.

Parsed bodies hide how they were written (a trailing newline, key order, escaping), and some
clients keep the raw text, so every HTTP record also holds its ``wire`` form
(:func:`.wire.wire_record`): the status line, the Content-Type, the body's ``form`` (Go's
compact JSON with the encoder's newline, without it, indented, or not JSON) and, for every
error response and the successful responses of the steps marked ``wire``, the raw body text
with only run-specific values masked.
"""

from __future__ import annotations

import asyncio
import base64
import fnmatch
import json
import re
import ssl
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import attrs
from ruamel.yaml import YAML

from .wire import wire_record


@attrs.frozen
class Target:
    """A server to run scripts against, read from its kubeconfig."""

    name: str
    url: str
    token: str
    ca_file: str | None
    etcd: str | None = None
    """A real server's etcd client URL (compaction steps use it); None for the emulator,
    which is compacted through its control API."""
    kubeconfig: str | None = None
    """The kubeconfig kubectl steps run with."""

    @classmethod
    def from_kubeconfig(cls, name: str, path: Path, *, etcd: str | None = None) -> Target:
        config = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        return cls(name=name, url=cluster["server"], token=user.get("token", ""),
                   ca_file=cluster.get("certificate-authority"), etcd=etcd,
                   kubeconfig=str(path))

    def ssl(self) -> ssl.SSLContext | bool:
        if self.url.startswith("https://") and self.ca_file:
            return ssl.create_default_context(cafile=self.ca_file)
        return False


@attrs.frozen
class Step:
    """One request. ``save`` maps a variable to a dotted path in the response body;
    ``watch`` > 0 reads that many watch events (fewer if the stream ends within ``wait``
    seconds); ``until`` repeats the request until the status code is the given one (or
    ``wait`` seconds pass), for effects of asynchronous controllers such as the GC.
    ``compact`` makes the step a storage compaction at the current revision instead of a
    request (:func:`compact_storage`); ``kubectl`` makes it a kubectl command in the script's
    namespace (``body``, a string, is its stdin; :func:`run_kubectl`)."""

    method: str
    path: str
    body: Any = None
    content_type: str = "application/json"
    headers: Mapping[str, str] = attrs.field(factory=dict)
    save: Mapping[str, str] = attrs.field(factory=dict)
    watch: int = 0
    until: int | None = None
    wait: float = 5.0
    note: str = ""
    compact: bool = False
    kubectl: tuple[str, ...] = ()
    wire: bool = False
    """Compare a successful response's raw bytes too (error responses always are)."""


@attrs.frozen
class Script:
    """A named sequence of requests run in a namespace of its own (``${ns}``)."""

    name: str
    steps: tuple[Step, ...]
    about: str = ""
    namespaced: bool = True


@attrs.frozen
class Allowed:
    """A documented difference: paths matching ``path`` (fnmatch on ``step[i].a.b``) in
    script ``script`` (fnmatch; not the scripts named in ``unless``) differ for ``reason``."""

    script: str
    path: str
    reason: str
    unless: tuple[str, ...] = ()


@attrs.frozen
class Difference:
    path: str
    emulator: Any
    real: Any
    reason: str | None = None


@attrs.frozen
class Outcome:
    """The comparison of one script: ``verdict`` is equal, allowed or differing."""

    script: str
    differences: tuple[Difference, ...]

    @property
    def unexplained(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.reason is None)

    @property
    def verdict(self) -> str:
        if not self.differences:
            return "equal"
        return "differing" if self.unexplained else "allowed"


USER_AGENT = "cre-differential/1.0"
"""Both servers name the default field manager after it (``cre-differential``)."""

_VAR = re.compile(r"\$\{(\w+)\}")


def _fill(value: Any, env: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _VAR.sub(lambda m: env[m.group(1)], value)
    if isinstance(value, list):
        return [_fill(v, env) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, env) for k, v in value.items()}
    return value


def _dig(body: Any, dotted: str) -> str:
    for part in dotted.split("."):
        body = body[int(part)] if isinstance(body, list) else body[part]
    return str(body)


async def _request(session: aiohttp.ClientSession, target: Target, step: Step,
                   env: Mapping[str, str]) -> dict[str, Any]:
    path = _fill(step.path, env)
    body = _fill(step.body, env)
    data = body.encode() if isinstance(body, str) else (
        None if body is None else json.dumps(body).encode())
    headers = {"Authorization": f"Bearer {target.token}", "Accept": "application/json",
               "User-Agent": USER_AGENT,
               **({"Content-Type": step.content_type} if data is not None else {}),
               **step.headers}
    async with session.request(step.method, target.url + path, data=data, headers=headers,
                               ssl=target.ssl()) as resp:
        if step.watch:
            events: list[Any] = []
            if resp.status != 200:
                raw = await resp.read()
                return {"status": resp.status, "body": _parse(raw),
                        "wire": wire_record(resp, raw, full=True)}
            deadline = time.monotonic() + step.wait
            while len(events) < step.watch:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    line = await asyncio.wait_for(resp.content.readline(), left)
                except TimeoutError:
                    break
                if not line:
                    break
                if line.strip():
                    events.append(json.loads(line))
            return {"status": resp.status, "events": events}
        raw = await resp.read()
        return {"status": resp.status, "body": _parse(raw),
                "wire": wire_record(resp, raw, full=step.wire or resp.status >= 400)}


def _parse(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


COMPACT_REV_KEY = base64.b64encode(b"compact_rev_key").decode()
"""The etcd key through which kube-apiservers sharing an etcd tell each other the revision
they compacted at (``k8s.io/apiserver/pkg/storage/etcd3/compact.go``)."""


async def compact_storage(session: aiohttp.ClientSession, target: Target) -> None:
    """Compact the target's storage at its current revision.

    On a real server this is what a peer kube-apiserver's compactor does: record the revision
    under ``compact_rev_key`` (each kube-apiserver watches it and its watch cache drops the
    list snapshots below it on its next 15 s poll) and compact etcd there, through etcd's
    JSON gateway. The emulator does the same through ``POST /_emulator/compact``."""
    if target.etcd is None:
        async with session.post(target.url + "/_emulator/compact", ssl=target.ssl(), headers={
                "Authorization": f"Bearer {target.token}"}) as resp:
            resp.raise_for_status()
        return
    async with session.post(target.etcd + "/v3/kv/range",
                            json={"key": COMPACT_REV_KEY}) as resp:
        revision = int((await resp.json())["header"]["revision"])
    value = base64.b64encode(str(revision).encode()).decode()
    async with session.post(target.etcd + "/v3/kv/put",
                            json={"key": COMPACT_REV_KEY, "value": value}) as resp:
        resp.raise_for_status()
    async with session.post(target.etcd + "/v3/kv/compaction",
                            json={"revision": str(revision), "physical": True}) as resp:
        resp.raise_for_status()


_AGE = re.compile(r"(\d+d)?(\d+h)?(\d+m)?(\d+s)?")
_COLUMNS = re.compile(r" {2,}")


def _table_line(line: str) -> str:
    """A table row with its cells joined by `` | `` (widths follow the values) and ages
    masked."""
    cells = _COLUMNS.split(line.rstrip())
    return " | ".join("<age>" if c and _AGE.fullmatch(c) else c for c in cells)


async def run_kubectl(target: Target, step: Step, env: Mapping[str, str]) -> dict[str, Any]:
    """Run ``kubectl <step.kubectl>`` against the target in the script's namespace; the record
    holds the exit code, stdout (parsed when it is JSON, ages masked when it is a table) and
    stderr. Each target has its own discovery cache beside its kubeconfig."""
    if target.kubeconfig is None:
        raise ValueError(f"target {target.name} has no kubeconfig for kubectl steps")
    args = [_fill(a, env) for a in step.kubectl]
    stdin = _fill(step.body, env)
    cache = str(Path(target.kubeconfig).parent / "kubectl-cache")
    proc = await asyncio.create_subprocess_exec(
        "kubectl", f"--kubeconfig={target.kubeconfig}", f"--cache-dir={cache}",
        "-n", env["ns"], *args, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    data = None if stdin is None else (
        stdin if isinstance(stdin, str) else json.dumps(stdin)).encode()
    out, err = await asyncio.wait_for(proc.communicate(data), 60)
    text = out.decode(errors="replace")
    try:
        parsed: Any = json.loads(text) if text.lstrip().startswith("{") else None
    except ValueError:
        parsed = None
    if parsed is None:
        parsed = [_table_line(line) for line in text.splitlines()]
    return {"rc": proc.returncode, "stdout": parsed,
            "stderr": err.decode(errors="replace").splitlines()}


async def run_script(target: Target, script: Script) -> list[dict[str, Any]]:
    """Play ``script`` against ``target``; one record per step (status and body or events).

    The namespace ``d-<script name>`` is created first (not recorded) and deleted after."""
    ns = "d-" + script.name.replace("_", "-")[:60]
    env: dict[str, str] = {"ns": ns}
    records: list[dict[str, Any]] = []
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        if script.namespaced:
            await _request(session, target, Step("POST", "/api/v1/namespaces", body={
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}), env)
        try:
            for step in script.steps:
                if step.kubectl:
                    records.append(await run_kubectl(target, step, env))
                    continue
                if step.compact:
                    await compact_storage(session, target)
                    records.append({"compacted": True})
                    continue
                deadline = time.monotonic() + step.wait
                while True:
                    record = await _request(session, target, step, env)
                    if step.until is None or record["status"] == step.until \
                            or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.1)
                for var, dotted in step.save.items():
                    try:
                        env[var] = _dig(record.get("body"), dotted)
                    except (KeyError, IndexError, TypeError, ValueError):
                        env[var] = ""
                records.append(record)
        finally:
            if script.namespaced:
                await _request(session, target, Step(
                    "DELETE", f"/api/v1/namespaces/{ns}"), env)
    return records


_MASK_KEYS = {"uid": "<uid>", "resourceVersion": "<rv>", "creationTimestamp": "<ts>",
              "deletionTimestamp": "<ts>", "lastTransitionTime": "<ts>", "time": "<ts>",
              "lastUpdateTime": "<ts>", "lastProbeTime": "<ts>", "startTime": "<ts>",
              "continue": "<continue>"}
_RV_IN_MESSAGE = re.compile(r"\b\d{2,}\b")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def normalise(value: Any, *, key: str = "") -> Any:
    """Mask run-specific values: uids (wherever they appear, in keys and strings too),
    resourceVersions, timestamps, continue tokens, generated name suffixes and the numbers
    in Expired/Gone messages."""
    if isinstance(value, dict):
        out = {_UUID.sub("<uid>", k): normalise(v, key=k) for k, v in value.items()}
        meta = out.get("metadata")
        if isinstance(meta, dict) and meta.get("generateName") and "name" in meta:
            meta["name"] = meta["generateName"] + "<suffix>"
        if out.get("kind") == "Status" and out.get("reason") in ("Expired", "Gone"):
            out["message"] = _RV_IN_MESSAGE.sub("<n>", str(out.get("message", "")))
        return out
    if isinstance(value, list):
        return [normalise(v, key=key) for v in value]
    if key in _MASK_KEYS and value not in (None, ""):
        return _MASK_KEYS[key]
    if isinstance(value, str):
        return _UUID.sub("<uid>", value)
    return value


def _walk(a: Any, b: Any, path: str, out: list[tuple[str, Any, Any]]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            _walk(a.get(k, _MISSING), b.get(k, _MISSING), f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _walk(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append((path, a, b))


class _Missing:
    def __repr__(self) -> str:
        return "<absent>"


_MISSING = _Missing()


def compare(script: str, emulator: Sequence[Any], real: Sequence[Any],
            allowed: Sequence[Allowed]) -> Outcome:
    """Differences between the normalised records; each tagged with its allowlist reason."""
    raw: list[tuple[str, Any, Any]] = []
    _walk([normalise(r) for r in emulator], [normalise(r) for r in real], "step", raw)
    rules = [a for a in allowed
             if fnmatch.fnmatchcase(script, a.script) and script not in a.unless]
    diffs = []
    for path, a, b in raw:
        reason = next((r.reason for r in rules if fnmatch.fnmatchcase(path, r.path)), None)
        diffs.append(Difference(path=path, emulator=_plain(a), real=_plain(b), reason=reason))
    return Outcome(script=script, differences=tuple(diffs))


def _plain(value: Any) -> Any:
    return repr(value) if isinstance(value, _Missing) else value


async def run_all(emulator: Target, real: Target, scripts: Sequence[Script],
                  allowed: Sequence[Allowed]) -> list[Outcome]:
    """Run every script on both servers (the two runs of one script concurrently)."""
    outcomes = []
    for script in scripts:
        a, b = await asyncio.gather(run_script(emulator, script), run_script(real, script))
        outcomes.append(compare(script.name, a, b, allowed))
    return outcomes


def summary(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The headline table: scripts, equal, allowed, differing, and what differs."""
    verdicts = [o.verdict for o in outcomes]
    return {
        "scripts": len(outcomes),
        "equal": verdicts.count("equal"),
        "allowed": verdicts.count("allowed"),
        "differing": verdicts.count("differing"),
        "unexplained": {o.script: [attrs.asdict(d) for d in o.unexplained[:20]]
                        for o in outcomes if o.unexplained},
    }
