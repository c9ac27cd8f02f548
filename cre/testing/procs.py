"""Run the emulated stack as separate processes: API emulator, simulated cluster, cre-manager.

``make demo``, the end-to-end tests and the manager benchmark all need the same thing a user
does by hand: start the emulator and wait for its kubeconfig, start the simulator against it,
start one or more ``cre-manager`` processes and learn where their probe and metrics servers
listen, then stop everything in order however the run ends. Doing it in one place keeps the
three honest: they exercise the real CLIs, not in-process shortcuts.

Managers are started on ephemeral ports (``127.0.0.1:0``); the bound addresses are read from the
manager's own ``serving`` log records, so parallel runs never race for a port.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import attrs

from cre._vendor.crds import LATEST as UPSTREAM_CRDS

REPO = Path(__file__).resolve().parents[2]
CRE_CRDS = REPO / "deploy" / "crds"
T = TypeVar("T")


class StackError(RuntimeError):
    """A process of the stack failed to start or to reach the awaited state."""


def wait_until(predicate: Callable[[], T | None], *, timeout: float, what: str,
               interval: float = 0.05, alive: Callable[[], None] | None = None) -> T:
    """Poll ``predicate`` until it returns a truthy value; ``StackError`` naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if alive is not None:
            alive()
        if time.monotonic() > deadline:
            raise StackError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


