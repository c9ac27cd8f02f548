"""What every ``make demo`` driver shares (:mod:`cre.testing.demo`, its fleet and WorkloadRun
scenarios): a narrator over a :class:`cre.testing.procs.Stack` that announces steps, shows a
``kubectl apply`` (what goes in, what kubectl answers) and stops the manager, the console a
demo prints to, and the run-and-report frame every scenario ends with.

It sits below the drivers in the test kit's layers (docs/design/019): the fleet and WorkloadRun
drivers are imported by :mod:`cre.testing.demo`, so they cannot import from it.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable

from rich.console import Console

from cre.testing.procs import REPO, Stack, StackError


class DemoSteps:
    """What every demo driver (:mod:`cre.testing.demo`'s, :mod:`cre.testing.demo_fleet`'s,
    :mod:`cre.testing.demo_workloadrun`'s) does over its :class:`Stack`: announce a step, run
    ``kubectl apply`` showing what goes in and what kubectl answers, stop the manager."""

    def __init__(self, stack: Stack, console: Console) -> None:
        self.stack = stack
        self.console = console

    def step(self, text: str) -> None:
        self.console.print(f"[bold cyan]>[/] {text}")

    def _echo(self, out: str) -> None:
        for line in out.splitlines():
            self.console.print(f"  {line}")

    def apply_manifest(self, body: str) -> None:
        """``kubectl apply -f -`` of ``body``: the manifest (dimmed), then kubectl's answer."""
        self.step("kubectl apply -f - <<EOF")
        for line in body.splitlines():
            self.console.print(f"  [dim]{line}[/]")
        self._echo(self.stack.kubectl("apply", "-f", "-", stdin=body).stdout)

    def apply_logprofiles(self) -> None:
        """``kubectl apply -k deploy/logprofiles``: the LogProfiles the measurements read."""
        self.step("kubectl apply -k deploy/logprofiles   (the LogProfiles CRE ships)")
        self._echo(self.stack.kubectl("apply", "-k", str(REPO / "deploy" / "logprofiles")).stdout)

    def stop_manager(self) -> None:
        """SIGTERM to cre-manager; a :class:`StackError` unless it exits 0."""
        self.step("shutting down: SIGTERM to cre-manager (drains, releases, exits 0)")
        manager = next(p for p in self.stack.procs if p.name == "manager")
        manager.send(signal.SIGTERM)
        code = manager.wait(60)
        self.console.print(f"  cre-manager exited with code {code}")
        if code != 0:
            raise StackError(f"cre-manager exited {code}:\n{manager.tail()}")


def demo_console() -> Console:
    """The console a demo prints to (wide enough for the tables when piped: CI,
    ``make demo | tee``)."""
    console = Console(highlight=False)
    return console if console.is_terminal else Console(highlight=False, width=160)


def drive(stack: Stack, console: Console, body: Callable[[Stack], bool], *,
          scenario: str) -> int:
    """Run ``body`` over ``stack`` (started, then stopped): 0 when it returns True, 1 when it
    returns False or the stack fails (its logs kept), 130 when interrupted."""
    with stack:
        try:
            ok = body(stack)
        except (StackError, subprocess.TimeoutExpired) as exc:
            console.print(f"[bold red]demo failed:[/] {exc}")
            console.print(f"  process logs: {stack.workdir}")
            stack.keep = True
            return 1
        except KeyboardInterrupt:
            console.print("[yellow]interrupted[/]")
            return 130
    if not ok:
        console.print(f"[bold red]unexpected outcome for scenario {scenario}[/]")
        return 1
    console.print("[bold green]demo finished[/]: every process stopped cleanly")
    return 0
