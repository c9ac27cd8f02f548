"""Read a failed container's log the moment the watch reports its exit, not when a worker is free.

JobSet deletes a failed launcher's pod about half a second after it exits, and the batch Job
controller deletes a crash-looping worker's pod as soon as its backoffLimit is hit. The Job key
is enqueued at once, but with many Jobs in flight it can wait behind other reconciles for longer
than that, and a log read issued after the deletion finds nothing. The prefetcher decouples the
race from queue latency: the pod handler starts the read immediately (bounded parallelism), and
when the reconcile later asks for that tail it gets the prefetched one (waiting for it if the
read is still in flight) instead of reading a pod that may be gone. The pure core does not know
or care where the tail came from.

Memory is bounded three ways: a global capacity (least recently used out), a cap per Job (its
oldest tail out), and a time to live since last use; the controller also drops a Job's tails as
soon as the Job is terminal or deleted (:meth:`LogPrefetcher.forget`).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

import anyio
import attrs
from anyio.abc import TaskGroup

from cre.core.common.observed import LogTail, PodView
from cre.core.common.plan import ReadLog
from cre.kube.client import KubeClient
from cre.kube.pods import read_pod_log

log = logging.getLogger(__name__)

Key = tuple[str, str, str, str, bool]  # namespace, pod, container, pod uid, previous run

DEFAULT_CAPACITY: Final = 1024
DEFAULT_PARALLEL: Final = 16
# Tails kept per Job: a launcher retry plus a handful of failed workers; more is a runaway.
DEFAULT_PER_OWNER: Final = 16
# A tail nobody asked for within this long (seconds) is dropped.
DEFAULT_TTL: Final = 900.0


@attrs.frozen
class _Held:
    tail: LogTail
    owner: str
    used: float


class LogPrefetcher:
    """Early log reads of failed containers, kept (bounded) until a reconcile asks for them."""

    def __init__(self, client: KubeClient, *, timeout: float, capacity: int = DEFAULT_CAPACITY,
                 parallel: int = DEFAULT_PARALLEL, per_owner: int = DEFAULT_PER_OWNER,
                 ttl: float = DEFAULT_TTL, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.timeout = timeout
        self.capacity = capacity
        self.per_owner = per_owner
        self.ttl = ttl
        self._clock = clock
        self._limit = anyio.Semaphore(parallel)
        self._tails: OrderedDict[Key, _Held] = OrderedDict()
        self._in_flight: dict[Key, anyio.Event] = {}
        self._tg: TaskGroup | None = None

    def bind(self, tg: TaskGroup | None) -> None:
        """Spawn reads in ``tg`` from now on (``None``: prefetching is off)."""
        self._tg = tg

    def request(self, pod: PodView, container: str, *, previous: bool = False, owner: str = "",
                refresh: bool = False) -> None:
        """Start reading ``container`` of ``pod`` (its previous run's log when ``previous``)
        now, on behalf of the Job key ``owner``, unless already read or being read. With
        ``refresh`` a stored tail is read again (a container restarted in place crashed once
        more: its ``previous=true`` log is now that newer run's)."""
        key = (pod.namespace, pod.name, container, pod.uid, previous)
        if self._tg is None or key in self._in_flight:
            return
        if key in self._tails and not refresh:
            return
        self._in_flight[key] = anyio.Event()
        self._tg.start_soon(self._fetch, key, owner,
                            name=f"log prefetch {pod.namespace}/{pod.name}")

    async def _fetch(self, key: Key, owner: str) -> None:
        namespace, pod, container, uid, previous = key
        try:
            request = ReadLog(namespace=namespace, pod=pod, container=container,
                                 pod_uid=uid, previous=previous)
            async with self._limit:
                tail = await read_pod_log(self.client, request, timeout=self.timeout)
            if tail.error is None or key not in self._tails:
                # A failed re-read (the pod is gone by now) never replaces a good tail.
                self._store(key, tail, owner)
        except Exception:  # a prefetch is an optimisation: the reconcile reads again
            log.exception("log prefetch of %s/%s failed", namespace, pod)
        finally:
            self._in_flight.pop(key).set()

    def _store(self, key: Key, tail: LogTail, owner: str) -> None:
        now = self._clock()
        self._tails[key] = _Held(tail=tail, owner=owner, used=now)
        self._tails.move_to_end(key)
        self._expire(now)
        if owner:
            mine = [k for k, held in self._tails.items() if held.owner == owner]
            for old in mine[:max(len(mine) - self.per_owner, 0)]:
                del self._tails[old]
        while len(self._tails) > self.capacity:
            self._tails.popitem(last=False)

    def _expire(self, now: float) -> None:
        # Least recently used first, so the expired ones are at the front.
        while self._tails:
            key, held = next(iter(self._tails.items()))
            if now - held.used < self.ttl:
                return
            del self._tails[key]

    async def tail_for(self, req: ReadLog) -> LogTail | None:
        """The prefetched tail for ``req`` (waiting for an in-flight read), or ``None``."""
        key = (req.namespace, req.pod, req.container, req.pod_uid, req.previous)
        pending = self._in_flight.get(key)
        if pending is not None:
            await pending.wait()
        now = self._clock()
        self._expire(now)
        held = self._tails.get(key)
        if held is None:
            return None
        self._tails[key] = attrs.evolve(held, used=now)
        self._tails.move_to_end(key)
        return held.tail

    def forget(self, owner: str) -> None:
        """Drop every tail read on behalf of the Job key ``owner`` (terminal or deleted)."""
        for key in [k for k, held in self._tails.items() if held.owner == owner]:
            del self._tails[key]

    def pods_of(self, owner: str) -> frozenset[str]:
        """The pods with a stored tail read on behalf of ``owner``."""
        return frozenset(k[1] for k, held in self._tails.items() if held.owner == owner)

    def __len__(self) -> int:
        return len(self._tails)
