"""The Job controller: a Reconciler for ``cre.dev`` Jobs on the generic runtime, plus the parts
only the Job tier has (early failure capture, log prefetch, tombstones).

It watches CRE Jobs, the TrainJobs they own, the two label-scoped pod caches (workers by
``cre.dev/job``, launchers by ``cre.dev/launcher``) and GPU nodes (``nvidia.com/gpu.present=true``)
and maps every change to a Job key on the :class:`cre.kube.runtime.Controller`'s queue. A
launcher pod's first non-zero termination is enqueued at once and ahead of routine work
(``PRIORITY_URGENT``): JobSet deletes that pod about half a second later, and the failure log
must be read before that. Every pod's non-zero termination (launcher or worker, current state
or ``lastState``) also starts a log prefetch, and a failed pod deleted before the Job's failure
was recorded is kept as a tombstone (``cre.controller.job.tombstones``), so the core still sees the
candidate and its tail. Worker failures are not written to status while the run goes on (the
core only captures launchers early); their tails wait in memory for the verdict.

One reconcile is :func:`cre.kube.runtime.converge` around
:func:`cre.core.job.reconcile.reconcile_job`: when the Plan asks for log tails, a live confirmation
or the workload's Events, the shell reads them and runs the core again on a richer Observation; the
result of a create (created, name taken, refused) goes into the Observation the same way; a status
write that conflicts re-reads the Job live and runs the core on the fresh copy. Only a Plan without
requests is applied, so the failure record and the condition it belongs to land in one status write.
A Plan that creates anything is applied only after the Job was read live with the same uid and
resourceVersion: a cache that kept a deleted Job never gets a workload created for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Final

import attrs
from anyio.abc import TaskGroup
from prometheus_client import CollectorRegistry

from cre.api.goodput import GoodputMeasurement
from cre.api.job import Job, JobStatus
from cre.api.labels import GPU_PRESENT, JOB
from cre.api.measurement import BandwidthMeasurement
from cre.controller.job.events import INDEX_GROUP_NODE, JobEvents, node_changed
from cre.controller.job.metrics import job_metrics_for
from cre.controller.job.nodechecks import NodeChecks
from cre.controller.job.prefetch import LogPrefetcher
from cre.controller.job.shell import (
    JobReads,
    bandwidth_from_dict,
    by_creation,
    goodput_from_dict,
    involved,
    job_executor,
    job_from_dict,
)
from cre.controller.job.tombstones import Tombstones
from cre.core.common.observed import NodeView, PodView, TrainJobView
from cre.core.common.plan import (
    DEFAULT_SETTINGS,
    Ask,
    ConfirmAbsent,
    JobSettings,
    ListLive,
    Observation,
    ReadEvents,
    ReadLog,
)
from cre.core.common.projections import node_view, trainjob_view
from cre.core.job.bandwidth import BANDWIDTH_KIND, bandwidth_name
from cre.core.job.classify import group_nodes
from cre.core.job.goodput import GOODPUT_KIND, goodput_name
from cre.core.job.health import expression_of
from cre.core.job.reconcile import JobPlan, is_terminal, reconcile_job
from cre.core.job.workload import TRAINJOB_KIND, workload_name
from cre.kube.client import (
    BANDWIDTHMEASUREMENTS,
    GOODPUTMEASUREMENTS,
    JOBS,
    NODES,
    TRAINJOBS,
    KubeClient,
)
from cre.kube.executor import CreateFailed, Outcome, answer, refused_again, remember_applied
from cre.kube.factory import InformerFactory
from cre.kube.informer import Informer
from cre.kube.pods import (
    INDEX_JOB,
    INDEX_LAUNCHER,
    launcher_pod_informer,
    worker_pod_informer,
)
from cre.kube.runtime import (
    DONE,
    Again,
    CoreReconciler,
    Result,
    converge,
    enqueue_mapped,
    key_of,
    object_key,
)
from cre.kube.runtime.base import utcnow

log = logging.getLogger(__name__)

CONTROLLER: Final = "job"
COMPONENT: Final = "cre.dev/job-controller"
# Tombstones of failed launchers kept per Job (a retry makes two; more is a runaway).
MAX_DEPARTED: Final = 8
# Tombstones of failed workers kept per Job (the earliest failures win on overflow).
MAX_DEPARTED_WORKERS: Final = 16

_MEASUREMENT_KINDS: Final = (BANDWIDTH_KIND, GOODPUT_KIND)

__all__ = ["JOBS", "JobController", "job_from_dict", "job_group_nodes"]


def job_group_nodes(job: Job) -> tuple[str, ...]:
    """Index function: the group nodes of ``job``, so a node event finds the Jobs it concerns
    even when none of their pods is bound to it yet."""
    return group_nodes(job)


def _with_departed(cached: Sequence[PodView], departed: dict[str, PodView]
                   ) -> tuple[PodView, ...]:
    names = {p.name for p in cached}
    return by_creation([*cached, *(p for p in departed.values() if p.name not in names)])


def _absorb(obs: Observation, outcome: Outcome) -> Observation:
    """``obs`` with what applying a plan created, and the held measurements a create found:
    a re-run after a conflict adopts the workload just created instead of creating it again,
    and keeps (this Job's) or deletes (an earlier Job's) a measurement holding its name."""
    found = {**{c.kind: dict(c.holder) for c in outcome.conflicts},
             **{str(raw.get("kind")): raw for raw in outcome.created}}
    if TRAINJOB_KIND in found and not any(c.kind == TRAINJOB_KIND for c in outcome.conflicts):
        obs = attrs.evolve(obs, trainjob=trainjob_view(found[TRAINJOB_KIND]))
    if BANDWIDTH_KIND in found:
        obs = attrs.evolve(obs, bandwidth_measurement=bandwidth_from_dict(found[BANDWIDTH_KIND]))
    if GOODPUT_KIND in found:
        obs = attrs.evolve(obs, goodput_measurement=goodput_from_dict(found[GOODPUT_KIND]))
    return obs


class JobController(JobEvents, CoreReconciler[Job, Observation, JobStatus]):
    """Reconciles ``cre.dev/v1alpha1`` Jobs in ``namespaces`` (``None``: all namespaces).

    ``informers``: the process's shared informer factory (then its namespaces apply);
    ``registry``: where the metrics go (default: prometheus-client's default registry).
    ``run()`` until cancelled; ``stop()`` drains; ``queue`` and ``has_synced()`` serve the
    manager's supervision.
    """

    def __init__(self, client: KubeClient, *, namespaces: Sequence[str] | None = None,
                 informers: InformerFactory | None = None,
                 max_concurrent_reconciles: int = 4, settings: JobSettings = DEFAULT_SETTINGS,
                 log_timeout: float = 10.0, clock: Callable[[], datetime] = utcnow,
                 registry: CollectorRegistry | None = None, time_scale: float = 1.0) -> None:
        super().__init__(client, name=CONTROLLER, component=COMPONENT,
                         workers=max_concurrent_reconciles, clock=clock, informers=informers,
                         namespaces=namespaces, registry=registry, time_scale=time_scale)
        self.settings = settings
        self.max_concurrent_reconciles = max_concurrent_reconciles
        self.metrics = job_metrics_for(registry)
        self.jobs: Informer[Job] = self.cache(
            JOBS, transform=job_from_dict, indexers={INDEX_GROUP_NODE: job_group_nodes},
            name="cre-jobs")
        self.trainjobs: Informer[TrainJobView] = self.cache(
            TRAINJOBS, transform=trainjob_view, label_selector=JOB, name="cre-trainjobs")
        self.workers = worker_pod_informer(self.informer_factory)
        self.launchers = launcher_pod_informer(self.informer_factory)
        self.measurements: Informer[BandwidthMeasurement] = self.cache(
            BANDWIDTHMEASUREMENTS, transform=bandwidth_from_dict, label_selector=JOB,
            name="cre-bandwidthmeasurements")
        self.goodputs: Informer[GoodputMeasurement] = self.cache(
            GOODPUTMEASUREMENTS, transform=goodput_from_dict, label_selector=JOB,
            name="cre-goodputmeasurements")
        self.nodes: Informer[NodeView] = self.cache(
            NODES, transform=node_view, label_selector=f"{GPU_PRESENT}=true", name="gpu-nodes")
        # Failed pods deleted before the Job's failure was recorded, by Job key (tombstones).
        self.departed_launchers = Tombstones(per_job=MAX_DEPARTED)
        self.departed_workers = Tombstones(per_job=MAX_DEPARTED_WORKERS)
        # The nodeHealthMonitor's results, evaluated once per node copy (not per pass).
        self.node_checks = NodeChecks()
        self.deleted_workloads: dict[str, str] = {}
        self.prefetcher = LogPrefetcher(client, timeout=log_timeout)
        self.reads = JobReads(client, self.prefetcher, log_timeout=log_timeout)
        self.executor = job_executor(client, self.recorder, clock=clock)
        # Each goodput sample brings the Job back (``owns``): stall detection reads its steps.
        (self.managed().for_(self.jobs, self.on_job)
            .owns(self.trainjobs, self.measurements, self.goodputs)
            .watches(self.workers, self.on_worker)
            .watches(self.launchers, self.on_launcher)
            .watches(self.nodes, enqueue_mapped(self.jobs_on_node), node_changed)
            .watches(self.nodes, self.on_node_deleted)
            .watches(self.trainjobs, self.on_trainjob_deleted))

    def bind(self, tg: TaskGroup | None) -> None:
        """Log prefetches and events run in the background while the controller runs."""
        super().bind(tg)
        self.prefetcher.bind(tg)

    # --- the Reconciler -----------------------------------------------------------------------

    def observe(self, job: Job) -> Observation:
        """The Observation of ``job`` from the caches (no live reads, no log tails)."""
        key = key_of(job)
        # A Job being deleted drains its pods: a tombstone is no running pod to wait for.
        draining = job.metadata.deletion_timestamp is not None
        workers = _with_departed(self.workers.store.by_index(INDEX_JOB, key),
                                 {} if draining else self.departed_workers.pods(key))
        launchers = _with_departed(self.launchers.store.by_index(INDEX_LAUNCHER, key),
                                   {} if draining else self.departed_launchers.pods(key))
        hosts = set(group_nodes(job)) | {p.node_name for p in workers + launchers if p.node_name}
        nodes = tuple(n for n in (self.nodes.store.get(x) for x in sorted(hosts)) if n is not None)
        trainjob = object_key(job.metadata.namespace, workload_name(job.metadata.name or ""))
        bandwidth = object_key(job.metadata.namespace, bandwidth_name(job.metadata.name or ""))
        goodput = object_key(job.metadata.namespace, goodput_name(job.metadata.name or ""))
        return self._checked(job, Observation(
            trainjob=self.trainjobs.store.get(trainjob), worker_pods=workers,
            launcher_pods=launchers, nodes=nodes,
            bandwidth_measurement=self.measurements.store.get(bandwidth),
            goodput_measurement=self.goodputs.store.get(goodput)))

    def _checked(self, job: Job, obs: Observation) -> Observation:
        """``obs`` with the Job's nodeHealthMonitor expression evaluated on its nodes when the
        core judges them: the Job is not terminal and its workload is observed (else nothing is
        evaluated, and the CEL library is not even loaded)."""
        expression = expression_of(job)
        if expression is None or obs.trainjob is None or is_terminal(job):
            return attrs.evolve(obs, node_checks=()) if obs.node_checks else obs
        return attrs.evolve(obs, node_checks=self.node_checks.checks(expression, obs.nodes))

    async def reconcile(self, key: str) -> Result:
        """One pass over the Job ``namespace/name``."""
        job = self.status_echo.latest(key, self.jobs.store.get(key))
        if job is None:
            return DONE
        if is_terminal(job) or job.metadata.deletion_timestamp is not None:
            self._forget_failures(key)
        return await converge(self._step, job, self.observe(job), what=f"job {key}")

    async def _step(self, job: Job, obs: Observation) -> Again[Job, Observation] | Result:
        """Run the core once; answer what it asks, or apply its Plan and answer the outcome."""
        plan = reconcile_job(job, obs, self._clock(), settings=self.settings)
        if plan.asks:
            return Again(job, await self._answer(job, obs, plan.asks), "asks answered")
        refused_again(job, obs, plan, involved)
        try:
            outcome = await self.executor.apply(job, plan)
        except CreateFailed as exc:
            await self.recorder.emit(involved=involved(job), type_="Warning",
                                     reason="WorkloadCreationError", message=str(exc))
            raise
        obs = self._checked(job, _absorb(obs, outcome))
        after = answer(job, obs, outcome, decode=job_from_dict)
        if after is not None:
            return after
        key = key_of(job)
        log.debug("job %s: applied %d create(s), %d delete(s), %d patch(es), %s",
                  key, len(plan.creates), len(plan.deletes), len(plan.patches),
                  "a status write" if plan.status is not None else "no status write")
        self._record(job, plan, outcome)
        if plan.status is not None and is_terminal(attrs.evolve(job, status=plan.status)):
            self._forget_failures(key)  # the verdict is written: nothing left to record
        return self.requeue(plan.requeue_after)

    async def _answer(self, job: Job, obs: Observation, asks: Sequence[Ask]) -> Observation:
        """``obs`` with the answers to ``asks`` (the core asks one kind of thing at a time)."""
        tails = await self.reads.logs([a for a in asks if isinstance(a, ReadLog)])
        obs = attrs.evolve(obs, log_tails=obs.log_tails + tails)
        if any(isinstance(a, ListLive) for a in asks):
            workers, launchers = await self.reads.pods(job)
            obs = attrs.evolve(obs, worker_pods=workers, launcher_pods=launchers)
        if any(isinstance(a, ReadEvents) for a in asks):
            obs = attrs.evolve(obs, workload_events=await self.reads.workload_events(
                obs.trainjob))
        if any(isinstance(a, ConfirmAbsent) for a in asks):
            obs = self._checked(job, attrs.evolve(obs, trainjob=await self._workload(job)))
        return attrs.evolve(obs, feedback=obs.feedback.answering(*asks))

    async def _workload(self, job: Job) -> TrainJobView | None:
        """The Job's TrainJob as served now. Absent without a read when the cache saw the one
        its status names deleted (a uid never comes back) and holds none of that name since: a
        releasing Job asks on every pass while its pods drain. Else read live."""
        ref, key = job.status.workload_ref, key_of(job)
        name = object_key(job.metadata.namespace, workload_name(job.metadata.name or ""))
        if (ref is not None and ref.uid and self.deleted_workloads.get(key) == ref.uid
                and self.trainjobs.store.get(name) is None):
            return None
        return await self.reads.trainjob(job)

    def _record(self, job: Job, plan: JobPlan, outcome: Outcome) -> None:
        ns, name = job.metadata.namespace or "", job.metadata.name or ""
        workloads = sum(1 for c in plan.creates if c.kind not in _MEASUREMENT_KINDS)
        if workloads:
            self.metrics.workload_created.inc(workloads)
        status = plan.status
        if status is None:
            return
        remember_applied(self.status_echo, job, plan, outcome)
        self.metrics.set_job_phase(ns, name, status.phase)
        log_ = status.failure_log
        if (log_ is not None and log_ != job.status.failure_log and log_.finished_at is not None
                and outcome.status_written_at is not None):
            delay = (outcome.status_written_at - log_.finished_at).total_seconds()
            self.metrics.failure_log_delay.observe(max(delay, 0.0))
