"""The BandwidthMeasurement lifecycle as a pure function: ``reconcile_bandwidth -> Plan``.

A measurement follows one Job (``spec.jobRef``, tied to the Job's uid by the ``cre.dev/job-uid``
annotation) and turns the nccl-tests table in one pod's log into per-size bandwidth. The rules,
including the sharp edges the reference hit (provisional samples deciding verdicts, windows
counted twice, logs read from a crash-looping container):

* **Provisional sampling** while the Job is InProgress, at most every ``sampleInterval``: the
  pod is the LogProfile's replicated job's (lowest completion index, then Succeeded < Running <
  Failed, newer restart attempt, newer creation, name); no read while its container waits (a
  CrashLoopBackOff launcher prints SSH errors, not NCCL output). The read starts at the anchor
  (``status.sampledThrough``, the kubelet timestamp of the last line counted, as ``sinceTime``
  at second resolution) and :class:`WindowFilter` skips every line at or before the anchor
  that was already counted, so no line is ever counted twice. The anchor advances only when
  rows were found or the container never restarted (after a restart the real output comes
  after recovery). Rows are merged into ``status.results`` as running means; provisional
  results are never used for a verdict (cre.core.job.thresholds only trusts ``JobSucceeded``).
* **Final read** once the Job ended: the whole log of the chosen pod, streamed, every row
  counted exactly once; the results *replace* the provisional ones. Job Succeeded: rows ->
  ``JobSucceeded``, none -> ``NoDataCollected``; a read that fails is retried
  (``Measuring=False / FinalReadPending``, whose transition time is when the wait started) for
  max(2 min, the Job's measurementTimeout), then ``LogsUnavailable``. Job Failed: one
  best-effort read, results replaced only if rows were found, ``JobFailed``.
* The Job gone (confirmed live) or replaced (uid differs): ``LogsUnavailable`` if this
  measurement ever saw its Job, else it waits visibly (``Measuring=False / JobNotFound``
  naming the Job) for at most :data:`JOB_WAIT_BOUND`, then completes ``JobNotFound``.
* **Configuration is said at once**: a ``spec.jobRef`` naming anything but a ``cre.dev`` Job
  completes ``InvalidJobRef`` (naming the kind it got) on the first pass; a LogProfile that is
  missing (``LogProfileNotFound``) or does not compile (``LogProfileInvalid``) is written on
  ``Measuring=False`` on the first pass too, whatever the Job is doing (the Job tier reads it
  and fails its thresholds as the user's configuration, cre.core.job.thresholds).
* **First terminal write wins**: a measurement with ``Complete=True`` is never written again.
  ``completionTime`` is the Job's terminal transition time.

The core asks, the shell answers (cre.core's feedback contract): a :class:`ReadRequest` asks
for a streamed log read (the shell runs :class:`WindowFilter` and the parser over the stream and
answers with a :class:`ReadResult`); a :class:`cre.core.common.plan.ConfirmAbsent` asks for a live
read of the Job. The steps the goodput core takes alike (which Job, the container, the anchor, the
conditions) are
:mod:`cre.core.measure.logread`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Final

import attrs

from cre.api import labels as L
from cre.api.conditions import ConditionType, JobReason, MeasurementPhase, MeasurementReason
from cre.api.job import Job
from cre.api.measurement import (
    BandwidthMeasurement,
    BandwidthMeasurementStatus,
    BandwidthResult,
    NodeBandwidth,
)
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
from cre.core.common.wording import count
from cre.core.measure.logprofile import CompiledProfile
from cre.core.measure.logread import FINAL_LIMIT_BYTES as FINAL_LIMIT_BYTES
from cre.core.measure.logread import MAX_LOOKBACK as MAX_LOOKBACK
from cre.core.measure.logread import POLL as POLL
from cre.core.measure.logread import SAMPLE_LIMIT_BYTES as SAMPLE_LIMIT_BYTES
from cre.core.measure.logread import (
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
from cre.core.measure.logwindow import WindowFilter as WindowFilter
from cre.core.measure.logwindow import stamp_key as stamp_key
from cre.core.measure.ncclparse import SizeResult

#: How long a measurement whose Job never existed waits for it before it completes.
JOB_WAIT_BOUND: Final = timedelta(minutes=10)
#: Minimum time the final read is retried after the Job ended.
FINAL_READ_GRACE: Final = timedelta(minutes=2)
FINAL_READ_RETRY: Final = 10.0
_PHASE_RANK: Final = {"Succeeded": 0, "Running": 1, "Failed": 2}


@attrs.frozen(kw_only=True)
class ReadRequest(StreamLog):
    """A streamed log read the core wants, with the nccl-tests row regex to parse it by;
    ``per_node``: one of a Multi profile's final reads (answered in ``node_reads``)."""

    regex: str
    per_node: bool = False


