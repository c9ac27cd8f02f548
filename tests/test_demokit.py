"""The demo drivers' shared steps: the echoed ``kubectl apply`` and the run-and-report frame."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

from rich.console import Console

from cre.testing.demokit import DemoSteps, drive
from cre.testing.procs import Stack, StackError


class RecordingStack(Stack):
    """A Stack whose kubectl answers like kubectl and records what it was given."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.calls: list[tuple[tuple[str, ...], str | None]] = []

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True,
                timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        self.calls.append((args, stdin))
        return subprocess.CompletedProcess(["kubectl", *args], 0,
                                           stdout="workloadrun.cre.dev/r created\n", stderr="")


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=120, highlight=False), out


def test_apply_manifest_shows_the_manifest_and_kubectls_answer(tmp_path: Path) -> None:
    """The manifest goes to kubectl apply -f - on stdin; the console shows the heredoc line,
    every manifest line, then kubectl's output, in that order."""
    stack, (console, out) = RecordingStack(tmp_path), _console()
    DemoSteps(stack, console).apply_manifest("kind: WorkloadRun\nmetadata: {name: r}\n")
    assert stack.calls == [(("apply", "-f", "-"), "kind: WorkloadRun\nmetadata: {name: r}\n")]
    assert [line.strip() for line in out.getvalue().splitlines()] == [
        "> kubectl apply -f - <<EOF", "kind: WorkloadRun", "metadata: {name: r}",
        "workloadrun.cre.dev/r created"]


def test_drive_maps_the_outcome_to_an_exit_code(tmp_path: Path) -> None:
    """True is 0 (finished), False 1 (unexpected outcome), a StackError 1 with the logs kept,
    an interrupt 130."""
    def failing(_: Stack) -> bool:
        raise StackError("manager died")

    def interrupted(_: Stack) -> bool:
        raise KeyboardInterrupt

    codes = []
    for body in (lambda _: True, lambda _: False, failing, interrupted):
        console, out = _console()
        stack = Stack(tmp_path / str(len(codes)))
        (tmp_path / str(len(codes))).mkdir()
        codes.append((drive(stack, console, body, scenario="x"), stack.keep, out.getvalue()))
    assert [(c, k) for c, k, _ in codes] == [(0, False), (1, False), (1, True), (130, False)]
    assert "demo finished" in codes[0][2] and "unexpected outcome for scenario x" in codes[1][2]
    assert "demo failed: manager died" in codes[2][2]
