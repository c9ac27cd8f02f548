"""The GoodputMeasurement core (cre.core.measure.goodput): sampling, restarts, terminal freeze."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from cre.api.conditions import ConditionType, JobReason, MeasurementReason
from cre.api.converter import to_dict
from cre.api.goodput import (
    GoodputMeasurement,
    GoodputMeasurementSpec,
    GoodputMeasurementStatus,
)
from cre.api.job import Job
from cre.api.meta import ConditionStatus, ObjectMeta, TypedLocalObjectReference
from cre.core.common.lifecycle import set_exclusive
from cre.core.common.plan import ConfirmAbsent, Feedback
from cre.core.job.bandwidth import JOB_UID_ANNOTATION
from cre.core.measure.bandwidth import WindowFilter
from cre.core.measure.goodput import (
    GoodputObservation,
    GoodputPlan,
    GoodputReadRequest,
    GoodputReadResult,
    is_complete,
    reconcile_goodput,
)
from cre.core.measure.goodputlog import compile_goodput_profile
from cre.core.measure.goodputprofiles import megatron_profile
from cre.testing.strategies.job import at, make_job, pod, running_status
from tests.core.test_goodput import RUN_1, RUN_2, log, stamp, training_logs

PARSER = compile_goodput_profile(megatron_profile())
WORKER = attrs.evolve(pod("j1-workload-node-0-0-aaaaa"), labels=(
    ("cre.dev/job", "j1"), ("jobset.sigs.k8s.io/replicatedjob-name", "node")))


def _gm(status: GoodputMeasurementStatus | None = None) -> GoodputMeasurement:
    return GoodputMeasurement(
        metadata=ObjectMeta(name="j1-goodput", namespace="team-a", uid="gm-1",
                            resource_version="7", annotations={JOB_UID_ANNOTATION: "job-uid-1"}),
        spec=GoodputMeasurementSpec(job_ref=TypedLocalObjectReference(
            api_group="cre.dev", kind="Job", name="j1"), log_profile_ref="megatron-training",
            sample_interval="10s"),
        status=status or GoodputMeasurementStatus())


def _job(*, restarts: int = 0, end: str | None = None, end_at: float = 500) -> Job:
    status = attrs.evolve(running_status(), restart_count=restarts)
    if end is not None:
        member = ConditionType.SUCCEEDED if end == "ok" else ConditionType.FAILED
        conds, _ = set_exclusive(status.conditions, member=member, reason=end if end != "ok"
                                 else JobReason.WORKLOAD_COMPLETED, message="m",
                                 now=at(end_at), generation=1)
        status = attrs.evolve(status, conditions=conds)
    return attrs.evolve(make_job(), status=status)


def _read(plan: GoodputPlan) -> GoodputReadRequest | None:
    """The log read ``plan`` asks for, if any."""
    return next((a for a in plan.asks if isinstance(a, GoodputReadRequest)), None)


def _completes(plan: GoodputPlan) -> bool:
    """Whether ``plan`` writes the Complete status."""
    return plan.status is not None and is_complete(attrs.evolve(_gm(), status=plan.status))


def _answer(plan: GoodputPlan, lines: list[str], worker: object = WORKER) -> GoodputReadResult:
    """What the shell does: the window filter, then the parser, over ``lines``."""
    read = _read(plan)
    assert read is not None
    window = WindowFilter(anchor=read.anchor, skip_lines=read.skip_lines)
    kept = [line for line in lines if window.admit(line)]
    return GoodputReadResult(request=read,
                             events=tuple(e for e in map(PARSER.parse, kept) if e is not None),
                             lines=len(kept), last_stamp=window.last_stamp,
                             lines_at_last=window.lines_at_last)


def _pass(gm: GoodputMeasurement, obs: GoodputObservation, now: datetime, lines: list[str]
          ) -> tuple[GoodputMeasurement, GoodputPlan]:
    """One reconcile through its read (as converge does), the status written."""
    plan = reconcile_goodput(gm, obs, now)
    if _read(plan) is not None:
        plan = reconcile_goodput(gm, attrs.evolve(obs, read=_answer(plan, lines)), now)
    if plan.status is not None:
        gm = attrs.evolve(gm, status=plan.status)
    return gm, plan


def _obs(job: Job, *pods: object) -> GoodputObservation:
    return GoodputObservation(job=job, parser=PARSER, pods=pods or (WORKER,))  # type: ignore[arg-type]


def _t(seconds: float) -> datetime:
    # The logs of tests.core.test_goodput start at 2026-01-01T00:00:00Z.
    return datetime.fromisoformat("2026-01-01T00:00:00+00:00") + timedelta(seconds=seconds)


def test_sampling_reads_from_the_anchor_and_counts_each_line_once() -> None:
    """A running Job: the first read has no anchor; the next starts at the last stamp read
    and only new lines count, so two samples give what one whole read gives."""
    gm, job = _gm(), _job()
    gm, _ = _pass(gm, _obs(job), _t(40), RUN_1[:4])
    assert gm.status.last_sample_time == _t(40) and gm.status.current_step == 30
    assert gm.status.conditions[0].reason == MeasurementReason.JOB_RUNNING
    later = reconcile_goodput(gm, _obs(job), _t(45))
    assert _read(later) is None and later.requeue_after == 5.0  # throttled by sampleInterval
    gm, _ = _pass(gm, _obs(job), _t(90), RUN_1)
    once, _ = _pass(_gm(), _obs(job), _t(90), RUN_1)
    assert gm.status.tally == once.status.tally and gm.status.result == once.status.result


def test_no_read_while_the_container_waits_and_no_profile_is_a_condition() -> None:
    """A crash-looping trainer is not read; a missing profile sets Measuring=False and is not
    polled (the LogProfile watch brings the measurement back)."""
    from cre.testing.strategies.job import crashloop

    waiting = attrs.evolve(WORKER, container_statuses=tuple(
        attrs.evolve(c, state=crashloop()) for c in WORKER.container_statuses))
    plan = reconcile_goodput(_gm(), _obs(_job(), waiting), _t(10))
    assert _read(plan) is None and plan.status is not None
    missing = reconcile_goodput(_gm(), GoodputObservation(job=_job(), profile_missing=True),
                                _t(10))
    assert missing.status is not None and missing.requeue_after is None
    cond = missing.status.conditions[0]
    assert (cond.type, cond.status, cond.reason) == (
        ConditionType.MEASURING, ConditionStatus.FALSE, MeasurementReason.LOG_PROFILE_NOT_FOUND)
    assert missing.events[0].reason == MeasurementReason.LOG_PROFILE_NOT_FOUND


def test_job_restart_records_one_interruption() -> None:
    """restartCount above interruptionCount: one interruption (event WorkloadRestarted); the
    new pod's lines then resume the run and resolve it."""
    gm, _ = _pass(_gm(), _obs(_job()), _t(100), RUN_1)
    restarted = _job(restarts=1)
    gm, plan = _pass(gm, _obs(restarted, WORKER), _t(110), [])
    assert gm.status.interruption_count == 1
    assert [e.reason for e in plan.events] == [MeasurementReason.WORKLOAD_RESTARTED]
    new_pod = attrs.evolve(WORKER, name="j1-workload-node-0-0-bbbbb", uid="pod-uid-2")
    gm, plan = _pass(gm, _obs(restarted, new_pod), _t(200), RUN_2)
    assert gm.status.interruption_count == 1 and gm.status.pending_interruption is None
    assert (gm.status.lost_work_time_sec, gm.status.reschedule_time_sec) == ("31.000",
                                                                             "32.000")
    again, plan = _pass(gm, _obs(restarted, new_pod), _t(300), [])
    assert again.status.interruption_count == 1 and not plan.events


