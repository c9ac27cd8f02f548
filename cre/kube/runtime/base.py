"""The one base of CRE's controllers: a kind's shell around its pure core, on the runtime.

Every controller (Job, Workflow, Certification, WorkloadRun and the log-reading measurements)
is a Reconciler for one kind ``K`` whose core reads an observation ``O`` and writes a status
``S``. What is the same for all of them lives here, once: the workqueue and workers (a
:class:`cre.kube.runtime.Controller`), the caches (asked of an
:class:`cre.kube.factory.InformerFactory`, the manager's shared one or a private one), the
event recorder, the status echo, and the life cycle the manager supervises (``queue``,
``has_synced()``, ``run()``, ``stop()``). A subclass asks for its caches with :meth:`cache`,
says what wakes it with :meth:`managed` (a :class:`cre.kube.runtime.builder.Builder`), and
implements ``reconcile``: observe, plan with its core, answer what the plan asks.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import anyio
from anyio.abc import TaskGroup
from prometheus_client import CollectorRegistry

from cre.kube.client import JSON, KubeClient, Resource
from cre.kube.events import EventRecorder
from cre.kube.factory import InformerFactory
from cre.kube.informer import Informer
from cre.kube.metrics import metrics_for
from cre.kube.runtime.builder import Builder
from cre.kube.runtime.controller import Controller
from cre.kube.runtime.predicates import OwnStatusEcho
from cre.kube.runtime.reconcile import Result
from cre.kube.store import Indexer
from cre.kube.workqueue import WorkQueue

K = TypeVar("K")
O = TypeVar("O")  # noqa: E741 (the observation, as the issue and the design record name it)
S = TypeVar("S")
T = TypeVar("T")


def utcnow() -> datetime:
    """The wall clock, timezone-aware: every controller's default ``clock``."""
    return datetime.now(UTC)


class CoreReconciler(abc.ABC, Generic[K, O, S]):
    """The shell of kind ``K`` (observation ``O``, status ``S``) named ``name``.

    ``informers``: the process's shared factory (the manager's); ``None`` builds a private one
    over ``namespaces`` that :meth:`run` runs. ``registry``: where the runtime's metrics go.
    ``time_scale``: seconds of ``clock`` per wall second (a simulated clock runs faster): a
    core's requeues are in clock seconds (its deadlines are read on that clock), the workqueue
    waits in wall seconds (:meth:`requeue`).
    """

    def __init__(self, client: KubeClient, *, name: str, component: str, workers: int,
                 clock: Callable[[], datetime], informers: InformerFactory | None,
                 namespaces: Sequence[str] | None,
                 registry: CollectorRegistry | None, time_scale: float = 1.0) -> None:
        if time_scale <= 0:
            raise ValueError(f"{type(self).__name__}: time_scale must be positive, got "
                             f"{time_scale}")
        if workers < 1:
            raise ValueError(f"{type(self).__name__}: max_concurrent_reconciles must be at "
                             f"least 1, got {workers}")
        if informers is not None and namespaces is not None:
            raise ValueError(f"{type(self).__name__}: namespaces are the shared informer "
                             "factory's; pass one or the other")
        self.client = client
        self._clock = clock
        self.time_scale = time_scale
        kube = metrics_for(registry)
        self._runs_informers = informers is None
        self.informer_factory = informers or InformerFactory(client, namespaces=namespaces,
                                                             metrics=kube)
        self.recorder = EventRecorder(client, component=component, metrics=kube)
        self.status_echo = OwnStatusEcho()
        self.controller = Controller(name, self, workers=workers, metrics=kube,
                                     recorder=self.recorder)

    def cache(self, resource: Resource, *, transform: Callable[[JSON], T],
              label_selector: str | None = None,
              indexers: Mapping[str, Indexer[T]] | None = None,
              name: str | None = None) -> Informer[T]:
        """The shared informer of this query (:meth:`InformerFactory.informer`)."""
        return self.informer_factory.informer(resource, transform=transform,
                                              label_selector=label_selector,
                                              indexers=indexers, name=name)

    def managed(self) -> Builder[K]:
        """The builder that wires this controller's watches (``for_``, ``owns``, ``watches``)."""
        return Builder(self.controller, echo=self.status_echo)

    def requeue(self, after: float | None) -> Result:
        """The Result that looks again ``after`` seconds of the clock from now (``None``:
        only on the next event), in wall seconds."""
        return Result(requeue_after=after / self.time_scale if after is not None else None)

    @abc.abstractmethod
    async def reconcile(self, key: str) -> Result:
        """One pass over the object ``key``: observe, plan with the core, answer its asks."""

    # --- what the manager supervises --------------------------------------------------------

    @property
    def queue(self) -> WorkQueue[str]:
        """The controller's workqueue of object keys."""
        return self.controller.queue

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        """The caches this controller watches, in the order it asked for them."""
        return tuple(self.controller.informers)

    def has_synced(self) -> bool:
        """True once every watched cache holds its first full list."""
        return self.controller.has_synced()

    async def wait_synced(self) -> None:
        """Return once every watched cache holds its first full list."""
        await self.controller.wait_synced()

    def bind(self, tg: TaskGroup | None) -> None:
        """Start background helpers in ``tg`` while running (``None``: stop them): here the
        event recorder's sink, so a worker never waits on an Event write."""
        self.recorder.bind(tg)

    async def run(self) -> None:
        """Watch and reconcile until cancelled, or until :meth:`stop` drained the queue (a
        private informer factory runs alongside; a shared one is its owner's to run)."""
        async with anyio.create_task_group() as tg:
            self.bind(tg)
            try:
                if self._runs_informers:
                    tg.start_soon(self.informer_factory.run, name="informers")
                await self.controller.run()
            finally:
                self.bind(None)
                tg.cancel_scope.cancel()

    def stop(self) -> None:
        """Take no new keys; finish what is in flight and queued, then let :meth:`run` return."""
        self.controller.stop()