@attrs.define
class Proc:
    """One child process with its combined output in a log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def returncode(self) -> int | None:
        return self.popen.poll()

    def check_alive(self) -> None:
        code = self.popen.poll()
        if code is not None:
            raise StackError(f"{self.name} exited with code {code}; its log "
                             f"({self.log_path}):\n{self.tail()}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def json_records(self) -> list[dict[str, Any]]:
        """The JSON log records written so far (other lines skipped)."""
        out: list[dict[str, Any]] = []
        for line in self.log_text().splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
        return out

    def send(self, sig: signal.Signals) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout)

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit code."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                return self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
        return self.popen.wait()


@attrs.define
class ManagerProc(Proc):
    """A running ``cre-manager`` and the addresses its servers bound."""

    health_url: str = ""
    metrics_url: str = ""

    def get(self, server: str, path: str, timeout: float = 5.0) -> tuple[int, str]:
        base = self.health_url if server == "health" else self.metrics_url
        try:
            with urllib.request.urlopen(base + path, timeout=timeout) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode()
        except OSError as exc:
            return 0, str(exc)

    def ready(self) -> bool:
        return self.get("health", "/readyz")[0] == 200


class Stack:
    """Owns a scratch directory and the processes started in it; stops them on exit."""

    def __init__(self, workdir: Path | None = None, *, keep: bool = False,
                 shared_time_scale: float | None = None) -> None:
        self._own = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="cre-stack-"))
        self.keep = keep
        self.procs: list[Proc] = []
        self.kubeconfig = self.workdir / "kubeconfig"
        # One scaled clock for every process (``SimClock.shared``): the emulator's timestamps,
        # the simulated cluster's and what cre-manager reads as now all agree, as on a real
        # cluster. Without it only the simulated cluster runs scaled: the manager's wall clock
        # then lags the pods' timestamps (fine for event-driven Jobs, not for a goodput
        # measurement sampled every few simulated seconds).
        self.shared_time_scale = shared_time_scale
        self.time_origin = time.time()
        if shared_time_scale is not None and shared_time_scale <= 0:
            raise ValueError(f"shared_time_scale must be > 0, got {shared_time_scale}")

    def _time_args(self, scale_flag: str, origin_flag: str) -> list[str]:
        if self.shared_time_scale is None:
            return []
        return [scale_flag, str(self.shared_time_scale), origin_flag, repr(self.time_origin)]

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Stop managers first, then the simulator, then the emulator."""
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()
        if self._own and not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _spawn(self, name: str, argv: Sequence[str], *, env: dict[str, str] | None = None,
               cls: type[Proc] = Proc) -> Proc:
        log_path = self.workdir / f"{name}.log"
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        with log_path.open("wb") as out:
            popen = subprocess.Popen([sys.executable, *argv], stdout=out,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=full_env, cwd=REPO)
        proc = cls(name=name, popen=popen, log_path=log_path)
        self.procs.append(proc)
        return proc

    def start_emulator(self, *, crds: Sequence[Path] | None = None,
                       timeout: float = 60.0, args: Sequence[str] = ()) -> Proc:
        """The API emulator with the upstream Trainer/JobSet CRDs and CRE's own (``args``:
        more of its CLI flags, e.g. ``--rbac``)."""
        dirs = list(crds) if crds is not None else [*UPSTREAM_CRDS, CRE_CRDS]
        argv = ["-m", "cre.testing.apiserver", "--port", "0", "--write-kubeconfig",
                str(self.kubeconfig), *self._time_args("--time-scale", "--time-origin"), *args]
        for d in dirs:
            argv += ["--crds", str(d)]
        proc = self._spawn("apiserver", argv)
        wait_until(self.kubeconfig.is_file, timeout=timeout, what="the API emulator",
                   alive=proc.check_alive)
        return proc

    def start_cluster(self, *, profile: str = "aws-h100", nodes: int = 8,
                      time_scale: float = 1.0, fail_launcher: bool = False,
                      extra_args: Sequence[str] = ()) -> Proc:
        """The simulated cluster (``python -m cre.testing.cluster``); ``fail_launcher`` makes
        every MPI launcher exit 1 with an NCCL error (its ``--fail-launcher`` flag);
        ``extra_args`` go to its command line as they are (``--write-concurrency 16``)."""
        if self.shared_time_scale is not None:
            if time_scale not in (1.0, self.shared_time_scale):
                raise ValueError(f"time_scale {time_scale} differs from the stack's shared "
                                 f"clock ({self.shared_time_scale})")
            time_args = self._time_args("--time-scale", "--time-origin")
        else:
            time_args = ["--time-scale", str(time_scale)]
        argv = ["--kubeconfig", str(self.kubeconfig), "--profile", profile, "--nodes",
                str(nodes), *time_args]
        if fail_launcher:
            argv.append("--fail-launcher")
        argv += list(extra_args)
        return self._spawn("cluster", ["-m", "cre.testing.cluster", *argv])

    def start_manager(self, *args: str, name: str = "manager", env: dict[str, str] | None = None,
                      wait_ready: bool = True, timeout: float = 60.0,
                      kubeconfig: Path | None = None) -> ManagerProc:
        """``cre-manager`` on ephemeral ports; waits until it serves (and is ready). It uses
        the emulator's administrator kubeconfig unless given another (``kubeconfig``)."""
        argv = ["-m", "cre_manager", "--kubeconfig", str(kubeconfig or self.kubeconfig),
                "--health-probe-bind-address", "127.0.0.1:0",
                "--metrics-bind-address", "127.0.0.1:0",
                *self._time_args("--sim-time-scale", "--sim-time-origin"), *args]
        proc = self._spawn(name, argv, env=env, cls=ManagerProc)
        assert isinstance(proc, ManagerProc)

        def bound() -> bool:
            servers = {r.get("server"): r.get("address") for r in proc.json_records()
                       if r.get("msg") == "serving"}
            if "health" in servers and "metrics" in servers:
                proc.health_url = f"http://{servers['health']}"
                proc.metrics_url = f"http://{servers['metrics']}"
                return True
            return False

        wait_until(bound, timeout=timeout, what=f"{name} to serve", alive=proc.check_alive)
        if wait_ready:
            wait_until(proc.ready, timeout=timeout, what=f"{name} to be ready",
                       alive=proc.check_alive)
        return proc

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True,
                timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """kubectl against the emulator."""
        result = subprocess.run(["kubectl", "--kubeconfig", str(self.kubeconfig), *args],
                                input=stdin, capture_output=True, text=True, timeout=timeout,
                                check=False)
        if check and result.returncode != 0:
            raise StackError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def emulator_control(self, method: str, path: str, body: Any = None) -> Any:
        """A call to the emulator's ``/_emulator/`` control API (JSON in and out)."""
        from ruamel.yaml import YAML

        cluster = YAML(typ="safe").load(self.kubeconfig.read_text())["clusters"][0]["cluster"]
        ca = cluster.get("certificate-authority")
        context = ssl.create_default_context(cafile=ca) if ca else None
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{cluster['server']}/_emulator/{path}", data=data,
                                     method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60, context=context) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def kubeconfig_with_token(self, token: str, name: str) -> Path:
        """A copy of the emulator's kubeconfig whose user presents ``token``."""
        from ruamel.yaml import YAML

        config = YAML(typ="safe").load(self.kubeconfig.read_text())
        config["users"] = [{"name": "cre-emulator", "user": {"token": token}}]
        path = self.workdir / name
        path.write_text(json.dumps(config), encoding="utf-8")
        return path

    def apply_kustomization(self, folder: str | Path) -> str:
        """``kubectl apply -k folder`` as the deploy/default comment tells a user to on a fresh
        cluster: a first apply (kubectl cannot map the CRE kinds whose CRDs it creates yet;
        only that failure is tolerated), a wait for the CRDs, a second apply. Both outputs.

        The first apply skips kubectl's client-side validation: for a kind the server does not
        serve yet kubectl falls back to ``/openapi/v2`` in protobuf, which the emulator answers
        in JSON (a gap of the emulator; a real server fails only the unmapped objects)."""
        first = self.kubectl("apply", "-k", str(folder), "--validate=false", check=False)
        if first.returncode == 0:
            return first.stdout
        unmapped = [line for line in first.stderr.splitlines() if line.strip()]
        if not all("ensure CRDs are installed first" in line
                   or line.startswith("resource mapping not found") for line in unmapped):
            raise StackError(f"kubectl apply -k {folder} failed: {first.stderr.strip()}")
        self.kubectl("wait", "--for", "condition=established", "--timeout", "30s",
                     "crd", "--all")
        return first.stdout + self.kubectl("apply", "-k", str(folder)).stdout

    def kubectl_json(self, *args: str) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.kubectl(*args, "-o", "json").stdout)
        return doc


@contextlib.contextmanager
def stack(**kw: Any) -> Iterator[Stack]:
    with Stack(**kw) as s:
        yield s