@attrs.frozen(kw_only=True)
class ReadResult(LogReadResult):
    """The shell's answer to a :class:`ReadRequest`: the rows found, per size."""

    request: ReadRequest
    results: tuple[SizeResult, ...] = ()
    transports: tuple[str, ...] = ()
    rows: int = 0


@attrs.frozen(kw_only=True)
class BandwidthObservation(LogObservation):
    """What the measurement core reads: its Job, profile, pods and the read it asked for."""

    profile: CompiledProfile | None = None
    read: ReadResult | None = None
    # The answers to a Multi profile's final reads (one :class:`ReadRequest` per pod).
    node_reads: tuple[ReadResult, ...] = ()


#: The outcome of one pure reconcile of a BandwidthMeasurement. The shell publishes the
#: provisional results as gauges after each applied pass and removes them once ``Complete``.
BandwidthPlan = Plan[BandwidthMeasurementStatus]


# --- helpers ----------------------------------------------------------------------------------


def choose_pod(pods: Sequence[PodView], replicated_job: str) -> PodView | None:
    """The pod to read among ``pods`` of the replicated job ``replicated_job``."""
    mine = [p for p in pods if p.label(L.REPLICATED_JOB_NAME) == replicated_job
            and p.deletion_timestamp is None]

    def key(p: PodView) -> tuple[int, int, int, float, str]:
        index = p.label(L.COMPLETION_INDEX) or p.label(L.JOB_INDEX) or "0"
        attempt = p.label(L.RESTART_ATTEMPT) or "0"
        created = p.creation_timestamp.timestamp() if p.creation_timestamp else 0.0
        return (int(index) if index.isdigit() else 0, _PHASE_RANK.get(p.phase or "", 3),
                -(int(attempt) if attempt.isdigit() else 0), -created, p.name)

    return min(mine, key=key, default=None)


def pods_per_node(pods: Sequence[PodView], replicated_job: str) -> tuple[PodView, ...]:
    """The pod to read for each completion index of ``replicated_job`` (a Multi profile: one
    pod per node), in index order."""
    by_index: dict[str, list[PodView]] = {}
    for p in pods:
        if p.label(L.REPLICATED_JOB_NAME) == replicated_job and p.deletion_timestamp is None:
            index = p.label(L.COMPLETION_INDEX) or p.label(L.JOB_INDEX) or "0"
            by_index.setdefault(index, []).append(p)
    chosen = (choose_pod(group, replicated_job) for _, group in sorted(
        by_index.items(), key=lambda kv: (int(kv[0]) if kv[0].isdigit() else 0, kv[0])))
    return tuple(p for p in chosen if p is not None)


def _waiting_reason(pod: PodView, name: str | None) -> str:
    status = next((c for c in pod.container_statuses if c.name == name), None)
    state = status.state if status is not None else None
    return (state.reason if state is not None else None) or "waiting"


def _results(sizes: Sequence[SizeResult]) -> tuple[BandwidthResult, ...]:
    return tuple(BandwidthResult(size_bytes=s.size_bytes, alg_bw=s.alg_bw, bus_bw=s.bus_bw,
                                 samples=s.samples) for s in sizes)


