"""Running a real etcd + kube-apiserver (and optionally the controller-manager and scheduler).

envtest's job, done here without its downloaded binaries: start etcd and kube-apiserver on
loopback with a throwaway CA and serving certificate, a static token with ``system:masters``,
and a service-account signing key; wait for ``/readyz``; install CRDs and wait until they are
established and served; write a kubeconfig; optionally start kube-controller-manager (Job, GC,
namespace controllers ...) and kube-scheduler against it. :meth:`ControlPlane.stop` stops the
processes in reverse order (SIGTERM, then SIGKILL) and a state file lets the CLI stop a plane
it left running. Every process is started in its own session and, unless detached, dies with
its parent (``PR_SET_PDEATHSIG``), so a killed test run leaks nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
from ruamel.yaml import YAML

from cre._vendor.crds import LATEST as UPSTREAM_CRDS
from cre.testing.apiserver.emulator import make_certificates

from .build import REPO, Binaries, Unavailable, ensure_built

TOKEN = "cre-controlplane-admin"
CRE_CRDS = REPO / "deploy" / "crds"
STATE = "controlplane.json"


class ControlPlaneError(RuntimeError):
    """A component failed to start or to reach the awaited state; the message has its log."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@attrs.define
class Component:
    """One running binary with its output in ``log_path``."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    def alive(self) -> None:
        code = self.popen.poll()
        if code is not None:
            raise ControlPlaneError(f"{self.name} exited with code {code}; the end of its log "
                                    f"({self.log_path}):\n{self.tail()}")

    def tail(self, lines: int = 25) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 15.0) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
        self.popen.wait()


def wait_for(predicate: Callable[[], bool], *, timeout: float, what: str,
              alive: Sequence[Component] = ()) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        for comp in alive:
            comp.alive()
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.1)


@attrs.define
class ControlPlane:
    """A running control plane; use :func:`start` (or ``with start(...) as plane``)."""

    workdir: Path
    binaries: Binaries
    url: str
    ca_file: Path
    kubeconfig: Path
    etcd_url: str
    components: list[Component] = attrs.field(factory=list)
    owns_workdir: bool = False

    token: str = TOKEN

    @property
    def serving_cert(self) -> tuple[Path, Path]:
        """(certificate, key) for 127.0.0.1 signed by the plane's CA (which kube-apiserver
        also trusts for kubelets: :mod:`cre.testing.cluster.kubelet_logs` serves logs with it)."""
        return self.workdir / "pki" / "server.crt", self.workdir / "pki" / "server.key"

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def request(self, method: str, path: str, body: Any = None, *,
                content_type: str = "application/json",
                timeout: float = 30.0) -> tuple[int, Any]:
        """One HTTP call as the administrator: (status, parsed JSON body or text)."""
        data = None if body is None else (body if isinstance(body, bytes)
                                          else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": content_type,
            "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.ssl_context()) as r:
                status, raw = int(r.status), r.read()
        except urllib.error.HTTPError as exc:
            status, raw = int(exc.code), exc.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def ready(self) -> bool:
        try:
            return self.request("GET", "/readyz", timeout=5)[0] == 200
        except OSError:
            return False

    def install_crds(self, sources: Sequence[Path], *, timeout: float = 60.0) -> list[str]:
        """Create (or replace) every CRD in the YAML files/folders and wait until served."""
        names: list[str] = []
        for doc in _load_crds(sources):
            name = doc["metadata"]["name"]
            status, body = self.request(
                "PATCH", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
                "?fieldManager=cre-controlplane&force=true", doc,
                content_type="application/apply-patch+yaml")
            if status >= 300:
                raise ControlPlaneError(f"CRD {name} was rejected ({status}): {body}")
            names.append(name)
        for name in names:
            wait_for(lambda n=name: self._crd_served(n), timeout=timeout,  # type: ignore[misc]
                     what=f"CRD {name} to be established", alive=self.components)
        return names

    def _crd_served(self, name: str) -> bool:
        status, body = self.request(
            "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        if status != 200:
            return False
        conds = {c["type"]: c["status"] for c in body.get("status", {}).get("conditions", [])}
        if conds.get("Established") != "True":
            return False
        spec = body["spec"]
        served = [v["name"] for v in spec["versions"] if v.get("served")]
        return all(self.request("GET", f"/apis/{spec['group']}/{v}/{spec['names']['plural']}"
                                "?limit=1")[0] == 200 for v in served)

    def reset(self, *, keep_namespaces: Sequence[str] = (
            "default", "kube-system", "kube-public", "kube-node-lease")) -> None:
        """Remove what tests created: every deletable namespaced object in the kept namespaces
        (finalizers stripped, no grace period), every other namespace, and every node.

        Lets tests written for a fresh emulator share one real server."""
        kinds = self._deletable_kinds()
        for ns in keep_namespaces:
            for base, plural in kinds:
                if ns == "default" and plural in ("services", "endpoints", "endpointslices"):
                    continue  # the `kubernetes` service and its endpoints are the server's
                path = f"{base}/namespaces/{ns}/{plural}"
                status, body = self.request("GET", path)
                if status != 200:
                    continue
                for item in body.get("items", []):
                    name = item["metadata"]["name"]
                    if item["metadata"].get("finalizers"):
                        self.request("PATCH", f"{path}/{name}",
                                     {"metadata": {"finalizers": None}},
                                     content_type="application/merge-patch+json")
                    if plural == "serviceaccounts" and name == "default":
                        continue
                    if ns == "kube-system" or (plural == "configmaps"
                                               and name == "kube-root-ca.crt"):
                        continue
                    self.request("DELETE", f"{path}/{name}?gracePeriodSeconds=0")
        status, body = self.request("GET", "/api/v1/namespaces")
        for item in body.get("items", []) if status == 200 else []:
            name = item["metadata"]["name"]
            if name not in keep_namespaces:
                self.request("DELETE", f"/api/v1/namespaces/{name}?gracePeriodSeconds=0")
        status, body = self.request("GET", "/api/v1/nodes")
        for item in body.get("items", []) if status == 200 else []:
            self.request("DELETE", f"/api/v1/nodes/{item['metadata']['name']}")

    def _deletable_kinds(self) -> list[tuple[str, str]]:
        """(API base path, plural) of every namespaced resource that can be listed and deleted."""
        out: list[tuple[str, str]] = []
        bases = ["/api/v1"]
        status, groups = self.request("GET", "/apis")
        for group in groups.get("groups", []) if status == 200 else []:
            bases.append("/apis/" + group["preferredVersion"]["groupVersion"])
        for base in bases:
            status, listing = self.request("GET", base)
            for res in listing.get("resources", []) if status == 200 else []:
                verbs = set(res.get("verbs", []))
                if res.get("namespaced") and "/" not in res["name"] \
                        and {"list", "delete"} <= verbs and res["name"] != "events":
                    out.append((base, res["name"]))
        return out

    def start_component(self, name: str, args: Sequence[str], *, detach: bool = False,
                        binary: Path | None = None) -> Component:
        log_path = self.workdir / f"{name}.log"
        with log_path.open("ab") as out:
            popen = subprocess.Popen(
                [str(binary or self.binaries.component(name)), *args], stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir,
                start_new_session=True, preexec_fn=None if detach else _die_with_parent)
        comp = Component(name=name, popen=popen, log_path=log_path)
        self.components.append(comp)
        self._write_state()
        return comp

    def start_controller_manager(self, *, detach: bool = False,
                                 controllers: str = "*") -> Component:
        """kube-controller-manager (all default controllers unless ``controllers``)."""
        pki = self.workdir / "pki"
        return self.start_component("kube-controller-manager", [
            f"--kubeconfig={self.kubeconfig}", "--secure-port=0", "--leader-elect=false",
            f"--controllers={controllers}", "--use-service-account-credentials=false",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={self.ca_file}", "--cluster-cidr=10.244.0.0/16",
            "--service-cluster-ip-range=10.0.0.0/24", "--concurrent-job-syncs=10",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        ], detach=detach)

    def start_scheduler(self, *, detach: bool = False) -> Component:
        return self.start_component("kube-scheduler", [
            f"--kubeconfig={self.kubeconfig}", "--secure-port=0", "--leader-elect=false",
        ], detach=detach)

    def stop(self) -> None:
        """Stop every component, newest first; remove the scratch folder if it made it."""
        for comp in reversed(self.components):
            comp.stop()
        self.components.clear()
        with contextlib.suppress(OSError):
            (self.workdir / STATE).unlink()
        if self.owns_workdir:
            import shutil

            shutil.rmtree(self.workdir, ignore_errors=True)

    def pids(self) -> list[int]:
        return [c.popen.pid for c in self.components]

    def _write_state(self) -> None:
        state = {"url": self.url, "kubeconfig": str(self.kubeconfig), "etcd": self.etcd_url,
                 "pids": {c.name: c.popen.pid for c in self.components}}
        (self.workdir / STATE).write_text(json.dumps(state, indent=2) + "\n")

    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _load_crds(sources: Sequence[Path]) -> Iterator[dict[str, Any]]:
    yaml = YAML(typ="safe")
    files: list[Path] = []
    for src in sources:
        files += sorted(src.glob("*.yaml")) if src.is_dir() else [src]
    for path in files:
        for doc in yaml.load_all(path.read_text(encoding="utf-8")):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                yield doc


def default_crds() -> list[Path]:
    """The vendored upstream CRDs (latest Trainer and JobSet) and CRE's own."""
    return [p for p in (*UPSTREAM_CRDS, CRE_CRDS) if p.exists()]


