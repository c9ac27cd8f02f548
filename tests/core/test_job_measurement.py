"""The Job's bandwidth measurement and threshold verdict (cre.core.job.bandwidth via the Job
core)."""

from __future__ import annotations

import attrs

from cre.api.conditions import ConditionType, FailureScope, JobReason, MeasurementReason
from cre.api.goodput import (
    GoodputMeasurement,
    GoodputMeasurementSpec,
    GoodputMeasurementStatus,
)
from cre.api.job import BandwidthMeasurementRequest, GoodputMeasurementRequest, Job
from cre.api.measurement import (
    BandwidthMeasurement,
    BandwidthMeasurementSpec,
    BandwidthMeasurementStatus,
    BandwidthResult,
)
from cre.api.meta import Condition, ConditionStatus, ObjectMeta, TypedLocalObjectReference
from cre.core.common.lifecycle import set_exclusive
from cre.core.common.plan import DEFAULT_SETTINGS, Observation
from cre.core.job.bandwidth import JOB_UID_ANNOTATION, bandwidth_manifest
from cre.core.job.reconcile import reconcile_job
from cre.core.job.thresholds import COMPLETION_GRACE, DEFAULT_MEASUREMENT_TIMEOUT
from cre.testing.strategies.job import at, make_job, running_status, trainjob


def _job(thresholds: dict[str, str] | None = None, *, succeeded_at: int | None = None) -> Job:
    job = make_job()
    spec = attrs.evolve(job.spec, bandwidth_measurement=BandwidthMeasurementRequest(
        log_profile_ref="nccl-bandwidth"), thresholds=thresholds or {})
    status = running_status()
    if succeeded_at is not None:
        conds, _ = set_exclusive(status.conditions, member=ConditionType.SUCCEEDED,
                                 reason=JobReason.WORKLOAD_COMPLETED, message="done",
                                 now=at(succeeded_at), generation=1)
        status = attrs.evolve(status, conditions=conds)
    return attrs.evolve(job, spec=spec, status=status)


def _bm(job: Job, reason: str | None, bus: str = "350.00", *, uid: str | None = None
        ) -> BandwidthMeasurement:
    conds = () if reason is None else (Condition(
        type=ConditionType.COMPLETE, status=ConditionStatus.TRUE, reason=reason,
        message="m", last_transition_time=at(0)),)
    return BandwidthMeasurement(
        metadata=ObjectMeta(name="j1-bandwidth", namespace="team-a", uid="bm-1",
                            annotations={JOB_UID_ANNOTATION: uid or job.metadata.uid or ""}),
        spec=BandwidthMeasurementSpec(job_ref=TypedLocalObjectReference(
            api_group="cre.dev", kind="Job", name="j1"), log_profile_ref="nccl-bandwidth"),
        status=BandwidthMeasurementStatus(conditions=conds, results=(
            BandwidthResult(size_bytes=1 << 30, alg_bw="200.00", bus_bw=bus, samples=1),)))


def _validation(plan_status: object) -> Condition | None:
    conds = getattr(plan_status, "conditions", ())
    return next((c for c in conds if c.type == ConditionType.VALIDATION_FAILED), None)


def test_new_job_creates_its_measurement_before_the_workload() -> None:
    """A fresh Job asking for a measurement creates <job>-bandwidth (owned, uid-annotated) in the
    same plan as its workload and before it."""
    job = attrs.evolve(_job(), status=make_job().status)
    plan = reconcile_job(job, Observation(), at(0))
    assert [c.kind for c in plan.creates] == ["BandwidthMeasurement", "TrainJob"]
    create = plan.creates[0]
    assert create.body == bandwidth_manifest(job)
    meta = create.body["metadata"]
    assert meta["name"] == "j1-bandwidth"
    assert meta["annotations"] == {JOB_UID_ANNOTATION: "job-uid-1"}
    assert meta["ownerReferences"][0]["uid"] == "job-uid-1"
    assert create.body["spec"]["jobRef"] == {"apiGroup": "cre.dev", "kind": "Job", "name": "j1"}
    # Its own measurement observed (a create's AlreadyExists answer): only the workload.
    again = reconcile_job(job, Observation(bandwidth_measurement=_bm(job, None)), at(0))
    assert [c.kind for c in again.creates] == ["TrainJob"]


