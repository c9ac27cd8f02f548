"""``make demo``'s driver end to end, both scenarios, as a subprocess."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cre.testing.procs import REPO


def _demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cre.testing.demo", "--time-scale", "10", *args],
                          capture_output=True, text=True, timeout=600, cwd=REPO, check=False)


@pytest.mark.slow
def test_demo_success() -> None:
    """The default demo passes its threshold, shows the per-node table and the bandwidth table
    the manager measured, and exits 0."""
    result = _demo()
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "the Certification tier comes later" in out
    assert "Verdict: PASSED" in out
    assert out.count("passed") >= 8
    assert "Measured bandwidth" in out and "JobSucceeded" in out
    assert "ThresholdsMet" in out
    assert "busBandwidthGBps (max over sizes)" in out
    assert "cre-manager exited with code 0" in out


@pytest.mark.slow
def test_demo_threshold() -> None:
    """The threshold scenario: the Job succeeds, the threshold miss names value and expression."""
    result = _demo("--scenario", "threshold")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "Verdict: FAILED" in out
    assert "ThresholdViolation" in out and "expression: value >= 1000000" in out
    assert "cre-manager exited with code 0" in out


@pytest.mark.slow
def test_demo_launcher_failure() -> None:
    """The failure scenario ends Failed with the captured failureLog and still exits 0."""
    result = _demo("--scenario", "launcher-failure")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "Verdict: FAILED" in out
    assert "status.failureLog" in out
    assert "NCCL WARN NET/IB" in out
    assert "cre-manager exited with code 0" in out
