"""The Job lifecycle as a pure function: ``reconcile_job(job, observation, now) -> Plan``.

One Job runs one workload (a Kubeflow TrainJob named ``<job>-workload``) on one node group. This
module decides, from the Job and an Observation of its world, what the Job's status must say and
what the shell must do: add the finalizer, create or adopt the workload, map its state onto the
exclusive InProgress/Succeeded/Failed trio, time it out, restart it from a checkpoint, record the
log of the failure that decided the run, classify the failure, and drain before the finalizer
goes. It performs no I/O, reads no clock and is deterministic, so the same inputs always give
the same Plan, and the controller, the tests and the benchmarks all run the very same decisions.

Failure-log rules (see ``cre.core.job.failurelog`` for selection):

* Early launcher capture: while the workload runs, the first launcher seen with a non-zero exit
  is recorded in the same status write as the InProgress condition (JobSet deletes the failed
  launcher about half a second later). A recorded launcher that later turns out to be a
  disruption target is dropped, so a replacement's failure can take its place. A workload
  without a launcher (a single loopback or DCGM pod) is captured from its worker pods.
* The record always describes the failure that decided the run: dropped when the run succeeds
  and on checkpoint restart, replaced when the run ends for another reason (timeout, workload
  deleted). The timeout path reads a launcher's log before any worker's.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Final

import attrs

from cre.api.conditions import ConditionType, JobReason, Phase
from cre.api.errors import describe
from cre.api.job import FailureLog, Job, JobStatus, WorkloadRetention
from cre.api.labels import JOB, JOB_FINALIZER, LAUNCHER
from cre.api.meta import ConditionStatus
from cre.api.validate import validate
from cre.core.common.lifecycle import bound_note, set_exclusive, true_member
from cre.core.common.observed import PodView, TrainJobView
from cre.core.common.plan import (
    DEFAULT_SETTINGS,
    ConfirmAbsent,
    Create,
    Delete,
    EventSpec,
    JobSettings,
    ListLive,
    Observation,
    Patch,
    Plan,
    ReadEvents,
    ReadLog,
)
from cre.core.common.projections import trainjob_view
from cre.core.common.timeouts import parse_duration, resume_clock, seconds_left
from cre.core.job import failurelog as fl
from cre.core.job import imagepull, stall
from cre.core.job.bandwidth import bandwidth_writes, validate_succeeded
from cre.core.job.classify import (
    Cause,
    classify,
    group_nodes,
    merge_failed_nodes,
    preempted_message,
)
from cre.core.job.goodput import (
    check_stall,
    checkpoint_read_pending,
    checkpoint_restart_allowed,
    goodput_writes,
)
from cre.core.job.health import HealthVerdict, check_job, mark_hardware_failed
from cre.core.job.release import is_released, release
from cre.core.job.workload import (
    TRAINJOB_API_VERSION,
    TRAINJOB_KIND,
    WorkloadState,
    has_launcher,
    manifest,
    owned_by,
    reference,
    state_of,
    workload_name,
)

_TERMINAL_POD_PHASES: Final = ("Succeeded", "Failed")
# metav1.Condition.message is at most 32768 characters; keep the status writable.
CONDITION_MESSAGE_LIMIT: Final = 32768
JobPlan = Plan[JobStatus]


@attrs.frozen(kw_only=True)
class _Ctx:
    job: Job
    obs: Observation
    now: datetime
    settings: JobSettings
    # A deadline closer than the poll interval (the end of an image-pull grace), in seconds.
    poll_cap: float | None = None

    @property
    def name(self) -> str:
        return self.job.metadata.name or ""

    @property
    def poll(self) -> float:
        """The requeue of a running workload: the poll interval, or sooner for a deadline."""
        interval = self.settings.poll_interval
        return interval if self.poll_cap is None else max(min(interval, self.poll_cap), 0.0)

    @property
    def namespace(self) -> str:
        return self.job.metadata.namespace or ""

    @property
    def rv(self) -> str:
        return self.job.metadata.resource_version or ""

    def plan(self, **kwargs: Any) -> JobPlan:
        return Plan(resource_version=self.rv, **kwargs)

    @property
    def workload_absence(self) -> ConfirmAbsent:
        """The ask: is the workload really gone?"""
        return ConfirmAbsent(kind=TRAINJOB_KIND, name=workload_name(self.name))

    @property
    def live_pods(self) -> tuple[ListLive, ListLive]:
        """The asks: the Job's worker and launcher pods, listed live."""
        return (ListLive(kind="Pod", selector=f"{JOB}={self.name}"),
                ListLive(kind="Pod", selector=f"{LAUNCHER}={self.name}"))


