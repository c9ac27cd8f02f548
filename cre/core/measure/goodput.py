"""The GoodputMeasurement lifecycle as a pure function: ``reconcile_goodput -> GoodputPlan``.

A goodput measurement follows one Job (``spec.jobRef``, tied to the Job's uid by the
``cre.dev/job-uid`` annotation) and folds its training log into goodput
(:mod:`cre.core.measure.goodputfold`). The rules:

* **Sampling** while the Job is ``InProgress/WorkloadRunning``, at most every
  ``sampleInterval``: the pod is worker 0 of the LogProfile's replicated job (job index and
  completion index 0; among several, as for bandwidth:
  :func:`cre.core.measure.bandwidth.choose_pod`), never another worker: every rank prints the same
  log, so a peer of the current run read from its start would look like a new run
  (:func:`worker_zero`). No read while its container waits. The read
  starts at the anchor (``status.sampledThrough`` as ``sinceTime``, never more than 30 min
  back) and :class:`cre.core.measure.bandwidth.WindowFilter` skips lines already counted, so every
  line is folded exactly once and the result does not depend on the sampling. A new pod is
  read from its start (``status.sampledPodUid``).
* **Restart detection**: the Job's ``restartCount`` above ``interruptionCount`` records an
  interruption of the current run (``WorkloadRestarted`` event); a new pod or a second
  ``applicationStart`` does the same inside the fold.
* **Terminal**: once the Job ended, one last read of the current pod from the anchor (best
  effort), then the Job Failed records an interruption at the run's last line, and the status
  is completed: ``JobSucceeded`` / ``JobFailed``, or ``NoDataCollected`` when no training
  line was ever parsed. ``completionTime`` and the terminal conditions' transition time are
  the Job's terminal transition time, never the clock, and every step of the completion is
  idempotent, so a Complete status regenerates byte-identically from its own content (the
  reference's terminal freeze, ADR-072). A Complete measurement is never written again.
* The Job gone (confirmed live) or replaced (uid differs): ``LogsUnavailable`` if this
  measurement ever saw its Job, else it keeps waiting.

The core asks, the shell answers (:mod:`cre.core`'s feedback contract): a
:class:`GoodputReadRequest` asks for a streamed log read folded through the profile's parser
(answered with a :class:`GoodputReadResult`); a :class:`cre.core.common.plan.ConfirmAbsent` asks for
a live read of the Job. The steps the bandwidth core takes alike (which Job, the container, the
anchor, the conditions) are
:mod:`cre.core.measure.logread`'s.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

import attrs

from cre.api import labels as L
from cre.api.conditions import ConditionType, JobReason, MeasurementPhase, MeasurementReason
from cre.api.goodput import GoodputMeasurement, GoodputMeasurementStatus
from cre.api.job import Job
from cre.api.meta import ConditionStatus
from cre.core.common.lifecycle import true_member
from cre.core.common.observed import PodView
from cre.core.common.plan import (
    EventSeverity,
    EventSpec,
    Plan,
    StreamLog,
    owner_plan,
)
from cre.core.measure import goodputfold as G
from cre.core.measure.bandwidth import choose_pod
from cre.core.measure.goodputlog import GoodputParser, LogEvent, to_ms
from cre.core.measure.logread import (
    FINAL_LIMIT_BYTES,
    POLL,
    SAMPLE_LIMIT_BYTES,
    JobGapKind,
    LogObservation,
    LogReadResult,
    container_state,
    job_absence,
    job_gap,
    sample_wait,
    seconds,
    set_condition,
    since_time,
)
from cre.core.measure.logread import is_complete as is_complete
from cre.core.measure.logwindow import parse_stamp

DEFAULT_INTERVAL: Final = 60.0


@attrs.frozen(kw_only=True)
class GoodputReadRequest(StreamLog):
    """A streamed log read, folded through the profile's goodput parser."""


