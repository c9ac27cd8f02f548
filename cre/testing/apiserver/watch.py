"""WATCH: initial events, resume from a resourceVersion, bookmarks, selectors and 410.

Follows the watch cache of ``k8s.io/apiserver/pkg/storage/cacher``: a watch without a
resourceVersion (or ``"0"``) starts with synthetic ``ADDED`` events for the current state; a
watch from ``n`` replays history after ``n`` or, when ``n`` has left the bounded history, sends
one ``ERROR`` event with a 410 ``Expired`` Status; selector watches turn "started matching" into
``ADDED`` and "stopped matching" into ``DELETED`` (with the previous object carrying the new
revision); ``sendInitialEvents`` ends the initial state with a bookmark annotated
``k8s.io/initial-events-end``. Each event is JSON-encoded once and shared by every watcher.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from aiohttp import HttpVersion11, web

from cre.api.watch import WatchEventType as EventType

from . import errors
from .convert import from_storage, is_new_event
from .httpio import check_fields
from .query import ListOptions
from .resources import ResourceType
from .store import Event, Obj, Watcher, dumps, encode_object

if TYPE_CHECKING:
    from .context import ServerContext

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# bytes a client may leave unread before its events go through the handler's queue again
DIRECT_LIMIT = 256 * 1024


def _watch_list_default(version: str) -> bool:
    """Whether the WatchList feature gate defaults sendInitialEvents (1.32: on, 1.33: off)."""
    try:
        minor = int(version.split(".")[1])
    except (IndexError, ValueError):
        return False
    return minor == 32 or minor >= 34


def _bookmark(rt: ResourceType, rv: int, *, initial_end: bool = False) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    obj: dict[str, Any] = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}
    return b'{"type":"BOOKMARK","object":' + dumps(obj) + b"}\n"


def error_event(exc: errors.ApiError) -> bytes:
    return b'{"type":"ERROR","object":' + dumps(exc.body()) + b"}\n"


class _Filter:
    def __init__(self, rt: ResourceType, namespace: str, opts: ListOptions) -> None:
        self.namespace = namespace
        self.labels = opts.labels
        self.fields = opts.fields
        self.plain = opts.labels.empty and opts.fields.empty
        self.only_namespace = self.plain and bool(namespace)

    def matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        if self.namespace and obj["metadata"].get("namespace") != self.namespace:
            return False
        if self.plain:
            return True
        return self.labels.matches(obj["metadata"].get("labels")) and self.fields.matches(obj)


async def serve(
    server: ServerContext, request: web.Request, rt: ResourceType, namespace: str, opts: ListOptions
) -> web.StreamResponse:
    from . import table

    check_fields(rt, opts.fields)
    store = server.store
    bucket = store.bucket(rt.bucket)
    filt = _Filter(rt, namespace, opts)
    rv_text = opts.resource_version
    sie = opts.send_initial_events
    if sie is None and rv_text in (None, "", "0") and not opts.rv_match:
        sie = _watch_list_default(server.kubernetes_version) or None
    initial: list[Obj] = []
    replay: list[Event] = []
    error: errors.ApiError | None = None
    start_rv = store.rv
    if rv_text in (None, "", "0"):
        if sie is not False:
            initial = [o for k, o in sorted(bucket.objects.items()) if filt.matches(o)]
    else:
        want = int(rv_text or 0)
        if server.faults.take_gone_status(rt.plural):
            raise errors.expired(f"too old resource version: {want} ({store.rv})")
        if server.faults.force_410_on_resume or want < bucket.evicted_rv:
            error = errors.expired(
                f"too old resource version: {want} ({max(bucket.evicted_rv, want + 1) - 1})"
                if not server.faults.force_410_on_resume
                else f"too old resource version: {want} ({store.rv})"
            )
        elif sie:
            initial = [o for k, o in sorted(bucket.objects.items()) if filt.matches(o)]
        else:
            replay = list(bucket.events_after(want))
            start_rv = want
    watcher = Watcher()
    if error is None:
        bucket.watchers.add(watcher)
    table_version = table.requested(request)
    state: _Stream | None = None
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    resp.enable_chunked_encoding()
    try:
        await resp.prepare(request)
        if error is not None:
            await resp.write(error_event(error))
            return resp
        state = _Stream(server, rt, filt, resp, table_version, request)
        chunks = [state.encode_obj(EventType.ADDED, o) for o in initial]
        if sie and opts.allow_bookmarks:
            chunks.append(_bookmark(rt, start_rv, initial_end=True))
        for ev in replay:
            data = state.encode_event(ev)
            if data:
                chunks.append(data)
        wf = server.faults.watch
        if wf is not None and wf.after_events is not None and wf.resource in ("*", rt.plural):
            chunks = chunks[: wf.after_events]
        if chunks:
            await state.send(b"".join(chunks), len(chunks))
        await state.run(watcher, opts)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        watcher.sink = None
        bucket.watchers.discard(watcher)
        if state is not None:
            state.flush()
    return resp


class _Stream:
    def __init__(
        self,
        server: ServerContext,
        rt: ResourceType,
        filt: _Filter,
        resp: web.StreamResponse,
        table_version: str,
        request: web.Request,
    ) -> None:
        self.server = server
        self.rt = rt
        self.filt = filt
        self.resp = resp
        self.table_version = table_version
        self.request = request
        self.sent = 0
        self.first_table = True
        self.cache_key = f"{rt.group}/{rt.version}"
        self.writing = False
        self.pending: list[bytes] = []

    def encode_obj(self, etype: EventType, obj: Obj) -> bytes:
        view = from_storage(self.rt, obj)
        if self.table_version:
            from . import table

            tab = table.build(self.server, self.rt, [view], {}, self.table_version, self.request,
                              headers=self.first_table)
            self.first_table = False
            return b'{"type":"' + etype.encode() + b'","object":' + dumps(tab) + b"}\n"
        return (b'{"type":"' + etype.encode() + b'","object":'
                + encode_object(view, custom=self.rt.is_custom) + b"}\n")

    def encode_event(self, ev: Event) -> bytes | None:
        filt = self.filt
        if filt.plain and (not filt.namespace or ev.key[0] == filt.namespace):
            etype = ev.type
        elif filt.only_namespace:
            return None
        else:
            now_matches = ev.type is not EventType.DELETED and filt.matches(ev.obj)
            was = filt.matches(ev.prev)
            if ev.type is EventType.DELETED:
                if not was:
                    return None
                etype = EventType.DELETED
            elif now_matches and was:
                etype = EventType.MODIFIED
            elif now_matches:
                etype = EventType.ADDED
            elif was:
                assert ev.prev is not None
                gone = {**ev.prev, "metadata": {**ev.prev["metadata"],
                                               "resourceVersion": str(ev.rv)}}
                return self.encode_obj(EventType.DELETED, gone)
            else:
                return None
        if self.table_version or is_new_event(self.rt):
            return self.encode_obj(etype, ev.obj)
        return ev.encode(self.rt.api_version, etype, custom=self.rt.is_custom)

    async def send(self, data: bytes, count: int) -> None:
        self.flush()  # what was delivered directly goes first
        self.writing = True
        try:
            await self.resp.write(data)
        finally:
            self.writing = False
        self.sent += count

    def deliver(self, ev: Event) -> bool:
        """Take one event from the write that produced it, without waking the handler task.

        Encoded lines collect until the end of the current event-loop step and then go out as
        one chunk per watcher, so a burst of writes costs one socket write per watcher, not one
        per event. Declines (the event is queued and the handler task writes it with
        back-pressure) while the handler is itself writing, or when the client has not read
        what it was sent (more than `DIRECT_LIMIT` bytes buffered).
        """
        transport = self.request.transport
        if (self.writing or transport is None or transport.is_closing()
                or transport.get_write_buffer_size() > DIRECT_LIMIT):
            return False
        try:
            data = self.encode_event(ev)
        except Exception:  # the handler task meets it again when it drains its queue
            return False
        if data:
            if not self.pending:
                asyncio.get_running_loop().call_soon(self.flush)
            self.pending.append(data)
            self.sent += 1
        return True

    def flush(self) -> None:
        if not self.pending:
            return
        data = b"".join(self.pending)
        self.pending.clear()
        transport = self.request.transport
        if transport is not None and not transport.is_closing():
            transport.write(b"%x\r\n%b\r\n" % (len(data), data))

    async def run(self, watcher: Watcher, opts: ListOptions) -> None:
        faults = self.server.faults.watch
        if faults is not None and faults.resource not in ("*", self.rt.plural):
            faults = None
        loop_start = time.monotonic()
        deadline = loop_start + opts.timeout_seconds if opts.timeout_seconds else None
        if faults is not None and faults.after_seconds is not None:
            drop_at = loop_start + faults.after_seconds
            deadline = drop_at if deadline is None else min(deadline, drop_at)
        interval = self.server.bookmark_interval
        next_bookmark = loop_start + interval if opts.allow_bookmarks else None
        store = self.server.store
        if faults is None and self.resp.chunked and self.request.version >= HttpVersion11:
            watcher.sink = self.deliver
        while True:
            if (faults is not None and faults.after_events is not None
                    and self.sent >= faults.after_events):
                return
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return
            if watcher.queue:
                chunks: list[bytes] = []
                while watcher.queue:
                    data = self.encode_event(watcher.queue.popleft())
                    if data:
                        chunks.append(data)
                        if (faults is not None and faults.after_events is not None
                                and self.sent + len(chunks) >= faults.after_events):
                            break
                if chunks:
                    await self.send(b"".join(chunks), len(chunks))
                continue
            if next_bookmark is not None and now >= next_bookmark:
                await self.send(_bookmark(self.rt, store.rv), 0)
                next_bookmark = now + interval
                continue
            waits = [t for t in (deadline, next_bookmark) if t is not None]
            timeout = max(min(waits) - now, 0.0) if waits else None
            if watcher.closed:
                return
            await watcher.wait(timeout)
            if watcher.closed and not watcher.queue:
                return
