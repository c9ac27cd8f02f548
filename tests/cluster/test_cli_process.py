"""End to end: ``python -m cre.testing.cluster`` against a separately started API emulator.

The issue's "done when": the simulated cluster runs as its own process against an emulator that
was started on its own, registers the profile's nodes, and exits cleanly on SIGTERM. Both sides
run as real subprocesses; readiness is read from their stderr lines, not guessed with sleeps.
"""

from __future__ import annotations

import selectors
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

import anyio

from cre._vendor import crds
from cre.kube.client import NODES, KubeClient

# A guard against a hung child only (the test fails instead of hanging); not a timing assertion.
STARTUP_GUARD_SECONDS = 300.0  # once exceeded at 120 s on a 2-core machine at load ~12


def _wait_for_line(proc: subprocess.Popen[str], needle: str) -> list[str]:
    """Read ``proc``'s stderr until a line contains ``needle``; the lines read so far."""
    stream: IO[str] | None = proc.stderr
    assert stream is not None
    seen: list[str] = []
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        while True:
            if not sel.select(timeout=STARTUP_GUARD_SECONDS):
                raise AssertionError(f"no line containing {needle!r}; stderr so far: {seen}")
            line = stream.readline()
            if not line:
                raise AssertionError(f"exited ({proc.wait()}) before {needle!r}: {seen}")
            seen.append(line.rstrip())
            if needle in line:
                return seen


def _stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=STARTUP_GUARD_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


async def _node_names(kubeconfig: Path) -> list[str]:
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    try:
        got = await client.list(NODES)
    finally:
        await client.close()
    return sorted(n["metadata"]["name"] for n in got.get("items", []))


def test_cli_simulates_eight_nodes_until_sigterm(tmp_path: Path) -> None:
    """The CLI registers 8 aws-h100 nodes on a separate emulator and both exit 0 on SIGTERM."""
    kubeconfig = tmp_path / "kubeconfig"
    crd_args = [arg for d in crds.LATEST for arg in ("--crds", str(d))]
    emu = subprocess.Popen(
        [sys.executable, "-m", "cre.testing.apiserver", "--port", "0",
         "--write-kubeconfig", str(kubeconfig), *crd_args],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    sim: subprocess.Popen[str] | None = None
    try:
        _wait_for_line(emu, "serving")
        assert kubeconfig.exists()
        sim = subprocess.Popen(
            [sys.executable, "-m", "cre.testing.cluster", "--kubeconfig", str(kubeconfig),
             "--profile", "aws-h100", "--nodes", "8"],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        _wait_for_line(sim, "simulating 8 aws-h100 nodes")
        names = anyio.run(_node_names, kubeconfig)
        assert names == [f"aws-h100-node-{i}" for i in range(8)]
        assert _stop(sim) == 0
        assert _stop(emu) == 0
    finally:
        for proc in (sim, emu):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
