"""Starting the emulator: :func:`serve`, the :class:`Emulator` handle and its control API.

Tests and the CLI start the aiohttp server on 127.0.0.1 (any free port), write a kubeconfig
that kubectl and both Python clients accept, install CRDs, and hand back an :class:`Emulator`
whose Python API bypasses HTTP for setup: raw objects, container logs, faults and the clock.
HTTPS uses a throwaway self-signed CA made with the ``openssl`` CLI.
"""

from __future__ import annotations

import asyncio
import functools
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from ruamel.yaml import YAML

from . import errors
from .audit import Audit
from .errors import ApiError
from .faults import Faults
from .objects import DeleteOptions, WriteOptions
from .rbac import Rbac
from .resources import ResourceType
from .selectors import parse_field_selector, parse_label_selector
from .server import ApiServer
from .store import Obj

SETUP = WriteOptions(manager="cre-emulator", field_validation="Ignore")


class Clock:
    """The emulator's notion of now: wall-clock time plus an offset, or a fixed instant."""

    def __init__(self, start: datetime | None = None) -> None:
        self._fixed = start
        self._offset = timedelta()

    def __call__(self) -> datetime:
        if self._fixed is not None:
            return self._fixed
        return datetime.now(UTC) + self._offset

    def set(self, when: datetime) -> None:
        """Freeze the clock at ``when`` (timezone-aware)."""
        self._fixed = when

    def advance(self, seconds: float) -> None:
        if self._fixed is not None:
            self._fixed += timedelta(seconds=seconds)
        else:
            self._offset += timedelta(seconds=seconds)

    def release(self) -> None:
        """Follow the wall clock again (keeping any offset)."""
        self._fixed = None


class Objects:
    """Direct object access for test setup: same semantics as the API, no HTTP."""

    def __init__(self, server: ApiServer) -> None:
        self._server = server

    def _rt(self, api_version: str, kind: str) -> ResourceType:
        rt = self._server.registry.by_kind(api_version, kind)
        if rt is None:
            raise KeyError(f"the emulator does not serve {kind} in {api_version}")
        return rt

    def get(self, api_version: str, kind: str, name: str, namespace: str = "") -> Obj | None:
        rt = self._rt(api_version, kind)
        try:
            from .convert import from_storage

            return from_storage(rt, self._server.objects.get(rt, namespace, name))
        except ApiError:
            return None

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str = "",
        *,
        label_selector: str = "",
        field_selector: str = "",
    ) -> list[Obj]:
        rt = self._rt(api_version, kind)
        q = {"labelSelector": label_selector, "fieldSelector": field_selector}
        parse_label_selector(label_selector)
        parse_field_selector(field_selector)
        items, _, _, _ = self._server.list_objects(rt, namespace, q)
        return items

    def put(self, obj: Obj) -> Obj:
        """Create ``obj`` or replace the stored one (status included); returns the result."""
        rt = self._rt(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        meta = obj.get("metadata") or {}
        ns = str(meta.get("namespace", "")) if rt.namespaced else ""
        if rt.namespaced and not ns:
            ns = "default"
        name = str(meta.get("name", ""))
        body = _clone(obj)
        body.setdefault("metadata", {}).pop("resourceVersion", None)
        status = body.get("status")
        existing = self.get(rt.api_version, rt.kind, name, ns) if name else None
        if existing is None:
            stored = self._server.objects.create(rt, ns, body, SETUP)
            name = str(stored["metadata"]["name"])
        else:
            body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
            stored, _ = self._server.objects.update(rt, ns, name, body, SETUP)
        if status is not None and "status" in rt.subresources:
            upd = {**stored, "status": status}
            stored, _ = self._server.objects.update(rt, ns, name, upd, SETUP,
                                                    subresource="status")
        return stored

    def delete(self, api_version: str, kind: str, name: str, namespace: str = "", *,
               grace_period: int | None = None, propagation: str | None = None) -> Obj | None:
        rt = self._rt(api_version, kind)
        try:
            obj, _ = self._server.objects.delete(
                rt, namespace, name,
                DeleteOptions(grace_period=grace_period, propagation=propagation))
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        return obj


def _clone(obj: Obj) -> Obj:
    return orjson.loads(orjson.dumps(obj))  # type: ignore[no-any-return]


class Emulator:
    """A running emulator: URLs, kubeconfig and the Python control API."""

    def __init__(self, server: ApiServer, *, url: str, kubeconfig_path: Path, clock: Clock,
                 ca_path: Path | None) -> None:
        self.server = server
        self.url = url
        self.kubeconfig_path = kubeconfig_path
        self.clock = clock
        self.ca_path = ca_path
        self.objects = Objects(server)

    @property
    def kubernetes_version(self) -> str:
        return self.server.kubernetes_version

    @property
    def faults(self) -> Faults:
        return self.server.faults

    @property
    def audit(self) -> Audit:
        """Every request served (see :mod:`.audit`)."""
        return self.server.audit

    @property
    def rbac(self) -> Rbac:
        """Tokens and RBAC enforcement (see :mod:`.rbac`)."""
        return self.server.rbac

    @property
    def resource_version(self) -> int:
        return self.server.store.rv

    def append_log(self, namespace: str, pod: str, container: str, text: str, *,
                   previous: bool = False, at: datetime | None = None) -> None:
        self.server.logs.append(namespace, pod, container, text, previous=previous, at=at)

    def rotate_log(self, namespace: str, pod: str, container: str) -> None:
        self.server.logs.rotate(namespace, pod, container)

    def install_crd(self, crd: Obj) -> Obj:
        return install_crd(self.server, crd)

    async def settle(self) -> None:
        """Let the garbage collector finish everything pending."""
        self.server.gc.settle()
        await asyncio.sleep(0)


def install_crd(server: ApiServer, crd: Obj) -> Obj:
    rt = server.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    assert rt is not None
    return server.objects.create(rt, "", _clone(crd), SETUP)


def load_manifests(sources: Iterable[Path | Obj]) -> list[Obj]:
    """Objects from dicts, YAML files and directories of YAML files (sorted)."""
    out: list[Obj] = []
    for src in sources:
        if isinstance(src, dict):
            out.append(src)
            continue
        path = Path(src)
        files = sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml", ".json")) \
            if path.is_dir() else [path]
        for f in files:
            stat = f.stat()
            out.extend(_parse_yaml(str(f), stat.st_mtime_ns, stat.st_size))
    return out


@functools.lru_cache(maxsize=256)
def _parse_yaml(path: str, mtime_ns: int, size: int) -> tuple[Obj, ...]:
    """Documents of one YAML file (ruamel's C loader when installed), cached per file version."""
    with open(path, encoding="utf-8") as fh:
        docs = list(YAML(typ="safe").load_all(fh))
    return tuple(d for d in docs if isinstance(d, dict) and d.get("kind"))


def write_kubeconfig(path: Path, *, url: str, ca_path: Path | None) -> None:
    cluster: dict[str, Any] = {"server": url}
    if ca_path is not None:
        cluster["certificate-authority"] = str(ca_path)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cre-emulator", "cluster": cluster}],
        "users": [{"name": "cre-emulator", "user": {"token": "cre-emulator"}}],
        "contexts": [{"name": "cre-emulator",
                      "context": {"cluster": "cre-emulator", "user": "cre-emulator",
                                  "namespace": "default"}}],
        "current-context": "cre-emulator",
    }
    tmp = path.with_suffix(path.suffix + ".tmp")
    dumper = YAML(typ="safe")
    dumper.default_flow_style = False
    dumper.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    with tmp.open("w", encoding="utf-8") as fh:
        dumper.dump(config, fh)
    tmp.replace(path)


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """(ca.crt, server.crt, server.key) for 127.0.0.1/localhost, signed by a new CA."""
    ca_key, ca_crt = folder / "ca.key", folder / "ca.crt"
    key, csr, crt = folder / "server.key", folder / "server.csr", folder / "server.crt"
    ext = folder / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                   "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                   "extendedKeyUsage=serverAuth\n")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out",
        str(ca_crt), "-days", "2", "-subj", "/CN=cre-emulator-ca")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj",
        "/CN=127.0.0.1")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(crt), "-days", "2", "-extfile", str(ext))
    return ca_crt, crt, key