@attrs.frozen(kw_only=True)
class GoodputReadResult(LogReadResult):
    """The shell's answer: the events of the new lines, in order, and where the read ended."""

    request: GoodputReadRequest
    events: tuple[LogEvent, ...] = ()


@attrs.frozen(kw_only=True)
class GoodputObservation(LogObservation):
    """What the goodput core reads: its Job, parser, pods and the read it asked for."""

    parser: GoodputParser | None = None
    profile_missing: bool = False
    read: GoodputReadResult | None = None


#: The outcome of one pure reconcile of a goodput measurement. The shell publishes the gauges
#: from the status after each applied pass once a sample was taken (the ratio only, once
#: ``Complete``).
GoodputPlan = Plan[GoodputMeasurementStatus]


def worker_zero(pods: tuple[PodView, ...], replicated_job: str) -> PodView | None:
    """The pod to read: worker 0 of ``replicated_job``, ``None`` while there is none.

    Not the lowest index present: when the restart deletes worker 0 first, a late reconcile
    may list only worker 1 of the crashed run, whose log (every rank prints the same one) read
    from its start would count the crashed run again as a new pod's run."""
    zero = tuple(p for p in pods if all((p.label(key) or "0") == "0"
                                        for key in (L.JOB_INDEX, L.COMPLETION_INDEX)))
    return choose_pod(zero, replicated_job)


def _interval(gm: GoodputMeasurement) -> float:
    return seconds(gm.spec.sample_interval, DEFAULT_INTERVAL)


@attrs.frozen(kw_only=True)
class _Ctx:
    gm: GoodputMeasurement
    obs: GoodputObservation
    now: datetime


def reconcile_goodput(gm: GoodputMeasurement, obs: GoodputObservation, now: datetime
                      ) -> GoodputPlan:
    """The Plan that moves ``gm`` one step along its Job."""
    ctx = _Ctx(gm=gm, obs=obs, now=now)
    if is_complete(gm):
        return owner_plan(gm)  # written once: frozen
    job = obs.job
    gap = job_gap(gm, job, job_name=gm.spec.job_ref.name, feedback=obs.feedback,
                  started=gm.status.start_time is not None)
    if gap is not None:
        if gap.kind == JobGapKind.CONFIRM:
            return owner_plan(ctx.gm, asks=(job_absence(gm.spec.job_ref.name),))
        if gap.kind == JobGapKind.WAIT:
            return owner_plan(ctx.gm, requeue_after=POLL)
        return _complete(ctx, gm.status, MeasurementReason.LOGS_UNAVAILABLE,
                         f"{gap.why}; goodput covers the logs read until then", done_at=now)
    assert job is not None  # job_gap: the Job is followed
    status, events = _restarts(ctx, job)
    member = true_member(job.status.conditions)
    if member is not None and member.type in (ConditionType.SUCCEEDED, ConditionType.FAILED):
        return _final(ctx, status, succeeded=member.type == ConditionType.SUCCEEDED,
                      why=member.reason, ended=member.last_transition_time or now)
    if member is None or member.reason != JobReason.WORKLOAD_RUNNING:
        # Not polled: the Job's next change brings the measurement back (watched).
        return owner_plan(ctx.gm, status, events=events)
    return _sample(ctx, status, events)


def _restarts(ctx: _Ctx, job: Job) -> tuple[GoodputMeasurementStatus, tuple[EventSpec, ...]]:
    """The status with the Job's checkpoint restarts recorded as interruptions."""
    status = ctx.gm.status
    count = job.status.restart_count
    if count <= status.interruption_count:
        return status, ()
    status = G.interrupt(status, at=to_ms(ctx.now), reason=JobReason.WORKLOAD_RESTARTING)
    status = attrs.evolve(status, interruption_count=max(status.interruption_count, count))
    status = G.summarise(status, log_interval=_log_interval(ctx))
    message = (f"Job {job.metadata.name} restarted its workload (restart {count}); lost work "
               f"so far {status.lost_work_time_sec or '0.000'}s")
    return status, (EventSpec(type=EventSeverity.NORMAL,
                              reason=MeasurementReason.WORKLOAD_RESTARTED, message=message),)