def merge_running(old: Sequence[BandwidthResult], new: Sequence[SizeResult]
                  ) -> tuple[BandwidthResult, ...]:
    """Provisional results: running means per size over the samples of every window."""
    acc: dict[int, list[float]] = {r.size_bytes: [float(r.alg_bw) * r.samples,
                                                  float(r.bus_bw) * r.samples, r.samples]
                                   for r in old}
    for s in new:
        cur = acc.setdefault(s.size_bytes, [0.0, 0.0, 0])
        cur[0] += float(s.alg_bw) * s.samples
        cur[1] += float(s.bus_bw) * s.samples
        cur[2] += s.samples
    return tuple(BandwidthResult(size_bytes=size, alg_bw=f"{a / n:.2f}", bus_bw=f"{b / n:.2f}",
                                 samples=int(n))
                 for size, (a, b, n) in sorted(acc.items()) if n)


# --- the core ---------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class _Ctx:
    bm: BandwidthMeasurement
    obs: BandwidthObservation
    now: datetime


def reconcile_bandwidth(bm: BandwidthMeasurement, obs: BandwidthObservation,
                          now: datetime) -> BandwidthPlan:
    """The Plan that moves ``bm`` one step along its Job."""
    ctx = _Ctx(bm=bm, obs=obs, now=now)
    if is_complete(bm):
        return owner_plan(bm)  # first terminal write won: frozen
    ref = bm.spec.job_ref
    if ref.kind != "Job" or ref.api_group not in (None, "", L.GROUP):
        return _complete(ctx, MeasurementReason.INVALID_JOB_REF,
                         f"spec.jobRef names {ref.kind or '(no kind)'} {ref.name!r} of API "
                         f"group {ref.api_group or '(core)'!r}; a BandwidthMeasurement "
                         f"measures a Job of API group {L.GROUP!r}", results=None, done_at=now)
    job = obs.job
    gap = job_gap(bm, job, job_name=ref.name, feedback=obs.feedback,
                  started=bm.status.start_time is not None)
    if gap is not None:
        if gap.kind == JobGapKind.CONFIRM:
            return owner_plan(ctx.bm, asks=(job_absence(ref.name),))
        if gap.kind == JobGapKind.WAIT:
            return _await_job(ctx)  # never saw its Job: wait visibly, bounded
        return _complete(ctx, MeasurementReason.LOGS_UNAVAILABLE,
                         f"{gap.why}; results are provisional and are not used for threshold "
                         "evaluation", results=None, done_at=now)
    assert job is not None  # job_gap: the Job is followed
    member = true_member(job.status.conditions)
    if member is None or member.type != ConditionType.FAILED:
        problem = _profile_problem(ctx)
        if problem is not None:
            return problem
    if member is None:  # the Job's next change brings the measurement back (watched)
        return owner_plan(ctx.bm)
    if member.type == ConditionType.SUCCEEDED:
        return _final(ctx, job, succeeded=True, ended=member.last_transition_time or now)
    if member.type == ConditionType.FAILED:
        return _final(ctx, job, succeeded=False, ended=member.last_transition_time or now)
    if member.reason != JobReason.WORKLOAD_RUNNING:
        return owner_plan(ctx.bm)  # as above
    return _sample(ctx)


def _await_job(ctx: _Ctx) -> BandwidthPlan:
    """A Job that does not exist (confirmed live) and was never seen: ``Measuring=False /
    JobNotFound`` naming it, for at most :data:`JOB_WAIT_BOUND`, then ``Complete``."""
    ref = ctx.bm.spec.job_ref
    message = f"Job {ref.name} does not exist; waiting for it (at most {JOB_WAIT_BOUND})"
    status = ctx.bm.status
    conds = set_condition(status.conditions, type_=ConditionType.MEASURING,
                          status=ConditionStatus.FALSE, reason=MeasurementReason.JOB_NOT_FOUND,
                          message=message, now=ctx.now)
    since = next(c for c in conds if c.type == ConditionType.MEASURING).last_transition_time
    if since is not None and ctx.now - since >= JOB_WAIT_BOUND:
        return _complete(ctx, MeasurementReason.JOB_NOT_FOUND,
                         f"Job {ref.name} did not appear within {JOB_WAIT_BOUND}; nothing was "
                         "measured", results=None, done_at=ctx.now)
    new = attrs.evolve(status, conditions=conds)
    event = EventSpec(type=EventSeverity.WARNING, reason=MeasurementReason.JOB_NOT_FOUND,
                      message=message)
    return owner_plan(ctx.bm, new, events=(event,) if new != status else (), requeue_after=POLL)


