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
    """Log lines per container instance, with a wake-up for followers.

    Lines are filed per pod, so a pod's removal from the store drops all of its containers'
    logs at once (:meth:`clear_pod`, wired to the store by the server): a deleted pod's log is
    unreachable on a real server too, and keeping it would grow memory with every pod ever run.
    """

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self.clock = clock
        self._pods: dict[tuple[str, str], dict[tuple[str, bool], list[LogLine]]] = {}
        self._changed = asyncio.Event()

    def _get(self, key: LogKey) -> list[LogLine] | None:
        namespace, pod, container, previous = key
        return (self._pods.get((namespace, pod)) or {}).get((container, previous))

    def append(
        self, namespace: str, pod: str, container: str, text: str, *, previous: bool = False,
        at: datetime | None = None
    ) -> None:
        """Append ``text``, stamped now, or at ``at`` (when it was written: a writer that runs
        late) kept between the last line's time and now, so the log stays in time order."""
        lines = self._pods.setdefault((namespace, pod), {}).setdefault((container, previous), [])
        now = self.clock()
        if at is not None:
            now = min(max(at, lines[-1].time) if lines else at, now)
        if lines and not lines[-1].text.endswith("\n"):
            head, sep, text = text.partition("\n")
            lines[-1] = LogLine(lines[-1].time, lines[-1].text + head + sep)
        for part in text.splitlines(keepends=True):
            lines.append(LogLine(now, part))
        self._changed.set()
        self._changed = asyncio.Event()

    def rotate(self, namespace: str, pod: str, container: str) -> None:
        """A container restart: the current log becomes the previous instance's log."""
        files = self._pods.setdefault((namespace, pod), {})
        files[(container, True)] = files.pop((container, False), [])

    def clear_pod(self, namespace: str, pod: str) -> None:
        """Forget every log of the pod (it left the store)."""
        self._pods.pop((namespace, pod), None)

    def pods(self) -> int:
        """How many pods have logs (for memory checks)."""
        return len(self._pods)

    def has(self, namespace: str, pod: str, container: str, previous: bool) -> bool:
        return self._get((namespace, pod, container, previous)) is not None

    def count(self, namespace: str, pod: str, container: str, previous: bool) -> int:
        return len(self._get((namespace, pod, container, previous)) or ())

    def render(self, key: LogKey, opts: LogOptions, *, start: int = 0) -> tuple[bytes, int]:
        """The selected log text from line ``start`` on, and the index after the last line."""
        lines = self._get(key) or []
        end = len(lines)
        chosen = lines[start:]
        if opts.since_time is not None or opts.since_seconds is not None:
            since = opts.since_time or (self.clock() - timedelta(seconds=opts.since_seconds or 0))
            chosen = [ln for ln in chosen if ln.time >= since]
        if opts.tail_lines is not None and start == 0:
            chosen = chosen[-opts.tail_lines :] if opts.tail_lines else []
        budget = opts.limit_bytes
        if budget is None:
            out = "".join(
                (f"{_stamp(ln.time)} {ln.text}" if opts.timestamps else ln.text) for ln in chosen
            )
            return out.encode(), end
        # As the kubelet streams the file and stops at limitBytes: never more than the budget
        # is built, whatever the size of a line (a 1 GB log without a newline is one line).
        parts: list[bytes] = []
        for ln in chosen:
            if budget <= 0:
                break
            text = f"{_stamp(ln.time)} {ln.text}" if opts.timestamps else ln.text
            piece = text[:budget].encode()[:budget]  # a character is at least one byte
            parts.append(piece)
            budget -= len(piece)
        return b"".join(parts), end

    async def wait_changed(self, timeout: float) -> None:
        ev = self._changed
        try:
            await asyncio.wait_for(ev.wait(), timeout)
        except TimeoutError:
            return
