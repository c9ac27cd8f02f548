"""Simulated time: one clock the whole simulated cluster reads, running ``scale`` times wall time.

Real clusters spend most of a failure scenario waiting (10 s pod-failure backoff, crash-loop
back-off, stub workloads that run for a minute). The simulator keeps those durations in
*simulated* seconds, exactly as the upstream controllers state them, and divides them by the
scale factor only when it actually sleeps. Every timestamp it writes into an object comes from
this clock, so objects look as if the minutes really passed, while a test finishes in well
under a second. Nothing here sleeps to wait for *state*: callers wait on watch events and use
the clock only to schedule the next simulated deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

# 2026-01-01T00:00:00Z: a fixed, round origin keeps timestamps in goldens readable.
DEFAULT_EPOCH = 1767225600.0

# The least wall time a test's wait on simulated time gets before it times out (the scenario
# and controller golden runners): on a loaded machine simulated time runs on while the
# controllers wait for a CPU, and a bound meant to catch a hang must not catch a slow machine.
WAIT_WALL_FLOOR = 120.0


class SimClock:
    """Simulated seconds since the Unix epoch, advancing ``scale`` times faster than wall time.

    ``start`` is the simulated time at construction (or at wall time ``wall0``); ``wall`` is
    injectable for tests.
    """

    def __init__(self, *, scale: float = 1.0, start: float = DEFAULT_EPOCH,
                 wall: Callable[[], float] = time.monotonic, wall0: float | None = None) -> None:
        if scale <= 0:
            raise ValueError(f"SimClock: scale must be > 0, got {scale!r}")
        self.scale = scale
        self._wall = wall
        self._wall0 = wall() if wall0 is None else wall0
        self._sim0 = start

    @classmethod
    def shared(cls, *, scale: float, origin: float) -> SimClock:
        """The clock processes share: ``origin + (time.time() - origin) x scale``. The API
        emulator, the simulated cluster and ``cre-manager --sim-time-scale`` each build it from
        the same origin (Unix seconds), so their timestamps agree."""
        return cls(scale=scale, start=origin, wall=time.time, wall0=origin)

    def now(self) -> float:
        """The current simulated time in seconds since the epoch."""
        return self._sim0 + (self._wall() - self._wall0) * self.scale

    def wall_delay(self, sim_seconds: float) -> float:
        """How long to sleep in wall seconds for ``sim_seconds`` of simulated time."""
        return max(0.0, sim_seconds) / self.scale


def fmt_time(t: float) -> str:
    """RFC 3339 at second precision, as the API server serialises ``metav1.Time``."""
    return datetime.fromtimestamp(int(t), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> float | None:
    """Seconds since the epoch from an RFC 3339 timestamp, or None when absent or malformed."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
