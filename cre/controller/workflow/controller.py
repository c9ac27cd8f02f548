"""The Workflow controller: a Reconciler for ``cre.dev`` Workflows on the generic runtime.

It watches Workflows, the CRE Jobs labelled ``cre.dev/workflow`` (a Job change enqueues its
controlling Workflow), the Workflows' TrainingRuntime copies and ConfigMaps (dependencies and
node-result ConfigMaps, by the same label), the two label-scoped pod caches (a Job's pods
finishing lets the Workflow sweep that Job's dependency copies) and GPU nodes
(``nvidia.com/gpu.present=true``, slim :class:`cre.core.common.observed.NodeView`; a node appearing
or changing readiness wakes the Workflows that have not discovered their nodes yet).

One reconcile is :func:`cre.kube.runtime.converge` around
:func:`cre.core.workflow.run.reconcile_workflow`: the Observation comes from the caches; when the
Plan asks for a live list (a ``ListLive`` of its Jobs) the shell reads the Jobs, dependencies
and pods live and runs the core again; a create whose name a foreign object holds, or that was
refused for good, goes back in ``feedback``; a status write that conflicts re-reads the Workflow
live. Plans are applied by :class:`cre.kube.executor.PlanExecutor` in the order it documents
(node-result ConfigMaps before the status); the lifecycle and the step around the core are
:class:`cre.controller.common.tiershell.TierController`'s. Every cache comes from the informer
factory, so the pod and node caches are the Job controller's own when both run in one process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Final

import attrs
from prometheus_client import CollectorRegistry

from cre.api import labels as L
from cre.api.conditions import ConditionType
from cre.api.job import Job
from cre.api.watch import WatchEventType
from cre.api.workflow import Workflow
from cre.controller.common.phasemetrics import phase_metrics_for
from cre.controller.common.tiershell import TierController
from cre.controller.job.events import node_changed
from cre.controller.job.shell import job_from_dict
from cre.controller.workflow.shell import (
    CACHED_KINDS,
    INDEX_WORKFLOW,
    Owned,
    WorkflowReads,
    active_count,
    configmap_view,
    involved_workflow,
    job_workflow_index,
    results_of,
    runtime_view,
    views_for,
    workflow_from_dict,
)
from cre.core.common.lifecycle import true_member
from cre.core.common.observed import NodeView, PodView
from cre.core.common.plan import Ask
from cre.core.common.projections import node_view
from cre.core.workflow.reconcile import (
    DEFAULT_WORKFLOW_SETTINGS,
    WorkflowObservation,
    WorkflowPlan,
    WorkflowSettings,
)
from cre.core.workflow.run import reconcile_workflow
from cre.kube.client import CONFIGMAPS, JOBS, NODES, TRAINING_RUNTIMES, WORKFLOWS, KubeClient
from cre.kube.factory import InformerFactory
from cre.kube.informer import Informer
from cre.kube.pods import INDEX_JOB, INDEX_LAUNCHER, launcher_pod_informer, worker_pod_informer
from cre.kube.runtime import (
    WatchEvent,
    enqueue_mapped,
    key_of,
    object_key,
)
from cre.kube.runtime.base import utcnow
from cre.kube.store import namespaced_label_indexer

log = logging.getLogger(__name__)

CONTROLLER: Final = "workflow"
COMPONENT: Final = "cre.dev/workflow-controller"

__all__ = ["WORKFLOWS", "WorkflowController", "workflow_from_dict"]


def _namespace(wf: Workflow) -> str:
    """Where the Workflow's Jobs and dependencies live (the core's rule)."""
    return wf.status.namespace or wf.spec.namespace or wf.metadata.namespace or ""


def _settled(wf: Workflow) -> bool:
    member = true_member(wf.status.conditions)
    return member is not None and member.type != ConditionType.IN_PROGRESS \
        and wf.metadata.deletion_timestamp is None


class WorkflowController(TierController[Workflow, WorkflowObservation]):
    """Reconciles ``cre.dev/v1alpha1`` Workflows in ``namespaces`` (``None``: all).

    ``settings.infra_scoped_fail_fast`` is the manager's ``--infra-scoped-failfast`` switch (a
    Workflow's ``failurePolicy.infraScopedFailFast`` wins over it).
    """

    def __init__(self, client: KubeClient, *, namespaces: Sequence[str] | None = None,
                 informers: InformerFactory | None = None,
                 max_concurrent_reconciles: int = 4,
                 settings: WorkflowSettings = DEFAULT_WORKFLOW_SETTINGS,
                 clock: Callable[[], datetime] = utcnow,
                 registry: CollectorRegistry | None = None) -> None:
        """``informers``: the process's shared informer factory (then its namespaces apply;
        the pod and node caches are the Job controller's when it runs too)."""
        super().__init__(client, name=CONTROLLER, component=COMPONENT, owner=WORKFLOWS,
                         decode=workflow_from_dict, involved=involved_workflow,
                         workers=max_concurrent_reconciles, clock=clock, informers=informers,
                         namespaces=namespaces, registry=registry)
        self.settings = settings
        by_wf = {INDEX_WORKFLOW: namespaced_label_indexer(L.WORKFLOW)}
        self.workflows: Informer[Workflow] = self.cache(
            WORKFLOWS, transform=workflow_from_dict, name="cre-workflows")
        self.jobs: Informer[Job] = self.cache(
            JOBS, transform=job_from_dict, label_selector=L.WORKFLOW,
            indexers={INDEX_WORKFLOW: job_workflow_index}, name="workflow-jobs")
        self.runtimes: Informer[Owned] = self.cache(
            TRAINING_RUNTIMES, transform=runtime_view, label_selector=L.WORKFLOW,
            indexers=dict(by_wf), name="workflow-runtimes")
        self.configmaps: Informer[Owned] = self.cache(
            CONFIGMAPS, transform=configmap_view, label_selector=L.WORKFLOW,
            indexers=dict(by_wf), name="workflow-configmaps")
        self.workers = worker_pod_informer(self.informer_factory)
        self.launchers = launcher_pod_informer(self.informer_factory)
        self.nodes: Informer[NodeView] = self.cache(
            NODES, transform=node_view, label_selector=f"{L.GPU_PRESENT}=true",
            name="gpu-nodes")
        self.reads = WorkflowReads(client)
        self.metrics = phase_metrics_for(CONTROLLER, registry)
        (self.managed_for(self.workflows, on_deleted=self._deleted).owns(self.jobs)
            .watches(self.runtimes, enqueue_mapped(self._owner_of))
            .watches(self.configmaps, enqueue_mapped(self._owner_of))
            .watches(self.workers, enqueue_mapped(self._pod_workflow))
            .watches(self.launchers, enqueue_mapped(self._pod_workflow))
            .watches(self.nodes, enqueue_mapped(self._waiting_for_nodes), node_changed))

    # --- event mapping ---------------------------------------------------------------------

    def _owner_of(self, event: WatchEvent[Owned]) -> Iterable[str]:
        obj = event.obj
        if obj.workflow and (event.type == WatchEventType.DELETED or obj.view.terminating):
            yield object_key(obj.namespace, obj.workflow)

    def _pod_workflow(self, event: WatchEvent[PodView]) -> Iterable[str]:
        """The Workflow of the Job whose pod finished or went away."""
        old, new = event.old, event.new
        finished = new is None or event.type == WatchEventType.DELETED or (
            new.phase in ("Succeeded", "Failed") and (old is None or old.phase != new.phase))
        if not finished:
            return
        pod = event.obj
        job_name = pod.label(L.JOB) or pod.label(L.LAUNCHER)
        job = self.jobs.store.get(object_key(pod.namespace, job_name)) if job_name else None
        if job is not None and job.metadata.labels.get(L.WORKFLOW):
            yield object_key(job.metadata.namespace, job.metadata.labels[L.WORKFLOW])

    def _waiting_for_nodes(self, event: WatchEvent[NodeView]) -> Iterable[str]:
        """Workflows that have not partitioned their nodes yet (a new or changed GPU node may
        be the one they wait for)."""
        del event
        for wf in self.workflows.store.list():
            if wf.status.orchestration is None and not _settled(wf):
                yield key_of(wf)

    # --- the Reconciler --------------------------------------------------------------------

    def observe(self, wf: Workflow) -> WorkflowObservation:
        """The Observation of ``wf`` from the caches (no live reads)."""
        ns = _namespace(wf)
        index = f"{ns}/{wf.metadata.name or ''}"
        uid = wf.metadata.uid or ""
        jobs = tuple(sorted(self.jobs.store.by_index(INDEX_WORKFLOW, index),
                            key=lambda j: j.metadata.name or ""))
        owned = (*self.runtimes.store.by_index(INDEX_WORKFLOW, index),
                 *self.configmaps.store.by_index(INDEX_WORKFLOW, index))
        active = {}
        for job in jobs:
            key = object_key(job.metadata.namespace, job.metadata.name or "")
            active[job.metadata.name or ""] = active_count(
                self.workers.store.by_index(INDEX_JOB, key)) + active_count(
                self.launchers.store.by_index(INDEX_LAUNCHER, key))
        if wf.status.orchestration is None:
            nodes = tuple(sorted(self.nodes.store.list(), key=lambda n: n.name))
        else:
            # Launching a group re-checks its nodes (NotReady, cordoned, tainted): the nodes
            # of the groups not finished (a running group may be re-run in this very pass).
            # Diagnose plans its next round from the topology domains of every node it has
            # run (a cross-boundary pair joins nodes of finished groups): all of them.
            every = wf.spec.orchestration.diagnose is not None
            wanted = sorted({n for g in wf.status.groups if every or not g.phase.terminal
                             for n in g.nodes})
            nodes = tuple(v for n in wanted if (v := self.nodes.store.get(n)) is not None)
        return WorkflowObservation(nodes=nodes, jobs=jobs, dependencies=views_for(owned, uid),
                                   config_maps=results_of(owned, uid), active_pods=active)

    async def answer(self, wf: Workflow, obs: WorkflowObservation, asks: Sequence[Ask]
                     ) -> WorkflowObservation:
        """``obs`` with the Jobs, dependencies, result ConfigMaps and pods read live (its only
        ask)."""
        ns, name, uid = _namespace(wf), wf.metadata.name or "", wf.metadata.uid or ""
        jobs = await self.reads.jobs(ns, name)
        owned: list[Owned] = list(await self._uncached(wf))
        for res in (TRAINING_RUNTIMES, CONFIGMAPS):
            owned += await self.reads.owned(ns, name, api_version=res.api_version,
                                            kind=res.kind)
        active = {j.metadata.name or "": await self.reads.active_pods(ns, j.metadata.name or "")
                  for j in jobs}
        return attrs.evolve(obs, jobs=jobs, dependencies=views_for(owned, uid),
                            config_maps=results_of(owned, uid), active_pods=active,
                            feedback=obs.feedback.answering(*asks))

    async def _uncached(self, wf: Workflow) -> tuple[Owned, ...]:
        """Dependency objects of kinds without a cache that the Workflow's status refers to."""
        ns, name = _namespace(wf), wf.metadata.name or ""
        out: list[Owned] = []
        for api_version, kind in sorted({(r.api_version, r.kind)
                                         for r in wf.status.dependency_refs
                                         if r.kind not in CACHED_KINDS}):
            out += await self.reads.owned(ns, name, api_version=api_version, kind=kind)
        return tuple(out)

    async def first_observation(self, wf: Workflow) -> WorkflowObservation:
        """The cached Observation, with the uncached dependency kinds read live."""
        obs = self.observe(wf)
        extra = await self._uncached(wf)
        if extra:
            uid = wf.metadata.uid or ""
            obs = attrs.evolve(obs, dependencies=tuple(sorted(
                (*obs.dependencies, *views_for(extra, uid)), key=lambda v: (v.kind, v.name))))
        return obs

    def plan(self, wf: Workflow, obs: WorkflowObservation, now: datetime) -> WorkflowPlan:
        return reconcile_workflow(wf, obs, now, settings=self.settings)

    def _deleted(self, wf: Workflow) -> None:
        self.metrics.forget(wf.metadata.namespace or "", wf.metadata.name or "")

    def applied(self, wf: Workflow, plan: WorkflowPlan) -> None:
        if (wf.metadata.deletion_timestamp is not None
                or self.workflows.store.get(key_of(wf)) is None):
            self._deleted(wf)  # never bring back the series of a deleted Workflow
        else:
            status = plan.status or wf.status
            self.metrics.publish(wf.metadata.namespace or "", wf.metadata.name or "",
                                 phase=status.phase, verdict=status.verdict)
        log.debug("workflow %s: applied %d create(s), %d delete(s)%s",
                  key_of(wf), len(plan.creates), len(plan.deletes),
                  ", a status write" if plan.status is not None else "")
