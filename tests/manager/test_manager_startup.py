"""cre-manager as a process: each bad configuration or environment exits with its own code."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cre.testing.procs import REPO, Stack
from cre_manager.errors import ExitCode


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cre_manager", "--metrics-bind-address", "0",
                           "--health-probe-bind-address", "0", *args],
                          capture_output=True, text=True, timeout=120, env=env, cwd=REPO,
                          check=False)


def _write_kubeconfig(path: Path, server: str, token: str = "sekret-token-value") -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        f"users: [{{name: u, user: {{token: {token}}}}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n")
    return path


class _Refusing(BaseHTTPRequestHandler):
    """An API server that answers every request with the configured status."""

    status = 401

    def do_GET(self) -> None:
        reason = {401: "Unauthorized", 403: "Forbidden"}[self.status]
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "message": reason.lower(), "reason": reason, "code": self.status})
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(params=[401, 403])
def refusing_server(request: pytest.FixtureRequest) -> Iterator[str]:
    handler = type("Handler", (_Refusing,), {"status": request.param})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_bad_flag_exits_2_naming_it(tmp_path: Path) -> None:
    """An invalid flag value exits BAD_CONFIG with the flag in the message."""
    kc = _write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:9")
    result = _run("--kubeconfig", str(kc), "--max-concurrent-reconciles", "0")
    assert result.returncode == ExitCode.BAD_CONFIG
    assert "invalid --max-concurrent-reconciles: must be at least 1" in result.stderr


def test_unreachable_api_exits_3(tmp_path: Path) -> None:
    """No server behind the kubeconfig: API_UNREACHABLE once the start-up budget is spent,
    naming the address."""
    kc = _write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:9")
    result = _run("--kubeconfig", str(kc), "--startup-timeout", "1s")
    assert result.returncode == ExitCode.API_UNREACHABLE
    assert "cannot reach the API server at http://127.0.0.1:9" in result.stderr


def test_refused_credentials_exit_4_without_leaking_the_token(tmp_path: Path,
                                                                refusing_server: str) -> None:
    """401/403: CREDENTIALS_REFUSED, and the bearer token never appears in the output."""
    kc = _write_kubeconfig(tmp_path / "kc", refusing_server)
    result = _run("--kubeconfig", str(kc))
    assert result.returncode == ExitCode.CREDENTIALS_REFUSED
    assert "refused our credentials" in result.stderr
    assert "sekret-token-value" not in result.stderr + result.stdout


def test_missing_crds_exit_5_naming_them() -> None:
    """An emulator without CRE's and Trainer's CRDs: CRDS_MISSING, naming each and the fix."""
    with Stack() as stack:
        stack.start_emulator(crds=[])
        result = _run("--kubeconfig", str(stack.kubeconfig))
    assert result.returncode == ExitCode.CRDS_MISSING
    for name in ("jobs.cre.dev", "trainjobs.trainer.kubeflow.org",
                 "trainingruntimes.trainer.kubeflow.org"):
        assert name in result.stderr
    assert "kubectl apply -k deploy/crds" in result.stderr


def test_invalid_catalog_exits_6_naming_file_and_key(tmp_path: Path) -> None:
    """A broken catalog entry: CATALOG_INVALID with the file and the key path."""
    catalog = tmp_path / "catalog"
    shutil.copytree(REPO / "catalog", catalog)
    entry = catalog / "communication" / "nccl-all-reduce.yaml"
    entry.write_text(entry.read_text().replace("runtime: mpi", "runtime: [no]"))
    kc = _write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:9")
    result = _run("--kubeconfig", str(kc), "--catalog-dir", str(catalog))
    assert result.returncode == ExitCode.CATALOG_INVALID
    assert "communication/nccl-all-reduce.yaml: runtime:" in result.stderr


def test_version_flag() -> None:
    """--version prints the version and exits 0."""
    result = subprocess.run([sys.executable, "-m", "cre_manager", "--version"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0
    assert result.stdout.startswith("cre-manager ")
