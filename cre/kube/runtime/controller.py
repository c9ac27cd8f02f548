"""The generic controller loop: watches fill a workqueue, N workers call one Reconciler.

As controller-runtime's ``pkg/internal/controller``, this is the only place CRE runs a worker
loop, so every controller gets the same guarantees:

* a key is never reconciled by two workers at once, and a change during a reconcile is not lost
  (the :class:`cre.kube.workqueue.WorkQueue` semantics);
* the :class:`~cre.kube.runtime.reconcile.Result` decides the requeue: ``requeue_after`` polls
  (backoff reset), ``requeue`` retries after the rate limiter's backoff, nothing waits for the
  next change; an error backs off per key (5 ms doubling to 1000 s, max'ed with a global bucket);
* every record a reconcile logs carries ``controller``, ``namespace``, ``name`` and a fresh
  ``reconcileID`` (:func:`cre.kube.logcontext.reconcile_context`);
* controller-runtime's metrics: ``controller_runtime_reconcile_total{result}``, ``..._errors``,
  ``..._panics``, ``..._time_seconds``, ``controller_runtime_active_workers`` and
  ``controller_runtime_max_concurrent_reconciles``;
* a :class:`~cre.kube.runtime.reconcile.TerminalError` is recorded (a Warning event on the
  object it names, through the controller's ``recorder``; ``..._terminal_reconcile_errors``;
  an error log) and the key is *not* requeued: no retry can mend it;
* panics are errors: whatever one object makes its reconcile raise, ``BaseException`` included
  (a C extension's panic type may derive from it), is counted, logged and retried with backoff,
  and the worker lives on. Only cancellation, ``KeyboardInterrupt``, ``SystemExit`` and
  ``GeneratorExit`` propagate: they are about the process, not the object.

Wiring a controller is: ask an :class:`cre.kube.factory.InformerFactory` for the informers,
``watch`` each with a handler (and predicates), run the factory, then ``run()``: the controller
never runs an informer (several controllers share one), it waits for those it watches to sync.
:meth:`Controller.stop` drains: no new key is taken, the queued and in-flight ones finish, then
``run()`` returns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import anyio

from cre.api.watch import WatchEventType
from cre.kube.events import EventRecorder
from cre.kube.informer import Informer
from cre.kube.logcontext import reconcile_context
from cre.kube.metrics import KubeMetrics, metrics_for
from cre.kube.ratelimit import RateLimiter
from cre.kube.runtime.handlers import EventHandler, KeyQueue, WatchEvent, key_of
from cre.kube.runtime.predicates import OwnStatusEcho, Predicate
from cre.kube.runtime.reconcile import Reconciler, TerminalError, split_key
from cre.kube.workqueue import QueueShutDown, WorkQueue

T = TypeVar("T")
log = logging.getLogger(__name__)


def must_propagate(exc: BaseException) -> bool:
    """Whether ``exc`` is about the process (cancellation, interrupt, exit) rather than about
    the object being reconciled; true if any exception inside a group is."""
    if isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit
                  | anyio.get_cancelled_exc_class()):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(must_propagate(inner) for inner in exc.exceptions)
    return False


class Controller:
    """Runs ``reconciler`` for the keys its watches enqueue, with ``workers`` at a time."""

    def __init__(self, name: str, reconciler: Reconciler, *, workers: int = 1,
                 rate_limiter: RateLimiter | None = None,
                 metrics: KubeMetrics | None = None,
                 recorder: EventRecorder | None = None, runs_informers: bool = False) -> None:
        """``name`` labels the metrics and the logs (``controller``) and names the workqueue;
        ``metrics``: the collectors to report to (default: prometheus-client's default
        registry, created on first use); ``recorder``: where a terminal error's Warning event
        goes (``None``: logged and counted only); ``runs_informers``: a standalone controller
        that owns its caches runs the informers it watches itself (default: their owner, an
        :class:`cre.kube.factory.InformerFactory` shared by several controllers, runs them)."""
        if workers < 1:
            raise ValueError(f"controller {name}: workers must be at least 1, got {workers}")
        self.name = name
        self.reconciler = reconciler
        self.workers = workers
        self.metrics = metrics or metrics_for()
        self._rate_limiter = rate_limiter
        self.recorder = recorder
        self.queue: WorkQueue[str] = self._new_queue()
        self._informers: list[Informer[Any]] = []
        self._runs_informers = runs_informers
        self._stop_requested = False
        self.metrics.init_controller_series(name)
        self.metrics.max_concurrent_reconciles.labels(controller=name).set(workers)

    def _new_queue(self) -> WorkQueue[str]:
        return WorkQueue(self.name, rate_limiter=self._rate_limiter, metrics=self.metrics)

    # --- wiring ---------------------------------------------------------------------------

    def watch(self, informer: Informer[T], handler: EventHandler[T],
              *predicates: Predicate[T]) -> None:
        """Pass every change ``informer`` sees that all ``predicates`` accept to ``handler``
        with this controller's queue; :meth:`run` waits for the informer to sync (its owner,
        the informer factory, runs it)."""
        if informer not in self._informers:
            self._informers.append(informer)

        def dispatch(etype: WatchEventType, old: T | None, new: T | None) -> None:
            event = WatchEvent(etype, old, new)
            if all(accept(event) for accept in predicates):
                handler(event, self.queue)

        informer.add_handler(dispatch)

    def watch_own(self, informer: Informer[T], echo: OwnStatusEcho, *,
                  on_deleted: Callable[[T], None] | None = None) -> None:
        """Watch the controller's own kind: every change but the echo of its own status write
        enqueues the object; its deletion instead forgets the key (its remembered status, its
        requeue history) and runs ``on_deleted`` (metrics, caches of the object)."""

        def handle(event: WatchEvent[T], queue: KeyQueue) -> None:
            key = key_of(event.obj)
            if event.type == WatchEventType.DELETED:
                echo.forget(key)
                self.queue.forget(key)
                if on_deleted is not None:
                    on_deleted(event.obj)
                return
            queue.add(key)

        self.watch(informer, handle, echo)

    @property
    def informers(self) -> Sequence[Informer[Any]]:
        """The informers of the watches, in the order they were added."""
        return tuple(self._informers)

    def has_synced(self) -> bool:
        """True once every watched cache holds its first full list."""
        return all(i.has_synced() for i in self._informers)

    async def wait_synced(self) -> None:
        """Return once every watched cache holds its first full list."""
        for informer in self._informers:
            await informer.wait_synced()

    # --- life cycle -----------------------------------------------------------------------

    async def run(self) -> None:
        """Once the watched informers have synced, run the workers; until cancelled or until
        :meth:`stop` drained the queue."""
        if self.queue.shutting_down and not self._stop_requested:
            self.queue = self._new_queue()  # restarted by a supervisor after a failure
        if not self._runs_informers:
            await self._run_workers()
            return
        async with anyio.create_task_group() as tg:
            for informer in self._informers:
                tg.start_soon(informer.run, name=f"informer {informer.name}")
            await self._run_workers()
            tg.cancel_scope.cancel()

    async def _run_workers(self) -> None:
        try:
            await self.wait_synced()
            async with anyio.create_task_group() as workers:
                for i in range(self.workers):
                    workers.start_soon(self._worker, name=f"{self.name} worker {i}")
            # The workers return only once stop() shut the queue and it drained.
        finally:
            self.queue.shutdown()

    def stop(self) -> None:
        """Take no new keys; finish the reconciles in flight and what is queued, then let
        :meth:`run` return."""
        self._stop_requested = True
        self.queue.shutdown()

    # --- the worker loop ------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except QueueShutDown:
                return
            await self.process(key)

    async def process(self, key: str) -> None:
        """One reconcile of ``key`` (taken from the queue by the caller) and its bookkeeping:
        the requeue, the metrics, ``done``."""
        namespace, name = split_key(key)
        m, ctl = self.metrics, self.name
        started = time.monotonic()
        active = m.active_workers.labels(controller=ctl)
        active.inc()
        # Every record of this pass (here, in the modules it calls and in the tasks they
        # start) carries controller, namespace, name and a fresh reconcileID.
        with reconcile_context(controller=ctl, namespace=namespace, name=name):
            log.debug("%s %s: reconciling", ctl, key)
            try:
                result = await self.reconciler.reconcile(key)
            except TerminalError as exc:
                await self._terminal(key, exc)
            except BaseException as exc:
                if must_propagate(exc):
                    raise
                self._failed(key, exc)
            else:
                if result.requeue_after is not None:
                    self.queue.forget(key)
                    self.queue.add_after(key, result.requeue_after)
                    outcome = "requeue_after"
                elif result.requeue:
                    self.queue.add_rate_limited(key)
                    outcome = "requeue"
                else:
                    self.queue.forget(key)
                    outcome = "success"
                m.reconcile_total.labels(controller=ctl, result=outcome).inc()
                log.debug("%s %s: reconciled (%s)", ctl, key, outcome)
            finally:
                m.reconcile_time.labels(controller=ctl).observe(time.monotonic() - started)
                active.dec()
                self.queue.done(key)

    async def _terminal(self, key: str, exc: TerminalError) -> None:
        """Record a failure no retry can mend; the key is forgotten, not requeued."""
        m, ctl = self.metrics, self.name
        log.error("%s %s: reconcile failed for good, not retrying: %s", ctl, key, exc)
        m.terminal_reconcile_errors.labels(controller=ctl).inc()
        m.reconcile_errors.labels(controller=ctl).inc()
        m.reconcile_total.labels(controller=ctl, result="error").inc()
        self.queue.forget(key)
        if self.recorder is not None and exc.involved is not None:
            await self.recorder.emit(involved=exc.involved, type_="Warning", reason=exc.reason,
                                     message=str(exc))

    def _failed(self, key: str, exc: BaseException) -> None:
        m, ctl = self.metrics, self.name
        if isinstance(exc, Exception):
            log.warning("%s %s: reconcile failed, retrying with backoff: %s", ctl, key, exc)
        else:
            # A panic (BaseException from a library): the object's fault, not the process's.
            m.reconcile_panics.labels(controller=ctl).inc()
            log.error("%s %s: reconcile panicked, retrying with backoff: %s: %s", ctl, key,
                      type(exc).__name__, exc)
        log.debug("%s %s: the failed reconcile's traceback", ctl, key, exc_info=exc)
        m.reconcile_errors.labels(controller=ctl).inc()
        m.reconcile_total.labels(controller=ctl, result="error").inc()
        self.queue.add_rate_limited(key)