def reconcile_job(
    job: Job, observation: Observation, now: datetime, *, settings: JobSettings = DEFAULT_SETTINGS
) -> JobPlan:
    """The Plan that moves ``job`` one step towards the state ``observation`` calls for."""
    ctx = _Ctx(job=job, obs=observation, now=now, settings=settings)
    if job.metadata.deletion_timestamp is not None:
        return _deletion(ctx)
    if JOB_FINALIZER not in job.metadata.finalizers:
        # Added alone: its watch event drives the next pass (a status write would conflict).
        body = {"metadata": {"finalizers": [*job.metadata.finalizers, JOB_FINALIZER]}}
        return ctx.plan(patches=(Patch(body=body),))
    current = true_member(job.status.conditions)
    if current is not None and current.type == ConditionType.SUCCEEDED:
        return _judge(ctx, ctx.job.status, None)
    if current is not None and current.type == ConditionType.FAILED:
        return _terminal(ctx)
    return _lifecycle(ctx)


def _terminal(ctx: _Ctx) -> JobPlan:
    """A finished Job: release its workload once nothing needs its pods (cre.core.job.release)."""
    return _released(ctx, ctx.job.status, events=())


def _released(ctx: _Ctx, status: JobStatus, *, events: tuple[EventSpec, ...],
              requeue_after: float | None = None) -> JobPlan:
    """The Plan of a finished Job whose new status is ``status`` (``events``: those of this
    pass), with the release step added; live confirmations are asked for only on a pass that
    writes nothing else (a Plan carrying a request carries no writes)."""
    quiet = status == ctx.job.status and not events
    step = release(ctx.job, status, ctx.obs, ctx.now, verify=quiet,
                   absence=ctx.workload_absence, live_pods=ctx.live_pods)
    if step.asks:
        return ctx.plan(asks=step.asks)
    if ctx.job.spec.workload_retention == WorkloadRetention.RELEASE and not is_released(
            step.status):
        poll = ctx.settings.drain_poll_interval
        requeue_after = poll if requeue_after is None else min(requeue_after, poll)
    changed = step.status != ctx.job.status
    every = (*events, *((step.event,) if step.event is not None else ()))
    return ctx.plan(status=step.status if changed else None, events=every if changed else (),
                    deletes=step.deletes, requeue_after=requeue_after)


# --- status helpers ---------------------------------------------------------------------------


def _with_condition(
    ctx: _Ctx, status: JobStatus, *, member: ConditionType, reason: str, message: str
) -> tuple[JobStatus, EventSpec | None]:
    conditions, event = set_exclusive(
        status.conditions, member=member, reason=reason,
        message=bound_note(message, limit=CONDITION_MESSAGE_LIMIT), now=ctx.now,
        generation=ctx.job.metadata.generation,
    )
    if member == ConditionType.SUCCEEDED:
        phase = Phase.SUCCEEDED
    elif member == ConditionType.FAILED:
        phase = Phase.FAILED
    else:
        phase = Phase.RUNNING if reason == JobReason.WORKLOAD_RUNNING else Phase.PENDING
    return attrs.evolve(status, conditions=conditions, phase=phase,
                        observed_generation=ctx.job.metadata.generation), event


def _finish(
    ctx: _Ctx,
    status: JobStatus,
    event: EventSpec | None,
    *,
    creates: tuple[Create, ...] = (),
    deletes: tuple[Delete, ...] = (),
    requeue_after: float | None = None,
) -> JobPlan:
    changed = status != ctx.job.status
    return ctx.plan(
        creates=creates,
        deletes=deletes,
        status=status if changed else None,
        events=(event,) if event is not None and changed else (),
        requeue_after=requeue_after,
    )


def _in_progress(ctx: _Ctx, status: JobStatus, reason: str, message: str,
                 **kwargs: Any) -> JobPlan:
    new, event = _with_condition(ctx, status, member=ConditionType.IN_PROGRESS, reason=reason,
                                 message=message)
    return _finish(ctx, new, event, **kwargs)


