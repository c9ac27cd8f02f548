"""Threshold verdicts: CEL over ``value`` judged on final measurements only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cre.api.conditions import ConditionType, JobReason, MeasurementReason
from cre.api.measurement import (
    BandwidthMeasurement,
    BandwidthMeasurementSpec,
    BandwidthMeasurementStatus,
    BandwidthResult,
)
from cre.api.meta import Condition, ConditionStatus, ObjectMeta, TypedLocalObjectReference
from cre.core.job.thresholds import Verdict, Wait, judge, measured_values, measurement_state

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def _bm(reason: str | None, results: tuple[tuple[int, str, str], ...]) -> BandwidthMeasurement:
    conds = ()
    if reason is not None:
        conds = (Condition(type=ConditionType.COMPLETE, status=ConditionStatus.TRUE, reason=reason,
                           message="why", last_transition_time=T0),)
    return BandwidthMeasurement(
        metadata=ObjectMeta(name="j-bandwidth", namespace="ns"),
        spec=BandwidthMeasurementSpec(job_ref=TypedLocalObjectReference(
            api_group="cre.dev", kind="Job", name="j"), log_profile_ref="nccl-bandwidth"),
        status=BandwidthMeasurementStatus(conditions=conds, results=tuple(
            BandwidthResult(size_bytes=s, alg_bw=a, bus_bw=b, samples=1) for s, a, b in results)))


ROWS = ((1024, "1.00", "1.75"), (1 << 30, "200.50", "350.88"), (1 << 33, "190.00", "332.50"))


def test_values_are_max_over_sizes_of_final_results() -> None:
    """busBandwidthGBps / algBandwidthGBps are the maxima of a JobSucceeded measurement."""
    assert measured_values(_bm(MeasurementReason.JOB_SUCCEEDED, ROWS)) == {
        "busBandwidthGBps": 350.88, "algBandwidthGBps": 200.5}


@pytest.mark.parametrize("reason", [None, MeasurementReason.NO_DATA_COLLECTED,
                                    MeasurementReason.LOGS_UNAVAILABLE,
                                    MeasurementReason.JOB_FAILED])
def test_provisional_or_unmeasured_gives_no_value(reason: str | None) -> None:
    """Provisional results and unmeasured endings never give a value."""
    assert measured_values(_bm(reason, ROWS)) == {}


def _judge(thresholds: dict[str, str], measured: dict[str, float],
           now: datetime = T0) -> Verdict | Wait:
    return judge(thresholds, measured, succeeded_at=T0, now=now,
                 timeout=timedelta(minutes=5), state="BandwidthMeasurement x ended NoDataCollected")


def test_met() -> None:
    """Every expression true: ValidationFailed=False / ThresholdsMet."""
    v = _judge({"busBandwidthGBps": "value >= 300"}, {"busBandwidthGBps": 350.88})
    assert isinstance(v, Verdict) and not v.failed and v.reason == JobReason.THRESHOLDS_MET
    assert v.status == ConditionStatus.FALSE


def test_violation_message_names_value_and_expression() -> None:
    """A miss names the measured value (4 decimals) and the expression."""
    v = _judge({"busBandwidthGBps": "value >= 1000000"}, {"busBandwidthGBps": 350.88})
    assert v == Verdict(failed=True, reason=JobReason.THRESHOLD_VIOLATED,
                        message='Threshold "busBandwidthGBps" violated: measured 350.8800, '
                        "expression: value >= 1000000")


def test_range_expression() -> None:
    """A range is one expression."""
    v = _judge({"algBandwidthGBps": "value >= 100.0 && value <= 200.0"},
               {"algBandwidthGBps": 200.5})
    assert isinstance(v, Verdict) and v.reason == JobReason.THRESHOLD_VIOLATED


def test_unknown_key() -> None:
    """A key outside the registry fails at once, naming it."""
    v = _judge({"latencyUs": "value < 5"}, {})
    assert isinstance(v, Verdict) and v.reason == JobReason.UNKNOWN_THRESHOLD_KEY
    assert "'latencyUs'" in v.message


@pytest.mark.parametrize(("expr", "fragment"), [("value >=", "is invalid"),
                                                ("value + 1.0", "not a bool"),
                                                ("size > 1", "cannot be evaluated")])
def test_invalid_expression(expr: str, fragment: str) -> None:
    """A bad expression fails with the expression and the library's message."""
    v = _judge({"busBandwidthGBps": expr}, {"busBandwidthGBps": 1.0})
    assert isinstance(v, Verdict) and v.reason == JobReason.INVALID_THRESHOLD_EXPRESSION
    assert repr(expr) in v.message and fragment in v.message


def test_missing_value_waits_then_times_out() -> None:
    """No value: wait until measurementTimeout after success, then ThresholdNoData."""
    w = _judge({"busBandwidthGBps": "value >= 1"}, {}, now=T0 + timedelta(minutes=1))
    assert w == Wait(deadline=T0 + timedelta(minutes=5), missing=("busBandwidthGBps",))
    v = _judge({"busBandwidthGBps": "value >= 1"}, {}, now=T0 + timedelta(minutes=5))
    assert isinstance(v, Verdict) and v.reason == JobReason.THRESHOLD_NO_DATA
    assert "within 5m" in v.message and "NoDataCollected" in v.message


def test_violation_decides_before_a_missing_key() -> None:
    """A measured miss does not wait for another key's value."""
    v = _judge({"busBandwidthGBps": "value >= 1000", "goodputRatio": "value > 0.9"},
               {"busBandwidthGBps": 350.0})
    assert isinstance(v, Verdict) and v.reason == JobReason.THRESHOLD_VIOLATED


def test_measurement_state_phrase() -> None:
    """Messages say what the measurement ended as."""
    assert measurement_state(None) == "no BandwidthMeasurement exists"
    assert measurement_state(_bm(MeasurementReason.NO_DATA_COLLECTED, ())) == (
        "BandwidthMeasurement j-bandwidth ended NoDataCollected: why")