def test_running_job_never_creates_on_a_cache_miss() -> None:
    """A running Job whose measurement is not in the cache creates nothing."""
    plan = reconcile_job(_job(), Observation(trainjob=trainjob()), at(30))
    assert not plan.creates


def test_leftover_of_an_earlier_job_is_deleted_first() -> None:
    """A measurement annotated with another Job's uid (a group retry) is deleted by uid before
    the workload is created."""
    job = attrs.evolve(_job(), status=make_job().status)
    plan = reconcile_job(job, Observation(bandwidth_measurement=_bm(job, None, uid="old")), at(0))
    assert not plan.creates
    (delete,) = plan.deletes
    assert (delete.kind, delete.name, delete.uid) == ("BandwidthMeasurement", "j1-bandwidth",
                                                      "bm-1")


def test_threshold_met_and_violated() -> None:
    """A final measurement decides: ThresholdsMet (False) or ThresholdViolated (True)."""
    job = _job({"busBandwidthGBps": "value >= 300"}, succeeded_at=10)
    plan = reconcile_job(job, Observation(bandwidth_measurement=_bm(
        job, MeasurementReason.JOB_SUCCEEDED)), at(20))
    cond = _validation(plan.status)
    assert cond is not None and cond.status == ConditionStatus.FALSE
    assert cond.reason == JobReason.THRESHOLDS_MET
    assert plan.status is not None and plan.status.bus_bandwidth_gbps == "350.00"
    job = _job({"busBandwidthGBps": "value >= 1000000"}, succeeded_at=10)
    plan = reconcile_job(job, Observation(bandwidth_measurement=_bm(
        job, MeasurementReason.JOB_SUCCEEDED)), at(20))
    cond = _validation(plan.status)
    assert cond is not None and cond.status == ConditionStatus.TRUE
    assert cond.message == ('Threshold "busBandwidthGBps" violated: measured 350.0000, '
                            "expression: value >= 1000000")
    assert [e.reason for e in plan.events] == ["ThresholdViolated"]
    # The trio stays Succeeded: the verdict is additive.
    assert plan.status is not None and plan.status.phase == job.status.phase


def test_provisional_results_wait_then_time_out() -> None:
    """A measurement still Measuring never decides; it gets COMPLETION_GRACE past
    measurementTimeout to complete (the Job looks again at most every poll interval), then
    ThresholdNoData says it has not completed and blames the measurement controller."""
    job = _job({"busBandwidthGBps": "value >= 1"}, succeeded_at=10)
    obs = Observation(bandwidth_measurement=_bm(job, None))
    plan = reconcile_job(job, obs, at(60))
    grace = COMPLETION_GRACE.total_seconds()
    assert plan.status is None and plan.requeue_after == DEFAULT_SETTINGS.poll_interval
    plan = reconcile_job(job, obs, at(10 + 300 + int(grace) - 5))
    assert plan.status is None and plan.requeue_after == 5.0
    plan = reconcile_job(job, obs, at(10 + 300 + int(grace)))
    cond = _validation(plan.status)
    assert cond is not None and cond.reason == JobReason.THRESHOLD_NO_DATA
    assert cond.status == ConditionStatus.TRUE
    assert cond.message.endswith("BandwidthMeasurement j1-bandwidth has not completed")
    assert plan.status is not None and plan.status.failure_class is not None
    assert plan.status.failure_class.scope == FailureScope.CONTROL_PLANE


def test_timeout_names_what_a_late_measurement_ended_as() -> None:
    """The race a loaded scenario lost (measurement/nodata): the Job's measurementTimeout passes
    before its measurement has seen the Job succeed. The verdict waits for the measurement, so
    the message names what it ended as whichever controller ran first."""
    job = _job({"busBandwidthGBps": "value >= 1"}, succeeded_at=10)
    measuring = Observation(bandwidth_measurement=_bm(job, None))
    assert reconcile_job(job, measuring, at(10 + 300)).status is None  # deadline, still working
    nodata = attrs.evolve(_bm(job, MeasurementReason.NO_DATA_COLLECTED), status=attrs.evolve(
        _bm(job, MeasurementReason.NO_DATA_COLLECTED).status, results=()))
    late = reconcile_job(job, Observation(bandwidth_measurement=nodata), at(10 + 301))
    on_time = reconcile_job(job, Observation(bandwidth_measurement=nodata), at(10 + 300))
    for plan in (late, on_time):
        cond = _validation(plan.status)
        assert cond is not None and cond.reason == JobReason.THRESHOLD_NO_DATA
        assert cond.message.endswith("BandwidthMeasurement j1-bandwidth ended NoDataCollected: m")
        assert plan.status is not None and plan.status.failure_class is not None
        assert plan.status.failure_class.scope == FailureScope.WORKLOAD
    # A completed measurement is not waited for past measurementTimeout.
    assert reconcile_job(job, Observation(bandwidth_measurement=nodata), at(10 + 299)
                         ).requeue_after == 1.0