def _worker(name: str, uid: str, index: int, phase: str = "Running") -> object:
    return attrs.evolve(WORKER, name=name, uid=uid, phase=phase, labels=(
        *WORKER.labels, ("jobset.sigs.k8s.io/job-index", "0"),
        ("batch.kubernetes.io/job-completion-index", str(index))))


def test_a_peer_worker_of_the_same_run_is_not_a_new_run() -> None:
    """The sequence a loaded crash-restart scenario produced (3 runs, 2 interruptions for one
    restart): the trainer crashed, the restart deleted worker 0 first, and a reconcile that
    came late listed only worker 1 of the crashed run, still there. Every rank prints the same
    log, so reading it from its start replayed run 1 as a "new pod": an interruption, then a
    third run when the restarted workload's worker 0 was read. Only worker 0 is read: with it
    gone the measurement waits for the next pod 0."""
    old0 = _worker("j1-workload-node-0-0-aaaaa", "pod-a0", 0)
    old1 = _worker("j1-workload-node-0-1-aaaaa", "pod-a1", 1)
    job = _job()
    gm, _ = _pass(_gm(), _obs(job, old0, old1), _t(60), RUN_1[:8])
    assert gm.status.tally.run == 1
    failed = (attrs.evolve(old0, phase="Failed"), attrs.evolve(old1, phase="Failed"))
    gm, _ = _pass(gm, _obs(job, *failed), _t(100), RUN_1)
    # Worker 0 deleted by the restart, worker 1 of the same run still listed.
    # (read: nothing to read)
    gm, _ = _pass(gm, _obs(job, failed[1]), _t(112), RUN_1)
    restarted = _job(restarts=1)
    gm, _ = _pass(gm, _obs(restarted, failed[1]), _t(115), RUN_1)
    new0 = _worker("j1-workload-node-0-0-bbbbb", "pod-b0", 0)
    new1 = _worker("j1-workload-node-0-1-bbbbb", "pod-b1", 1)
    gm, _ = _pass(gm, _obs(restarted, new0, new1), _t(200), RUN_2)
    done = _job(restarts=1, end="ok", end_at=205)
    gm, plan = _pass(gm, _obs(done, new0, new1), _t(210), RUN_2)
    assert _completes(plan)
    assert (gm.status.interruption_count, gm.status.tally.run) == (1, 2)
    assert gm.status.conditions[0].message.endswith("2 run(s) with 1 interruption(s)")
    # Only the restart's interruption: the lost work is run 1's since its checkpoint.
    assert gm.status.lost_work_time_sec == "31.000"