def _delete_workload(view: TrainJobView | None) -> tuple[Delete, ...]:
    if view is None or view.deletion_timestamp is not None:
        return ()
    return (Delete(api_version=TRAINJOB_API_VERSION, kind=TRAINJOB_KIND,
                   namespace=view.namespace, name=view.name, uid=view.uid),)


def _log_request(ctx: _Ctx, pod: PodView, container: str, *, previous: bool = False
                 ) -> ReadLog:
    return ReadLog(namespace=pod.namespace or ctx.namespace, pod=pod.name,
                      container=container, pod_uid=pod.uid, previous=previous)


def _capture(ctx: _Ctx, failure: fl.FailedContainer) -> FailureLog | ReadLog:
    """The record of ``failure`` once its log tail (the previous run's for a ``lastState``
    termination) was read, or the read it needs first."""
    tail = ctx.obs.tail_for(pod=failure.pod.name, container=failure.container,
                           pod_uid=failure.pod.uid, previous=failure.previous)
    if tail is None:
        return _log_request(ctx, failure.pod, failure.container, previous=failure.previous)
    return fl.record(failure, tail)


# --- lifecycle --------------------------------------------------------------------------------


def spec_errors(job: Job) -> tuple[str, ...]:
    """Every problem :func:`cre.api.validate.validate` finds in the Job's ``spec`` (threshold
    keys, CEL syntax, cross-field rules the CRD schema cannot express), as ``path: problem``."""
    return tuple(str(e) for e in validate(job) if e.path == "spec" or e.path.startswith("spec."))


def _lifecycle(ctx: _Ctx) -> JobPlan:
    job, obs = ctx.job, ctx.obs
    held = obs.feedback.conflict(TRAINJOB_KIND, workload_name(ctx.name))
    if held is not None:
        return _name_taken(ctx, trainjob_view(held.holder))
    rejected = _rejection(ctx)
    if rejected is not None:
        message = (f"The API server refused to create workload {workload_name(ctx.name)}: "
                   f"{rejected}")
        return _fail(ctx, cause=Cause.CREATE_REJECTED, reason=JobReason.WORKLOAD_CREATION_ERROR,
                     message=message, view=None)
    ref = job.status.workload_ref
    view = obs.trainjob
    if ref is None and view is None:
        invalid = spec_errors(job)
        if invalid:
            # A spec the API server accepted (the CRD schema cannot say everything) but CRE
            # cannot run: fail before creating anything, naming every bad field.
            message = f"{describe(job, 'Job')} has an invalid spec: {'; '.join(invalid)}"
            return _fail(ctx, cause=Cause.INVALID_SPEC, reason=JobReason.INVALID_SPEC,
                         message=message, view=None)
    if ref is not None and _restarting(job):
        # ``ref`` names the previous workload, deleted by the restart: wait until it is gone.
        # The delete is repeated while it is not terminating (the status write that started the
        # restart may have landed while the delete after it failed).
        if view is not None and view.uid == ref.uid:
            return ctx.plan(deletes=_delete_workload(view),
                            requeue_after=ctx.settings.collision_retry)
        if view is None and not obs.feedback.has(ctx.workload_absence):
            return ctx.plan(asks=(ctx.workload_absence,))
        ref = None
    if ref is None:
        if view is not None:
            return _name_taken(ctx, view)
        return _create(ctx)
    ours = view is not None and owned_by(view, job) and (not ref.uid or view.uid == ref.uid)
    if not ours:
        if view is None and not obs.feedback.has(ctx.workload_absence):
            return ctx.plan(asks=(ctx.workload_absence,))
        return _workload_gone(ctx, foreign=view)
    assert view is not None
    return _track(ctx, view)


def _rejection(ctx: _Ctx) -> str | None:
    """The API server's message refusing the workload's create for good (``None``: none)."""
    return next((r.message for r in ctx.obs.feedback.create_rejections
                 if r.kind == TRAINJOB_KIND), None)


def _restarting(job: Job) -> bool:
    current = true_member(job.status.conditions)
    return current is not None and current.reason == JobReason.WORKLOAD_RESTARTING


