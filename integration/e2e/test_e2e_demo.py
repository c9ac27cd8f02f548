"""``make demo``'s driver end to end, every scenario, as a subprocess."""

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
    # The measured bandwidth per message size, from the BandwidthMeasurements' final reads.
    assert "logprofile.cre.dev/nccl-bandwidth created" in out
    assert "Measured bandwidth, GB/s busBW / algBW" in out
    rows = [line.split("│") for line in out.splitlines() if "16 GiB" in line]
    assert rows and [c.strip() for c in rows[0][2:7]] == [
        "478.92 / 255.43"] * 4 + ["478.91 / 273.66"], rows
    # 4 all-reduce groups, and the loopback's 8 Jobs (one per node) in one column.
    assert "nccl-loopback (8 jobs)" in out
    assert out.count("False ThresholdsMet") == 12


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
    per_node = out.split("Per node", 1)[1].split("Measured bandwidth", 1)[0]
    assert "Failed" not in per_node


@pytest.mark.slow
def test_demo_threshold(tmp_path: Path) -> None:
    """A node whose links run at 0.4: all-reduce group-1 (nodes 2 and 3) misses "value >= 300"
    and both its nodes are blamed; the loopback, judged per node, blames node 3 only; the
    verdict is Failed and the message names the measured value and the expression."""
    result = _demo("--scenario", "threshold", "--html", str(tmp_path / "r.html"))
    assert result.returncode == 0, result.stdout + result.stderr
    raw = result.stdout
    out = " ".join(raw.split())
    assert "Verdict: FAILED" in out
    assert ('Threshold "busBandwidthGBps" violated: measured 191.6000, expression: value >= 300'
            in out)
    assert "violated on node aws-h100-node-3: measured 191.6000" in out
    assert "True ThresholdViolated" in out
    rows = {line.split("│")[1].strip(): line for line in raw.splitlines()
            if line.startswith("│ aws-h100-node-")}
    assert "Failed 191.60" in rows["aws-h100-node-2"] and "Passed 478.91" in rows[
        "aws-h100-node-2"]
    assert rows["aws-h100-node-3"].count("Failed 191.60") == 2
    assert all(r.count("Passed") == 2 for n, r in rows.items()
               if n not in ("aws-h100-node-2", "aws-h100-node-3"))
    sizes = [line for line in raw.splitlines() if "16 GiB" in line]
    assert sizes and "191.60 / 102.19" in sizes[0]
    assert "cre-manager exited with code 0" in out


@pytest.mark.slow
def test_demo_hardware(tmp_path: Path) -> None:
    """A broken GPU found by a single-node test: DCGM level 1 runs one Job per node on 4 nodes,
    node 2's diagnostic fails: verdict Failed, node 2 Failed, the three others Passed."""
    result = _demo("--scenario", "hardware", "--html", str(tmp_path / "r.html"))
    assert result.returncode == 0, result.stdout + result.stderr
    raw = result.stdout
    assert "Verdict: FAILED" in " ".join(raw.split())
    rows = {line.split("│")[1].strip(): line for line in raw.splitlines()
            if line.startswith("│ aws-h100-node-")}
    assert sorted(rows) == [f"aws-h100-node-{i}" for i in range(4)]
    assert "Failed" in rows["aws-h100-node-2"]
    assert all("Passed" in r for n, r in rows.items() if n != "aws-h100-node-2")
    assert "cre-manager exited with code 0" in raw


@pytest.mark.slow
def test_demo_diagnose(tmp_path: Path) -> None:
    """testScale diagnose on 16 nodes whose node 13 breaks every group holding it: verdict
    Failed, node 13 alone Failed in the per-node table, the bisection tree printed."""
    result = _demo("--scenario", "diagnose", "--html", str(tmp_path / "r.html"))
    assert result.returncode == 0, result.stdout + result.stderr
    raw = result.stdout
    assert "Verdict: FAILED" in " ".join(raw.split())
    rows = {line.split("│")[1].strip(): line for line in raw.splitlines()
            if line.startswith("│ aws-h100-node-")}
    assert len(rows) == 16
    assert "Failed" in rows["aws-h100-node-13"]
    assert all("Passed" in r for n, r in rows.items() if n != "aws-h100-node-13")
    assert "Diagnose: 8 of 12 Jobs, 2 round(s) after screening" in raw
    assert "cre-manager exited with code 0" in raw


def _node_table(text: str) -> dict[str, list[str]]:
    """The node table's cells by node (node, state, passed, valid until, judged by, label,
    tainted)."""
    return {cells[0]: cells for cells in (
        [c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines()
        if line.startswith("│ aws-h100-node-"))}


@pytest.mark.slow
def test_demo_fleet() -> None:
    """A CertificationSchedule with node state on: after run 1 node 2 is Failed, labelled
    failed and tainted and the 7 others Passed; after the node is repaired, run 2 passes every
    node and node 2's taint is released; the manager exits 0."""
    result = _demo("--scenario", "fleet")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "certificationschedule.cre.dev/fleet created" in out
    first, second = out.split("Fleet after run 1:", 1)[1].split("Fleet after run 2:", 1)
    assert "verdict Failed" in first.splitlines()[0]
    assert "verdict Passed" in second.splitlines()[0]
    run1, run2 = _node_table(first), _node_table(second)
    nodes = [f"aws-h100-node-{i}" for i in range(8)]
    assert sorted(run1) == sorted(run2) == nodes
    assert [run1["aws-h100-node-2"][i] for i in (1, 2, 5, 6)] == ["Failed", "0/1", "failed", "yes"]
    for node in nodes:
        assert [run2[node][i] for i in (1, 2, 5, 6)] == ["Passed", "1/1", "passed", "no"], node
        if node != "aws-h100-node-2":
            assert [run1[node][i] for i in (1, 2, 5, 6)] == ["Passed", "1/1", "passed", "no"]
    # Each table names the run that judged the nodes: two different runs of the schedule.
    assert len({r[4] for r in run1.values()} | {r[4] for r in run2.values()}) == 2
    assert "SIGUSR1 to the simulator drops its DCGM fault" in out
    assert "cre-manager exited with code 0" in out