def _profile_problem(ctx: _Ctx) -> BandwidthPlan | None:
    """``Measuring=False`` naming a LogProfile that is missing or does not compile, or
    ``None``. Not polled: the shell watches LogProfiles and the Job, and either changing brings
    the measurement back."""
    if ctx.obs.profile is not None:
        return None
    error = ctx.obs.profile_error
    reason = (MeasurementReason.LOG_PROFILE_INVALID if error
              else MeasurementReason.LOG_PROFILE_NOT_FOUND)
    message = error or f"LogProfile {ctx.bm.spec.log_profile_ref} not found"
    status = ctx.bm.status
    conds = set_condition(status.conditions, type_=ConditionType.MEASURING,
                          status=ConditionStatus.FALSE, reason=reason, message=message,
                          now=ctx.now)
    new = attrs.evolve(status, conditions=conds)
    event = EventSpec(type=EventSeverity.WARNING, reason=reason, message=message)
    return owner_plan(ctx.bm, new, events=(event,) if new != status else ())


def _sample(ctx: _Ctx) -> BandwidthPlan:
    bm, obs, now = ctx.bm, ctx.obs, ctx.now
    interval = seconds(bm.spec.sample_interval, 60.0)
    wait = sample_wait(bm.status.last_sample_time, now, interval)
    if wait is not None and obs.read is None:
        return owner_plan(ctx.bm, requeue_after=wait)
    problem = _profile_problem(ctx)
    if problem is not None:
        return problem
    profile = obs.profile
    assert profile is not None
    pod = choose_pod(obs.pods, profile.replicated_job)
    if pod is None or pod.phase not in ("Running", "Succeeded"):
        # Pod events do not wake a measurement: poll, never slower than its sampleInterval.
        return owner_plan(ctx.bm, requeue_after=min(interval, POLL))
    container, waiting, restarts = container_state(pod, profile.container)
    status = bm.status
    if status.start_time is None:
        status = attrs.evolve(status, start_time=now, phase=MeasurementPhase.MEASURING)
    message = "Referenced Job is running, measurement in progress"
    if waiting:
        # Said on the condition, so a person sees why the numbers stand still.
        message = (f"Referenced Job is running; sample skipped: container {container} of pod "
                   f"{pod.name} is waiting ({_waiting_reason(pod, container)})")
    conds = set_condition(status.conditions, type_=ConditionType.MEASURING,
                          status=ConditionStatus.TRUE, reason=MeasurementReason.JOB_RUNNING,
                          message=message, now=now)
    status = attrs.evolve(status, conditions=conds)
    if waiting:
        # A crash-looping container: its log is not NCCL output. No read, anchor kept.
        return owner_plan(ctx.bm, status, requeue_after=min(interval, POLL))
    read = obs.read
    if read is None or read.request.final or read.request.pod_uid != pod.uid:
        anchor = status.sampled_through
        request = ReadRequest(namespace=bm.metadata.namespace or "", pod=pod.name,
                              container=container, pod_uid=pod.uid, final=False,
                              regex=profile.pattern.pattern, since_time=since_time(anchor, now),
                              anchor=anchor, skip_lines=status.sampled_through_lines or 0)
        return owner_plan(ctx.bm, asks=(request,))
    status = attrs.evolve(status, last_sample_time=now)
    if read.error is None:
        advance = read.rows > 0 or restarts == 0
        if read.rows:
            status = attrs.evolve(status, results=merge_running(status.results, read.results),
                                  transports=tuple(sorted({*status.transports,
                                                           *read.transports})))
        if advance and read.last_stamp is not None:
            status = attrs.evolve(status, sampled_through=read.last_stamp,
                                  sampled_through_lines=read.lines_at_last)
    return owner_plan(ctx.bm, status, requeue_after=interval)