def _create(ctx: _Ctx) -> JobPlan:
    # The Job's BandwidthMeasurement first (cre.core.job.bandwidth): created once, with the
    # workload and before it, never later on a cache miss.
    measure, stale = bandwidth_writes(ctx.job, ctx.obs.bandwidth_measurement)
    goodput, stale_goodput = goodput_writes(ctx.job, ctx.obs.goodput_measurement)
    measure, stale = (*measure, *goodput), (*stale, *stale_goodput)
    if stale:
        return ctx.plan(deletes=stale, requeue_after=ctx.settings.collision_retry)
    body = manifest(ctx.job)
    create = Create(api_version=TRAINJOB_API_VERSION, kind=TRAINJOB_KIND,
                    namespace=ctx.namespace, name=body["metadata"]["name"], body=body)
    ref = reference(TrainJobView(name=create.name, namespace=ctx.namespace, uid=""))
    status = attrs.evolve(ctx.job.status, workload_ref=attrs.evolve(ref, uid=None))
    return _in_progress(ctx, status, JobReason.WORKLOAD_CREATED,
                        f"Workload {create.name} created", creates=(*measure, create),
                        requeue_after=ctx.settings.poll_interval)


def _name_taken(ctx: _Ctx, holder: TrainJobView) -> JobPlan:
    """The workload name is held (seen in the cache, or reported by a create's AlreadyExists)."""
    if owned_by(holder, ctx.job):
        if holder.deletion_timestamp is not None:
            # Our previous workload (before a checkpoint restart) is still going away.
            return ctx.plan(requeue_after=ctx.settings.collision_retry)
        status = attrs.evolve(ctx.job.status, workload_ref=reference(holder))
        return _in_progress(ctx, status, JobReason.WORKLOAD_ADOPTED,
                            f"Adopted existing workload {holder.name}",
                            requeue_after=ctx.settings.poll_interval)
    if holder.deletion_timestamp is not None:
        return ctx.plan(requeue_after=ctx.settings.collision_retry)
    message = (f"TrainJob {holder.namespace}/{holder.name} already exists and is not controlled "
               f"by Job {ctx.name}")
    return _fail(ctx, cause=Cause.NAME_COLLISION, reason=JobReason.WORKLOAD_NAME_COLLISION,
                 message=message, view=None)


def _restart_allowed(ctx: _Ctx) -> bool:
    """A checkpoint restart is left and, with a GoodputMeasurement, a checkpoint was logged
    since the last restart (cre.core.job.goodput)."""
    return checkpoint_restart_allowed(ctx.job, ctx.obs.goodput_measurement)


def _restart(ctx: _Ctx, view: TrainJobView | None, why: str) -> JobPlan:
    checkpoint = ctx.job.spec.checkpoint
    assert checkpoint is not None
    count = ctx.job.status.restart_count + 1
    # workloadRef keeps naming the old workload until it is gone (never adopt it again).
    status = attrs.evolve(ctx.job.status, workload_start_time=None, restart_count=count,
                          failure_log=None, failure_class=None, image_pull_failing_since=None)
    message = (f"Restarting workload from checkpoint (restart {count}/{checkpoint.max_restarts})"
               f": {why}")
    return _in_progress(ctx, status, JobReason.WORKLOAD_RESTARTING, message,
                        deletes=_delete_workload(view), requeue_after=ctx.settings.restart_delay)


def _workload_gone(ctx: _Ctx, *, foreign: TrainJobView | None) -> JobPlan:
    ref = ctx.job.status.workload_ref
    name = ref.name if ref is not None else workload_name(ctx.name)
    message = f"Workload {name} was deleted"
    if _restart_allowed(ctx):
        return _restart(ctx, None, message)
    return _fail(ctx, cause=Cause.WORKLOAD_DELETED, reason=JobReason.WORKLOAD_FAILED,
                 message=message, view=None)