def _write_kubeconfig(path: Path, *, url: str, ca_file: Path, token: str) -> None:
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "cre-controlplane",
                      "cluster": {"server": url, "certificate-authority": str(ca_file)}}],
        "users": [{"name": "cre-admin", "user": {"token": token}}],
        "contexts": [{"name": "cre-controlplane", "context": {
            "cluster": "cre-controlplane", "user": "cre-admin", "namespace": "default"}}],
        "current-context": "cre-controlplane",
    }
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def start(*, workdir: Path | None = None, crds: Sequence[Path] | None = None,
          controller_manager: bool = False, scheduler: bool = False, detach: bool = False,
          binaries: Binaries | None = None, timeout: float = 120.0) -> ControlPlane:
    """Start etcd and kube-apiserver (building the binaries first if needed), install ``crds``
    (default: :func:`default_crds`), and optionally the controller-manager and scheduler.

    Raises :class:`~.build.Unavailable` when the binaries cannot be built here.
    """
    binaries = binaries or ensure_built().binaries
    owns = workdir is None
    workdir = workdir or Path(tempfile.mkdtemp(prefix="cre-controlplane-"))
    workdir.mkdir(parents=True, exist_ok=True)
    pki = workdir / "pki"
    pki.mkdir(exist_ok=True)
    try:
        ca_file, crt, key = make_certificates(pki)
        subprocess.run(["openssl", "genrsa", "-out", str(pki / "sa.key"), "2048"],
                       check=True, capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(pki / "sa.key"), "-pubout", "-out",
                        str(pki / "sa.pub")], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise Unavailable(f"the `openssl` CLI is needed for the control plane's certificates: "
                          f"{exc}") from exc
    (pki / "tokens.csv").write_text(f'{TOKEN},cre-admin,cre-admin,"system:masters"\n')
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    url = f"https://127.0.0.1:{api_port}"
    plane = ControlPlane(workdir=workdir, binaries=binaries, url=url, ca_file=ca_file,
                         kubeconfig=workdir / "kubeconfig", owns_workdir=owns,
                         etcd_url=f"http://127.0.0.1:{etcd_port}")
    try:
        etcd = plane.start_component("etcd", [
            "--name=cre", f"--data-dir={workdir / 'etcd'}",
            f"--listen-client-urls={plane.etcd_url}", f"--advertise-client-urls={plane.etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=cre=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync", "--log-level=warn",
        ], detach=detach, binary=binaries.etcd)
        wait_for(lambda: _etcd_healthy(plane.etcd_url), timeout=timeout, what="etcd /health",
                 alive=[etcd])
        api = plane.start_component("kube-apiserver", [
            f"--etcd-servers={plane.etcd_url}", "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1", f"--secure-port={api_port}",
            f"--cert-dir={pki}", f"--tls-cert-file={crt}", f"--tls-private-key-file={key}",
            f"--client-ca-file={ca_file}", f"--token-auth-file={pki / 'tokens.csv'}",
            "--authorization-mode=RBAC", f"--service-account-issuer={url}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
            "--disable-admission-plugins=ServiceAccount", "--profiling=false",
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-certificate-authority={ca_file}",
        ], detach=detach)
        wait_for(plane.ready, timeout=timeout, what="kube-apiserver /readyz", alive=[etcd, api])
        _write_kubeconfig(plane.kubeconfig, url=url, ca_file=ca_file, token=TOKEN)
        plane.install_crds(default_crds() if crds is None else crds, timeout=timeout)
        if controller_manager:
            plane.start_controller_manager(detach=detach)
        if scheduler:
            plane.start_scheduler(detach=detach)
    except BaseException:
        plane.stop()
        raise
    return plane


def _etcd_healthy(etcd_url: str) -> bool:
    try:
        with urllib.request.urlopen(etcd_url + "/health", timeout=2) as resp:
            return bool(json.loads(resp.read()).get("health") == "true")
    except (OSError, ValueError):
        return False


def stop_state(workdir: Path, *, timeout: float = 15.0) -> list[str]:
    """Stop the processes a detached plane in ``workdir`` recorded; returns their names."""
    path = workdir / STATE
    if not path.is_file():
        raise ControlPlaneError(f"no running control plane recorded in {path}")
    pids: dict[str, int] = json.loads(path.read_text())["pids"]
    stopped: list[str] = []
    for name, pid in reversed(list(pids.items())):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and _running(pid):
                time.sleep(0.1)
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
            stopped.append(name)
    path.unlink()
    return stopped


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
