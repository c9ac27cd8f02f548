"""The Job model converts to and from Kubernetes JSON and rejects bad input with paths."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import attrs
import pytest

from cre.api.conditions import ConditionType, FailureScope, JobReason, Phase
from cre.api.converter import from_dict, structure, to_dict, unstructure
from cre.api.errors import ValidationError
from cre.api.job import BandwidthMeasurementRequest, FailureClass, FailureLog, Job, JobStatus
from cre.api.measurement import BandwidthMeasurementSpec
from cre.api.meta import Condition, ConditionStatus, TypedLocalObjectReference

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "cre.dev/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "x", "namespace": "default"},
        "spec": {"workload": {"trainJob": {"runtimeRef": {"name": "rt"}}}, **spec},
    }


def test_job_defaults_and_camel_case() -> None:
    """A minimal Job gets the reference defaults and reads camelCase keys."""
    job = from_dict(_job(stallMultiplier=3))
    assert isinstance(job, Job)
    assert job.spec.stall_multiplier == 3
    assert job.spec.startup_stall_timeout_seconds == 1200
    assert job.spec.scheduling_stall_grace_seconds == 300
    assert job.spec.measurement_timeout == "5m"
    assert job.spec.workload.train_job == {"runtimeRef": {"name": "rt"}}


def test_unknown_spec_field_names_object_and_path() -> None:
    """An unknown spec key is rejected with the object and the field path."""
    with pytest.raises(ValidationError) as info:
        structure(_job(workloadd={}), Job)
    assert str(info.value) == "Job default/x: spec.workloadd: unknown field"


def test_unknown_metadata_fields_are_ignored() -> None:
    """Server-added metadata such as managedFields does not break structuring."""
    data = _job()
    data["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    data["metadata"]["creationTimestamp"] = "2026-01-02T03:04:05Z"
    job = structure(data, Job)
    assert job.metadata.creation_timestamp == T0


def test_status_round_trip() -> None:
    """A full status survives model -> JSON -> model with Z timestamps on the wire."""
    status = JobStatus(
        conditions=(
            Condition(
                type=ConditionType.FAILED,
                status=ConditionStatus.TRUE,
                reason=JobReason.WORKLOAD_FAILED,
                message="boom",
                last_transition_time=T0,
            ),
        ),
        phase=Phase.FAILED,
        failure_log=FailureLog(pod_name="p", exit_code=1, finished_at=T0, tail="x"),
        failure_class=FailureClass(scope=FailureScope.NODE, reason="XidError"),
        drain_start_time=T0,
    )
    job = structure(_job(), Job)
    job = Job(metadata=job.metadata, spec=job.spec, status=status)
    data = to_dict(job)
    assert data["status"]["drainStartTime"] == "2026-01-02T03:04:05Z"
    assert data["status"]["conditions"][0]["reason"] == "WorkloadFailed"
    assert structure(data, Job) == job
    assert unstructure(structure(data, Job)) == data


def test_a_jobs_bandwidth_request_carries_the_measurement_spec_less_its_job_ref() -> None:
    """The Job's request has exactly the BandwidthMeasurementSpec fields but jobRef, same schema."""
    request = {f.name: f for f in attrs.fields(BandwidthMeasurementRequest)}
    spec = {f.name: f for f in attrs.fields(BandwidthMeasurementSpec)}
    assert set(spec) - set(request) == {"job_ref"}
    for name, field in request.items():
        assert (field.type, field.default, field.metadata) == (
            spec[name].type, spec[name].default, spec[name].metadata), name


def test_a_bandwidth_request_becomes_the_spec_of_the_measurement_for_its_job() -> None:
    """for_job() names the measured Job and keeps every requested parameter."""
    ref = TypedLocalObjectReference(api_group="cre.dev", kind="Job", name="nccl")
    request = BandwidthMeasurementRequest(log_profile_ref="nccl", sample_interval="30s",
                                          test_type="all_reduce")
    assert request.for_job(ref) == BandwidthMeasurementSpec(
        job_ref=ref, log_profile_ref="nccl", sample_interval="30s", test_type="all_reduce")