def _track(ctx: _Ctx, view: TrainJobView) -> JobPlan:
    state, detail = state_of(view)
    status = ctx.job.status
    if status.workload_ref is None or status.workload_ref.uid != view.uid:
        status = attrs.evolve(status, workload_ref=reference(view))
    if state == WorkloadState.SUCCEEDED:
        status = attrs.evolve(status, failure_log=None, failure_class=None)
        new, event = _with_condition(ctx, status, member=ConditionType.SUCCEEDED,
                                     reason=JobReason.WORKLOAD_COMPLETED,
                                     message=f"Workload {view.name} completed")
        return _judge(ctx, new, event)
    if state == WorkloadState.FAILED:
        message = f"Workload {view.name} failed" + (f": {detail}" if detail else "")
        if _restart_allowed(ctx):
            return _restart(ctx, view, message)
        failed = view.condition("Failed")
        wait = checkpoint_read_pending(ctx.job, ctx.obs.goodput_measurement, now=ctx.now,
                                       failed_at=failed.last_transition_time if failed else None)
        if wait is not None:  # the measurement has not read the end of the log yet
            return ctx.plan(requeue_after=wait)
        return _fail(ctx, cause=Cause.WORKLOAD_FAILED, reason=JobReason.WORKLOAD_FAILED,
                     message=message, view=view, status=status)
    health = check_job(ctx.job, ctx.obs.nodes, ctx.obs.node_checks)
    if health is not None and health.flagged:
        return _hardware_failed(ctx, view, status, health)
    preempted = preempted_message(_current_pods(ctx, view))
    if preempted:
        # Higher-priority work took a node: the run cannot finish as planned; end it now
        # (Platform, no node judged) and release the rest of its GPUs.
        return _fail(ctx, cause=Cause.PREEMPTED, reason=JobReason.WORKLOAD_PREEMPTED,
                     message=f"Workload {view.name} {preempted}", view=view, status=status)
    if state == WorkloadState.RUNNING:
        pulled = _image_pull(ctx, view, status)
        if isinstance(pulled, Plan):
            return pulled
        ctx, status = pulled
        stalled = _stalled(ctx, view, status) or _training_stalled(ctx, view, status)
        if stalled is not None:
            return stalled
    if state == WorkloadState.PENDING:
        if status.workload_start_time is not None and status.scheduling_blocked_since is None:
            # Suspended after it ran (e.g. Kueue preemption): this time is not charged.
            status = attrs.evolve(status, scheduling_blocked_since=ctx.now)
        return _in_progress(ctx, status, JobReason.WORKLOAD_PENDING,
                            f"Workload {view.name} is pending: {detail}",
                            requeue_after=ctx.settings.poll_interval)
    return _running(ctx, view, status, note=health.note() if health is not None else "")


def _hardware_failed(ctx: _Ctx, view: TrainJobView, status: JobStatus,
                     health: HealthVerdict) -> JobPlan:
    """The health monitor flagged nodes: record them (``HardwareFailed``, ``failedNodes``) and
    fail the Job in the same write (Node class; classify reads the recorded finding)."""
    status = mark_hardware_failed(status, health, now=ctx.now,
                                  generation=ctx.job.metadata.generation)
    ctx = attrs.evolve(ctx, job=attrs.evolve(ctx.job, status=status))
    return _fail(ctx, cause=Cause.HARDWARE_FAILED, reason=JobReason.HARDWARE_FAILURE_DETECTED,
                 message=health.message(), view=view)


def _current_pods(ctx: _Ctx, view: TrainJobView | None) -> tuple[PodView, ...]:
    created = view.creation_timestamp if view is not None else None
    return tuple(p for p in _all_pods(ctx) if fl.of_current_workload(p, created))


def _image_pull(ctx: _Ctx, view: TrainJobView, status: JobStatus
                ) -> JobPlan | tuple[_Ctx, JobStatus]:
    """Containers of the current workload waiting on a failing image pull
    (``cre.core.job.imagepull``): past imagePullGraceSeconds the Job fails ``ImagePullFailed``;
    within it, ``imagePullFailingSince`` is recorded and the next pass comes at the end of the
    grace. A pull that recovered clears the mark."""
    found = imagepull.failures(_current_pods(ctx, view))
    if not found:
        if status.image_pull_failing_since is None:
            return ctx, status
        return ctx, attrs.evolve(status, image_pull_failing_since=None)
    since = status.image_pull_failing_since or ctx.now
    status = attrs.evolve(status, image_pull_failing_since=since)
    left = imagepull.seconds_left(ctx.job, since=since, now=ctx.now)
    if left > 0:
        return attrs.evolve(ctx, poll_cap=left), status
    message = imagepull.failed_message(workload=view.name, job=ctx.job, found=found)
    return _fail(ctx, cause=Cause.IMAGE_PULL_FAILED, reason=JobReason.IMAGE_PULL_FAILED,
                 message=message, view=view, status=status)


