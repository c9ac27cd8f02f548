"""Cluster-side mistakes are one line on stderr that says what is wrong and what to do, with
exit 5 (cluster unreachable) or 6 (CRDs missing), never a traceback, a repr or exit 70. Each
case runs the real ``cre`` process as a user types it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from cre.cli.exitcodes import ExitCode
from cre.testing.apiserver import serve

from .test_bad_input import _closed_port

pytestmark = pytest.mark.anyio
GOOD = """apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts:
- {{name: ctx, context: {{cluster: c, user: u}}}}
- {{name: lab, context: {{cluster: c, user: u}}}}
current-context: ctx
"""


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``cre ARGS`` in its own process with a clean environment plus ``env``."""
    base = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "COLUMNS": "80",
            "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "cre.cli", *args], capture_output=True,
                          text=True, timeout=120, check=False, env={**base, **env})


def expect(result: subprocess.CompletedProcess[str], code: ExitCode, line: str) -> None:
    """Exit ``code`` and exactly ``line`` on stderr, nothing on stdout."""
    assert result.returncode == code, result.stderr
    assert result.stderr.splitlines() == [line]
    assert result.stdout == ""


# (id, kubeconfig text or None for no file, extra args, env, exit code, stderr with {kc}/{port})
CASES = [
    ("connection-refused", GOOD, [], {}, ExitCode.UNREACHABLE,
     "cre: cannot reach the API server at http://127.0.0.1:{port}: connection refused (is the "
     "cluster up? kubectl cluster-info checks the same kubeconfig)"),
    ("not-a-kubeconfig", "apiVersion: v1\nkind: Config\nclusters: 3\n", [], {},
     ExitCode.UNREACHABLE, "cre: {kc}: not a valid kubeconfig: clusters: must be a list, got "
     "int (kubectl config view shows what kubectl reads)"),
    ("invalid-yaml", "clusters: [\n", [], {}, ExitCode.UNREACHABLE,
     "cre: {kc}: not a valid kubeconfig: invalid YAML at line 2: expected the node content, "
     "but found '<stream end>' (kubectl config view shows what kubectl reads)"),
    ("kubeconfig-env-missing", None, [], {"KUBECONFIG": "/nonexistent"}, ExitCode.UNREACHABLE,
     "cre: KUBECONFIG=/nonexistent: no such file (point KUBECONFIG at a kubeconfig file, or "
     "unset it to use ~/.kube/config)"),
    ("unknown-context", GOOD, ["--context", "nosuch"], {}, ExitCode.UNREACHABLE,
     "cre: --context nosuch: no such context in {kc} (contexts: ctx, lab)"),
    ("no-current-context", GOOD.replace("current-context: ctx\n", ""), [], {},
     ExitCode.UNREACHABLE, "cre: {kc}: no current-context; pass --context (contexts: ctx, lab)"),
    ("context-without-cluster", GOOD.replace("{name: c,", "{name: other,"), [], {},
     ExitCode.UNREACHABLE, "cre: {kc}: not a valid kubeconfig: context ctx names cluster c, "
     "which is not in clusters (other) (kubectl config view shows what kubectl reads)"),
]


@pytest.mark.parametrize("command", ["status", "report"])
@pytest.mark.parametrize(("text", "args", "env", "code", "line"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_cluster_side_errors_are_one_line_with_the_fix(
        tmp_path: Path, command: str, text: str | None, args: list[str], env: dict[str, str],
        code: ExitCode, line: str) -> None:
    """Each kubeconfig or connection mistake: the exact one line and the documented code."""
    port = _closed_port()
    kc = tmp_path / "kubeconfig"
    flags: list[str] = []
    if text is not None:
        kc.write_text(text.format(server=f"http://127.0.0.1:{port}"), encoding="utf-8")
        flags = ["--kubeconfig", str(kc)]
    result = run([command, "gpu-cert", *flags, *args], env)
    expect(result, code, line.format(kc=kc, port=port))


@pytest.mark.parametrize("command", ["status", "report"])
async def test_cluster_without_cre_crds_says_so_for_status_and_report(command: str) -> None:
    """A named Certification on an API server without CRE's CRDs: both commands say the CRDs
    are missing and how to install them (exit 6), not "Certification not found"."""
    async with serve(crds=[]) as emu:
        result = await anyio.to_thread.run_sync(lambda: run(
            [command, "gpu-cert", "-n", "team-a", "--kubeconfig", str(emu.kubeconfig_path)], {}))
        host = emu.url
    assert result.returncode == ExitCode.NOT_FOUND, result.stderr
    (line,) = result.stderr.splitlines()
    assert line == (f"cre: {host} does not serve certifications.cre.dev: CRE's CRDs are not "
                    "installed (kubectl apply -k deploy/crds)")
