"""The WorkloadRun controller: a Reconciler for ``cre.dev`` WorkloadRuns on the generic runtime.

It watches WorkloadRuns, the Workflows labelled ``cre.dev/workload-run`` (a Workflow change
enqueues its controlling run), the GoodputMeasurements of Jobs (a measurement change wakes the
run whose Workflow has that Job in a group, so the run's ``status.goodput`` follows it) and GPU
nodes (a node turning Ready wakes the runs still waiting for one). The catalog supplies the
hardware defaults (GPUs and NICs per node).

One reconcile is :func:`cre.kube.runtime.converge` around
:func:`cre.core.workloadrun.reconcile_run`, applied by
:class:`cre.controller.tiershell.TierExecutor`: ``confirm_live`` is answered by reading the
Workflow live, a Workflow name a foreign object holds goes back as ``create_conflict``, a status
write that conflicts re-reads the run. The Workflow it creates carries the generated
TrainingRuntime, ConfigMap and PVC as dependencies, so the Workflow controller creates them
(owned by the Workflow, which the run owns).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import attrs
from prometheus_client import CollectorRegistry

from cre.api import labels as L
from cre.api.conditions import ConditionType
from cre.api.converter import structure
from cre.api.goodput import GoodputMeasurement
from cre.api.workflow import Workflow
from cre.api.workloadrun import WorkloadRun
from cre.catalog.model import Catalog
from cre.controller.jobevents import node_changed
from cre.controller.jobshell import GOODPUTMEASUREMENTS, goodput_from_dict
from cre.controller.tiershell import TierExecutor, TierOutcomeKind
from cre.controller.workflow import follow
from cre.controller.workflowshell import WORKFLOWS, workflow_from_dict
from cre.core.observed import NodeView
from cre.core.projections import node_view
from cre.core.trio import true_member
from cre.core.workloadrun import (
    DEFAULT_RUN_SETTINGS,
    RunObservation,
    RunSettings,
    reconcile_run,
)
from cre.kube.client import NODES, ApiError, KubeClient, Resource
from cre.kube.events import EventRecorder
from cre.kube.informer import Informer
from cre.kube.metrics import metrics_for
from cre.kube.runtime import (
    DONE,
    Again,
    Controller,
    OwnStatusEcho,
    Result,
    WatchEvent,
    converge,
    enqueue_mapped,
    enqueue_owner,
    key_of,
)
from cre.kube.workqueue import WorkQueue
from cre.render.workloadrun import WORKLOAD_RUN_LABEL

log = logging.getLogger(__name__)

WORKLOADRUNS: Final = Resource(L.GROUP, L.VERSION, "workloadruns", kind="WorkloadRun")
CONTROLLER: Final = "workloadrun"
COMPONENT: Final = "cre.dev/workloadrun-controller"
MAX_PASSES: Final = 8

__all__ = ["WORKLOADRUNS", "WorkloadRunController", "workloadrun_from_dict"]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def workloadrun_from_dict(raw: dict[str, Any]) -> WorkloadRun:
    """The WorkloadRun model of a served object (unreadable objects are dropped)."""
    return structure(raw, WorkloadRun)


def involved_run(run: WorkloadRun) -> dict[str, Any]:
    """The ``involvedObject`` of an Event about ``run``."""
    meta = run.metadata
    return {"apiVersion": L.API_VERSION, "kind": "WorkloadRun", "name": meta.name,
            "namespace": meta.namespace, "uid": meta.uid}


def _jobs_of(wf: Workflow) -> frozenset[str]:
    """The names of the Jobs the Workflow's groups hold."""
    return frozenset(g.job_ref.name for g in wf.status.groups if g.job_ref is not None)


def _waiting(run: WorkloadRun) -> bool:
    member = true_member(run.status.conditions)
    return run.status.workflow_ref is None and (
        member is None or member.type == ConditionType.IN_PROGRESS)


