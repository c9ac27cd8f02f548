"""Reflector and informer: keep a local store equal to the API server's state for one query.

Python has no standard shared informer (kubernetes-asyncio's ``Watch`` retries a 410 once with
the same stale version and then raises), so CRE implements client-go's reflector behaviour:

* list, paginated with ``limit``/``continue``, then watch from the list's resourceVersion with
  bookmarks on and a server-side timeout randomised in [5, 10] minutes;
* a clean end of the watch resumes from the last seen version (events or bookmarks);
* 410 Gone (HTTP status or ``ERROR`` event) relists and reconciles the store against the new
  list, emitting synthetic ``DELETED`` for objects that vanished during the gap and ``MODIFIED``
  for those that changed, so handlers never miss a deletion;
* other failures reconnect after a jittered exponential backoff (0.8 s -> 30 s, reset after two
  minutes without failures), never less than a 429's Retry-After; a watch that ends within
  ``short_watch`` seconds without delivering anything counts as a failure, so a persistent error
  never spins (a quiet watch that simply reached its timeout is resumed at once, as client-go
  does);
* each state change is logged once, not once per retry.

Every object is turned into a frozen projection by ``transform`` before it is stored, and handlers
are called synchronously, in event order, as ``handler(event_type, old, new)``: ``ADDED`` has
``old=None``, ``DELETED`` has ``new=None`` and ``old`` the last known state. Handlers must be quick
(enqueue a key); an exception in one is logged and does not stop the informer.

The clock, the random source and the sleep function are injected so tests are deterministic.
"""

from __future__ import annotations

import enum
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import anyio
import attrs
from prometheus_client import Counter

from cre.api.watch import WatchEventType
from cre.core.common.projections import ProjectionError, object_key
from cre.kube.client import JSON, ApiError, KubeClient, Resource
from cre.kube.guard import require_pod_scope
from cre.kube.metrics import KubeMetrics, metrics_for
from cre.kube.store import Indexer, Store

T = TypeVar("T")
log = logging.getLogger(__name__)


class ReflectorState(enum.StrEnum):
    STARTING = "Starting"
    LISTING = "Listing"
    WATCHING = "Watching"
    BACKING_OFF = "BackingOff"
    STOPPED = "Stopped"


Handler = Callable[[WatchEventType, T | None, T | None], None]
Sleep = Callable[[float], Awaitable[Any]]


@attrs.frozen(slots=True, kw_only=True)
class ReflectorConfig:
    """Timing knobs; the defaults are client-go's."""

    page_size: int = 500
    watch_timeout_min: float = 300.0
    watch_timeout_max: float = 600.0
    backoff_initial: float = 0.8
    backoff_max: float = 30.0
    backoff_reset_after: float = 120.0
    backoff_jitter: float = 1.0
    request_timeout: float = 60.0
    #: A watch that ends sooner than this with no event at all is a failure (backs off).
    short_watch: float = 1.0

    def __attrs_post_init__(self) -> None:
        if not 0 < self.watch_timeout_min <= self.watch_timeout_max:
            raise ValueError("ReflectorConfig: need 0 < watch_timeout_min <= watch_timeout_max")
        if not 0 < self.backoff_initial <= self.backoff_max:
            raise ValueError("ReflectorConfig: need 0 < backoff_initial <= backoff_max")
        if self.page_size < 1:
            raise ValueError("ReflectorConfig: page_size must be >= 1")


class Backoff:
    """Jittered exponential backoff that starts over after ``reset_after`` quiet seconds."""

    def __init__(self, *, initial: float, maximum: float, reset_after: float, jitter: float,
                 clock: Callable[[], float], rand: Callable[[], float]) -> None:
        self.initial, self.maximum = initial, maximum
        self.reset_after, self.jitter = reset_after, jitter
        self._clock, self._rand = clock, rand
        self._attempt = 0
        self._last_failure: float | None = None

    def next(self) -> float:
        """The wait before the next attempt, after one more failure."""
        now = self._clock()
        if self._last_failure is not None and now - self._last_failure >= self.reset_after:
            self._attempt = 0
        self._last_failure = now
        base = min(self.maximum, self.initial * (2.0 ** min(self._attempt, 32)))
        self._attempt += 1
        return min(self.maximum, base * (1.0 + self.jitter * self._rand()))


class _Gone(Exception):
    """The watch's resourceVersion is too old (410): the reflector must relist."""

    def __init__(self, useful_events: int = 0) -> None:
        super().__init__("410 Gone")
        self.useful_events = useful_events


