"""The converter maps camelCase JSON to the models strictly and reports every problem."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from cre.api.certification import Certification
from cre.api.converter import from_dict, structure, to_dict, unstructure
from cre.api.errors import FieldError, ValidationError
from cre.api.job import Job, WorkloadSpec
from cre.api.measurement import BandwidthMeasurementStatus, BandwidthResult
from cre.api.meta import Condition, ConditionStatus, format_time, parse_time
from cre.api.workflow import StringMatch


def _job(spec: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    return {
        "apiVersion": "cre.dev/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "x", "namespace": "default"},
        "spec": spec if spec is not None else {"workload": {"trainJob": {}}},
        **top,
    }


def _errors(data: Any, cls: type = Job) -> list[str]:
    with pytest.raises(ValidationError) as info:
        structure(data, cls)
    return [str(e) for e in info.value.errors]


def test_every_structural_problem_is_reported() -> None:
    """Wrong types, missing and unknown fields all come back together, in one error."""
    spec = {
        "workload": {"trainJob": "nope"},
        "stallMultiplier": "3",
        "checkpoint": {"maxRestarts": True},
        "extra": 1,
    }
    assert sorted(_errors(_job(spec))) == sorted(
        [
            "spec.workload.trainJob: expected object, got string",
            "spec.stallMultiplier: expected integer, got string",
            "spec.checkpoint.pvcName: required field is missing",
            "spec.checkpoint.maxRestarts: expected integer, got boolean",
            "spec.extra: unknown field",
        ]
    )


def test_error_message_names_object_and_paths() -> None:
    """The exception text names the kind, namespace/name and each field path."""
    with pytest.raises(ValidationError) as info:
        structure(_job({"workload": {"trainJob": {}}, "workloadd": {}}), Job)
    assert str(info.value) == "Job default/x: spec.workloadd: unknown field"
    assert info.value.subject == "Job default/x"


def test_missing_spec_and_unnamed_object() -> None:
    """A Job without spec reports the missing field; an unnamed one says so."""
    data = _job()
    del data["spec"]
    data["metadata"] = {}
    with pytest.raises(ValidationError) as info:
        structure(data, Job)
    assert str(info.value) == "Job <unnamed>: spec: required field is missing"


def test_list_and_map_paths() -> None:
    """Errors inside lists carry the index and errors inside maps carry the key."""
    status = {
        "conditions": [
            {
                "type": "InProgress",
                "status": "True",
                "reason": "R",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            },
            {
                "type": "Failed",
                "status": "Maybe",
                "reason": "R",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            },
        ],
    }
    spec = {"workload": {"trainJob": {}}, "thresholds": {"busBandwidthGBps": 900}}
    assert sorted(_errors(_job(spec, status=status))) == [
        "spec.thresholds[busBandwidthGBps]: expected string, got number",
        "status.conditions[1].status: unsupported value: must be one of 'True', 'False', 'Unknown'",
    ]


def test_optional_enum_reports_allowed_values() -> None:
    """An invalid value of an optional enum lists the allowed values."""
    assert _errors(_job(status={"phase": "Done"})) == [
        "status.phase: unsupported value: must be one of 'Pending', 'Running', 'Succeeded', "
        "'Failed'"
    ]


def test_non_object_where_object_expected() -> None:
    """A list where an object belongs is a type error at that path."""
    assert _errors(_job({"workload": []})) == ["spec.workload: expected object, got array"]


def test_float_fields_accept_integers_only_as_numbers() -> None:
    """Strings are not coerced into numbers or numbers into strings."""
    data = _job({"workload": {"trainJob": {}}, "measurementTimeout": 5})
    assert _errors(data) == ["spec.measurementTimeout: expected string, got number"]


def test_irregular_json_names() -> None:
    """Fields whose wire name is not plain camelCase use the declared name."""
    cert = structure(
        {
            "kind": "Certification",
            "metadata": {"name": "c"},
            "spec": {
                "categories": [{"domain": "communication", "variant": "nccl-all-reduce",
                                "options": {"failurePolicy": {"infraScopedFailFast": False}}}],
            },
            "status": {"categoryStatuses": [{"domain": "communication",
                                             "variant": "nccl-all-reduce", "groups": [
                                                 {"name": "g", "phase": "Succeeded",
                                                  "busBandwidthGBps": "12.5"}]}]},
        },
        Certification,
    )
    options = cert.spec.categories[0].options
    assert options is not None and options.failure_policy is not None
    assert options.failure_policy.infra_scoped_fail_fast is False
    assert cert.status.category_statuses[0].groups[0].bus_bandwidth_gbps == "12.5"
    assert to_dict(cert)["status"]["categoryStatuses"][0]["groups"][0]["busBandwidthGBps"] \
        == "12.5"
    assert unstructure(StringMatch(in_=("aws",))) == {"in": ["aws"]}
    result = BandwidthResult(size_bytes=8, alg_bw="1.00", bus_bw="2.00", samples=1)
    assert unstructure(result) == {"sizeBytes": 8, "algBW": "1.00", "busBW": "2.00", "samples": 1}


def test_unstructure_omits_none_and_empty_collections() -> None:
    """None values and empty default collections are left out of the JSON."""
    assert unstructure(BandwidthMeasurementStatus()) == {}
    job = structure(_job(), Job)
    assert to_dict(job)["metadata"] == {"name": "x", "namespace": "default"}
    assert "checkpoint" not in to_dict(job)["spec"]
    assert to_dict(job)["status"] == {"restartCount": 0}


def test_opaque_train_job_is_copied() -> None:
    """The opaque TrainJob spec is deep-copied in both directions."""
    raw = {"runtimeRef": {"name": "rt"}}
    spec = structure({"trainJob": raw}, WorkloadSpec)
    raw["runtimeRef"]["name"] = "changed"
    assert spec.train_job == {"runtimeRef": {"name": "rt"}}
    out = unstructure(spec)
    out["trainJob"]["runtimeRef"]["name"] = "again"
    assert spec.train_job == {"runtimeRef": {"name": "rt"}}


def test_timestamps() -> None:
    """Offsets are normalised to UTC with Z; naive timestamps are rejected."""
    assert parse_time("2026-01-01T02:00:00+02:00") == datetime(2026, 1, 1, tzinfo=UTC)
    assert format_time(datetime(2026, 1, 1, 2, tzinfo=timezone(timedelta(hours=2)))) == (
        "2026-01-01T00:00:00Z"
    )
    assert format_time(datetime(2026, 1, 1, 0, 0, 0, 500, tzinfo=UTC)) == (
        "2026-01-01T00:00:00.000500Z"
    )
    with pytest.raises(ValueError, match="no timezone"):
        format_time(datetime(2026, 1, 1))
    cond = {
        "type": "Failed",
        "status": "True",
        "reason": "R",
        "lastTransitionTime": "2026-01-01T00:00:00",
    }
    assert _errors(cond, Condition) == [
        "lastTransitionTime: timestamp '2026-01-01T00:00:00' has no timezone (use 'Z' or an offset)"
    ]


def test_condition_reason_enums_become_plain_strings() -> None:
    """Reason enums stored in a condition serialise as their plain value."""
    from cre.api.conditions import ConditionType, JobReason

    cond = Condition(
        type=ConditionType.FAILED,
        status=ConditionStatus.TRUE,
        reason=JobReason.WORKLOAD_FAILED,
        last_transition_time=datetime(2026, 1, 1, tzinfo=UTC),
    )
    assert type(cond.reason) is str and cond.reason == "WorkloadFailed"
    assert unstructure(cond)["type"] == "Failed"


def test_from_dict_rejects_unknown_kind() -> None:
    """A document of another kind is refused with the list of CRE kinds."""
    with pytest.raises(ValidationError) as info:
        from_dict({"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}})
    assert info.value.errors[0] == FieldError(
        path="kind",
        message="unknown CRE kind (expected one of BandwidthMeasurement, Certification, "
        "CertificationSchedule, GoodputMeasurement, Job, LogProfile, NodeCertification, "
        "ReportExport, ReportExportPolicy, Workflow, WorkloadRun)",
        value="Pod",
    )
    assert str(info.value).startswith("Pod ns/p: kind: unknown CRE kind")


def test_to_dict_rejects_non_objects() -> None:
    """``to_dict`` only accepts models that serialise to objects."""
    with pytest.raises(TypeError):
        to_dict(("a",))


def test_null_means_unset() -> None:
    """JSON nulls (as clients send for empty metadata) are read as absent fields."""
    data = _job({"workload": {"trainJob": {"a": None}}, "checkpoint": None})
    data["metadata"].update(labels=None, creationTimestamp=None, finalizers=None)
    job = structure(data, Job)
    assert job.spec.checkpoint is None
    assert job.metadata.labels == {}
    assert job.spec.workload.train_job == {"a": None}