def _stalled(ctx: _Ctx, view: TrainJobView, status: JobStatus) -> JobPlan | None:
    """The workload cannot run (``cre.core.job.stall``): it never made a pod within
    startupStallTimeoutSeconds (fail, with its Events), or pods of it are unschedulable (the
    timeout clock pauses; past schedulingStallGraceSeconds the Job says so, past
    schedulingStallTimeout it fails ``WorkloadUnschedulable``). ``None``: neither."""
    pods = _current_pods(ctx, view)
    if not pods and not view.jobs_built:  # (pods gone after a JobSet restart are no stall)
        deadline = stall.startup_deadline(ctx.job, view)
        if deadline is None or ctx.now < deadline:
            return None
        events = ReadEvents(kind=TRAINJOB_KIND, name=view.name)
        if not ctx.obs.feedback.has(events):
            return ctx.plan(asks=(events,))
        message = stall.startup_message(job=ctx.job, view=view, events=ctx.obs.workload_events)
        return _fail(ctx, cause=Cause.STARTUP_STALLED, reason=JobReason.WORKLOAD_STALLED,
                     message=message, view=view, status=status)
    blocked = stall.unschedulable(pods)
    if not blocked:
        return None
    since = status.scheduling_blocked_since or ctx.now
    status = attrs.evolve(status, workload_start_time=status.workload_start_time or ctx.now,
                          scheduling_blocked_since=since)
    captured = _early_capture(ctx, view, status.failure_log)
    if isinstance(captured, ReadLog):
        return ctx.plan(asks=(captured,))
    status = attrs.evolve(status, failure_log=captured)
    left = (since + timedelta(seconds=ctx.job.spec.scheduling_stall_grace_seconds)
            - ctx.now).total_seconds()
    if left > 0:  # within the grace: still "running" as far as anyone can tell
        return _in_progress(ctx, status, JobReason.WORKLOAD_RUNNING,
                            f"Workload {view.name} is running",
                            requeue_after=min(ctx.poll, left))
    message = stall.blocked_message(workload=view.name, pods=blocked,
                                    group=group_nodes(ctx.job), nodes=ctx.obs.nodes,
                                    blocked_for=ctx.now - since)
    bound = (since + stall.stall_timeout(ctx.job) - ctx.now).total_seconds()
    if bound <= 0:
        return _fail(ctx, cause=Cause.UNSCHEDULABLE, reason=JobReason.WORKLOAD_UNSCHEDULABLE,
                     message=stall.unschedulable_message(
                         job=ctx.job, workload=view.name, pods=blocked,
                         group=group_nodes(ctx.job), nodes=ctx.obs.nodes),
                     view=view, status=status)
    return _in_progress(ctx, status, JobReason.WORKLOAD_SCHEDULING_BLOCKED, message,
                        requeue_after=min(ctx.poll, bound))


def _training_stalled(ctx: _Ctx, view: TrainJobView, status: JobStatus) -> JobPlan | None:
    """The training stopped logging steps (cre.core.job.goodput): restart from a checkpoint when
    allowed, else fail ``WorkloadStalled`` with the log tail of the stalled trainer."""
    if status.workload_start_time is None:
        return None
    job = attrs.evolve(ctx.job, status=status)
    check = check_stall(job, ctx.obs.goodput_measurement, ctx.now)
    if check.stall is None:
        return None
    ctx = attrs.evolve(ctx, job=job)
    if _restart_allowed(ctx):
        return _restart(ctx, view, check.stall.message)
    return _fail(ctx, cause=Cause.TRAINING_STALLED, reason=JobReason.WORKLOAD_STALLED,
                 message=check.stall.message, view=view, status=status)


