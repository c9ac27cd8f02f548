"""Read a failed launcher's log the moment the watch reports its exit, not when a worker is free.

JobSet deletes a failed launcher's pod about half a second after it exits. The Job key is
enqueued at once, but with many Jobs in flight it can wait behind other reconciles for longer
than that, and a log read issued after the deletion finds nothing. The prefetcher decouples the
race from queue latency: the launcher handler starts the read immediately (bounded parallelism),
and when the reconcile later asks for that tail it gets the prefetched one (waiting for it if
the read is still in flight) instead of reading a pod that may be gone. The pure core does not
know or care where the tail came from.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Final

import anyio
import attrs
from anyio.abc import TaskGroup

from cre.core.observed import LogTail, PodView
from cre.core.plan import READ_LIMIT_BYTES, TAIL_LINES, LogRequest
from cre.kube.client import KubeClient
from cre.kube.pods import read_pod_log

log = logging.getLogger(__name__)

Key = tuple[str, str, str, str, bool]  # namespace, pod, container, pod uid, previous run

DEFAULT_CAPACITY: Final = 1024
DEFAULT_PARALLEL: Final = 16


class LogPrefetcher:
    """Early log reads of failed containers, kept (bounded, least recently used out) until a
    reconcile asks for them."""

    def __init__(self, client: KubeClient, *, timeout: float, capacity: int = DEFAULT_CAPACITY,
                 parallel: int = DEFAULT_PARALLEL) -> None:
        self.client = client
        self.timeout = timeout
        self.capacity = capacity
        self._limit = anyio.Semaphore(parallel)
        self._tails: OrderedDict[Key, LogTail] = OrderedDict()
        self._in_flight: dict[Key, anyio.Event] = {}
        self._tg: TaskGroup | None = None

    def bind(self, tg: TaskGroup | None) -> None:
        """Spawn reads in ``tg`` from now on (``None``: prefetching is off)."""
        self._tg = tg

    def request(self, pod: PodView, container: str, *, previous: bool = False) -> None:
        """Start reading ``container`` of ``pod`` (its previous run's log when ``previous``)
        now, unless already read or being read."""
        key = (pod.namespace, pod.name, container, pod.uid, previous)
        if self._tg is None or key in self._tails or key in self._in_flight:
            return
        self._in_flight[key] = anyio.Event()
        self._tg.start_soon(self._fetch, key, name=f"log prefetch {pod.namespace}/{pod.name}")

    async def _fetch(self, key: Key) -> None:
        namespace, pod, container, uid, previous = key
        try:
            async with self._limit:
                tail = await read_pod_log(self.client, namespace=namespace, pod=pod,
                                          container=container, tail_lines=TAIL_LINES,
                                          limit_bytes=READ_LIMIT_BYTES, timeout=self.timeout,
                                          previous=previous, pod_uid=uid)
            self._store(key, attrs.evolve(tail, previous=previous))
        except Exception:  # a prefetch is an optimisation: the reconcile reads again
            log.exception("log prefetch of %s/%s failed", namespace, pod)
        finally:
            self._in_flight.pop(key).set()

    def _store(self, key: Key, tail: LogTail) -> None:
        self._tails[key] = tail
        self._tails.move_to_end(key)
        while len(self._tails) > self.capacity:
            self._tails.popitem(last=False)

    async def tail_for(self, req: LogRequest) -> LogTail | None:
        """The prefetched tail for ``req`` (waiting for an in-flight read), or ``None``."""
        key = (req.namespace, req.pod, req.container, req.pod_uid, req.previous)
        pending = self._in_flight.get(key)
        if pending is not None:
            await pending.wait()
        tail = self._tails.get(key)
        if tail is not None:
            self._tails.move_to_end(key)
        return tail

    def __len__(self) -> int:
        return len(self._tails)
