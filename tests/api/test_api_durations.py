"""Durations are bounded in the schema and in validation, and the core never overflows on one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import pytest

from cre.api.durations import duration_seconds
from cre.api.job import Job, JobSpec, WorkloadSpec
from cre.api.labels import JOB_FINALIZER
from cre.api.meta import ObjectMeta
from cre.api.validate import validate
from cre.core.common.observed import OwnerRef, TrainJobView
from cre.core.common.plan import Observation
from cre.core.common.timeouts import parse_duration, timeout_of
from cre.core.job.reconcile import reconcile_job
from cre.core.job.workload import reference, workload_name


def _job(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "cre.dev/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": {"workload": {"trainJob": {}}, **spec}}


@pytest.mark.parametrize("text", ["99999999999h", "900000000000s", "721h", "720h1ns",
                                  "43201m"])
def test_durations_over_30_days_are_rejected_with_the_field_path(text: str) -> None:
    """A timeout beyond 720h is a field error naming ``spec.timeoutPerJob`` and the bound."""
    assert [str(e) for e in validate(_job(timeoutPerJob=text))] == [
        "spec.timeoutPerJob: must be at most 720h"]


def test_durations_at_the_bound_and_below_are_accepted() -> None:
    """720h, 1h30m and 90s are valid."""
    for text in ("720h", "1h30m", "90s", "2.5h"):
        assert validate(_job(timeoutPerJob=text, measurementTimeout=text)) == []


def test_overlong_duration_strings_are_rejected_by_length() -> None:
    """A duration string longer than 32 characters is refused by its length bound."""
    text = "1s" * 17
    assert "spec.timeoutPerJob: must have at most 32 characters" in [
        str(e) for e in validate(_job(timeoutPerJob=text))]


def test_every_duration_field_is_bounded() -> None:
    """The sample intervals, measurement timeout and the Workflow's timeoutPerJob are bounded."""
    errors = [str(e) for e in validate(_job(
        measurementTimeout="99999999999h",
        goodputMeasurement={"logProfileRef": "p", "sampleInterval": "900000000000s"}))]
    assert errors == ["spec.goodputMeasurement.sampleInterval: must be at most 720h",
                      "spec.measurementTimeout: must be at most 720h"]
    workflow = {"apiVersion": "cre.dev/v1alpha1", "kind": "Workflow",
                "metadata": {"name": "w", "namespace": "ns"},
                "spec": {"jobTemplate": {"spec": {"workload": {"trainJob": {}}}},
                         "orchestration": {"execution": {"timeoutPerJob": "99999999999h"}}}}
    assert [str(e) for e in validate(workflow)] == [
        "spec.orchestration.execution.timeoutPerJob: must be at most 720h"]


def test_duration_seconds_never_overflows() -> None:
    """Any run of digits parses as a float; the core clamps it to 30 days."""
    assert duration_seconds("99999999999h") == pytest.approx(99999999999 * 3600.0)
    assert parse_duration("99999999999h") == timedelta(days=30)
    assert parse_duration("1h30m") == timedelta(minutes=90)
    with pytest.raises(ValueError, match="invalid duration"):
        duration_seconds("1x")


def test_a_running_job_with_a_huge_timeout_reconciles() -> None:
    """A Job an older CRD let through with ``timeoutPerJob: 99999999999h`` reconciles (its
    timeout is clamped to 30 days) instead of raising on every pass."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    job = Job(metadata=ObjectMeta(name="j", namespace="ns", uid="u1", resource_version="5",
                                  finalizers=(JOB_FINALIZER,)),
              spec=JobSpec(workload=WorkloadSpec(train_job={}),
                           timeout_per_job="99999999999h"))
    assert timeout_of(job) == timedelta(days=30)
    view = TrainJobView(name=workload_name("j"), namespace="ns", uid="t1",
                        owner_refs=(OwnerRef(api_version="cre.dev/v1alpha1", kind="Job",
                                             name="j", uid="u1", controller=True),),
                        creation_timestamp=now)
    job = attrs.evolve(job, status=attrs.evolve(job.status, workload_ref=reference(view),
                                                workload_start_time=now))
    view = attrs.evolve(view, jobs_built=True)  # its JobSet exists: not a startup stall
    plan = reconcile_job(job, Observation(trainjob=view), now + timedelta(days=1))
    assert plan.status is not None and plan.requeue_after == 15.0
    late = reconcile_job(job, Observation(trainjob=view), now + timedelta(days=31))
    assert late.status is not None
    assert late.status.conditions[-1].reason == "JobTimedOut"
