"""The BandwidthMeasurement core: provisional sampling, anchors, the final read, terminal rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs

from cre.api import labels as L
from cre.api.conditions import ConditionType, JobReason, MeasurementReason
from cre.api.job import Job, JobSpec, JobStatus, WorkloadSpec
from cre.api.measurement import (
    BandwidthMeasurement,
    BandwidthMeasurementSpec,
    BandwidthResult,
)
from cre.api.meta import ObjectMeta, TypedLocalObjectReference
from cre.core.common.lifecycle import set_exclusive
from cre.core.common.observed import ContainerState, ContainerStatusView, PodView
from cre.core.common.plan import ConfirmAbsent, Feedback
from cre.core.job.bandwidth import JOB_UID_ANNOTATION
from cre.core.measure.bandwidth import (
    BandwidthObservation,
    BandwidthPlan,
    ReadRequest,
    ReadResult,
    WindowFilter,
    choose_pod,
    merge_running,
    reconcile_bandwidth,
)
from cre.core.measure.logprofile import compile_profile, shipped_profiles
from cre.core.measure.ncclparse import NcclLineParser, SizeAggregate

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
PROFILE = compile_profile(shipped_profiles()[0])  # nccl-bandwidth: the launcher


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def _job(member: ConditionType = ConditionType.IN_PROGRESS, *, when: float = 0,
         reason: str = JobReason.WORKLOAD_RUNNING, uid: str = "job-uid") -> Job:
    conds, _ = set_exclusive((), member=member, reason=reason, message="m", now=at(when),
                             generation=1)
    return Job(metadata=ObjectMeta(name="j1", namespace="ns", uid=uid),
               spec=JobSpec(workload=WorkloadSpec(train_job={"runtimeRef": {"name": "x"}})),
               status=JobStatus(conditions=conds))


def _bm(**status: object) -> BandwidthMeasurement:
    bm = BandwidthMeasurement(
        metadata=ObjectMeta(name="j1-bandwidth", namespace="ns", uid="bm-uid",
                            resource_version="7", annotations={JOB_UID_ANNOTATION: "job-uid"}),
        spec=BandwidthMeasurementSpec(job_ref=TypedLocalObjectReference(
            api_group="cre.dev", kind="Job", name="j1"), log_profile_ref="nccl-bandwidth",
            sample_interval="30s"))
    return attrs.evolve(bm, status=attrs.evolve(bm.status, **status))


def _launcher(*, waiting: bool = False, restarts: int = 0, phase: str = "Running",
              uid: str = "pod-1") -> PodView:
    state = ContainerState(kind="waiting", reason="CrashLoopBackOff") if waiting else \
        ContainerState(kind="running", started_at=T0)
    return PodView(name="j1-workload-launcher-0-0-a", namespace="ns", uid=uid, phase=phase,
                   labels=((L.REPLICATED_JOB_NAME, "launcher"), (L.LAUNCHER, "j1")),
                   container_statuses=(ContainerStatusView(name="launcher", state=state,
                                                           restart_count=restarts),))


ROW = "     {size}  1  float  sum  -1  10.0  {alg}  {bus}  0  10.0  1.00  1.00  0"


def _log(lines: list[tuple[str, int, float]]) -> list[str]:
    """``(stamp, size, busbw)`` rows as kubelet-stamped log lines."""
    return [f"{stamp} " + ROW.format(size=size, alg=f"{bus / 2:.2f}", bus=f"{bus:.2f}")
            for stamp, size, bus in lines]


def _answer(request: ReadRequest, log: list[str], *, error: str | None = None) -> ReadResult:
    """What the shell answers: the window filter and the parser over the log."""
    if error is not None:
        return ReadResult(request=request, error=error)
    window = WindowFilter(anchor=request.anchor, skip_lines=request.skip_lines)
    parser, agg = NcclLineParser(PROFILE.pattern), SizeAggregate()
    for line in log:
        if window.admit(line) and (row := parser.feed(line)) is not None:
            agg.add(row)
    return ReadResult(request=request, results=agg.results(), rows=parser.rows,
                      lines=parser.lines, last_stamp=window.last_stamp,
                      lines_at_last=window.lines_at_last, transports=tuple(parser.transports))


def _read(plan: BandwidthPlan) -> ReadRequest | None:
    """The (single) log read ``plan`` asks for, if any."""
    return next((a for a in plan.asks if isinstance(a, ReadRequest)), None)


def _pass(bm: BandwidthMeasurement, obs: BandwidthObservation, now: datetime,
          log: list[str], *, error: str | None = None) -> tuple[BandwidthMeasurement,
                                                               BandwidthPlan]:
    plan = reconcile_bandwidth(bm, obs, now)
    if _read(plan) is not None:
        obs = attrs.evolve(obs, read=_answer(_read(plan), log, error=error))
        plan = reconcile_bandwidth(bm, obs, now)
        assert _read(plan) is None
    if plan.status is not None:
        bm = attrs.evolve(bm, status=plan.status)
    return bm, plan


def _cond(bm: BandwidthMeasurement, type_: ConditionType) -> tuple[str, str] | None:
    c = next((c for c in bm.status.conditions if c.type == type_), None)
    return None if c is None else (str(c.status), c.reason)


RUNNING = BandwidthObservation(job=_job(), profile=PROFILE, pods=(_launcher(),))


def test_provisional_windows_never_double_count() -> None:
    """Overlapping reads (sinceTime is whole seconds) count each line exactly once."""
    log = _log([("2026-12-01T10:00:01.100000000Z", 1024, 10.0),
                ("2026-12-01T10:00:01.200000000Z", 2048, 20.0)])
    bm, plan = _pass(_bm(), RUNNING, at(5), log)
    assert [(r.size_bytes, r.samples) for r in bm.status.results] == [(1024, 1), (2048, 1)]
    assert bm.status.sampled_through == "2026-12-01T10:00:01.200000000Z"
    assert _cond(bm, ConditionType.MEASURING) == ("True", MeasurementReason.JOB_RUNNING)
    assert plan.status is not None and plan.requeue_after == 30.0
    # The next read starts at the anchor's second and re-sees both lines: they are skipped.
    log += _log([("2026-12-01T10:00:01.200000000Z", 4096, 40.0),
                 ("2026-12-01T10:00:40Z", 1024, 30.0)])
    request = _read(reconcile_bandwidth(bm, RUNNING, at(40)))
    assert request is not None and request.since_time == at(1)
    assert request.anchor == "2026-12-01T10:00:01.200000000Z" and request.skip_lines == 1
    bm, _ = _pass(bm, RUNNING, at(40), log)
    assert [(r.size_bytes, r.bus_bw, r.samples) for r in bm.status.results] == [
        (1024, "20.00", 2), (2048, "20.00", 1), (4096, "40.00", 1)]


def test_sample_interval_throttles() -> None:
    """No read before sampleInterval has passed since the last sample."""
    bm, _ = _pass(_bm(), RUNNING, at(5), [])
    plan = reconcile_bandwidth(bm, RUNNING, at(20))
    assert _read(plan) is None and plan.requeue_after == 15.0


def test_no_read_while_container_waits() -> None:
    """A crash-looping launcher is not read; the anchor stays."""
    obs = attrs.evolve(RUNNING, pods=(_launcher(waiting=True, restarts=2),))
    plan = reconcile_bandwidth(_bm(sampled_through="2026-12-01T10:00:01Z"), obs, at(5))
    assert _read(plan) is None
    assert plan.status is not None and plan.status.sampled_through == "2026-12-01T10:00:01Z"


def test_anchor_kept_after_restart_without_rows() -> None:
    """Nothing parsed and the container restarted: the anchor does not advance."""
    obs = attrs.evolve(RUNNING, pods=(_launcher(restarts=1),))
    log = ["2026-12-01T10:00:09Z ssh: connect to host node-1 port 2222: Connection refused"]
    bm, _ = _pass(_bm(sampled_through="2026-12-01T10:00:01Z"), obs, at(10), log)
    assert bm.status.sampled_through == "2026-12-01T10:00:01Z"
    # Without restarts the same read advances it.
    bm, _ = _pass(_bm(sampled_through="2026-12-01T10:00:01Z"), RUNNING, at(10), log)
    assert bm.status.sampled_through == "2026-12-01T10:00:09Z"


def test_final_read_replaces_provisional() -> None:
    """On success the whole log is read once; results replace the provisional ones."""
    provisional = (BandwidthResult(size_bytes=1024, alg_bw="500.00", bus_bw="999.00",
                                   samples=7),)
    obs = attrs.evolve(RUNNING, job=_job(ConditionType.SUCCEEDED, when=50,
                                         reason=JobReason.WORKLOAD_COMPLETED),
                       pods=(_launcher(phase="Succeeded"),))
    log = _log([("2026-12-01T10:00:01Z", 1024, 10.0), ("2026-12-01T10:00:02Z", 1024, 12.0)])
    bm, plan = _pass(_bm(results=provisional, start_time=T0), obs, at(60), log)
    assert [(r.size_bytes, r.bus_bw, r.samples) for r in bm.status.results] == [
        (1024, "11.00", 2)]
    assert _cond(bm, ConditionType.COMPLETE) == ("True", MeasurementReason.JOB_SUCCEEDED)
    assert bm.status.completion_time == at(50)
    assert plan.status is not None and plan.status.completion_time == at(50)


def test_no_data_collected() -> None:
    """A succeeded Job whose log has no table ends NoDataCollected."""
    obs = attrs.evolve(RUNNING, job=_job(ConditionType.SUCCEEDED,
                                         reason=JobReason.WORKLOAD_COMPLETED))
    bm, _ = _pass(_bm(), obs, at(60), ["2026-12-01T10:00:01Z # nThread 1 nGpus 8"])
    assert _cond(bm, ConditionType.COMPLETE) == ("True", MeasurementReason.NO_DATA_COLLECTED)


def test_final_read_retried_then_logs_unavailable() -> None:
    """A failing final read is retried (FinalReadPending) until the grace, then LogsUnavailable."""
    obs = attrs.evolve(RUNNING, job=_job(ConditionType.SUCCEEDED,
                                         reason=JobReason.WORKLOAD_COMPLETED))
    bm, plan = _pass(_bm(), obs, at(60), [], error="pod ns/x not found")
    assert _cond(bm, ConditionType.MEASURING) == ("False", MeasurementReason.FINAL_READ_PENDING)
    assert [e.reason for e in plan.events] == ["FinalReadPending"]
    bm, _ = _pass(bm, obs, at(60 + 299), [], error="pod ns/x not found")
    assert _cond(bm, ConditionType.COMPLETE) is None
    bm, _ = _pass(bm, obs, at(60 + 300), [], error="pod ns/x not found")
    assert _cond(bm, ConditionType.COMPLETE) == ("True", MeasurementReason.LOGS_UNAVAILABLE)


def test_job_failed_best_effort() -> None:
    """A failed Job: one read; JobFailed, results replaced only if rows were found."""
    obs = attrs.evolve(RUNNING, job=_job(ConditionType.FAILED, reason="WorkloadFailed"))
    bm, _ = _pass(_bm(), obs, at(60), _log([("2026-12-01T10:00:01Z", 8, 1.0)]))
    assert _cond(bm, ConditionType.COMPLETE) == ("True", MeasurementReason.JOB_FAILED)
    assert len(bm.status.results) == 1


def test_first_terminal_write_wins() -> None:
    """A Complete measurement is never written again."""
    obs = attrs.evolve(RUNNING, job=_job(ConditionType.FAILED, reason="WorkloadFailed"))
    bm, _ = _pass(_bm(), obs, at(60), [])
    later = attrs.evolve(obs, job=_job(ConditionType.SUCCEEDED,
                                       reason=JobReason.WORKLOAD_COMPLETED))
    plan = reconcile_bandwidth(bm, later, at(90))
    assert plan.status is None and _read(plan) is None


def test_job_gone_or_replaced() -> None:
    """A vanished Job is confirmed live; one seen before ends LogsUnavailable; a new uid too."""
    plan = reconcile_bandwidth(_bm(start_time=T0), BandwidthObservation(), at(5))
    assert plan.asks == (ConfirmAbsent(kind="Job", name="j1"),)
    gone = BandwidthObservation(feedback=Feedback(answered=plan.asks))
    waiting, plan = _pass(_bm(), gone, at(5), [])  # never saw it: waits, visibly
    assert _cond(waiting, ConditionType.MEASURING) == ("False", MeasurementReason.JOB_NOT_FOUND)
    assert _cond(waiting, ConditionType.COMPLETE) is None and plan.requeue_after == 15.0
    bm, _ = _pass(_bm(start_time=T0), gone, at(5), [])
    assert _cond(bm, ConditionType.COMPLETE) == ("True", MeasurementReason.LOGS_UNAVAILABLE)
    bm, _ = _pass(_bm(), attrs.evolve(RUNNING, job=_job(uid="other")), at(5), [])
    assert _cond(bm, ConditionType.COMPLETE) == ("True", MeasurementReason.LOGS_UNAVAILABLE)


def test_missing_profile_is_not_terminal() -> None:
    """A missing profile (LogProfileNotFound, naming it) or an invalid one (LogProfileInvalid,
    the compiler's error) is reported on Measuring at the first pass, and not polled: a change
    of the profile or of the Job (both watched) brings the measurement back."""
    missing = attrs.evolve(RUNNING, profile=None)
    bm, plan = _pass(_bm(), missing, at(5), [])
    assert _cond(bm, ConditionType.MEASURING) == ("False", "LogProfileNotFound")
    cond = next(c for c in bm.status.conditions if c.type == ConditionType.MEASURING)
    assert cond.message == "LogProfile nccl-bandwidth not found"
    assert _cond(bm, ConditionType.COMPLETE) is None and plan.requeue_after is None
    invalid = attrs.evolve(missing, profile_error="LogProfile nccl-bandwidth: bad regex")
    bm, _ = _pass(_bm(), invalid, at(5), [])
    assert _cond(bm, ConditionType.MEASURING) == ("False", "LogProfileInvalid")


def test_missing_profile_is_said_before_the_job_runs() -> None:
    """The profile problem does not wait for the workload: a Job still pending already gets
    its measurement's LogProfileNotFound (the Job tier reads it at once)."""
    pending = BandwidthObservation(job=_job(reason=JobReason.WORKLOAD_PENDING), profile=None)
    bm, _ = _pass(_bm(), pending, at(1), [])
    assert _cond(bm, ConditionType.MEASURING) == ("False", "LogProfileNotFound")


def test_job_ref_of_another_kind_fails_saying_which() -> None:
    """A jobRef that names anything but a cre.dev Job completes InvalidJobRef at once, the
    message naming the kind and group it got."""
    bm = _bm()
    wrong = attrs.evolve(bm, spec=attrs.evolve(bm.spec, job_ref=TypedLocalObjectReference(
        api_group="batch", kind="Job", name="j1")))
    done, plan = _pass(wrong, RUNNING, at(1), [])
    assert _cond(done, ConditionType.COMPLETE) == ("True", MeasurementReason.INVALID_JOB_REF)
    cond = next(c for c in done.status.conditions if c.type == ConditionType.COMPLETE)
    assert "'batch'" in cond.message and "Job 'j1'" in cond.message
    assert plan.status is not None


def test_missing_job_waits_bounded() -> None:
    """A Job that never existed is waited for JOB_WAIT_BOUND (Measuring=False / JobNotFound
    naming it), then the measurement completes JobNotFound."""
    from cre.core.measure.bandwidth import JOB_WAIT_BOUND

    gone = BandwidthObservation(feedback=Feedback(answered=(
        ConfirmAbsent(kind="Job", name="j1"),)), profile=PROFILE)
    bm, _ = _pass(_bm(), gone, at(0), [])
    bm, _ = _pass(bm, gone, at(JOB_WAIT_BOUND.total_seconds() - 1), [])
    assert _cond(bm, ConditionType.COMPLETE) is None
    assert "Job j1 does not exist" in next(
        c.message for c in bm.status.conditions if c.type == ConditionType.MEASURING)
    bm, _ = _pass(bm, gone, at(JOB_WAIT_BOUND.total_seconds()), [])
    assert _cond(bm, ConditionType.COMPLETE) == ("True", MeasurementReason.JOB_NOT_FOUND)


def test_choose_pod_order() -> None:
    """Lowest index, then Succeeded before Running, then newer restart attempt."""
    a = attrs.evolve(_launcher(phase="Running", uid="a"), name="a")
    b = attrs.evolve(_launcher(phase="Succeeded", uid="b"), name="b")
    chosen = choose_pod([a, b], "launcher")
    assert chosen is not None and chosen.name == "b"
    assert choose_pod([a, b], "node") is None


def test_merge_running_means() -> None:
    """Running means weight each window by its samples."""
    old = (BandwidthResult(size_bytes=8, alg_bw="1.00", bus_bw="2.00", samples=3),)
    agg = SizeAggregate()
    parser = NcclLineParser()
    row = parser.feed(ROW.format(size=8, alg="5.00", bus="6.00"))
    assert row is not None
    agg.add(row)
    (merged,) = merge_running(old, agg.results())
    assert (merged.alg_bw, merged.bus_bw, merged.samples) == ("2.00", "3.00", 4)


def test_window_filter_anchor_without_fraction() -> None:
    """Stamps with and without fractions order by value (as strings "01Z" > "01.5Z")."""
    window = WindowFilter(anchor="2026-12-01T10:00:01.5Z", skip_lines=1)
    assert not window.admit("2026-12-01T10:00:01Z a")  # before the anchor
    assert not window.admit("2026-12-01T10:00:01.5Z b")  # the line counted last time
    assert window.admit("2026-12-01T10:00:01.5Z c")  # same stamp, not counted yet
    assert window.admit("2026-12-01T10:00:02Z d")
    assert (window.last_stamp, window.lines_at_last) == ("2026-12-01T10:00:02Z", 1)