def _log_interval(ctx: _Ctx) -> int | None:
    return ctx.obs.parser.log_interval if ctx.obs.parser is not None else None


def _profile_problem(ctx: _Ctx, status: GoodputMeasurementStatus) -> GoodputPlan | None:
    """``Measuring=False`` naming a LogProfile that is missing or does not compile, or
    ``None``. Not polled: the shell watches LogProfiles and the Job, and either changing brings
    the measurement back."""
    if ctx.obs.parser is not None:
        return None
    reason = (MeasurementReason.LOG_PROFILE_NOT_FOUND if ctx.obs.profile_missing
              or ctx.obs.profile_error is None else MeasurementReason.LOG_PROFILE_INVALID)
    message = ctx.obs.profile_error or f"LogProfile {ctx.gm.spec.log_profile_ref} not found"
    conds = set_condition(status.conditions, type_=ConditionType.MEASURING,
                          status=ConditionStatus.FALSE, reason=reason, message=message,
                          now=ctx.now)
    new = attrs.evolve(status, conditions=conds)
    event = EventSpec(type=EventSeverity.WARNING, reason=reason, message=message)
    changed = new.conditions != ctx.gm.status.conditions
    return owner_plan(ctx.gm, new, events=(event,) if changed else ())


def _request(ctx: _Ctx, status: GoodputMeasurementStatus, pod: PodView, container: str | None,
             *, final: bool) -> GoodputReadRequest:
    same_pod = status.sampled_pod_uid == pod.uid
    anchor = status.sampled_through if same_pod else None
    return GoodputReadRequest(
        namespace=ctx.gm.metadata.namespace or "", pod=pod.name, container=container,
        pod_uid=pod.uid, final=final, since_time=since_time(anchor, ctx.now), anchor=anchor,
        skip_lines=(status.sampled_through_lines or 0) if same_pod else 0,
        limit_bytes=FINAL_LIMIT_BYTES if final else SAMPLE_LIMIT_BYTES)


def _fold_read(ctx: _Ctx, status: GoodputMeasurementStatus, read: GoodputReadResult
               ) -> GoodputMeasurementStatus:
    parser = ctx.obs.parser
    assert parser is not None
    if read.error is not None:
        return status
    seen = to_ms(parse_stamp(read.last_stamp)) if read.last_stamp and read.lines else None
    status = G.fold(status, read.events, pod_uid=read.request.pod_uid, seen_until=seen,
                    warmup_steps=parser.warmup_steps, log_interval=parser.log_interval)
    status = G.summarise(status, log_interval=parser.log_interval)
    if read.last_stamp is not None:
        status = attrs.evolve(status, sampled_through=read.last_stamp,
                              sampled_through_lines=read.lines_at_last,
                              sampled_pod_uid=read.request.pod_uid)
    return status


def _answer(ctx: _Ctx, pod: PodView, *, final: bool) -> GoodputReadResult | None:
    read = ctx.obs.read
    if read is None or read.request.final != final or read.request.pod_uid != pod.uid:
        return None
    return read


