"""Every command given bad input prints one line saying what and where, exits with the code
the user guide documents, and never a traceback. Each case runs the real ``cre`` process."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from cre.cli.exitcodes import ExitCode
from cre.testing.apiserver import Emulator, serve

pytestmark = pytest.mark.anyio


def cre_process(*args: str) -> subprocess.CompletedProcess[str]:
    """``cre ARGS`` as a separate process (``python -m cre.cli``)."""
    return subprocess.run([sys.executable, "-m", "cre.cli", *args], capture_output=True,
                          text=True, timeout=120, check=False, env={"COLUMNS": "120",
                          "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})


def assert_one_line(result: subprocess.CompletedProcess[str], code: ExitCode,
                    *fragments: str) -> None:
    """Exit ``code``, nothing on stdout, one line on stderr holding every fragment."""
    lines = result.stderr.splitlines()
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    assert len(lines) == 1, result.stderr
    assert result.stdout == ""
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: ctx, context: {{cluster: c, user: u, namespace: team-a}}}}]
current-context: ctx
""")
    return path


RENDER = ("render", "communication/nccl-all-reduce", "--platform", "aws", "--arch", "h100",
          "--node-count", "2")


@pytest.mark.parametrize(("args", "code", "fragments"), [
    (("render", "communication/nope", "--platform", "aws", "--arch", "h100", "--node-count",
      "2"), ExitCode.CATALOG, ("communication/nope: unknown entry (known: ",)),
    (("render", "communication/nccl-all-reduce", "--platform", "mars", "--arch", "h100",
      "--node-count", "2"), ExitCode.CATALOG, ("mars: unknown platform (known: aws",)),
    (("render", "communication/nccl-all-reduce", "--platform", "aws", "--arch", "z9",
      "--node-count", "2"), ExitCode.CATALOG, ("--arch z9: aws supports gb200, gb300, h100",)),
    ((*RENDER, "--option", "bogus=1"), ExitCode.CATALOG, ("--option bogus: unknown parameter",)),
    ((*RENDER, "--worker-backoff-limit", "9"), ExitCode.USAGE, ("worker_backoff_limit",)),
    (("render", "communication/nccl-all-reduce", "--arch", "h100"), ExitCode.USAGE,
     ("cre render: Missing option '--platform'", "--help")),
    (("render", "communication/nccl-all-reduce", "--platform", "aws", "--arch", "h100"),
     ExitCode.USAGE, ("exactly one of --nodes and --node-count",)),
    (("catalog", "show", "diagnostics/dcgm-level9"), ExitCode.CATALOG,
     ("diagnostics/dcgm-level9: unknown entry",)),
    (("validate", "/nonexistent/cert.yaml"), ExitCode.INPUT,
     ("/nonexistent/cert.yaml: no such file",)),
    (("frobnicate",), ExitCode.USAGE, ("No such command 'frobnicate'",)),
], ids=["unknown-entry", "unknown-platform", "unknown-arch", "unknown-option", "bad-backoff",
        "missing-flag", "no-nodes", "catalog-unknown-entry", "validate-missing-file",
        "unknown-command"])
def test_offline_bad_input(args: tuple[str, ...], code: ExitCode,
                           fragments: tuple[str, ...]) -> None:
    """Offline commands: catalog and usage mistakes and missing files."""
    assert_one_line(cre_process(*args), code, *fragments)


def test_invalid_yaml_names_file_and_line(tmp_path: Path) -> None:
    """A YAML syntax error points at its line."""
    path = tmp_path / "broken.yaml"
    path.write_text("apiVersion: cre.dev/v1alpha1\nkind: Job\nmetadata: {name: [x\n")
    assert_one_line(cre_process("validate", str(path)), ExitCode.INPUT,
                    f"{path}:4: invalid YAML", "while parsing a flow sequence (line 3)")