def _running(ctx: _Ctx, view: TrainJobView, status: JobStatus, *, note: str = "") -> JobPlan:
    start, status = resume_clock(status, ctx.now)  # the time spent waiting is not charged
    requeue = ctx.poll
    left = seconds_left(ctx.job, start=start, now=ctx.now)
    if left is not None:
        if left <= 0:
            pulls = imagepull.failures(_current_pods(ctx, view))
            if pulls:  # the image never arrived: that, not the test, ran out the clock
                message = imagepull.failed_message(
                    workload=view.name, job=ctx.job, found=pulls,
                    bound=f"timeoutPerJob {ctx.job.spec.timeout_per_job}")
                return _fail(ctx, cause=Cause.IMAGE_PULL_FAILED,
                             reason=JobReason.IMAGE_PULL_FAILED, message=message, view=view,
                             status=status)
            message = (f"Workload {view.name} did not finish within timeoutPerJob "
                       f"{ctx.job.spec.timeout_per_job}")
            return _fail(ctx, cause=Cause.TIMEOUT, reason=JobReason.JOB_TIMED_OUT,
                         message=message, view=view, status=status)
        requeue = min(requeue, left)
    status = attrs.evolve(status, workload_start_time=start)
    captured = _early_capture(ctx, view, status.failure_log)
    if isinstance(captured, ReadLog):
        return ctx.plan(asks=(captured,))
    status = attrs.evolve(status, failure_log=captured)
    return _in_progress(ctx, status, JobReason.WORKLOAD_RUNNING,
                        f"Workload {view.name} is running{note}", requeue_after=requeue)


def _judge(ctx: _Ctx, status: JobStatus, event: EventSpec | None) -> JobPlan:
    """A Succeeded Job: its measurement exists, its thresholds are judged (cre.core.job.bandwidth);
    ``event`` is the Succeeded transition's, when this pass wrote it."""
    job = attrs.evolve(ctx.job, status=status)
    judged = validate_succeeded(job, ctx.obs.bandwidth_measurement, ctx.now,
                                timeout=parse_duration(job.spec.measurement_timeout or "5m"),
                                cap=ctx.settings.poll_interval, nodes=ctx.obs.nodes,
                                gm=ctx.obs.goodput_measurement)
    events = tuple(e for e in (event, judged.event) if e is not None)
    return _released(ctx, judged.status, events=events, requeue_after=judged.requeue_after)


def _early_capture(
    ctx: _Ctx, view: TrainJobView, recorded: FailureLog | None
) -> FailureLog | ReadLog | None:
    """The failure log to carry while the workload runs: the record kept, a new launcher
    failure (or the read it needs first), or nothing. A workload without a launcher (a single
    loopback or DCGM pod) is captured from its worker pods the same way: JobSet deletes those
    just as fast, and there is no launcher whose output would explain more."""
    launchers = ctx.obs.launcher_pods if has_launcher(ctx.job) else ctx.obs.worker_pods
    if recorded is not None:
        pod = next((p for p in launchers if p.name == recorded.pod_name), None)
        if pod is None or not fl.is_disruption_target(pod):
            return recorded  # the first attempt is kept over a replacement's failure
    failure = fl.failed_container_of(fl.eligible(launchers, view.creation_timestamp))
    if failure is None:
        return None
    return _capture(ctx, failure)


def _all_pods(ctx: _Ctx) -> tuple[PodView, ...]:
    # Launchers first: a same-second tie must pick the launcher.
    return ctx.obs.launcher_pods + ctx.obs.worker_pods