def test_verdict_written_once() -> None:
    """A Job carrying ValidationFailed is not judged again."""
    job = _job({"busBandwidthGBps": "value >= 300"}, succeeded_at=10)
    plan = reconcile_job(job, Observation(bandwidth_measurement=_bm(
        job, MeasurementReason.JOB_SUCCEEDED)), at(20))
    assert plan.status is not None
    judged = attrs.evolve(job, status=plan.status)
    again = reconcile_job(judged, Observation(bandwidth_measurement=_bm(
        job, MeasurementReason.JOB_SUCCEEDED, bus="1.00")), at(30))
    assert again.status is None and not again.events


def test_success_without_measurement_is_unchanged() -> None:
    """A Succeeded Job without thresholds or measurement plans nothing (as before)."""
    job = attrs.evolve(_job(succeeded_at=10), spec=make_job().spec)
    plan = reconcile_job(job, Observation(), at(20))
    assert plan.quiet


def test_completion_grace_fits_in_the_workflow_wait() -> None:
    """The Workflow's safety bound lies past the Job tier's own deadline (measurementTimeout +
    COMPLETION_GRACE): it never cuts a verdict the Job tier is still allowed to give."""
    from cre.core.workflow.run import VALIDATION_GRACE

    assert VALIDATION_GRACE.total_seconds() > DEFAULT_SETTINGS.poll_interval * 2


def test_missing_log_profile_is_judged_at_once_as_configuration() -> None:
    """A measurement waiting for a LogProfile that does not exist gives the verdict as soon as
    the Job succeeded (no measurementTimeout wait): ThresholdNoData, scope Configuration, the
    message naming the profile."""
    job = _job({"busBandwidthGBps": "value >= 1"}, succeeded_at=10)
    bm = _bm(job, None)
    waiting = Condition(type=ConditionType.MEASURING, status=ConditionStatus.FALSE,
                        reason=MeasurementReason.LOG_PROFILE_NOT_FOUND,
                        message="LogProfile nccl-loopback not found", last_transition_time=at(5))
    bm = attrs.evolve(bm, status=attrs.evolve(bm.status, conditions=(waiting,)))
    plan = reconcile_job(job, Observation(bandwidth_measurement=bm), at(11))
    cond = _validation(plan.status)
    assert cond is not None and cond.reason == JobReason.THRESHOLD_NO_DATA
    assert "LogProfile nccl-loopback not found" in cond.message
    assert plan.status is not None and plan.status.failure_class is not None
    assert plan.status.failure_class.scope == FailureScope.CONFIGURATION


def test_bad_expression_and_unknown_key_are_configuration() -> None:
    """An unknown threshold key and an expression that does not compile are the user's
    configuration: failureClass scope Configuration, judged without waiting for a value."""
    for thresholds, reason in (({"nope": "value > 1"}, JobReason.UNKNOWN_THRESHOLD_KEY),
                               ({"busBandwidthGBps": "value >>> 1"},
                                JobReason.INVALID_THRESHOLD_EXPRESSION)):
        job = _job(thresholds, succeeded_at=10)
        plan = reconcile_job(job, Observation(bandwidth_measurement=_bm(job, None)), at(11))
        cond = _validation(plan.status)
        assert cond is not None and cond.reason == reason
        assert plan.status is not None and plan.status.failure_class is not None
        assert plan.status.failure_class.scope == FailureScope.CONFIGURATION


