"""In-memory object storage with etcd-like revisions, bounded history and watch fan-out.

The real server stores every object under one global, strictly increasing revision that becomes
``metadata.resourceVersion``; watches replay a bounded per-resource history and answer 410 when
asked for something older; lists can be served at an exact past revision while it is still in
history. This module does exactly that, in one process:

* one revision counter shared by every bucket (a bucket is one stored resource, e.g. pods);
* stored objects are treated as immutable: a write stores a new dict, so readers and watch
  events can share them without copies;
* each bucket keeps a ring of recent :class:`Event` s (with the previous state), which serves
  watch resume and lets :meth:`Bucket.snapshot` rebuild the state at a past revision (exact
  ``resourceVersion`` lists and continue tokens). Like the real watch cache it is sized by
  freshness: it holds at most ``history`` events, and :meth:`Store.compact` drops events older
  than ``fresh_seconds`` beyond a floor of ``HISTORY_FLOOR`` per bucket (so a burst of
  objects that came and went does not stay in memory; a resume from before the window gets
  the usual 410);
* :meth:`Store.compact_storage` is etcd's compaction (what a peer kube-apiserver's compactor
  does every five minutes): lists at a revision below it (exact ``resourceVersion`` lists and
  continue tokens) answer 410 while watches keep replaying their history, as the real watch
  cache's event window is independent of etcd's;
* :class:`Event` caches its JSON encoding per apiVersion so N watchers cost one encode.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import orjson

from cre.api.watch import WatchEventType as EventType

from .keyorder import builtin_order

Key = tuple[str, str]  # (namespace, name); namespace is "" for cluster-scoped objects
Obj = dict[str, Any]

DEFAULT_HISTORY = 4096
HISTORY_FLOOR = 100  # the real watch cache's lower bound (events per resource)
FRESH_SECONDS = 75.0  # the real watch cache keeps at least this long of history


_GO_ESCAPES = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"),
               ("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


def dumps(obj: Any, *, sort_keys: bool = False) -> bytes:
    """Compact JSON bytes as Go's ``encoding/json`` writes them, which is what kube-apiserver's
    serializer sends: orjson (the list and watch hot paths encode a lot; like Go it writes
    UTF-8 as is and ``\\b \\f \\n \\r \\t`` and other control characters escaped), then the
    characters Go escapes for HTML safety (``<``, ``>``, ``&``, U+2028, U+2029) as ``\\u``
    escapes. Those bytes only occur inside JSON strings, so replacing them is exact.
    ``sort_keys`` sorts every object's keys, as Go writes maps (custom resources)."""
    data = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS) if sort_keys else orjson.dumps(obj)
    for raw, escaped in _GO_ESCAPES:
        data = data.replace(raw, escaped)
    return data


def encode_object(obj: Obj, *, custom: bool) -> bytes:
    """An API object as kube-apiserver writes it: a custom resource with every key sorted, a
    built-in with TypeMeta and ObjectMeta in Go's order (:mod:`.keyorder`)."""
    return dumps(obj, sort_keys=True) if custom else dumps(builtin_order(obj))


def dumps_indented(obj: Any) -> bytes:
    """JSON as Go's ``json.MarshalIndent(obj, "", "  ")`` writes it: two-space indent,
    ``": "`` after keys, Go's escaping, no final newline."""
    data = json.dumps(obj, indent=2, ensure_ascii=False).encode()
    for raw, escaped in _GO_ESCAPES:
        data = data.replace(raw, escaped)
    return data


@attrs.define(slots=True, eq=False)
class Event:
    """One change of one object, as stored in a bucket's history."""

    rv: int
    type: EventType
    key: Key
    obj: Obj  # the new state (for DELETED: the last state, carrying the deletion RV)
    prev: Obj | None  # the state before the change (None for ADDED)
    at: float = 0.0  # when it was recorded (the store's monotonic clock)
    _encoded: dict[str, bytes] = attrs.field(factory=dict)

    def encode(self, api_version: str, event_type: EventType | None = None, *,
               custom: bool = False) -> bytes:
        """``{"type":..,"object":..}\\n`` with the object's apiVersion set, cached (a bucket
        holds custom resources or built-ins, never both, so ``custom`` needs no key)."""
        etype = event_type or self.type
        cache_key = f"{etype}|{api_version}"
        data = self._encoded.get(cache_key)
        if data is None:
            obj = self.obj
            if obj.get("apiVersion") != api_version:
                obj = {**obj, "apiVersion": api_version}
            data = (b'{"type":"' + etype.encode() + b'","object":'
                    + encode_object(obj, custom=custom) + b"}\n")
            self._encoded[cache_key] = data
        return data


class Watcher:
    """A queue fed by a bucket; the watch handler drains it.

    Waiting parks on one plain future (no task, no ``wait_for``): a write that reaches twenty
    watchers wakes twenty handlers, so the per-wake cost is the fan-out cost. Events that
    arrive before the handler runs only join the queue; it drains them in one write.
    """

    __slots__ = ("_waiter", "closed", "queue", "sink")

    def __init__(self) -> None:
        self.queue: deque[Event] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False
        # Set by a handler in steady state: delivers one event synchronously (True) or declines
        # (False: slow client, write in progress), and the event goes through the queue.
        self.sink: Callable[[Event], bool] | None = None

    def offer(self, ev: Event) -> None:
        sink = self.sink
        if sink is not None and not self.queue and sink(ev):
            return
        self.queue.append(ev)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, timeout: float | None = None) -> None:
        """Until an event is queued, the watcher is closed, or ``timeout`` seconds passed."""
        if self.queue or self.closed:
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, self._wake)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def close(self) -> None:
        self.closed = True
        self._wake()


