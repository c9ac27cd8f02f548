"""core/v1 Events about CRE objects, emitted after the write they describe succeeded.

Controllers emit at most one event per transition (the pure core decides which), so this
recorder does no aggregation or spam filtering of its own: it writes one Event per call, with
the note bounded to the events/v1 limit, and never lets a failed emit fail or slow a reconcile
(an event is a best-effort notification; the status is the record).

An API server that throttles (429) or hiccups (5xx, 409, a dropped connection) would otherwise
lose the one event of a transition. As client-go's broadcaster does, a recorder bound to a task
group (:meth:`EventRecorder.bind`) hands each event to a bounded queue and returns at once; one
background sink writes them in order and retries a transient failure with jittered exponential
backoff (or the server's ``Retry-After``) up to ``max_tries`` times, then drops the event with a
log line. An event the server refuses for good (403, 404, 422) is dropped at once; one that
already exists (a retried create that had landed) counts as written. A full queue drops the new
event with a log line rather than block. An unbound recorder (a library caller without a task
group) writes once, inline.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Final

import anyio
import attrs
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from cre.api.meta import format_time
from cre.core.common.lifecycle import bound_note
from cre.kube.client import EVENTS, ApiError, KubeClient
from cre.kube.metrics import KubeMetrics, metrics_for

log = logging.getLogger(__name__)

# client-go's broadcaster: 12 tries per event, an incoming queue of 1000.
MAX_TRIES: Final = 12
QUEUE_SIZE: Final = 1000
RETRY_BASE: Final = 0.5
RETRY_CAP: Final = 10.0
_TRANSIENT: Final = frozenset({0, 409, 429})


def _utcnow() -> datetime:
    return datetime.now(UTC)


def event_namespace(involved: dict[str, Any]) -> str:
    """Where the Event about ``involved`` is written: its namespace, ``default`` for a
    cluster-scoped object."""
    return str(involved.get("namespace") or "default")


def _transient(exc: ApiError) -> bool:
    return (exc.status in _TRANSIENT and not exc.already_exists) or exc.status >= 500


@attrs.frozen
class _Pending:
    body: dict[str, Any]
    namespace: str


class EventRecorder:
    """Writes Events for one reporting component (``cre.dev/job-controller``, ...).

    ``metrics``: where ``cre_events_total{component,result}`` is counted (default: the
    collectors of prometheus-client's default registry, created on first use)."""

    def __init__(self, client: KubeClient, *, component: str, instance: str = "",
                 clock: Callable[[], datetime] = _utcnow, max_tries: int = MAX_TRIES,
                 retry_base: float = RETRY_BASE, retry_cap: float = RETRY_CAP,
                 queue_size: int = QUEUE_SIZE,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
                 rng: random.Random | None = None, metrics: KubeMetrics | None = None) -> None:
        if max_tries < 1 or queue_size < 1 or retry_base <= 0 or retry_cap < retry_base:
            raise ValueError("EventRecorder: need max_tries >= 1, queue_size >= 1 and "
                             f"0 < retry_base <= retry_cap, got max_tries={max_tries} "
                             f"queue_size={queue_size} retry_base={retry_base} "
                             f"retry_cap={retry_cap}")
        self.client = client
        self.component = component
        self.instance = instance or component
        self._clock = clock
        self.max_tries = max_tries
        self.retry_base = retry_base
        self.retry_cap = retry_cap
        self.queue_size = queue_size
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._send: MemoryObjectSendStream[_Pending] | None = None
        self.metrics = metrics if metrics is not None else metrics_for()
        self.metrics.init_event_series(component)

    def manifest(self, *, involved: dict[str, Any], type_: str, reason: str, message: str
                 ) -> dict[str, Any]:
        """The Event object for ``involved`` (apiVersion, kind, name, namespace, uid); the
        Event of a cluster-scoped object (no ``namespace``) lives in ``default``, as
        client-go's recorder puts it."""
        now = format_time(self._clock())
        name = f"{involved['name']}.{uuid.uuid4().hex[:16]}"
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": event_namespace(involved)},
            "involvedObject": involved,
            "type": type_,
            "reason": reason,
            "message": bound_note(message),
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }

    def bind(self, tg: TaskGroup | None) -> None:
        """Start the background sink in ``tg`` (events are queued from now on); ``None``
        closes the queue (the sink finishes what is queued, then ends)."""
        if self._send is not None:
            self._send.close()
            self._send = None
        if tg is None:
            return
        send, receive = anyio.create_memory_object_stream[_Pending](self.queue_size)
        self._send = send
        tg.start_soon(self._sink, receive, name=f"event sink {self.component}")

    async def emit(self, *, involved: dict[str, Any], type_: str, reason: str, message: str
                   ) -> bool:
        """Queue one Event (bound) or write it once (unbound). ``False`` (logged, never raised)
        when it was dropped: queue full, or refused by the server when written inline."""
        body = self.manifest(involved=involved, type_=type_, reason=reason, message=message)
        pending = _Pending(body, event_namespace(involved))
        if self._send is None:
            return await self._write(pending, tries=1)
        try:
            self._send.send_nowait(pending)
        except anyio.WouldBlock:
            self._dropped(pending, f"the event queue is full ({self.queue_size})")
            return False
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return await self._write(pending, tries=1)
        return True

    async def _sink(self, receive: MemoryObjectReceiveStream[_Pending]) -> None:
        async with receive:
            async for pending in receive:
                await self._write(pending, tries=self.max_tries)

    def _delay(self, attempt: int, exc: ApiError) -> float:
        if exc.retry_after is not None and exc.retry_after > 0:
            return min(float(exc.retry_after), self.retry_cap)
        base = self.retry_base * 2.0 ** min(attempt - 1, 30)
        return min(base * (1.0 + 0.5 * self._rng.random()), self.retry_cap)

    async def _write(self, pending: _Pending, *, tries: int) -> bool:
        for attempt in range(1, tries + 1):
            try:
                await self.client.create(EVENTS, pending.body, namespace=pending.namespace)
            except ApiError as exc:
                if exc.already_exists:
                    break  # an earlier try landed although its answer was lost
                if not _transient(exc):
                    self._dropped(pending, f"refused: {exc}")
                    return False
                if attempt == tries:
                    self._dropped(pending, f"still failing after {tries} tries: {exc}")
                    return False
                self.metrics.events_total.labels(component=self.component,
                                                 result="retried").inc()
                await self._sleep(self._delay(attempt, exc))
            else:
                break
        self.metrics.events_total.labels(component=self.component, result="recorded").inc()
        return True

    def _dropped(self, pending: _Pending, why: str) -> None:
        self.metrics.events_total.labels(component=self.component, result="dropped").inc()
        involved = pending.body.get("involvedObject") or {}
        log.warning("event %s for %s/%s not recorded, dropped: %s", pending.body.get("reason"),
                    involved.get("namespace"), involved.get("name"), why)