@asynccontextmanager
async def serve(
    *,
    crds: Sequence[Path | Obj] = (),
    kubernetes_version: str = "1.33",
    port: int = 0,
    tls: bool = False,
    clock: Clock | None = None,
    seed: int = 0,
    kubeconfig_path: Path | None = None,
    bookmark_interval: float = 60.0,
    history: int = 4096,
    rbac: bool = False,
) -> AsyncIterator[Emulator]:
    """Run an emulator on 127.0.0.1 for the duration of the ``async with`` block (``rbac``:
    enforce RBAC for service-account tokens, see :mod:`.rbac`)."""
    clock = clock or Clock()
    server = ApiServer(kubernetes_version=kubernetes_version, clock=clock, seed=seed,
                       history=history, bookmark_interval=bookmark_interval, rbac=rbac)
    for crd in load_manifests(crds):
        if crd.get("kind") == "Kustomization":
            continue  # CRD folders commonly carry their kustomization
        if crd.get("kind") != "CustomResourceDefinition":
            raise ValueError(
                f"{crd.get('kind')} {crd.get('metadata', {}).get('name')!r} is not a "
                "CustomResourceDefinition; only CRDs can be passed as crds="
            )
        try:
            install_crd(server, crd)
        except ApiError as exc:
            raise ValueError(
                f"CRD {crd.get('metadata', {}).get('name')!r} was rejected: {exc.message}"
            ) from exc
    with tempfile.TemporaryDirectory(prefix="cre-emulator-") as tmp:
        folder = Path(tmp)
        ssl_ctx = None
        ca_path: Path | None = None
        if tls:
            import ssl

            ca_path, crt, key = make_certificates(folder)
            ssl_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ssl_ctx.load_cert_chain(str(crt), str(key))
        runner = web.AppRunner(server.app(), access_log=None, handle_signals=False,
                               shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port, ssl_context=ssl_ctx, backlog=1024)
        await site.start()
        try:
            addrs = runner.addresses
            actual = int(addrs[0][1]) if addrs else port
            url = f"{'https' if tls else 'http'}://127.0.0.1:{actual}"
            kc = kubeconfig_path or folder / "kubeconfig"
            write_kubeconfig(kc, url=url, ca_path=ca_path)
            yield Emulator(server, url=url, kubeconfig_path=kc, clock=clock, ca_path=ca_path)
        finally:
            await runner.cleanup()


__all__ = ["Clock", "Emulator", "Objects", "errors", "serve"]