class Bucket:
    """The objects of one stored resource, their history, and their watchers."""

    def __init__(self, name: tuple[str, str], history: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.clock = clock
        self.objects: dict[Key, Obj] = {}
        self.history: deque[Event] = deque()
        self.history_limit = history
        # Every event with rv <= evicted_rv has left the history: watches from below it get 410.
        self.evicted_rv = 0
        self.watchers: set[Watcher] = set()
        self._sorted: list[Key] | None = None

    def keys_sorted(self) -> list[Key]:
        if self._sorted is None:
            self._sorted = sorted(self.objects)
        return self._sorted

    def record(self, ev: Event) -> None:
        if ev.type is EventType.ADDED or ev.type is EventType.DELETED:
            self._sorted = None
        ev.at = self.clock()
        self.history.append(ev)
        while len(self.history) > self.history_limit:
            self.evicted_rv = self.history.popleft().rv
        for w in self.watchers:
            w.offer(ev)

    def compact(self, *, floor: int, older_than: float) -> int:
        """Drop events recorded before ``older_than`` while more than ``floor`` remain."""
        dropped = 0
        while len(self.history) > floor and self.history[0].at < older_than:
            self.evicted_rv = self.history.popleft().rv
            dropped += 1
        return dropped

    def events_after(self, rv: int) -> Iterator[Event]:
        """History events with revision > rv (the caller checked ``rv >= evicted_rv``)."""
        if not self.history or self.history[-1].rv <= rv:
            return iter(())
        if self.history[0].rv > rv:
            return iter(list(self.history))
        # binary search the deque (random access is O(n) at the ends only; fine for our sizes)
        lo, hi = 0, len(self.history)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.history[mid].rv <= rv:
                lo = mid + 1
            else:
                hi = mid
        return iter([self.history[i] for i in range(lo, len(self.history))])

    def snapshot(self, rv: int) -> dict[Key, Obj] | None:
        """The bucket's objects at revision ``rv``, or None when history no longer reaches it."""
        if rv < self.evicted_rv:
            return None
        later = list(self.events_after(rv))
        if not later:
            return self.objects
        state = dict(self.objects)
        for ev in reversed(later):
            if ev.prev is None:
                state.pop(ev.key, None)
            else:
                state[ev.key] = ev.prev
        return state


class Store:
    """All buckets plus the global revision counter."""

    def __init__(self, *, history: int = DEFAULT_HISTORY, fresh_seconds: float = FRESH_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rv = 0
        # etcd's compaction revision: no list is served at a revision below it
        self.compacted_rv = 0
        self.history = history
        self.fresh_seconds = fresh_seconds
        self.clock = clock
        self.buckets: dict[tuple[str, str], Bucket] = {}
        self.listeners: list[Callable[[tuple[str, str], Event], None]] = []

    def bucket(self, name: tuple[str, str]) -> Bucket:
        b = self.buckets.get(name)
        if b is None:
            b = self.buckets[name] = Bucket(name, self.history, self.clock)
        return b

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def get(self, bucket: tuple[str, str], key: Key) -> Obj | None:
        b = self.buckets.get(bucket)
        return None if b is None else b.objects.get(key)

    def put(self, bucket: tuple[str, str], key: Key, obj: Obj) -> Obj:
        """Store ``obj`` (mutated: gets the new resourceVersion) and publish ADDED/MODIFIED."""
        b = self.bucket(bucket)
        rv = self.next_rv()
        obj["metadata"]["resourceVersion"] = str(rv)
        prev = b.objects.get(key)
        b.objects[key] = obj
        ev = Event(rv, EventType.ADDED if prev is None else EventType.MODIFIED, key, obj, prev)
        b.record(ev)
        for fn in self.listeners:
            fn(bucket, ev)
        return obj

    def remove(self, bucket: tuple[str, str], key: Key) -> Obj | None:
        """Delete the object; the DELETED event and the result carry the deletion revision."""
        b = self.buckets.get(bucket)
        if b is None or key not in b.objects:
            return None
        prev = b.objects.pop(key)
        rv = self.next_rv()
        final = {**prev, "metadata": {**prev["metadata"], "resourceVersion": str(rv)}}
        ev = Event(rv, EventType.DELETED, key, final, prev)
        b.record(ev)
        for fn in self.listeners:
            fn(bucket, ev)
        return final

    def compact(self) -> int:
        """Trim every bucket's history to its fresh part (at least ``HISTORY_FLOOR`` events);
        how many events were dropped. The server runs it periodically."""
        older_than = self.clock() - self.fresh_seconds
        return sum(b.compact(floor=HISTORY_FLOOR, older_than=older_than)
                   for b in self.buckets.values())

    def compact_storage(self) -> int:
        """Compact "etcd" at the current revision (lists at older revisions answer 410 from
        now on; watch history is untouched); the compaction revision."""
        self.compacted_rv = self.rv
        return self.rv

    def drop_bucket(self, bucket: tuple[str, str]) -> None:
        b = self.buckets.pop(bucket, None)
        if b is not None:
            for w in b.watchers:
                w.close()
