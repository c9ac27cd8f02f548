"""The pure core fails a Job whose spec CRE's validation rejects, before creating anything."""

from __future__ import annotations

import attrs

from cre.api.conditions import ConditionType, FailureScope
from cre.api.job import Job
from cre.core.common.lifecycle import true_member
from cre.core.common.plan import EventSeverity, Observation
from cre.core.job.reconcile import reconcile_job, spec_errors
from cre.testing.strategies.job import at, make_job, trainjob


def _with_thresholds(job: Job, thresholds: dict[str, str]) -> Job:
    return attrs.evolve(job, spec=attrs.evolve(job.spec, thresholds=thresholds))


def test_valid_spec_has_no_errors() -> None:
    """The reference Job's spec passes validation."""
    assert spec_errors(make_job()) == ()


def test_invalid_spec_fails_without_creating_the_workload() -> None:
    """An unknown threshold key and a bad CEL expression fail the Job (InvalidSpec, Platform,
    no node blamed) with one Warning naming the object and each field path, and no create."""
    job = _with_thresholds(make_job(), {"noSuchKey": "value > 1",
                                        "busBandwidthGBps": "value >= ("})
    plan = reconcile_job(job, Observation(), at(1))
    assert plan.creates == ()
    assert plan.status is not None
    cond = true_member(plan.status.conditions)
    assert cond is not None and cond.type == ConditionType.FAILED
    assert cond.reason == "InvalidSpec"
    assert cond.message.startswith("Job team-a/j1 has an invalid spec: ")
    assert "spec.thresholds[noSuchKey]: unknown threshold key" in cond.message
    assert "spec.thresholds[busBandwidthGBps]: invalid CEL expression" in cond.message
    assert plan.status.failure_class is not None
    assert plan.status.failure_class.scope == FailureScope.PLATFORM
    assert plan.status.failed_nodes == ()
    assert [(e.type, e.reason) for e in plan.events] == [(EventSeverity.WARNING, "InvalidSpec")]
    again = reconcile_job(attrs.evolve(job, status=plan.status), Observation(), at(2))
    assert again.status is None and again.events == () and again.creates == ()


def test_running_workload_is_not_failed_by_validation() -> None:
    """Validation gates only the creation: a Job whose workload already exists is not failed
    for its spec (the spec was accepted when the workload was created)."""
    job = _with_thresholds(make_job(), {"noSuchKey": "value > 1"})
    plan = reconcile_job(job, Observation(trainjob=trainjob()), at(1))
    cond = true_member(plan.status.conditions) if plan.status is not None else None
    assert cond is None or cond.reason != "InvalidSpec"
