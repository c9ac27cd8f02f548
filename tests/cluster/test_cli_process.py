"""End to end: ``python -m cre.testing.cluster`` against a separately started API emulator.

The issue's "done when": the simulated cluster runs as its own process against an emulator that
was started on its own, registers the profile's nodes, and exits cleanly on SIGTERM. Both sides
run as real subprocesses; readiness is read from their stderr lines, not guessed with sleeps.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

import anyio

from cre._vendor import crds
from cre.kube.client import NODES, KubeClient

# A guard against a hung child only (the test fails instead of hanging); not a timing assertion.
STARTUP_GUARD_SECONDS = 300.0


def _wait_for_line(proc: subprocess.Popen[str], needle: str) -> list[str]:
    """Read ``proc``'s stderr until a line contains ``needle``; the lines read so far.

    The lines are read by a thread into a queue. Waiting with ``select`` on the pipe and then
    calling ``readline`` on the buffered text stream lost lines: one ``readline`` pulls every
    line the child has written so far into Python's buffer, ``select`` then sees an empty pipe,
    and a needle already in the buffer was never read (the child was up, the test waited out
    the guard). That happened when the child wrote its last lines together, i.e. under load."""
    stream: IO[str] | None = proc.stderr
    assert stream is not None
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=STARTUP_GUARD_SECONDS)
        except queue.Empty:
            raise AssertionError(f"no line containing {needle!r}; stderr so far: {seen}") from None
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
