"""``make demo``'s driver end to end, both scenarios, as a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cre.testing.procs import REPO


def _demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cre.testing.demo", "--time-scale", "10", *args],
                          capture_output=True, text=True, timeout=600, cwd=REPO, check=False)


@pytest.mark.slow
def test_demo_success(tmp_path: Path) -> None:
    """The default demo applies a Certification of two categories, both pass, the per-node
    table lists every node, the HTML report is written where it says, and it exits 0."""
    result = _demo("--html", str(tmp_path / "report.html"))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "certification.cre.dev/gpu-cert created" in out
    assert "Verdict: PASSED" in out
    assert "category communication/nccl-loopback: Succeeded Passed" in out
    assert sum(1 for line in out.splitlines() if "aws-h100-node-" in line and
               line.count("Passed") == 2) == 8
    assert f"HTML report: {tmp_path / 'report.html'}" in out.replace("\n", "")
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert "cre-manager exited with code 0" in out


@pytest.mark.slow
def test_demo_launcher_failure(tmp_path: Path) -> None:
    """All-reduce fails with the captured failureLog, loopback still runs and passes, the
    verdict is Failed, and the demo exits 0."""
    result = _demo("--scenario", "launcher-failure", "--html", str(tmp_path / "r.html"))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "Verdict: FAILED" in out
    assert "category communication/nccl-loopback: Succeeded Passed" in out
    assert "failureLog of" in out
    assert "NCCL WARN NET/IB" in out
    assert "cre-manager exited with code 0" in out


@pytest.mark.slow
def test_demo_infra_abort(tmp_path: Path) -> None:
    """A node of group-1 is lost mid-run: the Node-class abort is deferred, no sibling is
    cancelled, group-1 re-runs on its infra retry, no node is Failed, and it exits 0."""
    result = _demo("--scenario", "infra-abort", "--html", str(tmp_path / "r.html"))
    assert result.returncode == 0, result.stdout + result.stderr
    out = " ".join(result.stdout.split())  # long lines wrap at the console width
    assert "kubelet reports NotReady while group-1 runs" in out
    assert "failed with class Node/NodeNotReady: deferred" in out
    assert "infra retry 1 after a Node/NodeNotReady abort" in out
    assert "Cancelled" not in out
    assert "Verdict: PASSED" in out or "Verdict: INCOMPLETE" in out
    assert "Failed" not in out.split("Per node", 1)[1].split("cre status", 1)[0]
