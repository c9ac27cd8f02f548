"""The ReportExportPolicy and ReportExport models: defaults, validation with field paths."""

from __future__ import annotations

from typing import Any

from cre.api.converter import from_dict
from cre.api.reportexport import ReportExportPolicy
from cre.api.validate import validate


def _policy(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "cre.dev/v1alpha1", "kind": "ReportExportPolicy",
            "metadata": {"name": "to-fleet", "namespace": "team-a"},
            "spec": {"webhook": {"url": "https://reports.example.com/in"}, **spec}}


def test_a_minimal_policy_gets_the_documented_defaults() -> None:
    """Only a URL: Certifications exported, everything sent, 10 attempts from 10s doubling to
    15m within a 24h cycle, 168h/720h kept."""
    policy = from_dict(_policy())
    assert isinstance(policy, ReportExportPolicy)
    assert validate(policy) == []
    spec = policy.spec
    assert spec.kind == "Certification" and spec.selector == {} and not spec.suspend
    assert (spec.content.verdict, spec.content.per_node, spec.content.measurements) == (
        True, True, True)
    assert (spec.retry.max_attempts, spec.retry.backoff_base, spec.retry.backoff_max,
            spec.retry.max_elapsed_time) == (10, "10s", "15m", "24h")
    assert (spec.retention.delivered, spec.retention.failed) == ("168h", "720h")
    assert spec.webhook.timeout == "10s" and spec.webhook.token_secret_ref is None


def test_bad_settings_are_reported_with_their_paths() -> None:
    """A URL that is not http(s), a cap shorter than the base wait, zero attempts, an
    overlong timeout and an overlong elapsed window each name their field."""
    errors = validate(_policy(webhook={"url": "ftp://x", "timeout": "721h"},
                              retry={"maxAttempts": 0, "backoffBase": "1m",
                                     "backoffMax": "10s", "maxElapsedTime": "721h"}))
    paths = {e.path for e in errors}
    assert {"spec.webhook.url", "spec.webhook.timeout", "spec.retry.maxAttempts",
            "spec.retry.backoffMax", "spec.retry.maxElapsedTime"} <= paths
    cap = next(e for e in errors if e.path == "spec.retry.backoffMax")
    assert cap.message == "backoffMax must not be shorter than backoffBase"


def test_a_token_reference_needs_a_secret_name_and_key() -> None:
    """An empty Secret name or key in tokenSecretRef is refused."""
    errors = validate(_policy(webhook={"url": "http://127.0.0.1:9/x",
                                       "tokenSecretRef": {"name": "", "key": ""}}))
    assert {e.path for e in errors} == {"spec.webhook.tokenSecretRef.name",
                                        "spec.webhook.tokenSecretRef.key"}
