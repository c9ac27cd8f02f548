"""Container logs fed by the test (or the cluster simulator) and served like the kubelet's.

There is no kubelet behind the emulator, so the control API appends text per container; the
``pods/{name}/log`` handler slices it with the real options (``tailLines``, ``limitBytes``,
``sinceTime``, ``sinceSeconds``, ``timestamps``, ``previous``) and ``follow`` streams new lines
until the container terminates or the pod goes away.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta

import attrs

LogKey = tuple[str, str, str, bool]  # namespace, pod, container, previous


@attrs.frozen
class LogLine:
    time: datetime
    text: str  # including the trailing newline when the line is complete


@attrs.frozen
class LogOptions:
    container: str = ""
    follow: bool = False
    previous: bool = False
    since_seconds: int | None = None
    since_time: datetime | None = None
    timestamps: bool = False
    tail_lines: int | None = None
    limit_bytes: int | None = None


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


class LogStore:
    """Log lines per container instance, with a wake-up for followers."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self.clock = clock
        self._lines: dict[LogKey, list[LogLine]] = {}
        self._changed = asyncio.Event()

    def append(
        self, namespace: str, pod: str, container: str, text: str, *, previous: bool = False
    ) -> None:
        lines = self._lines.setdefault((namespace, pod, container, previous), [])
        now = self.clock()
        if lines and not lines[-1].text.endswith("\n"):
            head, sep, text = text.partition("\n")
            lines[-1] = LogLine(lines[-1].time, lines[-1].text + head + sep)
        for part in text.splitlines(keepends=True):
            lines.append(LogLine(now, part))
        self._changed.set()
        self._changed = asyncio.Event()

    def rotate(self, namespace: str, pod: str, container: str) -> None:
        """A container restart: the current log becomes the previous instance's log."""
        cur = self._lines.pop((namespace, pod, container, False), [])
        self._lines[(namespace, pod, container, True)] = cur

    def clear_pod(self, namespace: str, pod: str) -> None:
        for key in [k for k in self._lines if k[0] == namespace and k[1] == pod]:
            del self._lines[key]

    def has(self, namespace: str, pod: str, container: str, previous: bool) -> bool:
        return (namespace, pod, container, previous) in self._lines

    def count(self, namespace: str, pod: str, container: str, previous: bool) -> int:
        return len(self._lines.get((namespace, pod, container, previous), ()))

    def render(self, key: LogKey, opts: LogOptions, *, start: int = 0) -> tuple[bytes, int]:
        """The selected log text from line ``start`` on, and the index after the last line."""
        lines = self._lines.get(key, [])
        end = len(lines)
        chosen = lines[start:]
        if opts.since_time is not None or opts.since_seconds is not None:
            since = opts.since_time or (self.clock() - timedelta(seconds=opts.since_seconds or 0))
            chosen = [ln for ln in chosen if ln.time >= since]
        if opts.tail_lines is not None and start == 0:
            chosen = chosen[-opts.tail_lines :] if opts.tail_lines else []
        out = "".join(
            (f"{_stamp(ln.time)} {ln.text}" if opts.timestamps else ln.text) for ln in chosen
        )
        return out.encode(), end

    async def wait_changed(self, timeout: float) -> None:
        ev = self._changed
        try:
            await asyncio.wait_for(ev.wait(), timeout)
        except TimeoutError:
            return
