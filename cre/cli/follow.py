"""``cre status [--watch] [--exit-code]``: show Certifications once, or follow them to the end.

On a terminal ``--watch`` redraws the tree in place (rich ``Live``). Anywhere else (a pipe, a
CI log) a redraw is noise and a ``Live`` prints nothing until it stops, so ``--watch`` prints
the whole tree once and then one line per object whose phase, verdict, reason or busBW changed,
flushed at once. ``--exit-code`` turns the outcome into the exit status a pipeline can gate on
(docs/guide/cli.md): 0 every Certification shown Passed, 9 one of them Failed, 10 otherwise
(Incomplete, or not finished when read without ``--watch``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import IO

import anyio
from rich.console import Console, Group
from rich.live import Live

from cre.api.conditions import Verdict
from cre.cli.cluster import Connection
from cre.cli.exitcodes import ExitCode
from cre.cli.session import read_snapshots
from cre.cli.status import change_lines, status_tree, terminal
from cre.core.certification.report import Snapshot


def verdict_code(snaps: list[Snapshot]) -> ExitCode:
    """The ``--exit-code`` status of what was shown last."""
    verdicts = [s.certification.status.verdict for s in snaps]
    if any(v == Verdict.FAILED for v in verdicts):
        return ExitCode.VERDICT_FAILED
    if verdicts and all(v == Verdict.PASSED for v in verdicts):
        return ExitCode.OK
    return ExitCode.NOT_CERTIFIED


def _nothing(conn: Connection, all_namespaces: bool) -> str:
    where = ("any namespace" if all_namespaces
             else f"namespace {conn.namespace or 'of the current context'}")
    return f"No Certifications in {where}."


def follow(conn: Connection, name: str | None, *, all_namespaces: bool, watch: bool,
           interval: float, exit_code: bool, console: Console) -> int:
    """Run ``cre status``; returns the exit code."""
    read = functools.partial(read_snapshots, conn, name, all_namespaces=all_namespaces)

    def view(snaps: list[Snapshot]) -> Group:
        if not snaps:
            return Group(_nothing(conn, all_namespaces))
        now = datetime.now(UTC)
        return Group(*(status_tree(s, now) for s in snaps))

    snaps = anyio.run(read)
    if watch and console.is_terminal:
        with Live(view(snaps), console=console, refresh_per_second=4) as live:
            while not all(terminal(s) for s in snaps):
                time.sleep(interval)
                snaps = anyio.run(read)
                live.update(view(snaps))
    elif watch:
        snaps = _follow_lines(read, snaps, interval=interval, out=console.file,
                              empty=_nothing(conn, all_namespaces))
    else:
        console.print(view(snaps))
    return verdict_code(snaps) if exit_code else ExitCode.OK


def _follow_lines(read: Callable[[], Awaitable[list[Snapshot]]], snaps: list[Snapshot], *,
                  interval: float, out: IO[str], empty: str) -> list[Snapshot]:
    if not snaps:
        print(empty, file=out, flush=True)
        return snaps
    seen: dict[str, str] = {}
    while True:
        for text in change_lines(snaps, seen):
            print(text, file=out)
        out.flush()
        if all(terminal(s) for s in snaps):
            return snaps
        time.sleep(interval)
        snaps = anyio.run(read)
