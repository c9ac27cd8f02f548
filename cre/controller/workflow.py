"""The Workflow controller: a Reconciler for ``cre.dev`` Workflows on the generic runtime.

It watches Workflows, the CRE Jobs labelled ``cre.dev/workflow`` (a Job change enqueues its
controlling Workflow), the Workflows' TrainingRuntime copies and ConfigMaps (dependencies and
node-result ConfigMaps, by the same label), the two label-scoped pod caches (a Job's pods
finishing lets the Workflow sweep that Job's dependency copies) and GPU nodes
(``nvidia.com/gpu.present=true``, slim :class:`cre.core.observed.NodeView`; a node appearing or
changing readiness wakes the Workflows that have not discovered their nodes yet).

One reconcile is :func:`cre.kube.runtime.converge` around
:func:`cre.core.workflow.reconcile_workflow`: the Observation comes from the caches; when the
Plan asks ``confirm_live`` the shell reads the Jobs, dependencies and pods live and runs the core
again with ``read_live``; a create whose name a foreign object holds goes back as
``create_conflicts``; a status write that conflicts re-reads the Workflow live. Plans are
applied by :class:`cre.controller.tiershell.TierExecutor` in the order ``cre.core.tierplan``
documents (node-result ConfigMaps before the status).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import attrs
from prometheus_client import CollectorRegistry

from cre.api import labels as L
from cre.api.conditions import ConditionType
from cre.api.job import Job
from cre.api.watch import WatchEventType
from cre.api.workflow import Workflow
from cre.controller.jobevents import node_changed
from cre.controller.jobshell import JOBS, job_from_dict
from cre.controller.tiershell import TierExecutor, TierOutcomeKind
from cre.controller.workflowshell import (
    CACHED_KINDS,
    INDEX_WORKFLOW,
    WORKFLOWS,
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
from cre.core.observed import NodeView, PodView
from cre.core.projections import node_view
from cre.core.trio import true_member
from cre.core.workflow import (
    DEFAULT_WORKFLOW_SETTINGS,
    WorkflowObservation,
    WorkflowSettings,
    reconcile_workflow,
)
from cre.kube.client import CONFIGMAPS, NODES, TRAINING_RUNTIMES, KubeClient
from cre.kube.events import EventRecorder
from cre.kube.informer import Informer
from cre.kube.metrics import metrics_for
from cre.kube.pods import INDEX_JOB, INDEX_LAUNCHER, launcher_pod_informer, worker_pod_informer
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
    enqueue_mapped,
    enqueue_owner,
    key_of,
    object_key,
)
from cre.kube.store import namespaced_label_indexer
from cre.kube.workqueue import WorkQueue

log = logging.getLogger(__name__)
T = TypeVar("T")

CONTROLLER: Final = "workflow"
COMPONENT: Final = "cre.dev/workflow-controller"
MAX_PASSES: Final = 8

__all__ = ["WORKFLOWS", "SharedCaches", "WorkflowController", "workflow_from_dict"]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _namespace(wf: Workflow) -> str:
    """Where the Workflow's Jobs and dependencies live (the core's rule)."""
    return wf.status.namespace or wf.spec.namespace or wf.metadata.namespace or ""


@attrs.frozen(kw_only=True)
class SharedCaches:
    """Caches another controller already runs (the Job controller's label-scoped pod caches
    and its GPU node cache): this controller reads and follows them but does not run them, so
    a manager running both keeps one copy of each."""

    workers: Informer[PodView]
    launchers: Informer[PodView]
    nodes: Informer[NodeView]


def follow(controller: Controller, informer: Informer[T], handler: EventHandler[T],
           *predicates: Predicate[T]) -> None:
    """Pass ``informer``'s changes to ``handler`` with ``controller``'s queue, like
    ``Controller.watch``, for an informer some other controller runs."""
    def dispatch(etype: WatchEventType, old: T | None, new: T | None) -> None:
        event = WatchEvent(etype, old, new)
        if all(accept(event) for accept in predicates):
            handler(event, controller.queue)

    informer.add_handler(dispatch)


def _settled(wf: Workflow) -> bool:
    member = true_member(wf.status.conditions)
    return member is not None and member.type != ConditionType.IN_PROGRESS \
        and wf.metadata.deletion_timestamp is None


class WorkflowController:
    """Reconciles ``cre.dev/v1alpha1`` Workflows in ``namespaces`` (``None``: all).

    ``settings.infra_scoped_fail_fast`` is the manager's ``--infra-scoped-failfast`` switch (a
    Workflow's ``failurePolicy.infraScopedFailFast`` wins over it).
    """

    def __init__(self, client: KubeClient, *, namespaces: Sequence[str] | None = None,
                 max_concurrent_reconciles: int = 4,
                 settings: WorkflowSettings = DEFAULT_WORKFLOW_SETTINGS,
                 clock: Callable[[], datetime] = _utcnow,
                 registry: CollectorRegistry | None = None,
                 shared: SharedCaches | None = None) -> None:
        """``shared``: the Job controller's pod and node caches, when it runs in the same
        process (default: this controller builds and runs its own)."""
        if max_concurrent_reconciles < 1:
            raise ValueError("WorkflowController: max_concurrent_reconciles must be at least 1, "
                             f"got {max_concurrent_reconciles}")
        self.client = client
        self.settings = settings
        self._clock = clock
        kube = metrics_for(registry)
        ns = list(namespaces) if namespaces is not None else None
        by_wf = {INDEX_WORKFLOW: namespaced_label_indexer(L.WORKFLOW)}
        self.workflows: Informer[Workflow] = Informer(
            client, WORKFLOWS, transform=workflow_from_dict, namespace=ns, metrics=kube,
            name="cre-workflows")
        self.jobs: Informer[Job] = Informer(
            client, JOBS, transform=job_from_dict, namespace=ns, label_selector=L.WORKFLOW,
            indexers={INDEX_WORKFLOW: job_workflow_index}, metrics=kube,
            name="workflow-jobs")
        self.runtimes: Informer[Owned] = Informer(
            client, TRAINING_RUNTIMES, transform=runtime_view, namespace=ns,
            label_selector=L.WORKFLOW, indexers=dict(by_wf), metrics=kube,
            name="workflow-runtimes")
        self.configmaps: Informer[Owned] = Informer(
            client, CONFIGMAPS, transform=configmap_view, namespace=ns,
            label_selector=L.WORKFLOW, indexers=dict(by_wf), metrics=kube,
            name="workflow-configmaps")
        self.shared = shared
        if shared is not None:
            self.workers, self.launchers, self.nodes = \
                shared.workers, shared.launchers, shared.nodes
        else:
            self.workers = worker_pod_informer(client, ns, metrics=kube,
                                               name="workflow-workers")
            self.launchers = launcher_pod_informer(client, ns, metrics=kube,
                                                   name="workflow-launchers")
            self.nodes = Informer(client, NODES, transform=node_view,
                                  label_selector=f"{L.GPU_PRESENT}=true",
                                  name="workflow-gpu-nodes", metrics=kube)
        self.reads = WorkflowReads(client)
        self.recorder = EventRecorder(client, component=COMPONENT)
        self.executor = TierExecutor(client, self.recorder, owner=WORKFLOWS,
                                     involved=involved_workflow)
        self.status_echo = OwnStatusEcho()
        self.controller = Controller(CONTROLLER, self, workers=max_concurrent_reconciles,
                                     metrics=kube)
        self.controller.watch_own(self.workflows, self.status_echo)
        self.controller.watch(self.jobs, enqueue_owner(kind="Workflow", group=L.GROUP))
        self.controller.watch(self.runtimes, enqueue_mapped(self._owner_of))
        self.controller.watch(self.configmaps, enqueue_mapped(self._owner_of))
        connect = self.controller.watch if shared is None else \
            (lambda inf, handler, *preds: follow(self.controller, inf, handler, *preds))
        connect(self.workers, enqueue_mapped(self._pod_workflow))
        connect(self.launchers, enqueue_mapped(self._pod_workflow))
        connect(self.nodes, enqueue_mapped(self._waiting_for_nodes), node_changed)

    # --- runtime plumbing ------------------------------------------------------------------

    @property
    def queue(self) -> WorkQueue[str]:
        """The controller's workqueue of Workflow keys."""
        return self.controller.queue

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        return tuple(self.controller.informers)

    def _shared_informers(self) -> tuple[Informer[Any], ...]:
        shared = self.shared
        return () if shared is None else (shared.workers, shared.launchers, shared.nodes)

    def has_synced(self) -> bool:
        """True once every cache (shared ones included) holds its first full list."""
        return self.controller.has_synced() and all(
            i.has_synced() for i in self._shared_informers())

    async def wait_synced(self) -> None:
        """Return once every cache (shared ones included) holds its first full list."""
        await self.controller.wait_synced()
        for informer in self._shared_informers():
            await informer.wait_synced()

    async def run(self) -> None:
        """Watch and reconcile until cancelled, or until :meth:`stop` drained the queue (once
        the shared caches, run by their owner, have synced)."""
        for informer in self._shared_informers():
            await informer.wait_synced()
        await self.controller.run()

    def stop(self) -> None:
        """Take no new keys; finish what is in flight and queued, then let :meth:`run` return."""
        self.controller.stop()

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
        nodes = tuple(sorted(self.nodes.store.list(), key=lambda n: n.name)) \
            if wf.status.orchestration is None else ()
        return WorkflowObservation(nodes=nodes, jobs=jobs, dependencies=views_for(owned, uid),
                                   config_maps=results_of(owned, uid), active_pods=active)

    async def observe_live(self, wf: Workflow, obs: WorkflowObservation) -> WorkflowObservation:
        """``obs`` with the Jobs, dependencies, result ConfigMaps and pods read live."""
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
                            read_live=True)

    async def _uncached(self, wf: Workflow) -> tuple[Owned, ...]:
        """Dependency objects of kinds without a cache that the Workflow's status refers to."""
        ns, name = _namespace(wf), wf.metadata.name or ""
        out: list[Owned] = []
        for api_version, kind in sorted({(r.api_version, r.kind)
                                         for r in wf.status.dependency_refs
                                         if r.kind not in CACHED_KINDS}):
            out += await self.reads.owned(ns, name, api_version=api_version, kind=kind)
        return tuple(out)

    async def reconcile(self, key: str) -> Result:
        """One pass over the Workflow ``namespace/name``."""
        wf = self.workflows.store.get(key)
        if wf is None:
            return DONE
        obs = self.observe(wf)
        extra = await self._uncached(wf)
        if extra:
            uid = wf.metadata.uid or ""
            obs = attrs.evolve(obs, dependencies=tuple(sorted(
                (*obs.dependencies, *views_for(extra, uid)), key=lambda v: (v.kind, v.name))))
        return await converge(self._step, wf, obs, what=f"workflow {key}",
                              max_passes=MAX_PASSES)

    async def _step(self, wf: Workflow, obs: WorkflowObservation
                    ) -> Again[Workflow, WorkflowObservation] | Result:
        plan = reconcile_workflow(wf, obs, self._clock(), settings=self.settings)
        if plan.confirm_live:
            return Again(wf, await self.observe_live(wf, obs), "live read")
        outcome = await self.executor.apply(wf, plan)
        if outcome.kind == TierOutcomeKind.CREATE_CONFLICTS:
            return Again(wf, attrs.evolve(obs, create_conflicts=(
                *obs.create_conflicts, *outcome.conflicts)), "name taken")
        if outcome.kind == TierOutcomeKind.CONFLICT:
            fresh = await self.reads.workflow(wf.metadata.namespace or "",
                                              wf.metadata.name or "")
            return DONE if fresh is None else Again(fresh, obs, "write conflicted")
        if outcome.kind == TierOutcomeKind.GONE:
            return DONE
        if plan.status is not None:
            self.status_echo.remember(key_of(wf), plan.status)
        log.debug("workflow %s: applied %d create(s), %d delete(s), %d upsert(s)%s",
                  key_of(wf), len(plan.creates), len(plan.deletes), len(plan.upserts),
                  ", a status write" if plan.status is not None else "")
        return Result(requeue_after=plan.requeue_after)
