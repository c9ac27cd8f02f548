"""``cre run FILE``: apply one CRE object, follow it to its verdict, report, exit by verdict.

The reference CLI's ``certification run`` in one verb that also takes a Workflow, a WorkloadRun
or a Job. The file (``-`` for stdin) must hold exactly one of them. The object is created (never
updated: a run with the name of an earlier one says so, rather than silently following the old
result); with ``--wait`` every change of phase or condition prints one line, so a CI log reads
as the run went, and the end prints the verdict and, for a Certification, one line per category.
``--results-file`` gets the JSON report (``cre report -o json``'s for a Certification);
``--cleanup`` deletes the object afterwards (its children go with it by owner references).

Exit codes: 0 Passed; 9 Failed; 10 not certified (Incomplete, or ``--timeout`` expired); the
usual input (3), unreachable (5) and API (7) codes otherwise.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import anyio
import attrs
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from cre.api import labels as L
from cre.api.certification import Certification
from cre.api.converter import from_dict
from cre.api.errors import ValidationError
from cre.api.kinds import BY_KIND
from cre.cli.cluster import Connection, api_failure, connect, namespace_of, snapshot
from cre.cli.exitcodes import CliError, ExitCode
from cre.core.certification.report import build_report, report_json
from cre.kube.client import ApiError, KubeClient, Resource

RUNNABLE: Final = ("Certification", "Workflow", "WorkloadRun", "Job")
#: What ``cre run`` exits with by verdict (the same numbers as ``status --exit-code``).
VERDICT_FAILED: Final = 9
NOT_CERTIFIED: Final = 10
TRIO: Final = ("Failed", "Succeeded", "InProgress")


@attrs.frozen(kw_only=True)
class Runnable:
    """The object ``cre run`` applies: its kind, name, namespace and body."""

    kind: str
    name: str
    namespace: str
    body: Mapping[str, Any]

    @property
    def resource(self) -> Resource:
        info = BY_KIND[self.kind]
        return Resource(L.GROUP, L.VERSION, info.plural, namespaced=info.namespaced,
                        kind=self.kind)

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def kubectl_name(self) -> str:
        return f"{BY_KIND[self.kind].plural[:-1]}.{L.GROUP}/{self.name}"


def load_runnable(path: str, *, namespace: str) -> Runnable:
    """The one CRE object in ``path`` (``-``: stdin), checked against its model."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(ExitCode.INPUT, f"{path}: no such file") from None
    except OSError as exc:
        raise CliError(ExitCode.INPUT, f"{path}: cannot read: {exc}") from None
    try:
        docs = [d for d in YAML(typ="safe", pure=True).load_all(text) if d is not None]
    except YAMLError as exc:
        raise CliError(ExitCode.INPUT, f"{path}: not valid YAML: "
                       f"{' '.join(str(exc).split())}") from None
    found = [d for d in docs if isinstance(d, dict) and d.get("kind") in RUNNABLE
             and str(d.get("apiVersion", "")).startswith(f"{L.GROUP}/")]
    if len(found) != 1:
        kinds = ", ".join(str(d.get("kind")) if isinstance(d, dict) else type(d).__name__
                          for d in docs) or "nothing"
        raise CliError(ExitCode.INPUT, f"{path}: expected exactly one {', '.join(RUNNABLE)} "
                       f"of {L.GROUP}, found {kinds}")
    body = dict(found[0])
    meta = dict(body.get("metadata") or {})
    if not meta.get("name"):
        raise CliError(ExitCode.INPUT, f"{path}: {body['kind']}: metadata.name: required")
    meta["namespace"] = meta.get("namespace") or namespace
    body["metadata"] = meta
    try:
        from_dict(body)
    except ValidationError as exc:
        raise CliError(ExitCode.INPUT, f"{path}: {exc.subject}: {exc.errors[0]}"
                       + (f" (and {len(exc.errors) - 1} more; cre validate {path} lists them)"
                          if len(exc.errors) > 1 else "")) from None
    return Runnable(kind=body["kind"], name=meta["name"], namespace=meta["namespace"],
                    body=body)


def progress(obj: Mapping[str, Any]) -> str:
    """One line for the object's current state: phase, then the True trio condition."""
    status = obj.get("status") or {}
    phase = status.get("phase") or "Pending"
    conds = {c.get("type"): c for c in status.get("conditions") or []
             if c.get("status") == "True"}
    cond = next((conds[t] for t in TRIO if t in conds), None)
    if cond is None:
        return phase
    text = f"{phase} ({cond.get('type')}/{cond.get('reason')}"
    return text + (f": {cond['message']})" if cond.get("message") else ")")


def progress_lines(kind: str, obj: Mapping[str, Any]) -> dict[str, str]:
    """What ``--wait`` prints, by key: the object's :func:`progress`, and for a Certification
    one line per category that has started (its state, verdict and message)."""
    lines = {"": progress(obj)}
    if kind == "Certification":
        for cat in (obj.get("status") or {}).get("categoryStatuses") or []:
            label = f"{cat.get('domain')}/{cat.get('variant')}"
            text = str(cat.get("status") or "Pending")
            if cat.get("verdict"):
                text += f", verdict {cat['verdict']}"
            if cat.get("message"):
                text += f": {cat['message']}"
            lines[label] = f"category {label}: {text}"
    return lines


def verdict_of(obj: Mapping[str, Any]) -> str | None:
    """Passed, Failed or Incomplete once the object is terminal; None before."""
    status = obj.get("status") or {}
    phase = status.get("phase")
    if phase not in ("Succeeded", "Failed"):
        return None
    verdict = status.get("verdict")
    if verdict:
        return str(verdict)
    return "Passed" if phase == "Succeeded" else "Failed"