class WorkloadRunController:
    """Reconciles ``cre.dev/v1alpha1`` WorkloadRuns in ``namespaces`` (``None``: all)."""

    def __init__(self, client: KubeClient, *, catalog: Catalog,
                 namespaces: Sequence[str] | None = None, max_concurrent_reconciles: int = 2,
                 settings: RunSettings = DEFAULT_RUN_SETTINGS,
                 clock: Callable[[], datetime] = _utcnow,
                 registry: CollectorRegistry | None = None,
                 nodes: Informer[NodeView] | None = None) -> None:
        """``nodes``: a GPU node cache another controller runs in this process (default: this
        controller builds and runs its own)."""
        if max_concurrent_reconciles < 1:
            raise ValueError("WorkloadRunController: max_concurrent_reconciles must be at "
                             f"least 1, got {max_concurrent_reconciles}")
        self.client = client
        self.catalog = catalog
        self.settings = settings
        self._clock = clock
        kube = metrics_for(registry)
        ns = list(namespaces) if namespaces is not None else None
        self.runs: Informer[WorkloadRun] = Informer(
            client, WORKLOADRUNS, transform=workloadrun_from_dict, namespace=ns,
            metrics=kube, name="cre-workloadruns")
        self.workflows: Informer[Workflow] = Informer(
            client, WORKFLOWS, transform=workflow_from_dict, namespace=ns,
            label_selector=WORKLOAD_RUN_LABEL, metrics=kube, name="workloadrun-workflows")
        self.goodputs: Informer[GoodputMeasurement] = Informer(
            client, GOODPUTMEASUREMENTS, transform=goodput_from_dict, namespace=ns,
            label_selector=L.JOB, metrics=kube, name="workloadrun-goodputmeasurements")
        self._shared_nodes = nodes
        self.nodes: Informer[NodeView] = nodes or Informer(
            client, NODES, transform=node_view, label_selector=f"{L.GPU_PRESENT}=true",
            name="workloadrun-gpu-nodes", metrics=kube)
        self.recorder = EventRecorder(client, component=COMPONENT)
        self.executor = TierExecutor(client, self.recorder, owner=WORKLOADRUNS,
                                     involved=involved_run)
        self.status_echo = OwnStatusEcho()
        self.controller = Controller(CONTROLLER, self, workers=max_concurrent_reconciles,
                                     metrics=kube)
        self.controller.watch_own(self.runs, self.status_echo)
        self.controller.watch(self.workflows, enqueue_owner(kind="WorkloadRun", group=L.GROUP))
        self.controller.watch(self.goodputs, enqueue_mapped(self._measured_keys))
        if nodes is None:
            self.controller.watch(self.nodes, enqueue_mapped(self._waiting_keys), node_changed)
        else:
            follow(self.controller, nodes, enqueue_mapped(self._waiting_keys), node_changed)

    @property
    def queue(self) -> WorkQueue[str]:
        """The controller's workqueue of WorkloadRun keys."""
        return self.controller.queue

    def has_synced(self) -> bool:
        """True once every cache (a shared node cache included) holds its first full list."""
        return self.controller.has_synced() and self.nodes.has_synced()

    async def wait_synced(self) -> None:
        """Return once every cache holds its first full list."""
        await self.controller.wait_synced()
        await self.nodes.wait_synced()

    async def run(self) -> None:
        """Watch and reconcile until cancelled, or until :meth:`stop` drained the queue."""
        if self._shared_nodes is not None:
            await self._shared_nodes.wait_synced()
        await self.controller.run()

    def stop(self) -> None:
        """Take no new keys; finish what is in flight and queued, then let :meth:`run` return."""
        self.controller.stop()

    def _waiting_keys(self, event: WatchEvent[NodeView]) -> Iterable[str]:
        del event
        for run in self.runs.store.list():
            if _waiting(run) and run.metadata.deletion_timestamp is None:
                yield key_of(run)

    def _measured_keys(self, event: WatchEvent[GoodputMeasurement]) -> Iterable[str]:
        gm = event.obj
        ns = gm.metadata.namespace or ""
        for wf in self.workflows.store.list():
            run = (wf.metadata.labels or {}).get(WORKLOAD_RUN_LABEL)
            if run and (wf.metadata.namespace or "") == ns and \
                    gm.spec.job_ref.name in _jobs_of(wf):
                yield f"{ns}/{run}"

    def observe(self, run: WorkloadRun) -> RunObservation:
        """The Observation of ``run`` from the caches."""
        ns = run.metadata.namespace or ""
        wf = self.workflows.store.get(f"{ns}/{run.metadata.name}")
        nodes = tuple(sorted(self.nodes.store.list(), key=lambda n: n.name))
        jobs = _jobs_of(wf) if wf is not None else frozenset()
        goodput = tuple(sorted((gm for gm in self.goodputs.store.list()
                                if (gm.metadata.namespace or "") == ns
                                and gm.spec.job_ref.name in jobs),
                               key=lambda gm: gm.metadata.name or ""))
        return RunObservation(nodes=nodes, workflow=wf, goodput=goodput)

    async def _live_workflow(self, run: WorkloadRun) -> Workflow | None:
        try:
            raw = await self.client.get(WORKFLOWS, run.metadata.name or "",
                                        namespace=run.metadata.namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return workflow_from_dict({"apiVersion": L.API_VERSION, "kind": "Workflow", **raw})

    async def _fresh(self, run: WorkloadRun) -> WorkloadRun | None:
        try:
            return workloadrun_from_dict(await self.client.get(
                WORKLOADRUNS, run.metadata.name or "", namespace=run.metadata.namespace))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def reconcile(self, key: str) -> Result:
        """One pass over the WorkloadRun ``namespace/name``."""
        run = self.runs.store.get(key)
        if run is None:
            return DONE
        return await converge(self._step, run, self.observe(run),
                              what=f"workloadrun {key}", max_passes=MAX_PASSES)

    async def _step(self, run: WorkloadRun, obs: RunObservation
                    ) -> Again[WorkloadRun, RunObservation] | Result:
        plan = reconcile_run(run, obs, self._clock(), catalog=self.catalog,
                             settings=self.settings)
        if plan.confirm_live:
            return Again(run, attrs.evolve(obs, workflow=await self._live_workflow(run),
                                           read_live=True), "live read")
        outcome = await self.executor.apply(run, plan)
        if outcome.kind == TierOutcomeKind.CREATE_CONFLICTS:
            return Again(run, attrs.evolve(obs, create_conflict=True), "name taken")
        if outcome.kind == TierOutcomeKind.CONFLICT:
            fresh = await self._fresh(run)
            return DONE if fresh is None else Again(fresh, obs, "write conflicted")
        if outcome.kind == TierOutcomeKind.GONE:
            return DONE
        if plan.status is not None:
            self.status_echo.remember(key_of(run), plan.status)
        return Result(requeue_after=plan.requeue_after)