def _final(ctx: _Ctx, job: Job, *, succeeded: bool, ended: datetime) -> BandwidthPlan:
    bm, obs = ctx.bm, ctx.obs
    problem = _profile_problem(ctx)
    if problem is not None:
        if succeeded:
            return problem
        return _complete(ctx, MeasurementReason.JOB_FAILED, "Referenced Job failed; "
                         f"{obs.profile_error or 'LogProfile not found'}", results=None,
                         done_at=ended)
    profile = obs.profile
    assert profile is not None
    if profile.multi:
        return _final_multi(ctx, job, profile, succeeded=succeeded, ended=ended)
    pod = choose_pod(obs.pods, profile.replicated_job)
    read = obs.read
    if pod is not None and (read is None or not read.request.final
                            or read.request.pod_uid != pod.uid):
        container, _, _ = container_state(pod, profile.container)
        return owner_plan(ctx.bm, asks=(ReadRequest(
            namespace=bm.metadata.namespace or "", pod=pod.name, container=container,
            pod_uid=pod.uid, final=True, regex=profile.pattern.pattern,
            limit_bytes=FINAL_LIMIT_BYTES),))
    error = (read.error if read is not None else None) or (
        None if pod is not None else f"no {profile.replicated_job} pod of the Job exists")
    if not succeeded:
        rows = read is not None and read.error is None and read.rows > 0
        return _complete(ctx, MeasurementReason.JOB_FAILED,
                         "Referenced Job failed" + ("" if rows else "; no bandwidth data"),
                         results=read.results if rows and read is not None else None,
                         transports=read.transports if rows and read is not None else (),
                         done_at=ended)
    if error is None and read is not None:
        if read.rows == 0:
            return _complete(ctx, MeasurementReason.NO_DATA_COLLECTED,
                             "Job succeeded but no bandwidth data was parsed; check "
                             f"spec.logProfileRef ({bm.spec.log_profile_ref})", results=(),
                             done_at=ended)
        return _complete(ctx, MeasurementReason.JOB_SUCCEEDED,
                         f"Final read ({bm.spec.log_profile_ref}): {count(read.rows, 'row')}, "
                         f"{count(len(read.results), 'message size')}", results=read.results,
                         transports=read.transports, done_at=ended)
    assert error is not None
    return _pending(ctx, job, error, ended=ended)


def _pending(ctx: _Ctx, job: Job, error: str, *, ended: datetime) -> BandwidthPlan:
    """A final read that failed: retried for max(2 min, measurementTimeout), then
    ``LogsUnavailable``."""
    bm = ctx.bm
    timeout = max(FINAL_READ_GRACE, timedelta(seconds=seconds(
        job.spec.measurement_timeout or "5m", 300.0)))
    status = bm.status
    conds = set_condition(status.conditions, type_=ConditionType.MEASURING,
                          status=ConditionStatus.FALSE,
                          reason=MeasurementReason.FINAL_READ_PENDING,
                          message=f"Final log read failed, retrying: {error}", now=ctx.now)
    pending = next(c for c in conds if c.type == ConditionType.MEASURING)
    if ctx.now - pending.last_transition_time >= timeout:
        had = bool(bm.status.results)
        return _complete(ctx, MeasurementReason.LOGS_UNAVAILABLE,
                         f"Final log read failed for {timeout}: {error}; " + (
                             "results are provisional and are not used for threshold "
                             "evaluation" if had else "no bandwidth data was parsed"),
                         results=None, done_at=ended)
    new = attrs.evolve(status, conditions=conds)
    event = EventSpec(type=EventSeverity.WARNING, reason=MeasurementReason.FINAL_READ_PENDING,
                      message=f"Final log read failed, retrying: {error}")
    return owner_plan(ctx.bm, new, events=(event,) if new != status else (),
                      requeue_after=FINAL_READ_RETRY)