def _sample(ctx: _Ctx, status: GoodputMeasurementStatus, events: tuple[EventSpec, ...]
            ) -> GoodputPlan:
    gm, obs, now = ctx.gm, ctx.obs, ctx.now
    interval = _interval(gm)
    wait = sample_wait(status.last_sample_time, now, interval)
    if wait is not None and obs.read is None and not events:
        return owner_plan(ctx.gm, requeue_after=wait)
    problem = _profile_problem(ctx, status)
    if problem is not None:
        return problem
    parser = obs.parser
    assert parser is not None
    pod = worker_zero(obs.pods, parser.replicated_job)
    # A failed trainer is read too: the Job waits on this sample for its last checkpoint.
    if pod is None or pod.phase not in ("Running", "Succeeded", "Failed"):
        return owner_plan(ctx.gm, status, events=events, requeue_after=POLL)
    container, waiting, _ = container_state(pod, parser.container)
    if status.start_time is None:
        status = attrs.evolve(status, start_time=now, phase=MeasurementPhase.MEASURING)
    conds = set_condition(status.conditions, type_=ConditionType.MEASURING,
                          status=ConditionStatus.TRUE, reason=MeasurementReason.JOB_RUNNING,
                          message="Referenced Job is running, measurement in progress", now=now)
    status = attrs.evolve(status, conditions=conds)
    if waiting:
        return owner_plan(ctx.gm, status, events=events, requeue_after=min(interval, POLL))
    read = _answer(ctx, pod, final=False)
    if read is None:
        return owner_plan(ctx.gm, asks=(_request(ctx, status, pod, container, final=False),))
    status = attrs.evolve(_fold_read(ctx, status, read), last_sample_time=now)
    return owner_plan(ctx.gm, status, events=events, requeue_after=interval)


def _final(ctx: _Ctx, status: GoodputMeasurementStatus, *, succeeded: bool, why: str,
           ended: datetime) -> GoodputPlan:
    parser = ctx.obs.parser
    if parser is None:
        if succeeded:
            problem = _profile_problem(ctx, status)
            assert problem is not None
            return problem
        return _complete(ctx, status, MeasurementReason.JOB_FAILED,
                         f"Referenced Job failed; {ctx.obs.profile_error or 'LogProfile not '}"
                         "found", done_at=ended)
    pod = worker_zero(ctx.obs.pods, parser.replicated_job)
    if pod is not None:
        container, _, _ = container_state(pod, parser.container)
        read = _answer(ctx, pod, final=True)
        if read is None:
            return owner_plan(ctx.gm, asks=(_request(ctx, status, pod, container, final=True),))
        status = _fold_read(ctx, status, read)
    if status.tally.run == 0:
        if succeeded:
            return _complete(ctx, status, MeasurementReason.NO_DATA_COLLECTED,
                             "Job succeeded but no training step was parsed; check "
                             f"spec.logProfileRef ({ctx.gm.spec.log_profile_ref})",
                             done_at=ended)
        return _complete(ctx, status, MeasurementReason.JOB_FAILED,
                         "Referenced Job failed; no training step was parsed", done_at=ended)
    if not succeeded:
        status = G.interrupt(status, at=to_ms(ended), reason=why or JobReason.WORKLOAD_FAILED)
        status = G.summarise(status, log_interval=parser.log_interval)
        return _complete(ctx, status, MeasurementReason.JOB_FAILED,
                         f"Referenced Job failed; {_runs(status)}", done_at=ended)
    return _complete(ctx, status, MeasurementReason.JOB_SUCCEEDED,
                     f"Referenced Job succeeded; {_runs(status)}", done_at=ended)


def _runs(status: GoodputMeasurementStatus) -> str:
    # No measured figure here: a condition message is stable across runs of the same story.
    return (f"goodput measured over {status.tally.run} run(s) with "
            f"{status.interruption_count} interruption(s)")


def _complete(ctx: _Ctx, status: GoodputMeasurementStatus, reason: MeasurementReason,
              message: str, *, done_at: datetime) -> GoodputPlan:
    conds = set_condition(status.conditions, type_=ConditionType.MEASURING,
                          status=ConditionStatus.FALSE, reason=reason, message=message,
                          now=done_at)
    conds = set_condition(conds, type_=ConditionType.COMPLETE, status=ConditionStatus.TRUE,
                          reason=reason, message=message, now=done_at)
    status = attrs.evolve(status, conditions=conds, completion_time=done_at,
                          phase=MeasurementPhase.COMPLETE)
    return owner_plan(ctx.gm, status)


def stall_grace(gm: GoodputMeasurement) -> timedelta:
    """Two sample intervals: how late a step may be reported by this measurement."""
    return timedelta(seconds=2 * _interval(gm))