def test_keys_no_measurement_gives_fail_at_once_as_configuration() -> None:
    """A threshold on a key no measurement of the Job gives (a goodput key without
    spec.goodputMeasurement, or bandwidth with no spec.bandwidthMeasurement) is the user's
    configuration: ThresholdNoData at once."""
    job = _job({"goodputRatio": "value > 0.5"}, succeeded_at=10)
    plan = reconcile_job(job, Observation(bandwidth_measurement=_bm(job, None)), at(11))
    cond = _validation(plan.status)
    assert cond is not None and cond.reason == JobReason.THRESHOLD_NO_DATA
    assert cond.message == ("Threshold(s) goodputRatio cannot be evaluated: the Job has no "
                            "spec.goodputMeasurement")
    assert plan.status is not None and plan.status.failure_class is not None
    assert plan.status.failure_class.scope == FailureScope.CONFIGURATION
    bare = _job({"busBandwidthGBps": "value >= 1"}, succeeded_at=10)
    bare = attrs.evolve(bare, spec=attrs.evolve(bare.spec, bandwidth_measurement=None))
    plan = reconcile_job(bare, Observation(), at(11))
    cond = _validation(plan.status)
    assert cond is not None and "no spec.bandwidthMeasurement" in cond.message


def _goodput_job(thresholds: dict[str, str]) -> Job:
    job = _job(thresholds, succeeded_at=10)
    return attrs.evolve(job, spec=attrs.evolve(
        job.spec, bandwidth_measurement=None,
        goodput_measurement=GoodputMeasurementRequest(log_profile_ref="megatron-training")))


def _gm(job: Job, reason: str | None, result: str = "0.9000") -> GoodputMeasurement:
    conds = () if reason is None else (Condition(
        type=ConditionType.COMPLETE, status=ConditionStatus.TRUE, reason=reason,
        message="m", last_transition_time=at(0)),)
    return GoodputMeasurement(
        metadata=ObjectMeta(name="j1-goodput", namespace="team-a", uid="gm-1",
                            annotations={JOB_UID_ANNOTATION: job.metadata.uid or ""}),
        spec=GoodputMeasurementSpec(job_ref=TypedLocalObjectReference(
            api_group="cre.dev", kind="Job", name="j1"), log_profile_ref="megatron-training"),
        status=GoodputMeasurementStatus(conditions=conds, result=result,
                                        avg_tflops_per_gpu="400.00", avg_step_time_sec="1.000"))


def test_goodput_thresholds_are_judged_on_the_completed_goodput_measurement() -> None:
    """goodputRatio / avgTFLOPsPerGPU / avgStepTimeSec are judged on the Job's
    GoodputMeasurement once it completed JobSucceeded: met, violated (naming the measured
    ratio), and waited for while it is still measuring (named on the timeout)."""
    job = _goodput_job({"goodputRatio": "value >= 0.8", "avgTFLOPsPerGPU": "value > 300",
                        "avgStepTimeSec": "value < 2"})
    plan = reconcile_job(job, Observation(goodput_measurement=_gm(
        job, MeasurementReason.JOB_SUCCEEDED)), at(20))
    cond = _validation(plan.status)
    assert cond is not None and cond.reason == JobReason.THRESHOLDS_MET
    assert cond.message == ("All thresholds met: avgStepTimeSec=1.0000 (value < 2), "
                            "avgTFLOPsPerGPU=400.0000 (value > 300), goodputRatio=0.9000 "
                            "(value >= 0.8)")
    strict = _goodput_job({"goodputRatio": "value >= 0.95"})
    plan = reconcile_job(strict, Observation(goodput_measurement=_gm(
        strict, MeasurementReason.JOB_SUCCEEDED)), at(20))
    cond = _validation(plan.status)
    assert cond is not None and cond.status == ConditionStatus.TRUE
    assert cond.message == ('Threshold "goodputRatio" violated: measured 0.9000, '
                            "expression: value >= 0.95")
    assert plan.status is not None and plan.status.failure_class is None
    # Still measuring: no verdict; past the deadline the message names the measurement.
    waiting = reconcile_job(strict, Observation(goodput_measurement=_gm(strict, None)), at(20))
    assert _validation(waiting.status) is None and waiting.requeue_after
    late = at(10) + DEFAULT_MEASUREMENT_TIMEOUT + COMPLETION_GRACE
    plan = reconcile_job(strict, Observation(goodput_measurement=_gm(strict, None)), late)
    cond = _validation(plan.status)
    assert cond is not None and cond.reason == JobReason.THRESHOLD_NO_DATA
    assert cond.message.endswith("; GoodputMeasurement j1-goodput has not completed")
    # A ratio of 0 (nothing useful measured) is no value: the reference's rule.
    zero = reconcile_job(strict, Observation(goodput_measurement=_gm(
        strict, MeasurementReason.JOB_SUCCEEDED, result="0")), at(20))
    assert _validation(zero.status) is None