def _complete_run(end: str) -> tuple[GoodputMeasurement, GoodputObservation]:
    gm, _ = _pass(_gm(), _obs(_job()), _t(60), RUN_1[:6])
    obs = _obs(_job(end=end, end_at=300))
    gm, plan = _pass(gm, obs, _t(400), RUN_1)
    assert _completes(plan) and is_complete(gm)
    return gm, obs


def test_failed_job_completes_with_the_interruption_and_the_jobs_end_time() -> None:
    """The Job failed: a last read, an interruption at the run's last line, Complete
    JobFailed; completionTime and the transition times are the Job's, not the clock's."""
    gm, _ = _complete_run(JobReason.WORKLOAD_STALLED)
    status = gm.status
    assert status.completion_time == at(300)
    assert all(c.last_transition_time == at(300) for c in status.conditions)
    assert {c.reason for c in status.conditions} == {MeasurementReason.JOB_FAILED}
    assert status.interruption_count == 1 and status.pending_interruption is not None
    assert status.pending_interruption.reason == JobReason.WORKLOAD_STALLED
    assert status.lost_work_time_sec == "31.000"


def test_complete_is_frozen_and_regenerates_byte_identically() -> None:
    """A Complete measurement is never written again; stripped of its terminal fields and
    reconciled again (its own output as input) it comes back byte for byte."""
    for end in ("ok", JobReason.WORKLOAD_FAILED):
        gm, obs = _complete_run(end)
        frozen = json.dumps(to_dict(gm), sort_keys=True)
        assert reconcile_goodput(gm, obs, _t(9999)) == GoodputPlan(resource_version="7")
        stripped = attrs.evolve(gm, status=attrs.evolve(
            gm.status, completion_time=None, phase=None,
            conditions=tuple(c for c in gm.status.conditions
                             if c.type != ConditionType.COMPLETE)))
        again, plan = _pass(stripped, obs, _t(9999), RUN_1)
        assert _completes(plan)
        assert json.dumps(to_dict(again), sort_keys=True) == frozen


def test_no_training_line_is_no_data() -> None:
    """A Job that succeeded without one parsed line completes NoDataCollected."""
    gm, plan = _pass(_gm(), _obs(_job(end="ok")), _t(10), ["2026-01-01T00:00:01Z hello"])
    assert _completes(plan)
    assert {c.reason for c in gm.status.conditions} == {MeasurementReason.NO_DATA_COLLECTED}


def test_job_gone_or_replaced() -> None:
    """Job absent: confirm live first; never seen -> wait; seen -> LogsUnavailable."""
    asked = reconcile_goodput(_gm(), GoodputObservation(), _t(0)).asks
    assert asked == (ConfirmAbsent(kind="Job", name="j1"),)
    confirmed = GoodputObservation(feedback=Feedback(answered=asked))
    assert reconcile_goodput(_gm(), confirmed, _t(0)).status is None
    seen = _gm(GoodputMeasurementStatus(start_time=_t(0)))
    plan = reconcile_goodput(seen, confirmed, _t(5))
    assert _completes(plan) and plan.status is not None
    assert plan.status.conditions[-1].reason == MeasurementReason.LOGS_UNAVAILABLE
    other = attrs.evolve(_job(), metadata=attrs.evolve(_job().metadata, uid="other"))
    replaced = reconcile_goodput(seen, GoodputObservation(job=other, parser=PARSER), _t(5))
    assert _completes(replaced)


@settings(max_examples=40, deadline=None)
@given(training_logs(), st.lists(st.integers(1, 400), max_size=4),
       st.sampled_from(["ok", JobReason.WORKLOAD_FAILED]))
def test_any_run_completes_frozen(steps: list[tuple[float, str]], samples: list[int],
                                  end: str) -> None:
    """Whatever the log and the sampling times, the Complete status reconciled again on its
    own content (terminal fields stripped) regenerates byte for byte, and its ratio is in
    [0, 1]."""
    lines = log(*steps)
    gm, job = _gm(), _job()
    for t in sorted(samples):
        gm, _ = _pass(gm, _obs(job), _t(t), [ln for ln in lines if ln < stamp(t)])
    obs = _obs(_job(end=end, end_at=600))
    gm, plan = _pass(gm, obs, _t(700), lines)
    assert _completes(plan) and is_complete(gm)
    if gm.status.result is not None:
        assert 0.0 <= float(gm.status.result) <= 1.0
    stripped = attrs.evolve(gm, status=attrs.evolve(
        gm.status, completion_time=None, phase=None,
        conditions=tuple(c for c in gm.status.conditions if c.type != ConditionType.COMPLETE)))
    again, _ = _pass(stripped, obs, _t(800), lines)
    assert json.dumps(to_dict(again), sort_keys=True) == json.dumps(to_dict(gm), sort_keys=True)
