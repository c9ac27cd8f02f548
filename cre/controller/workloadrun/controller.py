"""The WorkloadRun controller: a Reconciler for ``cre.dev`` WorkloadRuns on the generic runtime.

It watches WorkloadRuns, the Workflows labelled ``cre.dev/workload-run`` (a Workflow change
enqueues its controlling run), the GoodputMeasurements of Jobs (a measurement change wakes the
run whose Workflow has that Job in a group, so the run's ``status.goodput`` follows it) and GPU
nodes (a node turning Ready wakes the runs still waiting for one). The catalog supplies the
hardware defaults (GPUs and NICs per node).

One reconcile is :func:`cre.kube.runtime.converge` around
:func:`cre.core.workloadrun.reconcile.reconcile_workloadrun`, applied by
:class:`cre.kube.executor.PlanExecutor` (a :class:`cre.controller.common.tiershell.TierController`,
as the Workflow's): a ``ConfirmAbsent`` ask is answered by reading the Workflow live, a Workflow
name a foreign object holds goes back as a ``CreateConflict`` in the Observation's ``feedback``, a
status write that conflicts re-reads the run. The Workflow it creates carries the generated
TrainingRuntime, ConfigMap and PVC as dependencies, so the Workflow controller creates them
(owned by the Workflow, which the run owns).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
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
from cre.controller.common.tiershell import TierController
from cre.controller.job.events import node_changed
from cre.controller.job.shell import goodput_from_dict, involved_object
from cre.controller.workflow.shell import workflow_from_dict
from cre.core.common.lifecycle import true_member
from cre.core.common.observed import NodeView
from cre.core.common.plan import Ask
from cre.core.common.projections import node_view
from cre.core.workloadrun.reconcile import (
    DEFAULT_WORKLOADRUN_SETTINGS,
    WorkloadRunObservation,
    WorkloadRunPlan,
    WorkloadRunSettings,
    reconcile_workloadrun,
)
from cre.kube.client import (
    GOODPUTMEASUREMENTS,
    NODES,
    WORKFLOWS,
    WORKLOADRUNS,
    ApiError,
    KubeClient,
)
from cre.kube.factory import InformerFactory
from cre.kube.informer import Informer
from cre.kube.runtime import WatchEvent, enqueue_mapped, key_of
from cre.kube.runtime.base import utcnow
from cre.render.workloadrun import WORKLOAD_RUN_LABEL

log = logging.getLogger(__name__)

CONTROLLER: Final = "workloadrun"
COMPONENT: Final = "cre.dev/workloadrun-controller"

__all__ = ["WORKLOADRUNS", "WorkloadRunController", "workloadrun_from_dict"]


def workloadrun_from_dict(raw: dict[str, Any]) -> WorkloadRun:
    """The WorkloadRun model of a served object (unreadable objects are dropped)."""
    return structure(raw, WorkloadRun)


def involved_run(run: WorkloadRun) -> dict[str, Any]:
    """The ``involvedObject`` of an Event about ``run``."""
    return involved_object("WorkloadRun", run.metadata)


def _jobs_of(wf: Workflow) -> frozenset[str]:
    """The names of the Jobs the Workflow's groups hold."""
    return frozenset(g.job_ref.name for g in wf.status.groups if g.job_ref is not None)


def _waiting(run: WorkloadRun) -> bool:
    member = true_member(run.status.conditions)
    return run.status.workflow_ref is None and (
        member is None or member.type == ConditionType.IN_PROGRESS)


class WorkloadRunController(TierController[WorkloadRun, WorkloadRunObservation]):
    """Reconciles ``cre.dev/v1alpha1`` WorkloadRuns in ``namespaces`` (``None``: all)."""

    def __init__(self, client: KubeClient, *, catalog: Catalog,
                 namespaces: Sequence[str] | None = None,
                 informers: InformerFactory | None = None, max_concurrent_reconciles: int = 2,
                 settings: WorkloadRunSettings = DEFAULT_WORKLOADRUN_SETTINGS,
                 clock: Callable[[], datetime] = utcnow,
                 registry: CollectorRegistry | None = None) -> None:
        """``informers``: the process's shared informer factory (then its namespaces apply)."""
        super().__init__(client, name=CONTROLLER, component=COMPONENT, owner=WORKLOADRUNS,
                         decode=workloadrun_from_dict, involved=involved_run,
                         workers=max_concurrent_reconciles, clock=clock, informers=informers,
                         namespaces=namespaces, registry=registry)
        self.catalog = catalog
        self.settings = settings
        self.runs: Informer[WorkloadRun] = self.cache(
            WORKLOADRUNS, transform=workloadrun_from_dict, name="cre-workloadruns")
        self.workflows: Informer[Workflow] = self.cache(
            WORKFLOWS, transform=workflow_from_dict, label_selector=WORKLOAD_RUN_LABEL,
            name="workloadrun-workflows")
        self.goodputs: Informer[GoodputMeasurement] = self.cache(
            GOODPUTMEASUREMENTS, transform=goodput_from_dict, label_selector=L.JOB,
            name="cre-goodputmeasurements")
        self.nodes: Informer[NodeView] = self.cache(
            NODES, transform=node_view, label_selector=f"{L.GPU_PRESENT}=true",
            name="gpu-nodes")
        (self.managed_for(self.runs).owns(self.workflows)
            .watches(self.goodputs, enqueue_mapped(self._measured_keys))
            .watches(self.nodes, enqueue_mapped(self._waiting_keys), node_changed))

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

    def observe(self, run: WorkloadRun) -> WorkloadRunObservation:
        """The Observation of ``run`` from the caches."""
        ns = run.metadata.namespace or ""
        wf = self.workflows.store.get(f"{ns}/{run.metadata.name}")
        nodes = tuple(sorted(self.nodes.store.list(), key=lambda n: n.name))
        jobs = _jobs_of(wf) if wf is not None else frozenset()
        goodput = tuple(sorted((gm for gm in self.goodputs.store.list()
                                if (gm.metadata.namespace or "") == ns
                                and gm.spec.job_ref.name in jobs),
                               key=lambda gm: gm.metadata.name or ""))
        return WorkloadRunObservation(nodes=nodes, workflow=wf, goodput=goodput)

    async def first_observation(self, run: WorkloadRun) -> WorkloadRunObservation:
        return self.observe(run)

    async def answer(self, run: WorkloadRun, obs: WorkloadRunObservation, asks: Sequence[Ask]
                     ) -> WorkloadRunObservation:
        """``obs`` with the run's Workflow read live (its only ask)."""
        return attrs.evolve(obs, workflow=await self._live_workflow(run),
                            feedback=obs.feedback.answering(*asks))

    def plan(self, run: WorkloadRun, obs: WorkloadRunObservation, now: datetime) -> WorkloadRunPlan:
        return reconcile_workloadrun(run, obs, now, catalog=self.catalog, settings=self.settings)

    async def _live_workflow(self, run: WorkloadRun) -> Workflow | None:
        try:
            raw = await self.client.get(WORKFLOWS, run.metadata.name or "",
                                        namespace=run.metadata.namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return workflow_from_dict({"apiVersion": L.API_VERSION, "kind": "Workflow", **raw})