def _failure_record(
    ctx: _Ctx, *, cause: Cause, view: TrainJobView | None, recorded: FailureLog | None
) -> FailureLog | ReadLog:
    pods = _all_pods(ctx)
    created = view.creation_timestamp if view is not None else None
    if cause == Cause.NAME_COLLISION:
        return FailureLog(reason=JobReason.WORKLOAD_NAME_COLLISION,
                          tail="the workload was never created: its name is held by another object")
    if cause == Cause.INVALID_SPEC:
        return FailureLog(reason=JobReason.INVALID_SPEC,
                          tail="the workload was never created: the Job's spec is invalid")
    if cause == Cause.CREATE_REJECTED:
        return FailureLog(reason=JobReason.WORKLOAD_CREATION_ERROR,
                          tail=fl.trim_tail("the workload was never created: the API server "
                                            f"refused it ({_rejection(ctx)})"))
    if cause == Cause.STARTUP_STALLED:
        return stall.startup_failure_log(ctx.obs.workload_events)
    if cause == Cause.IMAGE_PULL_FAILED:
        return imagepull.failure_log(imagepull.failures(_current_pods(ctx, view)))
    if cause == Cause.UNSCHEDULABLE:
        return stall.unschedulable_failure_log(stall.unschedulable(_current_pods(ctx, view)))
    if cause == Cause.PREEMPTED:
        return FailureLog(reason=JobReason.WORKLOAD_PREEMPTED, tail=fl.trim_tail(
            "no container failed: " + preempted_message(_current_pods(ctx, view))))
    if cause in (Cause.TIMEOUT, Cause.TRAINING_STALLED):
        choice = fl.timeout_pod(fl.eligible(ctx.obs.launcher_pods, created),
                                fl.eligible(ctx.obs.worker_pods, created))
        if choice is None:
            return fl.fallback(bool(pods))
        pod, container = choice
        tail = ctx.obs.tail_for(pod=pod.name, container=container, pod_uid=pod.uid)
        if tail is None:
            return _log_request(ctx, pod, container)
        record = fl.timeout_record(pod, container, tail)
        if cause == Cause.TRAINING_STALLED:
            return attrs.evolve(record, reason=JobReason.WORKLOAD_STALLED)
        return record
    if cause == Cause.WORKLOAD_FAILED and recorded is not None and recorded.pod_name:
        held = next((p for p in pods if p.name == recorded.pod_name), None)
        if held is None or not fl.is_disruption_target(held):
            return recorded  # captured early, before JobSet deleted the pod
    failure = fl.failed_container_of(fl.eligible(pods, created))
    if failure is None:
        return fl.fallback(bool(pods))
    return _capture(ctx, failure)


def _fail(
    ctx: _Ctx,
    *,
    cause: Cause,
    reason: str,
    message: str,
    view: TrainJobView | None,
    status: JobStatus | None = None,
) -> JobPlan:
    status = status or ctx.job.status
    log = _failure_record(ctx, cause=cause, view=view, recorded=status.failure_log)
    if isinstance(log, ReadLog):
        return ctx.plan(asks=(log,))
    current = _current_pods(ctx, view)
    verdict = classify(job=ctx.job, cause=cause, message=message, failure_log=log,
                       pods=current, nodes=ctx.obs.nodes)
    status = attrs.evolve(
        status,
        failure_log=log,
        failure_class=verdict.failure_class,
        failed_nodes=merge_failed_nodes(status.failed_nodes, verdict.blamed, message=message),
    )
    new, event = _with_condition(ctx, status, member=ConditionType.FAILED, reason=reason,
                                 message=message)
    # The workload is released in the same write when nothing needs its pods; a timed-out
    # workload, or one on a node the monitor flagged, still holds its GPUs and is deleted at
    # once (cre.core.job.release).
    return _released(ctx, new, events=(event,) if event is not None else ())


# --- deletion ---------------------------------------------------------------------------------


def _deletion(ctx: _Ctx) -> JobPlan:
    job = ctx.job
    if JOB_FINALIZER not in job.metadata.finalizers:
        return ctx.plan()
    view = ctx.obs.trainjob
    deletes = _delete_workload(view) if view is not None and owned_by(view, job) else ()
    active = [p for p in _all_pods(ctx) if p.phase not in _TERMINAL_POD_PHASES]
    if active:
        start = job.status.drain_start_time
        if start is None:
            status = attrs.evolve(job.status, drain_start_time=ctx.now)
            return ctx.plan(deletes=deletes, status=status,
                            requeue_after=ctx.settings.drain_poll_interval)
        left = (start + timedelta(seconds=ctx.settings.drain_timeout) - ctx.now).total_seconds()
        if left > 0:
            return ctx.plan(deletes=deletes,
                            requeue_after=min(ctx.settings.drain_poll_interval, left))
    elif not all(ctx.obs.feedback.has(ask) for ask in ctx.live_pods):
        # "No pod running" from a cache may be lag: confirm before the irreversible step.
        return ctx.plan(asks=ctx.live_pods)
    finalizers = [f for f in job.metadata.finalizers if f != JOB_FINALIZER]
    patch = Patch(body={"metadata": {"finalizers": finalizers}})
    return ctx.plan(deletes=deletes, patches=(patch,))


def is_terminal(job: Job) -> bool:
    """Whether the Job's true trio member is Succeeded or Failed."""
    current = true_member(job.status.conditions)
    return current is not None and current.status == ConditionStatus.TRUE and current.type in (
        ConditionType.SUCCEEDED, ConditionType.FAILED)
