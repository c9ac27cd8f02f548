"""The Job controller: caches -> Observation -> pure core -> Plan -> executor.

It watches CRE Jobs, the TrainJobs they own, the two label-scoped pod caches (workers by
``cre.dev/job``, launchers by ``cre.dev/launcher``) and GPU nodes (``nvidia.com/gpu.present=true``)
and maps every change to a Job key on one workqueue, so a key is never reconciled twice at once.
A launcher pod's first non-zero termination enqueues its Job at once (``add``, no rate limit or
delay): JobSet deletes that pod about half a second later, and the failure log must be read
before that. Every pod's non-zero termination (launcher or worker, current state or
``lastState``) also starts a log prefetch, and a failed pod deleted before the Job's failure was
recorded is kept as a tombstone (``cre.controller.tombstones``), so the core still sees the
candidate and its tail. Worker failures are not written to status while the run goes on (the
core only captures launchers early); their tails wait in memory for the verdict.

One reconcile is a short loop around :func:`cre.core.job.reconcile_job`: when the Plan asks for
log tails or for a live confirmation that the workload is gone, they are fetched and the core
re-runs on the same observation; a create that hits AlreadyExists re-runs it with the live
holder; a status write that conflicts re-reads the Job live and re-runs it on the fresh copy.
Only a Plan without requests is applied, so the failure record and the condition it belongs to
land in one status write. Each pass runs in :func:`cre.kube.logcontext.reconcile_context`, so
every log record it emits carries ``controller``, ``namespace``, ``name`` and ``reconcileID``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import anyio
import attrs

from cre.api.converter import structure
from cre.api.job import Job, JobStatus
from cre.api.labels import GPU_PRESENT, JOB, LAUNCHER
from cre.controller import metrics as job_metrics
from cre.controller.prefetch import LogPrefetcher
from cre.controller.tombstones import Tombstones
from cre.core import failurelog as fl
from cre.core.classify import group_nodes
from cre.core.job import is_terminal, reconcile_job
from cre.core.observed import LogTail, NodeView, PodView, TrainJobView
from cre.core.plan import DEFAULT_SETTINGS, JobSettings, LogRequest, Observation, Plan
from cre.core.workload import TRAINJOB_KIND, workload_name
from cre.kube import metrics as kube_metrics
from cre.kube.client import NODES, TRAINJOBS, ApiError, KubeClient
from cre.kube.events import EventRecorder
from cre.kube.executor import (
    JOBS,
    Outcome,
    OutcomeKind,
    PlanExecutor,
    WorkloadCreateError,
    involved,
)
from cre.kube.informer import EventType, Informer
from cre.kube.logcontext import reconcile_context
from cre.kube.objectevents import read_object_events
from cre.kube.pods import (
    INDEX_JOB,
    INDEX_LAUNCHER,
    INDEX_NODE,
    launcher_pod_informer,
    live_list_pods,
    read_pod_log,
    worker_pod_informer,
)
from cre.kube.projections import node_view, trainjob_view
from cre.kube.workqueue import QueueShutDown, WorkQueue

log = logging.getLogger(__name__)

CONTROLLER: Final = "job"
COMPONENT: Final = "cre.dev/job-controller"
# Reconcile steps (log reads, live reads, conflicts) before a pass gives up and backs off.
MAX_STEPS: Final = 12
# Noisy worker pod updates are coalesced for this long; launcher failures skip the wait.
WORKER_POD_COALESCE: Final = 0.2
# Tombstones of failed launchers kept per Job (a retry makes two; more is a runaway).
MAX_DEPARTED: Final = 8
# Tombstones of failed workers kept per Job (the earliest failures win on overflow).
MAX_DEPARTED_WORKERS: Final = 16
# Jobs informer index: the nodes of a Job's group (its ``cre.dev/group-nodes`` annotation).
INDEX_GROUP_NODE: Final = "group-node"


def _utcnow() -> datetime:
    return datetime.now(UTC)


def job_from_dict(raw: dict[str, Any]) -> Job:
    """The Job model of a served object (the informer drops objects that do not validate)."""
    return structure(raw, Job)


def job_group_nodes(job: Job) -> tuple[str, ...]:
    """Index function: the group nodes of ``job``, so a node event finds the Jobs it concerns
    even when none of their pods is bound to it yet."""
    return group_nodes(job)


def _key(namespace: str | None, name: str | None) -> str:
    return f"{namespace}/{name}"


def failed_containers(pod: PodView) -> list[tuple[str, bool]]:
    """The init and regular containers of ``pod`` with a non-zero termination, as
    ``(container, previous)``: ``previous`` when that termination is the ``lastState`` of a
    container restarted in place (its log is then the ``previous=true`` one)."""
    return [(name, previous) for name, _, previous in fl.failed_terminations(pod)]


def has_failed_container(pod: PodView | None) -> bool:
    """Whether any init or regular container of ``pod`` has a non-zero termination, current or
    (for a container restarted in place) in its ``lastState``."""
    return pod is not None and bool(fl.failed_terminations(pod))


def _sorted_pods(pods: Sequence[PodView]) -> tuple[PodView, ...]:
    far = datetime.max.replace(tzinfo=UTC)
    return tuple(sorted(pods, key=lambda p: (p.creation_timestamp or far, p.name)))


def new_failures(old: PodView | None, new: PodView) -> list[tuple[str, bool]]:
    """The failed containers of ``new`` whose termination ``old`` did not show yet (a first
    exit, or one more crash of a container restarted in place), as ``(container, previous)``."""
    seen = {(name, state.finished_at, previous)
            for name, state, previous in (fl.failed_terminations(old) if old else [])}
    return [(name, previous) for name, state, previous in fl.failed_terminations(new)
            if (name, state.finished_at, previous) not in seen]


def _with_departed(cached: Sequence[PodView], departed: dict[str, PodView]
                   ) -> tuple[PodView, ...]:
    names = {p.name for p in cached}
    gone = [p for p in departed.values() if p.name not in names]
    return _sorted_pods([*cached, *gone])


class JobController:
    """Reconciles ``cre.dev/v1alpha1`` Jobs in ``namespaces`` (``None``: all namespaces)."""

    def __init__(self, client: KubeClient, *, namespaces: Sequence[str] | None = None,
                 max_concurrent_reconciles: int = 4, settings: JobSettings = DEFAULT_SETTINGS,
                 log_timeout: float = 10.0, clock: Callable[[], datetime] = _utcnow) -> None:
        if max_concurrent_reconciles < 1:
            raise ValueError("JobController: max_concurrent_reconciles must be at least 1, got "
                             f"{max_concurrent_reconciles}")
        self.client = client
        self.settings = settings
        self.log_timeout = log_timeout
        kube_metrics.init_controller_series(CONTROLLER)
        self.max_concurrent_reconciles = max_concurrent_reconciles
        self._clock = clock
        ns = list(namespaces) if namespaces is not None else None
        self.jobs: Informer[Job] = Informer(
            client, JOBS, transform=job_from_dict, namespace=ns,
            indexers={INDEX_GROUP_NODE: job_group_nodes}, name="cre-jobs")
        self.trainjobs: Informer[TrainJobView] = Informer(
            client, TRAINJOBS, transform=trainjob_view, namespace=ns, label_selector=JOB,
            name="cre-trainjobs")
        self.workers = worker_pod_informer(client, ns)
        self.launchers = launcher_pod_informer(client, ns)
        self.nodes: Informer[NodeView] = Informer(
            client, NODES, transform=node_view, label_selector=f"{GPU_PRESENT}=true",
            name="gpu-nodes")
        self.queue: WorkQueue[str] = WorkQueue(CONTROLLER)
        self._stop_requested = False
        # The last status this controller wrote, by Job key (to skip its watch echo).
        self._written: dict[str, JobStatus] = {}
        # Failed pods deleted before the Job's failure was recorded, by Job key (tombstones).
        self.departed_launchers = Tombstones(per_job=MAX_DEPARTED)
        self.departed_workers = Tombstones(per_job=MAX_DEPARTED_WORKERS)
        self.prefetcher = LogPrefetcher(client, timeout=log_timeout)
        self.recorder = EventRecorder(client, component=COMPONENT)
        self.executor = PlanExecutor(client, self.recorder, clock=clock)
        self.jobs.add_handler(self._on_job)
        self.trainjobs.add_handler(self._on_trainjob)
        self.workers.add_handler(self._on_worker)
        self.launchers.add_handler(self._on_launcher)
        self.nodes.add_handler(self._on_node)

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        return (self.jobs, self.trainjobs, self.workers, self.launchers, self.nodes)

    def has_synced(self) -> bool:
        """True once every cache holds its first full list."""
        return all(i.has_synced() for i in self.informers)

    async def wait_synced(self) -> None:
        """Return once every cache holds its first full list."""
        for informer in self.informers:
            await informer.wait_synced()

    async def run(self) -> None:
        """Watch and reconcile until cancelled, or until :meth:`stop` drained the queue."""
        if self.queue.shutting_down and not self._stop_requested:
            self.queue = WorkQueue(CONTROLLER)  # restarted by a supervisor after a failure
        try:
            async with anyio.create_task_group() as tg:
                self.prefetcher.bind(tg)
                self.recorder.bind(tg)  # events are queued and retried in the background
                for informer in self.informers:
                    tg.start_soon(informer.run, name=f"informer {informer.name}")
                await self.wait_synced()
                async with anyio.create_task_group() as workers:
                    for i in range(self.max_concurrent_reconciles):
                        workers.start_soon(self._worker, name=f"job worker {i}")
                # The workers return only once stop() shut the queue and it drained.
                tg.cancel_scope.cancel()
        finally:
            self.prefetcher.bind(None)
            self.recorder.bind(None)
            self.queue.shutdown()

    def stop(self) -> None:
        """Take no new keys; finish the reconciles in flight and what is queued, then let
        :meth:`run` return."""
        self._stop_requested = True
        self.queue.shutdown()

    # --- event mapping ------------------------------------------------------------------------

    def _on_job(self, etype: EventType, old: Job | None, new: Job | None) -> None:
        obj = new or old
        if obj is None:
            return
        if etype == EventType.DELETED:
            job_metrics.forget_job(obj.metadata.namespace or "", obj.metadata.name or "")
            self.queue.forget(_key(obj.metadata.namespace, obj.metadata.name))
            self._forget_failures(_key(obj.metadata.namespace, obj.metadata.name))
            self._written.pop(_key(obj.metadata.namespace, obj.metadata.name), None)
            return
        key = _key(obj.metadata.namespace, obj.metadata.name)
        if old is not None and new is not None and self._own_echo(key, old, new):
            return
        self.queue.add(key)

    def _own_echo(self, key: str, old: Job, new: Job) -> bool:
        """Whether the update is only our own last status write coming back through the
        watch (nothing to do: the pass that wrote it already decided on that state)."""
        written = self._written.get(key)
        if written is None or new.status != written or old.spec != new.spec:
            return False
        return (attrs.evolve(old.metadata, resource_version=None)
                == attrs.evolve(new.metadata, resource_version=None))

    def _on_trainjob(self, etype: EventType, old: TrainJobView | None,
                     new: TrainJobView | None) -> None:
        obj = new or old
        if obj is None:
            return
        for ref in obj.owner_refs:
            if ref.controller and ref.kind == "Job" and ref.api_version.startswith("cre.dev/"):
                self.queue.add(_key(obj.namespace, ref.name))
                return

    def _on_worker(self, etype: EventType, old: PodView | None, new: PodView | None) -> None:
        obj = new or old
        job = obj.label(JOB) if obj is not None else None
        if obj is None or not job:
            return
        key = _key(obj.namespace, job)
        if self._settled(key):
            self.queue.add_after(key, WORKER_POD_COALESCE)
            return
        if etype == EventType.DELETED and old is not None and has_failed_container(old):
            # Deleted (by JobSet, or by the worker Job past its backoffLimit) before the Job's
            # failure may have been recorded: keep its last state for the verdict.
            self.departed_workers.remember(key, old)
        if new is not None:
            # Read the log now: the pod may be gone by the time the workload is declared
            # failed. A single-pod workload's pod is its "launcher" and is captured early.
            for container, previous in new_failures(old, new):
                self.prefetcher.request(new, container, previous=previous, owner=key,
                                        refresh=True)
        if new is not None and has_failed_container(new) and not has_failed_container(old):
            self.queue.add(key)
        else:
            self.queue.add_after(key, WORKER_POD_COALESCE)

    def _on_launcher(self, etype: EventType, old: PodView | None, new: PodView | None) -> None:
        obj = new or old
        job = obj.label(LAUNCHER) if obj is not None else None
        if obj is None or not job:
            return
        key = _key(obj.namespace, job)
        settled = self._settled(key)
        if not settled and etype == EventType.DELETED and old is not None and has_failed_container(
                old):
            self.departed_launchers.remember(key, old)
        if new is not None and not settled:
            # The pod is about to be deleted: read its log now, not when a worker is free.
            for container, previous in new_failures(old, new):
                self.prefetcher.request(new, container, previous=previous, owner=key,
                                        refresh=True)
        # Every launcher change, and above all its first non-zero exit, goes straight to a
        # worker (no delay, no rate limit).
        self.queue.add(key)

    def _settled(self, key: str) -> bool:
        """Whether the cached Job ``key`` already has its verdict or is being deleted (a pod
        failure of it will not be recorded: no tombstone, no log read)."""
        job = self.jobs.store.get(key)
        return job is not None and (is_terminal(job) or job.metadata.deletion_timestamp is not None)

    def _forget_failures(self, key: str) -> None:
        """Drop the tombstones and prefetched tails of Job ``key`` (terminal, being deleted or
        gone: no failure of it will be recorded any more)."""
        self.departed_launchers.forget(key)
        self.departed_workers.forget(key)
        self.prefetcher.forget(key)

    def tombstones(self, key: str) -> frozenset[str]:
        """The names of the failed pods of Job ``key`` kept after their deletion."""
        return frozenset(self.departed_launchers.pods(key)) | frozenset(
            self.departed_workers.pods(key))

    def _on_node(self, etype: EventType, old: NodeView | None, new: NodeView | None) -> None:
        """A GPU node's readiness, schedulability, labels, conditions or taints changed (a
        heartbeat-only update does not count: the view keeps no heartbeat times): enqueue the
        non-terminal Jobs whose group lists it and the Jobs with a pod bound to it."""
        if new is None or etype == EventType.DELETED:
            return
        if old is not None and (old.ready, old.unschedulable, old.labels, old.conditions,
                                old.taints) == (new.ready, new.unschedulable, new.labels,
                                                new.conditions, new.taints):
            return
        grouped = {_key(j.metadata.namespace, j.metadata.name)
                   for j in self.jobs.store.by_index(INDEX_GROUP_NODE, new.name)
                   if not is_terminal(j)}
        keys = {p.label(JOB) and _key(p.namespace, p.label(JOB))
                for p in self.workers.store.by_index(INDEX_NODE, new.name)}
        keys |= {p.label(LAUNCHER) and _key(p.namespace, p.label(LAUNCHER))
                 for p in self.launchers.store.by_index(INDEX_NODE, new.name)}
        for key in sorted({k for k in keys if k} | grouped):
            self.queue.add(key)

    # --- the reconcile loop -------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except QueueShutDown:
                return
            namespace, _, name = key.partition("/")
            # Every record of this pass (here, in the modules it calls and in the tasks they
            # start) carries controller, namespace, name and a fresh reconcileID.
            with reconcile_context(controller=CONTROLLER, namespace=namespace, name=name):
                await self._process(key)

    async def _process(self, key: str) -> None:
        started = time.monotonic()
        log.debug("job %s: reconciling", key)
        try:
            requeue = await self.reconcile(key)
        except Exception as exc:
            log.warning("job %s: reconcile failed, retrying with backoff: %s", key, exc)
            kube_metrics.RECONCILE_ERRORS.labels(controller=CONTROLLER).inc()
            kube_metrics.RECONCILE_TOTAL.labels(controller=CONTROLLER, result="error").inc()
            self.queue.add_rate_limited(key)
        else:
            self.queue.forget(key)
            if requeue is not None:
                self.queue.add_after(key, requeue)
            result = "requeue_after" if requeue is not None else "success"
            kube_metrics.RECONCILE_TOTAL.labels(controller=CONTROLLER, result=result).inc()
            log.debug("job %s: reconciled (%s)", key, result)
        finally:
            kube_metrics.RECONCILE_TIME.labels(controller=CONTROLLER).observe(
                time.monotonic() - started)
            self.queue.done(key)

    def observe(self, job: Job) -> Observation:
        """The Observation of ``job`` from the caches (no live reads, no log tails)."""
        ns, name = job.metadata.namespace or "", job.metadata.name or ""
        key = _key(ns, name)
        # A Job being deleted drains its pods: a tombstone is no running pod to wait for.
        draining = job.metadata.deletion_timestamp is not None
        workers = _with_departed(self.workers.store.by_index(INDEX_JOB, key),
                                 {} if draining else self.departed_workers.pods(key))
        launchers = _with_departed(self.launchers.store.by_index(INDEX_LAUNCHER, key),
                                   {} if draining else self.departed_launchers.pods(key))
        hosts = set(group_nodes(job)) | {p.node_name for p in workers + launchers if p.node_name}
        nodes = tuple(n for n in (self.nodes.store.get(x) for x in sorted(hosts)) if n is not None)
        return Observation(trainjob=self.trainjobs.store.get(_key(ns, workload_name(name))),
                           worker_pods=workers, launcher_pods=launchers, nodes=nodes)

    async def _read_logs(self, requests: Sequence[LogRequest]) -> tuple[LogTail, ...]:
        tails: list[LogTail] = []
        for req in requests:
            early = await self.prefetcher.tail_for(req)
            if early is not None and early.error is None:
                tails.append(early)
                continue
            tail = await read_pod_log(
                self.client, namespace=req.namespace, pod=req.pod, container=req.container,
                tail_lines=req.tail_lines, limit_bytes=req.limit_bytes, timeout=self.log_timeout,
                previous=req.previous, pod_uid=req.pod_uid)
            tails.append(attrs.evolve(tail, previous=req.previous))
        return tuple(tails)

    async def _live_trainjob(self, job: Job) -> TrainJobView | None:
        try:
            raw = await self.client.get(TRAINJOBS, workload_name(job.metadata.name or ""),
                                        namespace=job.metadata.namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return trainjob_view(raw)

    async def _live_pods(self, job: Job) -> tuple[tuple[PodView, ...], tuple[PodView, ...]]:
        ns, name = job.metadata.namespace or "", job.metadata.name or ""
        workers = await live_list_pods(self.client, label_selector=f"{JOB}={name}",
                                       namespace=ns, caller=f"{__name__}.JobController")
        launchers = await live_list_pods(self.client, label_selector=f"{LAUNCHER}={name}",
                                         namespace=ns, caller=f"{__name__}.JobController")
        return _sorted_pods(workers), _sorted_pods(launchers)

    async def _live_job(self, namespace: str, name: str) -> Job | None:
        try:
            return job_from_dict(await self.client.get(JOBS, name, namespace=namespace))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def reconcile(self, key: str) -> float | None:
        """One pass over the Job ``namespace/name``; returns the requeue delay, if any."""
        namespace, _, name = key.partition("/")
        job = self.jobs.store.get(key)
        if job is None:
            return None
        if is_terminal(job) or job.metadata.deletion_timestamp is not None:
            self._forget_failures(key)
        obs = self.observe(job)
        for _ in range(MAX_STEPS):
            plan = reconcile_job(job, obs, self._clock(), settings=self.settings)
            if plan.log_reads:
                obs = attrs.evolve(obs, log_tails=obs.log_tails + await self._read_logs(
                    plan.log_reads))
                continue
            if plan.confirm_pods_live:
                workers, launchers = await self._live_pods(job)
                obs = attrs.evolve(obs, worker_pods=workers, launcher_pods=launchers,
                                   pods_read_live=True)
                continue
            if plan.read_workload_events and obs.trainjob is not None:
                tj = obs.trainjob
                obs = attrs.evolve(obs, workload_events=await read_object_events(
                    self.client, namespace=tj.namespace, kind=TRAINJOB_KIND, name=tj.name,
                    uid=tj.uid))
                continue
            if plan.confirm_workload_absence:
                view = await self._live_trainjob(job)
                obs = attrs.evolve(obs, trainjob=view, workload_absence_confirmed=view is None)
                continue
            try:
                outcome = await self.executor.apply(job, plan)
            except WorkloadCreateError as exc:
                if exc.rejected:
                    # Refused for good: the core fails the Job (Platform, AdmissionRejected).
                    obs = attrs.evolve(obs, create_rejected=exc.cause.message or str(exc.cause))
                    continue
                await self.recorder.emit(involved=involved(job), type_="Warning",
                                         reason="WorkloadCreationError", message=str(exc))
                raise
            if outcome.kind == OutcomeKind.CREATE_CONFLICT:
                holder = trainjob_view(outcome.holder) if outcome.holder else None
                obs = attrs.evolve(obs, create_conflict=holder)
                continue
            if outcome.kind == OutcomeKind.CONFLICT:
                fresh = await self._live_job(namespace, name)
                if fresh is None:
                    return None
                job = fresh
                continue
            if outcome.kind == OutcomeKind.JOB_GONE:
                return None
            log.debug("job %s: applied %d create(s), %d delete(s), %d patch(es), %s",
                      key, len(plan.creates), len(plan.deletes), len(plan.patches),
                      "a status write" if plan.status is not None else "no status write")
            self._record(job, plan, outcome)
            if plan.status is not None and is_terminal(attrs.evolve(job, status=plan.status)):
                self._forget_failures(key)  # the verdict is written: nothing left to record
            return plan.requeue_after
        raise RuntimeError(f"job {key}: no applicable plan after {MAX_STEPS} steps")

    def _record(self, job: Job, plan: Plan, outcome: Outcome) -> None:
        ns, name = job.metadata.namespace or "", job.metadata.name or ""
        if plan.creates:
            job_metrics.WORKLOAD_CREATED.inc(len(plan.creates))
        status = plan.status
        if status is None:
            return
        self._written[_key(ns, name)] = status
        job_metrics.set_job_phase(ns, name, status.phase)
        log_ = status.failure_log
        if (log_ is not None and log_ != job.status.failure_log and log_.finished_at is not None
                and outcome.status_written_at is not None):
            delay = (outcome.status_written_at - log_.finished_at).total_seconds()
            job_metrics.FAILURE_LOG_DELAY.observe(max(delay, 0.0))