def _describe(exc: ApiError) -> str:
    if exc.status:
        return f"HTTP {exc.status} {exc.reason}".strip()
    return exc.message.split(":")[0][:80] or "connection failed"


class _Reflector(Generic[T]):
    """One list+watch loop (one namespace, or all) feeding its informer's store."""

    def __init__(self, owner: Informer[T], namespace: str | None) -> None:
        self._o = owner
        self.namespace = namespace
        self.resource_version = ""
        self.synced = False
        self.state = ReflectorState.STARTING
        self._state_detail = ""
        self._failing: str | None = None  # the failure being retried, if any
        cfg = owner.config
        self._backoff = Backoff(initial=cfg.backoff_initial, maximum=cfg.backoff_max,
                                reset_after=cfg.backoff_reset_after, jitter=cfg.backoff_jitter,
                                clock=owner._clock, rand=owner._rand)

    @property
    def _where(self) -> str:
        return f"informer {self._o.name}" + (f" (namespace {self.namespace})"
                                             if self.namespace else "")

    def _set_state(self, state: ReflectorState, detail: str = "") -> None:
        """Log a state change once; the flapping of a failure streak is logged at debug."""
        if state == self.state and detail == self._state_detail:
            return
        self.state, self._state_detail = state, detail
        if state == ReflectorState.BACKING_OFF:
            repeat = self._failing == detail
            self._failing = detail
            level = logging.DEBUG if repeat else logging.WARNING
        elif self._failing is not None and state != ReflectorState.STOPPED:
            level = logging.DEBUG
        else:
            level = logging.INFO
        log.log(level, "%s: %s%s", self._where, state.value, f": {detail}" if detail else "")

    def _healthy(self) -> None:
        """Data is flowing again: end the failure streak (logged once)."""
        if self._failing is not None:
            self._failing = None
            log.info("%s: recovered, %s", self._where, self.state.value)

    async def run(self) -> None:
        # A restarted informer resumes its watch where it stopped (410 if that is too old).
        need_list = not (self.synced and self.resource_version)
        gone_streak = 0
        try:
            while True:
                try:
                    if need_list:
                        if self.state != ReflectorState.LISTING:
                            self._set_state(ReflectorState.LISTING)
                        await self._list_and_reconcile()
                        need_list = False
                    self._set_state(ReflectorState.WATCHING)
                    started = self._o._clock()
                    try:
                        seen = await self._watch()
                    except (TimeoutError, OSError) as exc:  # the stream's read timed out / broke
                        raise ApiError(status=0, message=f"watch stream: {exc!r}") from exc
                    if seen == 0 and self._o._clock() - started < self._o.config.short_watch:
                        raise ApiError(status=0, message="watch ended at once without any event")
                except _Gone as gone:
                    # Expected now and then (the server's history moved on): relist at once,
                    # unless the watch keeps expiring before delivering anything (no spinning).
                    need_list = True
                    gone_streak = 0 if gone.useful_events else gone_streak + 1
                    self._set_state(ReflectorState.LISTING, "resourceVersion expired (410)")
                    if gone_streak > 1:
                        self._o.metrics.informer_reconnects.labels(informer=self._o.name).inc()
                        await self._o._sleep(self._backoff.next())
                except ApiError as exc:
                    if exc.gone:
                        need_list = True
                    delay = self._backoff.next()
                    if exc.status == 429 and exc.retry_after:
                        delay = max(delay, exc.retry_after)
                    self._o.metrics.informer_reconnects.labels(informer=self._o.name).inc()
                    self._set_state(ReflectorState.BACKING_OFF, _describe(exc))
                    await self._o._sleep(delay)
        finally:
            self._set_state(ReflectorState.STOPPED)

    def _query(self) -> dict[str, str | int | bool]:
        q: dict[str, str | int | bool] = {}
        if self._o.label_selector:
            q["labelSelector"] = self._o.label_selector
        if self._o.field_selector:
            q["fieldSelector"] = self._o.field_selector
        return q

    async def _list_and_reconcile(self) -> None:
        o = self._o
        path = o.resource.path(namespace=self.namespace)
        fresh: dict[str, tuple[T, str]] = {}
        cont = ""
        while True:
            q = self._query()
            q["limit"] = o.config.page_size
            if cont:
                q["continue"] = cont
            try:
                page = await o.client.request("GET", path, query=q,
                                              timeout=o.config.request_timeout)
            except ApiError as exc:
                if exc.gone and cont:
                    raise _Gone(1) from exc  # continue token expired: start the list over
                raise
            for item in page.get("items") or []:
                projected = o._project(item)
                if projected is not None:
                    fresh[projected[0]] = (projected[1], projected[2])
            meta = page.get("metadata") or {}
            cont = str(meta.get("continue") or "")
            if not cont:
                list_rv = str(meta.get("resourceVersion") or "")
                break
        o.metrics.informer_relists.labels(informer=o.name).inc()
        store = o.store
        prefix = f"{self.namespace}/" if self.namespace else None
        for key in sorted(store.keys()):
            if (prefix is None or key.startswith(prefix)) and key not in fresh:
                old = store._remove(key)
                o._dispatch(WatchEventType.DELETED, old, None)
        for key, (obj, rv) in fresh.items():
            if store.resource_version(key) == rv:
                continue
            old = store._put(key, obj, rv)
            o._dispatch(WatchEventType.ADDED if old is None else WatchEventType.MODIFIED, old, obj)
        self._advance(list_rv)
        self._healthy()
        o._objects_gauge.set(len(store))
        if not self.synced:
            self.synced = True
            o._reflector_synced()

    async def _watch(self) -> int:
        """Watch from the current version; the number of events (bookmarks included) seen."""
        o = self._o
        cfg = o.config
        timeout = int(cfg.watch_timeout_min
                      + (cfg.watch_timeout_max - cfg.watch_timeout_min) * o._rand())
        q = self._query()
        q.update({"watch": True, "allowWatchBookmarks": True,
                  "resourceVersion": self.resource_version, "timeoutSeconds": max(1, timeout)})
        seen = 0
        try:
            async with o.client.stream_lines(o.resource.path(namespace=self.namespace), query=q,
                                             timeout=timeout + cfg.request_timeout) as lines:
                seen = await self._consume(lines)
        except ApiError as exc:
            if exc.gone:
                raise _Gone(0) from exc
            raise
        return seen

    async def _consume(self, lines: AsyncIterator[bytes]) -> int:
        seen = 0
        async for line in lines:
            try:
                event = json.loads(line)
                etype = event["type"]
                obj = event["object"]
            except (ValueError, KeyError, TypeError) as exc:
                raise ApiError(status=0, message=f"malformed watch event: {line[:200]!r}"
                               ) from exc
            seen += 1
            if seen == 1 and etype != "ERROR":
                self._healthy()
            if etype == "ERROR":
                code = int(obj.get("code") or 0)
                if code == 410:
                    raise _Gone(seen - 1)
                raise ApiError(status=code, body=obj)
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            if etype == "BOOKMARK":
                self._advance(rv)
                continue
            self._apply(etype, obj)
            self._advance(rv)
        return seen

    def _advance(self, rv: str) -> None:
        if rv:
            self.resource_version = rv
            self._o._advanced()

    def _apply(self, etype: str, raw: JSON) -> None:
        o = self._o
        projected = o._project(raw)
        if projected is None:
            return
        key, obj, rv = projected
        store = o.store
        counter = o._event_counters.get(etype)
        if counter is None:
            counter = o._event_counters[etype] = o.metrics.informer_events.labels(
                informer=o.name, type=etype)
        counter.inc()
        if etype == "DELETED":
            old = store._remove(key)
            if old is not None:
                o._dispatch(WatchEventType.DELETED, obj, None)
        elif etype in ("ADDED", "MODIFIED"):
            old = store._put(key, obj, rv)
            o._dispatch(WatchEventType.ADDED if old is None else WatchEventType.MODIFIED, old, obj)
        else:
            log.warning("%s: ignoring unknown watch event type %r", self._where, etype)
        o._objects_gauge.set(len(store))


