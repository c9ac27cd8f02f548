"""The last state of failed pods deleted before the Job's failure was recorded.

JobSet deletes a failed launcher about half a second after it exits, and the batch Job
controller deletes a crash-looping worker's pods once its backoffLimit is hit, which is also
what fails the workload. A reconcile that starts after the deletion finds no pod in the cache
and could only record ``PodNotFound``. The pod handlers therefore keep the last projected state
of every failed pod they see deleted (a tombstone), and the Observation lists it next to the
cached pods, so the pure core still sees the candidate (and asks for its log, which the
prefetcher already holds).

Memory is bounded: a cap per Job (on overflow the tombstone whose failure would be chosen last
goes: not OOMKilled, latest ``finishedAt``), a time to live, and the controller drops a Job's
tombstones once the Job is terminal, being deleted or gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from cre.core.common.observed import PodView
from cre.core.job import failurelog as fl

DEFAULT_TTL: Final = 900.0
_FAR: Final = datetime.max.replace(tzinfo=UTC)


def _rank(pod: PodView) -> tuple[int, datetime]:
    """How early the pod's failure would be chosen (smaller: earlier)."""
    found = fl.failed_terminations(pod)
    oom = any(state.reason == fl.OOM_KILLED for _, state, _ in found)
    finished = [s.finished_at for _, s, _ in found if s.finished_at is not None]
    return (0 if oom else 1, min(finished, default=_FAR))


class Tombstones:
    """Failed pods deleted from the cluster, by Job key, bounded per Job and by age."""

    def __init__(self, *, per_job: int, ttl: float = DEFAULT_TTL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if per_job < 1:
            raise ValueError(f"Tombstones: per_job must be at least 1, got {per_job}")
        self.per_job = per_job
        self.ttl = ttl
        self._clock = clock
        self._kept: dict[str, dict[str, tuple[PodView, float]]] = {}

    def remember(self, key: str, pod: PodView) -> None:
        """Keep the last state of ``pod`` (deleted with a failed container) for Job ``key``."""
        now = self._clock()
        self._expire(now)
        kept = self._kept.setdefault(key, {})
        kept[pod.name] = (pod, now)
        if len(kept) > self.per_job:
            latest = max(kept, key=lambda name: (_rank(kept[name][0]), name))
            del kept[latest]

    def pods(self, key: str) -> dict[str, PodView]:
        """The tombstones of Job ``key`` still within their time to live, by pod name."""
        self._expire(self._clock())
        return {name: pod for name, (pod, _) in self._kept.get(key, {}).items()}

    def forget(self, key: str) -> None:
        """Drop every tombstone of Job ``key``."""
        self._kept.pop(key, None)

    def _expire(self, now: float) -> None:
        for key in list(self._kept):
            kept = self._kept[key]
            for name in [n for n, (_, at) in kept.items() if now - at >= self.ttl]:
                del kept[name]
            if not kept:
                del self._kept[key]

    def __len__(self) -> int:
        return sum(len(kept) for kept in self._kept.values())