def _complete(ctx: _Ctx, reason: MeasurementReason, message: str, *,
              results: Sequence[SizeResult] | Sequence[BandwidthResult] | None,
              done_at: datetime, transports: Sequence[str] = (),
              node_results: Sequence[NodeBandwidth] | None = None) -> BandwidthPlan:
    status = ctx.bm.status
    if results is not None:
        status = attrs.evolve(status, results=tuple(
            r if isinstance(r, BandwidthResult) else _results((r,))[0] for r in results))
    if node_results is not None:
        status = attrs.evolve(status, node_results=tuple(node_results))
    status = attrs.evolve(status, transports=tuple(sorted({*status.transports, *transports})))
    conds = set_condition(status.conditions, type_=ConditionType.MEASURING,
                          status=ConditionStatus.FALSE, reason=reason, message=message,
                          now=ctx.now)
    conds = set_condition(conds, type_=ConditionType.COMPLETE, status=ConditionStatus.TRUE,
                          reason=reason, message=message, now=ctx.now)
    status = attrs.evolve(status, conditions=conds, completion_time=done_at,
                          phase=MeasurementPhase.COMPLETE)
    return owner_plan(ctx.bm, status)


def _node_result(read: ReadResult, pod: PodView) -> NodeBandwidth:
    node = pod.node_name or pod.name
    if read.error is not None or not read.results:
        why = read.error or "no bandwidth rows in its log"
        return NodeBandwidth(node_name=node, pod_name=pod.name, rows=read.rows,
                             message=f"pod {pod.name}: {why}")
    return NodeBandwidth(
        node_name=node, pod_name=pod.name, rows=read.rows,
        alg_bw=f"{max(float(r.alg_bw) for r in read.results):.2f}",
        bus_bw=f"{max(float(r.bus_bw) for r in read.results):.2f}")


def _final_multi(ctx: _Ctx, job: Job, profile: CompiledProfile, *, succeeded: bool,
                 ended: datetime) -> BandwidthPlan:
    """The final read of a Multi profile: every node's pod, one result per node; ``results``
    holds the per-size means over the nodes (for people and the Job's column), thresholds are
    judged on ``nodeResults`` (cre.core.job.thresholds)."""
    bm, obs = ctx.bm, ctx.obs
    pods = pods_per_node(obs.pods, profile.replicated_job)
    done = {r.request.pod_uid: r for r in obs.node_reads if r.request.final}
    missing = [p for p in pods if p.uid not in done]
    if missing:
        return owner_plan(ctx.bm, asks=tuple(ReadRequest(
            namespace=bm.metadata.namespace or "", pod=p.name,
            container=container_state(p, profile.container)[0], pod_uid=p.uid, final=True,
            regex=profile.pattern.pattern, limit_bytes=FINAL_LIMIT_BYTES, per_node=True)
            for p in missing))
    reads = [(p, done[p.uid]) for p in pods]
    errors = [f"pod {p.name}: {r.error}" for p, r in reads if r.error is not None]
    rows = sum(r.rows for _, r in reads if r.error is None)
    nodes = sorted((_node_result(r, p) for p, r in reads), key=lambda n: n.node_name)
    results = merge_running((), [s for _, r in reads if r.error is None for s in r.results])
    transports = sorted({t for _, r in reads for t in r.transports})
    if not succeeded:
        return _complete(ctx, MeasurementReason.JOB_FAILED,
                         "Referenced Job failed" + ("" if rows else "; no bandwidth data"),
                         results=results if rows else None, transports=transports if rows else (),
                         node_results=nodes if rows else None, done_at=ended)
    if not pods or errors:
        error = "; ".join(errors) or f"no {profile.replicated_job} pod of the Job exists"
        return _pending(ctx, job, error, ended=ended)
    if rows == 0:
        return _complete(ctx, MeasurementReason.NO_DATA_COLLECTED,
                         "Job succeeded but no bandwidth data was parsed; check "
                         f"spec.logProfileRef ({bm.spec.log_profile_ref})", results=(),
                         done_at=ended, node_results=nodes)
    return _complete(ctx, MeasurementReason.JOB_SUCCEEDED,
                     f"Final read ({bm.spec.log_profile_ref}): {count(rows, 'row')}, "
                     f"{count(len(results), 'message size')}, {count(len(nodes), 'node')}",
                     results=results,
                     transports=transports, node_results=nodes, done_at=ended)