@pytest.mark.parametrize("command", ["status", "report"])
def test_unreachable_cluster(tmp_path: Path, command: str) -> None:
    """Nothing listens at the kubeconfig's server: exit 5 naming the server."""
    port = _closed_port()
    kubeconfig = _kubeconfig(tmp_path, f"http://127.0.0.1:{port}")
    assert_one_line(cre_process(command, "gpu-cert", "--kubeconfig", str(kubeconfig)),
                    ExitCode.UNREACHABLE, f"cannot reach the API server at http://127.0.0.1:{port}")


@pytest.mark.parametrize(("args", "fragment"), [
    (("--kubeconfig", "/nonexistent/kubeconfig"), "--kubeconfig /nonexistent/kubeconfig: no such"),
    (("--context", "nope"), "--context nope"),
], ids=["missing-kubeconfig", "unknown-context"])
def test_bad_connection_flags(tmp_path: Path, args: tuple[str, ...], fragment: str) -> None:
    """kubectl-style flags that point nowhere: exit 5."""
    kubeconfig = _kubeconfig(tmp_path, "http://127.0.0.1:1")
    extra = () if "--kubeconfig" in args else ("--kubeconfig", str(kubeconfig))
    assert_one_line(cre_process("status", "gpu-cert", *args, *extra), ExitCode.UNREACHABLE,
                    fragment)


@pytest.mark.parametrize("command", ["status", "report"])
async def test_missing_certification(kube_emulator: Emulator, command: str) -> None:
    """A Certification that does not exist: exit 6 naming it and its namespace."""
    result = await anyio.to_thread.run_sync(lambda: cre_process(
        command, "no-such-cert", "-n", "team-b", "--kubeconfig",
        str(kube_emulator.kubeconfig_path)))
    assert_one_line(result, ExitCode.NOT_FOUND, "Certification team-b/no-such-cert not found")


async def test_cluster_without_cre_crds() -> None:
    """An API server that does not serve CRE's kinds: exit 6 saying how to install them."""
    async with serve(crds=[]) as emu:
        result = await anyio.to_thread.run_sync(lambda: cre_process(
            "status", "-A", "--kubeconfig", str(emu.kubeconfig_path)))
    assert_one_line(result, ExitCode.NOT_FOUND, "CRE's CRDs are not installed")


async def test_report_html_into_a_missing_folder(gpu_cert: Emulator, tmp_path: Path) -> None:
    """The report cannot be written: exit 3 naming the file (the table itself printed)."""
    target = tmp_path / "no" / "such" / "report.html"
    result = await anyio.to_thread.run_sync(lambda: cre_process(
        "report", "gpu-cert", "-n", "team-a", "--json", "--html", str(target),
        "--kubeconfig", str(gpu_cert.kubeconfig_path)))
    assert result.returncode == ExitCode.INPUT
    assert result.stderr.splitlines() == [f"cre: {target}: cannot write: No such file or directory"]


def test_missing_extra_is_one_line(tmp_path: Path) -> None:
    """Without click (the cli extra) the console script says what to install: exit 8."""
    blocker = tmp_path / "click.py"
    blocker.write_text("raise ModuleNotFoundError('No module named click', name='click')\n")
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import cre.cli.entry as e; "
            "sys.exit(e.main())")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=False)
    assert_one_line(result, ExitCode.MISSING_EXTRA, "pip install 'cre[cli]'", "click")


async def test_refused_request(gpu_cert: Emulator) -> None:
    """The API server answers with an error status: exit 7 naming the object and the status
    (the emulator injects 500; 401/403 take the same path with "refused the request")."""
    gpu_cert.faults.add_error(500, verb="get", resource="certifications")
    result = await anyio.to_thread.run_sync(lambda: cre_process(
        "report", "gpu-cert", "-n", "team-a", "--kubeconfig", str(gpu_cert.kubeconfig_path)))
    assert_one_line(result, ExitCode.API, "cre: Certification team-a/gpu-cert: 500 ")


def test_no_kubeconfig_anywhere() -> None:
    """No flag, no $KUBECONFIG, no ~/.kube/config and not in a pod: exit 5 saying so."""
    assert_one_line(cre_process("status"), ExitCode.UNREACHABLE,
                    "no kubeconfig ($KUBECONFIG, ~/.kube/config) and not running in a pod")
