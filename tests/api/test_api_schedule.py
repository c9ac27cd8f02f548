"""The CertificationSchedule API: validation names the field of every mistake (cron, interval,
time zone, the name's length), and the CRD's admission refuses what validation refuses."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cre.api.crdgen import build_crd
from cre.api.kinds import BY_KIND
from cre.api.schedule import CertificationSchedule
from cre.api.validate import validate, validated
from cre.testing.apiserver.validation import CRDSchema

BASE: dict[str, Any] = {
    "apiVersion": "cre.dev/v1alpha1", "kind": "CertificationSchedule",
    "metadata": {"name": "nightly", "namespace": "certs"},
    "spec": {"schedule": "0 2 * * 6", "timeZone": "Europe/Paris", "maxNodesPerRun": 16,
             "certificationTemplate": {"metadata": {"labels": {"team": "infra"}}, "spec": {
                 "categories": [{"domain": "diagnostics", "variant": "dcgm-level1"}]}}},
}


def edited(**spec: Any) -> dict[str, Any]:
    body = copy.deepcopy(BASE)
    for key, value in spec.items():
        if value is None:
            body["spec"].pop(key, None)
        else:
            body["spec"][key] = value
    return body


def messages(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e.path, e.message) for e in validate(body)]


def test_a_weekly_schedule_with_its_defaults_is_valid() -> None:
    """The example is valid; Forbid and the history limits 3 / 1 are the defaults."""
    obj = validated(BASE)
    assert isinstance(obj, CertificationSchedule)
    assert obj.spec.concurrency_policy == "Forbid"
    assert (obj.spec.successful_runs_history_limit, obj.spec.failed_runs_history_limit) == (3, 1)


@pytest.mark.parametrize(("spec", "path", "message"), [
    ({"schedule": "61 * * * *"}, "spec.schedule", "invalid cron expression"),
    ({"schedule": "* * * *"}, "spec.schedule", "must match"),
    ({"schedule": "0 0 * * * *"}, "spec.schedule", "must match"),
    ({"schedule": None, "timeZone": None}, "spec", "set exactly one of schedule, interval"),
    ({"interval": "1h"}, "spec", "set exactly one of schedule, interval"),
    ({"schedule": None, "timeZone": None, "interval": "30s"}, "spec.interval",
     "must be at least 1m"),
    ({"schedule": None, "timeZone": None, "interval": "800h"}, "spec.interval",
     "must be at most 720h"),
    ({"timeZone": "Mars/Olympus"}, "spec.timeZone", "unknown time zone"),
    ({"schedule": None, "interval": "12h"}, "spec.timeZone", "timeZone applies to schedule only"),
    ({"concurrencyPolicy": "Allow"}, "spec.concurrencyPolicy", ""),
    ({"maxNodesPerRun": 0}, "spec.maxNodesPerRun", "must be >= 1"),
])
def test_each_mistake_is_reported_at_its_field(spec: dict[str, Any], path: str,
                                               message: str) -> None:
    """A wrong cron, interval, time zone or policy is reported with its field path."""
    found = messages(edited(**spec))
    assert any(p == path and message in m for p, m in found), found


def test_a_name_too_long_for_its_runs_is_refused() -> None:
    """53 characters: its runs' names (<name>-<unix minutes>) would not fit a label value."""
    body = copy.deepcopy(BASE)
    body["metadata"]["name"] = "s" * 53
    assert [p for p, _ in messages(body)] == ["metadata.name"]


def test_admission_refuses_both_or_neither_and_a_stray_time_zone() -> None:
    """The CRD's CEL rules refuse what validation refuses: both or neither of schedule and
    interval, a timeZone without a schedule, a six-field cron."""
    schema = CRDSchema.from_crd(build_crd(BY_KIND["CertificationSchedule"]), "v1alpha1")

    def refused(body: dict[str, Any]) -> list[str]:
        return [c.message for c in schema.validate(schema.default(body))]

    assert refused(copy.deepcopy(BASE)) == []
    assert any("exactly one of schedule, interval" in m
               for m in refused(edited(interval="1h")))
    assert any("exactly one of schedule, interval" in m
               for m in refused(edited(schedule=None, timeZone=None)))
    assert any("timeZone applies to schedule only" in m
               for m in refused(edited(schedule=None, interval="1h")))
    assert refused(edited(schedule="0 0 * * * *"))
