"""The tier controllers' shell (Workflow, Certification, WorkloadRun).

:class:`TierController` is what the tier controllers share on top of
:class:`cre.kube.runtime.CoreReconciler` (queue, caches, run and stop): the step around the
core: a plan that asks is answered by the controller
(:meth:`TierController.answer`, live reads), any other is applied by the one
:class:`cre.kube.executor.PlanExecutor` in its documented order, and the outcome goes back to
the core the way :func:`cre.kube.executor.answer` says (a create whose name a foreign object
holds, or that was refused for good, in the Observation's ``feedback``; a status write that
conflicts, on the live copy; a gone object ends the reconcile). A core that plans again a
create the API server refused for good ends the reconcile in a
:class:`cre.kube.runtime.TerminalError` (recorded, not requeued). An applied status is
remembered so its own watch echo does not enqueue the key again, and until that echo arrives a
reconcile reads the copy the write returned instead of the cache's older one
(:meth:`cre.kube.runtime.OwnStatusEcho.latest`). Events are written in the background.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from prometheus_client import CollectorRegistry

from cre.api.meta import ObjectMeta
from cre.core.common.plan import Ask, Plan
from cre.kube.client import KubeClient, Resource
from cre.kube.executor import (
    PlanExecutor,
    WithFeedback,
    answer,
    refused_again,
    remember_applied,
)
from cre.kube.factory import InformerFactory
from cre.kube.informer import Informer
from cre.kube.runtime import (
    DONE,
    Again,
    Builder,
    CoreReconciler,
    Result,
    converge,
)

# --- the controller shell ---------------------------------------------------------------------

class TierObject(Protocol):
    """What the shell reads of a tier object (a Workflow, Certification, WorkloadRun)."""

    @property
    def metadata(self) -> ObjectMeta: ...


K = TypeVar("K", bound=TierObject)
B = TypeVar("B", bound=WithFeedback)


class TierController(CoreReconciler[K, B, Any]):
    """The shell of one tier kind ``K`` whose core reads observations ``B`` and returns a
    :class:`cre.core.common.plan.Plan`. A subclass asks for its caches after ``__init__`` here,
    wires them starting with :meth:`managed_for`, and says how to observe, plan and answer."""

    def __init__(self, client: KubeClient, *, name: str, component: str, owner: Resource,
                 decode: Callable[[dict[str, Any]], K], involved: Callable[[Any], dict[str, Any]],
                 workers: int, clock: Callable[[], datetime],
                 informers: InformerFactory | None, namespaces: Sequence[str] | None,
                 registry: CollectorRegistry | None, time_scale: float = 1.0) -> None:
        """``name`` names the controller (metrics, logs, errors)."""
        super().__init__(client, name=name, component=component, workers=workers, clock=clock,
                         informers=informers, namespaces=namespaces, registry=registry,
                         time_scale=time_scale)
        self._name = name
        self._decode = decode
        self.executor = PlanExecutor(client, self.recorder, owner=owner, involved=involved,
                                     clock=clock)
        self._involved = involved
        self._owners: Informer[K] | None = None

    def managed_for(self, owners: Informer[K], *,
                    on_deleted: Callable[[K], None] | None = None) -> Builder[K]:
        """Reconcile the objects of ``owners`` (their own status writes echo quietly; a
        deleted one runs ``on_deleted``); the builder to wire the other caches with."""
        self._owners = owners
        return self.managed().for_(owners, on_deleted=on_deleted)

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

    async def current(self, obj: K) -> K | None:
        """The copy a reconcile starts from: the cached ``obj`` (a subclass about to act on the
        outside world reads it live instead; ``None``: gone)."""
        return obj

    # --- the Reconciler --------------------------------------------------------------------

    async def reconcile(self, key: str) -> Result:
        """One pass over the object ``namespace/name``."""
        assert self._owners is not None, "managed_for was not called"
        obj = self.status_echo.latest(key, self._owners.store.get(key))
        if obj is not None:
            obj = await self.current(obj)
        if obj is None:
            return DONE
        return await converge(self._step, obj, await self.first_observation(obj),
                              what=f"{self._name} {key}")

    async def _step(self, obj: K, obs: B) -> Again[K, B] | Result:
        plan = self.plan(obj, obs, self._clock())
        if plan.asks:
            return Again(obj, await self.answer(obj, obs, plan.asks), "asks answered")
        refused_again(obj, obs, plan, self._involved)
        outcome = await self.executor.apply(obj, plan)
        after = answer(obj, obs, outcome, decode=self._decode)
        if after is not None:
            return after
        remember_applied(self.status_echo, obj, plan, outcome)
        self.applied(obj, plan)
        return self.requeue(plan.requeue_after)