def exit_code(verdict: str | None) -> int:
    """0 Passed, 9 Failed, 10 anything else (Incomplete, or not finished)."""
    if verdict == "Passed":
        return ExitCode.OK
    return VERDICT_FAILED if verdict == "Failed" else NOT_CERTIFIED


@attrs.frozen(kw_only=True)
class RunOptions:
    """``cre run``'s flags."""

    wait: bool = False
    timeout: float | None = None
    interval: float = 2.0
    cleanup: bool = False
    results_file: str | None = None
    dry_run: bool = False


async def _get(client: KubeClient, item: Runnable) -> dict[str, Any]:
    try:
        raw: dict[str, Any] = await client.get(item.resource, item.name, namespace=item.namespace)
    except ApiError as exc:
        if exc.not_found:
            raise CliError(ExitCode.NOT_FOUND, f"{item.ref} was deleted while cre followed "
                           "it") from None
        raise api_failure(exc, host=client.host, what=item.ref) from None
    return raw


async def _create(client: KubeClient, item: Runnable, *, dry_run: bool) -> None:
    try:
        await client.create(item.resource, dict(item.body), namespace=item.namespace,
                            query={"dryRun": "All"} if dry_run else None)
    except ApiError as exc:
        if exc.status == 409:
            raise CliError(ExitCode.API, f"{item.ref} already exists: delete it (kubectl "
                           f"delete {item.kubectl_name} -n {item.namespace}) or give the run "
                           "another name") from None
        if exc.not_found:
            raise CliError(ExitCode.NOT_FOUND, f"{client.host} does not serve "
                           f"{item.resource.plural}.{L.GROUP}: CRE's CRDs are not installed "
                           "(kubectl apply -k deploy/crds)") from None
        if exc.status == 422:
            raise CliError(ExitCode.API, f"{item.ref}: the API server rejected it: "
                           f"{exc.message}") from None
        raise api_failure(exc, host=client.host, what=f"create {item.ref}") from None


def _summary(lines: list[str], report: Any) -> None:
    for category in report.categories:
        failed = sorted(n.node for n in category.nodes if n.verdict == "Failed")
        text = f"  {category.entry}: {category.verdict or category.state}"
        if category.message:
            text += f" ({category.message})"
        if failed:
            text += f"; failed nodes: {', '.join(failed)}"
        lines.append(text)


async def run(conn: Connection, item: Runnable, options: RunOptions,
              echo: Callable[[str], None]) -> int:
    """Create ``item``, follow it when asked, print the outcome; returns the exit code."""
    client = await connect(conn)
    try:
        await _create(client, item, dry_run=options.dry_run)
        if options.dry_run:
            echo(f"{item.kubectl_name} created (server dry run)")
            return ExitCode.OK
        echo(f"{item.kubectl_name} created")
        if not options.wait:
            echo(f"follow it: cre status {item.name} -n {item.namespace} --watch"
                 if item.kind == "Certification" else
                 f"follow it: kubectl get {BY_KIND[item.kind].plural} {item.name} "
                 f"-n {item.namespace} -w")
            return ExitCode.OK
        obj, verdict = await _follow(client, item, options, echo)
        lines = [f"{item.ref}: {verdict or 'not finished'}"
                 + ("" if verdict else f" after {options.timeout:g}s (--timeout)")]
        results: dict[str, Any] = {
            "kind": item.kind, "namespace": item.namespace, "name": item.name,
            "verdict": verdict, "phase": (obj.get("status") or {}).get("phase"),
            "status": obj.get("status") or {}}
        if item.kind == "Certification":
            cert = from_dict(obj)
            assert isinstance(cert, Certification)
            report = build_report(await snapshot(client, cert))
            _summary(lines, report)
            results = report_json(report)
        for line in lines:
            echo(line)
        if options.results_file:
            _write_results(options.results_file, results)
            echo(f"results written to {options.results_file}")
        if options.cleanup:
            await _delete(client, item)
            echo(f"{item.kubectl_name} deleted (--cleanup)")
        return exit_code(verdict)
    finally:
        await client.close()


async def _follow(client: KubeClient, item: Runnable, options: RunOptions,
                  echo: Callable[[str], None]) -> tuple[dict[str, Any], str | None]:
    deadline = None if options.timeout is None else time.monotonic() + options.timeout
    shown: dict[str, str] = {}
    while True:
        obj = await _get(client, item)
        for key, line in progress_lines(item.kind, obj).items():
            if shown.get(key) != line:
                echo(f"{item.ref}: {line}")
                shown[key] = line
        verdict = verdict_of(obj)
        if verdict is not None:
            return obj, verdict
        if deadline is not None and time.monotonic() >= deadline:
            return obj, None
        await anyio.sleep(options.interval if deadline is None
                          else max(0.0, min(options.interval, deadline - time.monotonic())))


async def _delete(client: KubeClient, item: Runnable) -> None:
    try:
        await client.delete(item.resource, item.name, namespace=item.namespace,
                            propagation_policy="Foreground")
    except ApiError as exc:
        if not exc.not_found:
            raise api_failure(exc, host=client.host, what=f"delete {item.ref}") from None


def _write_results(path: str, results: Mapping[str, Any]) -> None:
    try:
        Path(path).write_text(json.dumps(results, indent=2, sort_keys=True, ensure_ascii=False)
                              + "\n", encoding="utf-8")
    except OSError as exc:
        raise CliError(ExitCode.INPUT, f"--results-file {path}: cannot write: {exc}") from None


def default_namespace(conn: Connection) -> str:
    """``-n``, else the kubeconfig context's namespace, else ``default``."""
    return namespace_of(conn)
