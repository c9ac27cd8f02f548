"""The tier controllers' shell (Workflow, Certification, WorkloadRun).

:class:`TierController` is what the tier controllers share: the runtime plumbing (queue, sync,
run and stop, with caches another controller runs in the same process followed through
:func:`follow`) and the step around the core: a plan that asks is answered by the controller
(:meth:`TierController.answer`, live reads), any other is applied by the one
:class:`cre.kube.executor.PlanExecutor` in its documented order, and the outcome goes back to
the core the way :func:`cre.kube.executor.answer` says (a create whose name a foreign object
holds, or that was refused for good, in the Observation's ``feedback``; a status write that
conflicts, on the live copy; a gone object ends the reconcile). A core that plans again a
create the API server refused for good ends the reconcile in a
:class:`cre.kube.runtime.TerminalError` (recorded, not requeued). An applied status is
remembered so its own watch echo does not enqueue the key again.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final, Generic, Protocol, TypeVar

from cre.api.meta import ObjectMeta
from cre.api.watch import WatchEventType
from cre.core.plan import Ask, Plan
from cre.kube.client import KubeClient, Resource
from cre.kube.events import EventRecorder
from cre.kube.executor import PlanExecutor, WithFeedback, answer, refused_again
from cre.kube.informer import Informer
from cre.kube.metrics import KubeMetrics
from cre.kube.runtime import (
    DONE,
    Again,
    Controller,
    EventHandler,
    OwnStatusEcho,
    Predicate,
    Result,
    WatchEvent,
    converge,
    key_of,
)
from cre.kube.workqueue import WorkQueue

# --- the controller shell ---------------------------------------------------------------------

T = TypeVar("T")


class TierObject(Protocol):
    """What the shell reads of a tier object (a Workflow, Certification, WorkloadRun)."""

    @property
    def metadata(self) -> ObjectMeta: ...


K = TypeVar("K", bound=TierObject)
B = TypeVar("B", bound=WithFeedback)

#: Passes of the core one reconcile may take (live reads, name conflicts, a fresh copy).
MAX_PASSES: Final = 8


def follow(controller: Controller, informer: Informer[T], handler: EventHandler[T],
           *predicates: Predicate[T]) -> None:
    """Pass ``informer``'s changes to ``handler`` with ``controller``'s queue, like
    ``Controller.watch``, for an informer some other controller runs."""
    def dispatch(etype: WatchEventType, old: T | None, new: T | None) -> None:
        event = WatchEvent(etype, old, new)
        if all(accept(event) for accept in predicates):
            handler(event, controller.queue)

    informer.add_handler(dispatch)


class TierController(abc.ABC, Generic[K, B]):
    """The shell of one tier kind ``K`` whose core reads observations ``B`` and returns a
    :class:`cre.core.plan.Plan`. A subclass builds its caches after ``__init__`` here,
    registers them with :meth:`watch_own` / :meth:`connect`, and says how to observe, plan
    and answer."""

    def __init__(self, client: KubeClient, *, name: str, component: str, owner: Resource,
                 decode: Callable[[dict[str, Any]], K], involved: Callable[[Any], dict[str, Any]],
                 workers: int, metrics: KubeMetrics,
                 clock: Callable[[], datetime],
                 shared: Sequence[Informer[Any]] = ()) -> None:
        """``name`` names the controller (metrics, logs, errors); ``shared``: caches another
        controller runs in this process (followed, not run; waited for before running)."""
        if workers < 1:
            raise ValueError(f"{type(self).__name__}: max_concurrent_reconciles must be at "
                             f"least 1, got {workers}")
        self.client = client
        self._clock = clock
        self._name = name
        self._decode = decode
        self._shared: tuple[Informer[Any], ...] = tuple(shared)
        self.recorder = EventRecorder(client, component=component)
        self.executor = PlanExecutor(client, self.recorder, owner=owner, involved=involved,
                                     clock=clock)
        self.status_echo = OwnStatusEcho()
        self.controller = Controller(name, self, workers=workers, metrics=metrics,
                                     recorder=self.recorder)
        self._involved = involved
        self._owners: Informer[K] | None = None

    def watch_own(self, owners: Informer[K]) -> None:
        """Reconcile the objects of ``owners`` (their own status writes echo quietly)."""
        self._owners = owners
        self.controller.watch_own(owners, self.status_echo)

    def connect(self, informer: Informer[T], handler: EventHandler[T],
                *predicates: Predicate[T]) -> None:
        """``Controller.watch`` for a cache this controller runs, :func:`follow` for a shared
        one."""
        if any(informer is s for s in self._shared):
            follow(self.controller, informer, handler, *predicates)
        else:
            self.controller.watch(informer, handler, *predicates)

    # --- runtime plumbing ------------------------------------------------------------------

    @property
    def queue(self) -> WorkQueue[str]:
        """The controller's workqueue of object keys."""
        return self.controller.queue

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        """The caches this controller runs (shared ones are not among them)."""
        return tuple(self.controller.informers)

    def has_synced(self) -> bool:
        """True once every cache (shared ones included) holds its first full list."""
        return self.controller.has_synced() and all(i.has_synced() for i in self._shared)

    async def wait_synced(self) -> None:
        """Return once every cache (shared ones included) holds its first full list."""
        await self.controller.wait_synced()
        for informer in self._shared:
            await informer.wait_synced()

    async def run(self) -> None:
        """Watch and reconcile until cancelled, or until :meth:`stop` drained the queue (once
        the shared caches, run by their owner, have synced)."""
        for informer in self._shared:
            await informer.wait_synced()
        await self.controller.run()

    def stop(self) -> None:
        """Take no new keys; finish what is in flight and queued, then let :meth:`run` return."""
        self.controller.stop()

    # --- what a tier says ------------------------------------------------------------------

    @abc.abstractmethod
    def plan(self, obj: K, obs: B, now: datetime) -> Plan[Any]:
        """The core's plan for ``obj`` seen through ``obs`` at ``now``."""

    @abc.abstractmethod
    async def first_observation(self, obj: K) -> B:
        """The observation a reconcile starts from (the caches)."""

    @abc.abstractmethod
    async def answer(self, obj: K, obs: B, asks: Sequence[Ask]) -> B:
        """``obs`` with ``asks`` answered (live reads), recorded in its ``feedback``."""

    def applied(self, obj: K, plan: Plan[Any]) -> None:
        """Called once ``plan`` was applied in full (for a subclass's log)."""

    # --- the Reconciler --------------------------------------------------------------------

    async def reconcile(self, key: str) -> Result:
        """One pass over the object ``namespace/name``."""
        assert self._owners is not None, "watch_own was not called"
        obj = self._owners.store.get(key)
        if obj is None:
            return DONE
        return await converge(self._step, obj, await self.first_observation(obj),
                              what=f"{self._name} {key}", max_passes=MAX_PASSES)

    async def _step(self, obj: K, obs: B) -> Again[K, B] | Result:
        plan = self.plan(obj, obs, self._clock())
        if plan.asks:
            return Again(obj, await self.answer(obj, obs, plan.asks), "asks answered")
        refused_again(obj, obs, plan, self._involved)
        outcome = await self.executor.apply(obj, plan)
        after = answer(obj, obs, outcome, decode=self._decode)
        if after is not None:
            return after
        if plan.status is not None:
            self.status_echo.remember(key_of(obj), plan.status)
        self.applied(obj, plan)
        return Result(requeue_after=plan.requeue_after)