class Informer(Generic[T]):
    """A store kept in sync with one resource query, and the handlers told of every change.

    ``namespace`` is one namespace, a list of namespaces (one watch each) or ``None`` for all.
    Pods require a ``label_selector`` (see :mod:`cre.kube.guard`); read pods through
    :mod:`cre.kube.pods`.
    """

    def __init__(self, client: KubeClient, resource: Resource, *,
                 transform: Callable[[JSON], T],
                 namespace: str | Sequence[str] | None = None,
                 label_selector: str | None = None, field_selector: str | None = None,
                 indexers: Mapping[str, Indexer[T]] | None = None, name: str | None = None,
                 config: ReflectorConfig | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 rand: Callable[[], float] = random.random, sleep: Sleep = anyio.sleep,
                 caller: str | None = None, metrics: KubeMetrics | None = None) -> None:
        """``metrics``: the collectors to report to (default: those of prometheus-client's
        default registry, created on first use)."""
        require_pod_scope(resource, label_selector, caller=caller)
        self.metrics = metrics or metrics_for()
        self.client = client
        self.resource = resource
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.name = name or resource.plural
        self.config = config or ReflectorConfig()
        self.store: Store[T] = Store(indexers=indexers)
        self._transform = transform
        self._clock, self._rand, self._sleep = clock, rand, sleep
        self._handlers: list[Handler[T]] = []
        self._synced = anyio.Event()
        self._progress = anyio.Event()
        self._running = False
        # Metric children looked up once: the per-event path stays cheap.
        self._event_counters: dict[str, Counter] = {}
        self._objects_gauge = self.metrics.informer_objects.labels(informer=self.name)
        self.metrics.init_informer_series(self.name)
        if namespace is None or not resource.namespaced:
            namespaces: list[str | None] = [None]
        elif isinstance(namespace, str):
            namespaces = [namespace]
        else:
            namespaces = list(dict.fromkeys(namespace))
            if not namespaces:
                raise ValueError(f"informer {self.name}: namespace list is empty "
                                 f"(pass None to watch all namespaces)")
        self._reflectors = [_Reflector(self, ns) for ns in namespaces]

    def add_handler(self, handler: Handler[T]) -> None:
        """Call ``handler(event_type, old, new)`` for every change from now on."""
        self._handlers.append(handler)

    def has_synced(self) -> bool:
        """True once the first full list of every namespace is in the store."""
        return all(r.synced for r in self._reflectors)

    async def wait_synced(self) -> None:
        await self._synced.wait()

    @property
    def states(self) -> dict[str | None, ReflectorState]:
        """Each reflector's state, by namespace (``None``: all namespaces)."""
        return {r.namespace: r.state for r in self._reflectors}

    def resource_version(self, namespace: str | None = None) -> str:
        """The version the watch of ``namespace`` would resume from."""
        for r in self._reflectors:
            if r.namespace == namespace:
                return r.resource_version
        raise KeyError(f"informer {self.name} does not watch namespace {namespace!r}")

    async def wait_for_resource_version(self, resource_version: str,
                                        namespace: str | None = None) -> None:
        """Wait until the watch of ``namespace`` has seen ``resource_version`` (an event or a
        bookmark at or after it): after a write, the cache reflects that write.

        Versions are compared as integers (comparable since Kubernetes 1.35; every etcd-backed
        server counts this way).
        """
        want = int(resource_version)
        while True:
            progress = self._progress
            have = self.resource_version(namespace)
            if have and int(have) >= want:
                return
            await progress.wait()

    async def run(self) -> None:
        """List and watch until cancelled (a restarted informer resumes where it stopped)."""
        if self._running:
            raise RuntimeError(f"informer {self.name} is already running")
        self._running = True
        try:
            async with anyio.create_task_group() as tg:
                for r in self._reflectors:
                    tg.start_soon(r.run, name=f"reflector {self.name} {r.namespace or '*'}")
        finally:
            self._running = False

    # -- used by the reflectors -------------------------------------------------------------

    def _project(self, raw: JSON) -> tuple[str, T, str] | None:
        try:
            key = object_key(raw)
            obj = self._transform(raw)
        except ProjectionError as exc:
            log.error("informer %s: dropping an object that cannot be projected: %s",
                      self.name, exc)
            return None
        except Exception as exc:  # any transform's failure on one object must not stop us
            meta = raw.get("metadata") if isinstance(raw, dict) else None
            where = (f"{meta.get('namespace', '')}/{meta.get('name', '?')}"
                     if isinstance(meta, dict) else "?")
            log.error("informer %s: transform failed on %s, object dropped: %r",
                      self.name, where, exc)
            return None
        rv = str((raw.get("metadata") or {}).get("resourceVersion") or "")
        return key, obj, rv

    def _dispatch(self, etype: WatchEventType, old: T | None, new: T | None) -> None:
        for handler in self._handlers:
            try:
                handler(etype, old, new)
            except Exception:
                log.exception("informer %s: handler %r failed on %s", self.name, handler,
                              etype.value)

    def _advanced(self) -> None:
        self._progress.set()
        self._progress = anyio.Event()

    def _reflector_synced(self) -> None:
        if self.has_synced():
            self._synced.set()
