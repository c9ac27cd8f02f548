"""The ReportExport cores: which exports a policy has, and one delivery's next step."""

from __future__ import annotations

import base64
import gzip
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cre.api.certification import Certification
from cre.api.converter import from_dict, structure
from cre.api.reportexport import (
    SNAPSHOT_KEY,
    ExportContent,
    ExportPhase,
    ExportReason,
    ExportSourceKind,
    ExportSourceRef,
    ReportExport,
    ReportExportPolicy,
    RetryPolicy,
)
from cre.api.workflow import Workflow
from cre.core.certification.report import Snapshot
from cre.core.common.plan import ConfirmAbsent, DeliverReport, EventSeverity, Feedback
from cre.core.export import delivery
from cre.core.export.delivery import (
    Attempt,
    ReportExportObservation,
    backoff_seconds,
    reconcile_reportexport,
)
from cre.core.export.payload import (
    SCHEMA_VERSION,
    build_payload,
    idempotency_key,
    workflow_snapshot,
)
from cre.core.export.policy import (
    ReportExportPolicyObservation,
    ended_at,
    export_manifest,
    export_name,
    reconcile_reportexportpolicy,
)
from tests.core.nodecertworld import ended

T0 = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)
NS = "certs"


def policy(*, created: datetime = T0 - timedelta(hours=1), **spec: Any) -> ReportExportPolicy:
    body = {"apiVersion": "cre.dev/v1alpha1", "kind": "ReportExportPolicy",
            "metadata": {"name": "fleet", "namespace": NS, "uid": "policy-uid",
                         "resourceVersion": "7",
                         "creationTimestamp": created.isoformat().replace("+00:00", "Z")},
            "spec": {"webhook": {"url": "https://r.example/in",
                                 "tokenSecretRef": {"name": "tok", "key": "token"}},
                     "retry": {"maxAttempts": 3, "backoffBase": "10s", "backoffMax": "15s"},
                     **spec}}
    out = from_dict(body)
    assert isinstance(out, ReportExportPolicy)
    return out


def cert(name: str, *, at: datetime = T0, labels: dict[str, str] | None = None,
         running: bool = False) -> Certification:
    c = ended(name=name, at=at)
    c = attrs.evolve(c, metadata=attrs.evolve(c.metadata, labels=labels or {}))
    if running:
        c = attrs.evolve(c, status=attrs.evolve(c.status, conditions=()))
    return c


def export_of(p: ReportExportPolicy, c: Certification, **status: Any) -> ReportExport:
    body = export_manifest(p, c)
    body["metadata"].update(uid=f"{c.metadata.name}-export-uid", resourceVersion="3")
    body["status"] = status
    return structure(body, ReportExport)


# --- the policy -------------------------------------------------------------------------------


def test_one_export_per_ended_selected_certification_at_most_once() -> None:
    """Ended Certifications the selector matches get one export each, named from the policy and
    the uid; a running one, an unlabelled one and one that ended before the policy existed get
    none; once the exports exist the same pass creates nothing."""
    p = policy(selector={"team": "infra"})
    certs = (cert("a", labels={"team": "infra"}), cert("b", labels={"team": "infra"}),
             cert("running", labels={"team": "infra"}, running=True), cert("other"),
             cert("old", labels={"team": "infra"}, at=T0 - timedelta(hours=2)))
    plan = reconcile_reportexportpolicy(p, ReportExportPolicyObservation(certifications=certs),
                                        T0)
    assert [c.name for c in plan.creates] == sorted([export_name("fleet", "a-uid"),
                                                     export_name("fleet", "b-uid")])
    body = plan.creates[0].body
    assert body["spec"]["source"]["uid"] in ("a-uid", "b-uid")
    assert body["metadata"]["ownerReferences"][0]["uid"] == "policy-uid"
    made = tuple(structure({**c.body, "metadata": {**c.body["metadata"], "uid": c.name}},
                           ReportExport) for c in plan.creates)
    again = reconcile_reportexportpolicy(
        p, ReportExportPolicyObservation(certifications=certs, exports=made), T0)
    assert again.creates == ()


def test_a_suspended_policy_creates_nothing() -> None:
    """``suspend: true``: an ended selected Certification gets no export."""
    plan = reconcile_reportexportpolicy(
        policy(suspend=True), ReportExportPolicyObservation(certifications=(cert("a"),)), T0)
    assert plan.creates == ()


def test_export_names_are_deterministic_bounded_and_distinct_per_source() -> None:
    """The same (policy, uid) always names the same export; another uid another; a long policy
    name is cut so the name stays a valid label value."""
    assert export_name("fleet", "u1") == export_name("fleet", "u1") != export_name("fleet", "u2")
    assert len(export_name("p" * 200, "u1")) <= 56


def test_retention_prunes_only_finished_exports_whose_certification_is_gone() -> None:
    """A Delivered export past its 168h is deleted once its Certification is gone, kept while
    it exists (deleting it would send the report again); one not yet expired sets the
    requeue to its expiry."""
    p = policy()
    a, b = cert("a"), cert("b")
    done = T0 - timedelta(hours=170)
    old = export_of(p, a, phase="Delivered", finishedAt=done.isoformat())
    fresh = export_of(p, b, phase="Delivered", finishedAt=(T0 - timedelta(hours=1)).isoformat())
    gone = reconcile_reportexportpolicy(
        p, ReportExportPolicyObservation(certifications=(), exports=(old, fresh)), T0)
    assert [d.name for d in gone.deletes] == [old.metadata.name]
    assert gone.deletes[0].uid == old.metadata.uid
    assert gone.requeue_after == timedelta(hours=167).total_seconds()
    kept = reconcile_reportexportpolicy(
        p, ReportExportPolicyObservation(certifications=(a, b), exports=(old, fresh)), T0)
    assert kept.deletes == () and kept.creates == ()


# --- the payload ------------------------------------------------------------------------------


def test_the_payload_is_deterministic_and_its_key_ignores_resource_versions() -> None:
    """The same Certification at two resourceVersions gives the same bytes and key; another
    uid gives another key; the envelope names the schema version and the source."""
    p = policy()
    a = cert("a")
    x = export_of(p, a)
    one = build_payload(Snapshot(certification=a), source=x.spec.source, content=x.spec.content)
    later = attrs.evolve(a, metadata=attrs.evolve(a.metadata, resource_version="999"))
    two = build_payload(Snapshot(certification=later), source=x.spec.source,
                        content=x.spec.content)
    assert one == two
    assert idempotency_key("a-uid", one) == idempotency_key("a-uid", two)
    assert idempotency_key("a-uid", one) != idempotency_key("other-uid", one)
    doc = json.loads(one)
    assert doc["schemaVersion"] == SCHEMA_VERSION
    assert doc["source"] == {"kind": "Certification", "namespace": NS, "name": "a",
                             "uid": "a-uid"}
    assert doc["report"]["kind"] == "CertificationReport"
    assert doc["report"]["certification"]["name"] == "a"


def test_content_switches_remove_their_parts() -> None:
    """Without verdict the certification and summary go; without perNode each category's
    groups and nodes; without measurements its thresholds."""
    a = cert("a")
    x = export_of(policy(), a)
    full = json.loads(build_payload(Snapshot(certification=a), source=x.spec.source,
                                    content=ExportContent()))["report"]
    assert {"certification", "summary"} <= full.keys()
    assert {"groups", "nodes", "thresholds"} <= full["categories"][0].keys()
    bare = json.loads(build_payload(
        Snapshot(certification=a), source=x.spec.source,
        content=ExportContent(verdict=False, per_node=False, measurements=False)))["report"]
    assert not {"certification", "summary"} & bare.keys()
    assert not {"groups", "nodes", "thresholds"} & bare["categories"][0].keys()
    assert bare["categories"][0]["verdict"] == full["categories"][0]["verdict"]


# --- one delivery -----------------------------------------------------------------------------


def _snapshotted(p: ReportExportPolicy, c: Certification) -> tuple[ReportExport, bytes]:
    """The export of ``c`` after its snapshot pass, and the snapshot's gzip bytes."""
    x = export_of(p, c)
    plan = reconcile_reportexport(x, ReportExportObservation(source=Snapshot(certification=c)),
                                  T0)
    assert plan.status is not None
    (cm,) = plan.creates
    blob = base64.b64decode(cm.body["binaryData"][SNAPSHOT_KEY])
    return attrs.evolve(x, status=plan.status), blob


def test_the_first_pass_snapshots_the_payload_before_any_attempt() -> None:
    """The snapshot ConfigMap (owned by the export) and the status with its digest and key are
    written together; nothing is sent yet, and the pass comes back at once."""
    c = cert("a")
    x, blob = _snapshotted(policy(), c)
    st_ = x.status
    assert st_.phase == ExportPhase.DELIVERING and st_.reason == ExportReason.SNAPSHOT_TAKEN
    assert st_.attempts == 0 and st_.next_attempt_at == T0
    assert st_.payload_digest and st_.payload_digest.startswith("sha256:")
    assert st_.idempotency_key and len(st_.idempotency_key) == 64
    assert blob


def test_a_source_missing_from_the_cache_is_read_live_before_the_export_fails() -> None:
    """No cached Certification: the plan asks to confirm it is absent; confirmed, the export is
    Failed (SourceGone) with a Warning event."""
    x = export_of(policy(), cert("a"))
    plan = reconcile_reportexport(x, ReportExportObservation(), T0)
    assert plan.asks == (ConfirmAbsent(kind="Certification", name="a"),)
    assert plan.status is None and not plan.creates
    gone = reconcile_reportexport(x, ReportExportObservation(
        feedback=Feedback(answered=plan.asks)), T0)
    assert gone.status is not None and gone.status.phase == ExportPhase.FAILED
    assert gone.status.reason == ExportReason.SOURCE_GONE
    assert gone.events[0].type == EventSeverity.WARNING


def test_a_due_attempt_asks_to_post_the_snapshot_with_its_key_and_token_reference() -> None:
    """Once snapshotted, a due pass asks for one POST of the snapshot's bytes with the
    status's key and the Secret reference (the core never sees the token)."""
    x, blob = _snapshotted(policy(), cert("a"))
    plan = reconcile_reportexport(x, ReportExportObservation(snapshot=blob), T0)
    (ask,) = plan.asks
    assert isinstance(ask, DeliverReport)
    assert ask.key == x.status.idempotency_key
    assert ask.token_secret == ("tok", "token") and ask.timeout_seconds == 10
    assert json.loads(ask.body)["source"]["uid"] == "a-uid"


def test_failures_back_off_then_exhaust_and_a_2xx_delivers() -> None:
    """503 twice: retries 10s then 15s (the cap) later, no attempt before it is due; a third
    503 is the last attempt (RetriesExhausted). A 204 instead delivers (deliveredAt, Normal
    event)."""
    x, blob = _snapshotted(policy(), cert("a"))
    now = T0
    waits = []
    for _ in range(2):
        plan = reconcile_reportexport(x, ReportExportObservation(
            snapshot=blob, attempt=Attempt(http_status=503)), now)
        assert plan.status is not None and plan.status.phase == ExportPhase.DELIVERING
        waits.append(plan.requeue_after)
        x = attrs.evolve(x, status=plan.status)
        early = reconcile_reportexport(x, ReportExportObservation(snapshot=blob), now)
        assert early.asks == () and early.requeue_after == plan.requeue_after
        assert plan.requeue_after is not None
        now += timedelta(seconds=plan.requeue_after)
    assert waits == [10.0, 15.0]
    delivered = reconcile_reportexport(x, ReportExportObservation(
        snapshot=blob, attempt=Attempt(http_status=204)), now)
    assert delivered.status is not None and delivered.status.phase == ExportPhase.DELIVERED
    assert delivered.status.delivered_at == now and delivered.status.attempts == 3
    assert delivered.events[0].type == EventSeverity.NORMAL
    last = reconcile_reportexport(x, ReportExportObservation(
        snapshot=blob, attempt=Attempt(http_status=None, error="connection refused")), now)
    assert last.status is not None and last.status.reason == ExportReason.RETRIES_EXHAUSTED
    assert last.status.last_error == "connection refused"


def test_a_client_error_is_final() -> None:
    """A 400 (or a redirect, never followed) fails the export at once: Rejected."""
    x, blob = _snapshotted(policy(), cert("a"))
    for code in (400, 302):
        plan = reconcile_reportexport(x, ReportExportObservation(
            snapshot=blob, attempt=Attempt(http_status=code)), T0)
        assert plan.status is not None and plan.status.reason == ExportReason.REJECTED


def test_a_lost_or_altered_snapshot_fails_rather_than_sending_another_payload() -> None:
    """A snapshot missing from the cache is read live first; confirmed gone, or present with
    other bytes, the export is Failed (SnapshotLost)."""
    x, _ = _snapshotted(policy(), cert("a"))
    plan = reconcile_reportexport(x, ReportExportObservation(), T0)
    assert plan.asks == (ConfirmAbsent(kind="ConfigMap", name=x.status.snapshot_ref or ""),)
    lost = reconcile_reportexport(x, ReportExportObservation(
        feedback=Feedback(answered=plan.asks)), T0)
    assert lost.status is not None and lost.status.reason == ExportReason.SNAPSHOT_LOST
    altered = reconcile_reportexport(x, ReportExportObservation(
        snapshot=gzip.compress(b"{}")), T0)
    assert altered.status is not None and altered.status.reason == ExportReason.SNAPSHOT_LOST


def test_a_finished_export_plans_nothing() -> None:
    """Delivered and Failed are final: no ask, no write, no requeue."""
    x, blob = _snapshotted(policy(), cert("a"))
    for phase in (ExportPhase.DELIVERED, ExportPhase.FAILED):
        done = attrs.evolve(x, status=attrs.evolve(x.status, phase=phase))
        plan = reconcile_reportexport(done, ReportExportObservation(snapshot=blob), T0)
        assert plan.quiet and plan.requeue_after is None


_SECONDS = st.integers(min_value=1, max_value=3600)


@given(base=_SECONDS, cap=_SECONDS, attempts=st.integers(min_value=1, max_value=10_000))
def test_backoff_is_bounded_and_never_shrinks(base: int, cap: int, attempts: int) -> None:
    """Whatever the settings and however many failures: the wait is at least the base (or the
    cap when lower), at most the cap, and never shorter than the wait before."""
    retry = RetryPolicy(backoff_base=f"{base}s", backoff_max=f"{max(base, cap)}s")
    wait = backoff_seconds(retry, attempts)
    assert base <= wait <= max(base, cap)
    assert wait >= backoff_seconds(retry, attempts - 1)


def test_a_report_too_large_to_keep_fails_before_any_attempt(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot over the bound (lowered here to 64 bytes) is not written: the export is Failed
    (PayloadTooLarge), saying how large the report is and what to turn off."""
    monkeypatch.setattr(delivery, "MAX_SNAPSHOT_BYTES", 64)
    x = export_of(policy(), cert("a"))
    plan = reconcile_reportexport(x, ReportExportObservation(source=Snapshot(
        certification=cert("a"))), T0)
    assert plan.creates == () and plan.asks == ()
    assert plan.status is not None and plan.status.reason == ExportReason.PAYLOAD_TOO_LARGE
    assert "at most 64 compressed" in (plan.status.message or "")


def _workflow(name: str, *, labels: dict[str, str], phase: str | None = "Succeeded",
              at: datetime = T0) -> Workflow:
    status: dict[str, Any] = {}
    if phase is not None:
        status = {"phase": phase, "verdict": "Passed" if phase == "Succeeded" else "Failed",
                  "conditions": [{"type": phase, "status": "True", "reason": "Done",
                                  "message": "done",
                                  "lastTransitionTime": at.isoformat().replace("+00:00", "Z")}]}
    return structure({
        "metadata": {"name": name, "namespace": NS, "uid": f"{name}-uid", "labels": labels},
        "spec": {"jobTemplate": {"spec": {"workload": {"trainJob": {}}}}, "orchestration": {}},
        "status": status}, Workflow)


def test_a_workflow_policy_exports_ended_selected_workflows_only() -> None:
    """``kind: Workflow`` selects the namespace's Workflows (not its Certifications): an ended
    labelled one gets an export whose source kind is Workflow; a running one none."""
    p = policy(kind="Workflow", selector={"export": "yes"})
    obs = ReportExportPolicyObservation(
        certifications=(cert("a", labels={"export": "yes"}),),
        workflows=(_workflow("done", labels={"export": "yes"}),
                   _workflow("running", labels={"export": "yes"}, phase=None)))
    plan = reconcile_reportexportpolicy(p, obs, T0)
    assert [c.name for c in plan.creates] == [export_name("fleet", "done-uid")]
    body = plan.creates[0].body
    assert body["spec"]["source"] == {"kind": "Workflow", "name": "done", "uid": "done-uid"}
    assert body["metadata"]["labels"]["cre.dev/workflow"] == "done"


def test_a_workflow_report_is_its_one_category() -> None:
    """A Workflow's payload is the report of one category ``workflow/<name>`` with the
    Workflow's phase and verdict, under a Workflow source."""
    wf = _workflow("done", labels={})
    source = ExportSourceRef(kind=ExportSourceKind.WORKFLOW, name="done", uid="done-uid")
    doc = json.loads(build_payload(workflow_snapshot(wf, jobs={}, bandwidth={}),
                                   source=source, content=ExportContent()))
    assert doc["source"] == {"kind": "Workflow", "namespace": NS, "name": "done",
                             "uid": "done-uid"}
    report = doc["report"]
    assert report["certification"]["verdict"] == "Passed"
    assert [(c["entry"], c["verdict"]) for c in report["categories"]] == [
        ("workflow/done", "Passed")]


_CERTS = st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]),  # name
                            st.integers(min_value=0, max_value=3),  # uid generation
                            st.integers(min_value=-3, max_value=3),  # ended, hours from T0
                            st.booleans()),  # labelled
                  max_size=8)


@given(certs=_CERTS, order=st.randoms(use_true_random=False))
def test_a_verdict_never_gets_two_exports(certs: list[tuple[str, int, int, bool]],
                                          order: Any) -> None:
    """Whatever Certifications exist (same names with other uids, ended before or after the
    policy, labelled or not) and in whatever order passes see the exports land: the exports
    converge to one per selected uid that ended after the policy, and a pass over them creates
    nothing more."""
    p = policy(created=T0, selector={"x": "1"})
    objs = {}
    for name, gen, hours, labelled in certs:
        c = cert(name, at=T0 + timedelta(hours=hours), labels={"x": "1"} if labelled else {})
        c = attrs.evolve(c, metadata=attrs.evolve(c.metadata, uid=f"{name}-{gen}"))
        objs[c.metadata.uid] = c
    sources = tuple(objs.values())
    exports: list[ReportExport] = []
    for _ in range(3):
        plan = reconcile_reportexportpolicy(p, ReportExportPolicyObservation(
            certifications=sources, exports=tuple(exports)), T0)
        made = [structure({**c.body, "metadata": {**c.body["metadata"], "uid": c.name}},
                          ReportExport) for c in plan.creates]
        order.shuffle(made)
        exports += made[:max(1, len(made) // 2)]  # some creates land before the next pass
    final = reconcile_reportexportpolicy(p, ReportExportPolicyObservation(
        certifications=sources, exports=tuple(exports)), T0)
    exports += [structure(c.body, ReportExport) for c in final.creates]
    uids = [x.spec.source.uid for x in exports]
    assert len(uids) == len(set(uids))
    wanted = {c.metadata.uid for c in sources
              if c.metadata.labels and ended_at(c) is not None and ended_at(c) >= T0}
    assert set(uids) == wanted
    assert reconcile_reportexportpolicy(p, ReportExportPolicyObservation(
        certifications=sources, exports=tuple(exports)), T0).creates == ()


def test_retry_after_is_honoured_past_the_cap_within_the_elapsed_window() -> None:
    """A 429 asking for 12s waits 12s (the backoff says 10s); one asking for an hour waits the
    hour, past the 15s backoffMax (as the reference does); one asking for less than the
    backoff waits the backoff; one asking for longer than the 24h maxElapsedTime leaves fails
    the export at once (RetryDeadlineExceeded), with no wait that can only end in failure."""
    x, blob = _snapshotted(policy(), cert("a"))
    waits = []
    for asked in (12.0, 3600.0, 1.0):
        plan = reconcile_reportexport(x, ReportExportObservation(
            snapshot=blob, attempt=Attempt(http_status=429, retry_after=asked)), T0)
        assert plan.status is not None and plan.status.phase == ExportPhase.DELIVERING
        waits.append(plan.requeue_after)
    assert waits == [12.0, 3600.0, 10.0]
    for asked in (25 * 3600.0, 1e30):
        past = reconcile_reportexport(x, ReportExportObservation(
            snapshot=blob, attempt=Attempt(http_status=503, retry_after=asked)), T0)
        assert past.status is not None and past.requeue_after is None
        assert (past.status.phase, past.status.reason) == (
            ExportPhase.FAILED, ExportReason.RETRY_DEADLINE_EXCEEDED)
        assert past.status.attempts == 1 and past.events[0].type == EventSeverity.WARNING


def test_the_elapsed_window_counts_from_the_cycles_first_attempt() -> None:
    """maxElapsedTime 60s: the first attempt (503) starts the cycle; a pass due after the
    window ran out (the export was suspended meanwhile) fails it without a POST
    (RetryDeadlineExceeded) instead of attempting."""
    x, blob = _snapshotted(policy(retry={"maxAttempts": 5, "backoffBase": "10s",
                                         "backoffMax": "10s", "maxElapsedTime": "60s"}),
                           cert("a"))
    first = reconcile_reportexport(x, ReportExportObservation(
        snapshot=blob, attempt=Attempt(http_status=503)), T0)
    assert first.status is not None and first.status.cycle_started_at == T0
    x = attrs.evolve(x, status=first.status)
    due = reconcile_reportexport(x, ReportExportObservation(snapshot=blob),
                                 T0 + timedelta(seconds=10))
    assert isinstance(due.asks[0], DeliverReport)
    late = reconcile_reportexport(x, ReportExportObservation(snapshot=blob),
                                  T0 + timedelta(seconds=61))
    assert late.asks == () and late.status is not None
    assert late.status.reason == ExportReason.RETRY_DEADLINE_EXCEEDED


def _failed(reason: str) -> tuple[ReportExport, bytes]:
    """An export that ended Failed for ``reason`` after two attempts (maxAttempts 2)."""
    x, blob = _snapshotted(policy(retry={"maxAttempts": 2, "backoffBase": "10s",
                                         "backoffMax": "10s"}), cert("a"))
    now = T0
    codes = {"exhausted": (503, 503), "rejected": (503, 401)}[reason]
    for code in codes:
        plan = reconcile_reportexport(x, ReportExportObservation(
            snapshot=blob, attempt=Attempt(http_status=code)), now)
        assert plan.status is not None
        x = attrs.evolve(x, status=plan.status)
        now += timedelta(seconds=10)
    assert x.status.phase == ExportPhase.FAILED and x.status.attempts == 2
    return x, blob


def _nonce(x: ReportExport, value: str) -> ReportExport:
    return attrs.evolve(x, spec=attrs.evolve(x.spec, retry_nonce=value))


@pytest.mark.parametrize("reason", ["exhausted", "rejected"])
def test_a_new_retry_nonce_starts_a_new_cycle_of_a_failed_export(reason: str) -> None:
    """A Failed export (out of attempts, or a 401) given a new retryNonce: Delivering again
    with cycleAttempts 0, the cycle and its window starting at the change, attempts still 2,
    finishedAt cleared, one RetryRequested event; the next pass POSTs the same snapshot under
    the same key, judged as attempt 1 of the cycle (3 in all) with the first backoff."""
    x, blob = _failed(reason)
    key = x.status.idempotency_key
    now = T0 + timedelta(hours=3)
    plan = reconcile_reportexport(_nonce(x, "r1"), ReportExportObservation(snapshot=blob), now)
    st = plan.status
    assert st is not None and plan.requeue_after == 0.0
    assert (st.phase, st.reason, st.observed_retry_nonce) == (
        ExportPhase.DELIVERING, ExportReason.RETRY_REQUESTED, "r1")
    assert (st.attempts, st.cycle_attempts, st.cycle_started_at, st.finished_at) == (
        2, 0, now, None)
    assert [(e.type, e.reason) for e in plan.events] == [(EventSeverity.NORMAL,
                                                         "RetryRequested")]
    x = attrs.evolve(_nonce(x, "r1"), status=st)
    (ask,) = reconcile_reportexport(x, ReportExportObservation(snapshot=blob), now).asks
    assert isinstance(ask, DeliverReport) and ask.key == key
    judged = reconcile_reportexport(x, ReportExportObservation(
        snapshot=blob, attempt=Attempt(http_status=503)), now)
    assert judged.status is not None and judged.status.phase == ExportPhase.DELIVERING
    assert (judged.status.attempts, judged.status.cycle_attempts) == (3, 1)
    assert judged.requeue_after == 10.0
    # the same nonce again is not a new request: the pass plans nothing new
    again = reconcile_reportexport(attrs.evolve(x, status=attrs.evolve(
        judged.status, phase=ExportPhase.FAILED)), ReportExportObservation(snapshot=blob), now)
    assert again.quiet and again.status is None


@pytest.mark.parametrize("phase", ["Delivered", "Cancelled", "Failed+cancel", "Delivering"])
def test_a_retry_nonce_on_an_export_that_is_not_failed_is_only_observed(phase: str) -> None:
    """On a Delivered or Cancelled export, a Failed one whose cancel is set, or one still
    delivering, a new retryNonce is recorded (observedRetryNonce, the message says there is
    nothing to retry) without an attempt, an event or a new cycle; recorded while delivering,
    it does not restart the export when it fails later."""
    x, blob = _snapshotted(policy(), cert("a"))
    name = phase.split("+")[0]
    x = attrs.evolve(x, status=attrs.evolve(x.status, phase=ExportPhase(name)))
    if phase.endswith("+cancel"):
        x = _cancelled(x)
    plan = reconcile_reportexport(_nonce(x, "r1"), ReportExportObservation(snapshot=blob), T0)
    assert plan.status is not None and plan.asks == () and plan.events == ()
    assert plan.status.phase == ExportPhase(name) and plan.status.observed_retry_nonce == "r1"
    assert plan.status.reason == ExportReason.RETRY_NONCE_OBSERVED
    assert "nothing to retry" in (plan.status.message or "")
    assert plan.status.cycle_attempts == x.status.cycle_attempts
    if name == "Delivering":
        x = attrs.evolve(_nonce(x, "r1"), status=plan.status)
        end = reconcile_reportexport(x, ReportExportObservation(
            snapshot=blob, attempt=Attempt(http_status=400)), T0)
        assert end.status is not None and end.status.phase == ExportPhase.FAILED
        done = attrs.evolve(x, status=end.status)
        assert reconcile_reportexport(done, ReportExportObservation(snapshot=blob), T0).quiet


# --- suspend and cancel -----------------------------------------------------------------------


def _cancelled(x: ReportExport) -> ReportExport:
    return attrs.evolve(x, spec=attrs.evolve(x.spec, cancel=True))


def test_a_suspended_policy_pauses_a_delivery_in_backoff_until_resumed() -> None:
    """A 503 schedules the next attempt 10s later; the policy is suspended: at and long after
    that time no attempt is asked for, the phase is Suspended (once: no second write, one
    PolicySuspended event) with the attempt count, key and due time kept. Resumed before the
    due time it waits out the rest (Resumed, one event); resumed after it, Resumed is written
    (one event) and the next pass POSTs the same key, judged as attempt 2."""
    x, blob = _snapshotted(policy(), cert("a"))
    failed = reconcile_reportexport(x, ReportExportObservation(
        snapshot=blob, attempt=Attempt(http_status=503)), T0)
    assert failed.status is not None
    x = attrs.evolve(x, status=failed.status)
    key, due = x.status.idempotency_key, x.status.next_attempt_at
    paused = reconcile_reportexport(x, ReportExportObservation(snapshot=blob, suspended=True),
                                    T0 + timedelta(seconds=10))
    assert paused.asks == () and paused.requeue_after is None and paused.status is not None
    assert paused.status.phase == ExportPhase.SUSPENDED
    assert paused.status.reason == ExportReason.POLICY_SUSPENDED
    assert (paused.status.attempts, paused.status.idempotency_key,
            paused.status.next_attempt_at) == (1, key, due)
    x = attrs.evolve(x, status=paused.status)
    later = T0 + timedelta(hours=5)
    still = reconcile_reportexport(x, ReportExportObservation(snapshot=blob, suspended=True),
                                   later)
    assert still.asks == () and still.status is None and still.requeue_after is None
    early = reconcile_reportexport(x, ReportExportObservation(snapshot=blob),
                                   T0 + timedelta(seconds=4))
    assert early.asks == () and early.status is not None and early.requeue_after == 6.0
    assert (early.status.phase, early.status.reason) == (ExportPhase.DELIVERING,
                                                        ExportReason.RESUMED)
    assert [(e.type, e.reason) for e in paused.events] == [(EventSeverity.NORMAL,
                                                           "PolicySuspended")]
    assert still.events == () and [e.reason for e in early.events] == ["Resumed"]
    resumed = reconcile_reportexport(x, ReportExportObservation(snapshot=blob), later)
    assert resumed.asks == () and resumed.requeue_after == 0.0 and resumed.status is not None
    assert resumed.status.reason == ExportReason.RESUMED
    assert [e.reason for e in resumed.events] == ["Resumed"]
    x = attrs.evolve(x, status=resumed.status)
    again = reconcile_reportexport(x, ReportExportObservation(snapshot=blob), later)
    (ask,) = again.asks
    assert isinstance(ask, DeliverReport) and ask.key == key and again.events == ()
    judged = reconcile_reportexport(x, ReportExportObservation(
        snapshot=blob, attempt=Attempt(http_status=503)), later)
    assert judged.status is not None and judged.status.phase == ExportPhase.DELIVERING
    assert judged.status.attempts == 2 and judged.requeue_after == 15.0


def test_a_suspended_policy_still_snapshots_but_sends_nothing() -> None:
    """An export created just before its policy was suspended takes its snapshot (the report is
    kept while the Jobs are still there) and then waits Suspended without any attempt."""
    x = export_of(policy(), cert("a"))
    first = reconcile_reportexport(x, ReportExportObservation(
        source=Snapshot(certification=cert("a")), suspended=True), T0)
    assert first.status is not None and first.creates and first.asks == ()
    x = attrs.evolve(x, status=first.status)
    (cm,) = first.creates
    blob = base64.b64decode(cm.body["binaryData"][SNAPSHOT_KEY])
    paused = reconcile_reportexport(x, ReportExportObservation(snapshot=blob, suspended=True),
                                    T0)
    assert paused.asks == () and paused.status is not None
    assert paused.status.phase == ExportPhase.SUSPENDED and paused.status.attempts == 0


@pytest.mark.parametrize("stage", ["pending", "backoff", "suspended"])
def test_cancel_ends_the_export_without_another_attempt(stage: str) -> None:
    """spec.cancel on a pending export, one in backoff or one suspended: Cancelled at once
    (finishedAt set, no attempt asked, nothing created, a Normal event), final afterwards."""
    x = export_of(policy(), cert("a"))
    if stage != "pending":
        x, blob = _snapshotted(policy(), cert("a"))
        plan = reconcile_reportexport(x, ReportExportObservation(
            snapshot=blob, attempt=Attempt(http_status=503)), T0)
        assert plan.status is not None
        x = attrs.evolve(x, status=plan.status)
        if stage == "suspended":
            x = attrs.evolve(x, status=attrs.evolve(x.status, phase=ExportPhase.SUSPENDED))
    now = T0 + timedelta(minutes=1)
    plan = reconcile_reportexport(_cancelled(x), ReportExportObservation(
        source=Snapshot(certification=cert("a"))), now)
    assert plan.asks == () and plan.creates == () and plan.status is not None
    assert (plan.status.phase, plan.status.reason) == (ExportPhase.CANCELLED,
                                                      ExportReason.CANCELLED)
    assert plan.status.finished_at == now and plan.status.next_attempt_at is None
    assert plan.events[0].type == EventSeverity.NORMAL
    done = attrs.evolve(_cancelled(x), status=plan.status)
    assert reconcile_reportexport(done, ReportExportObservation(), now).status is None


def test_cancel_after_delivery_changes_nothing() -> None:
    """A Delivered export stays Delivered when cancel is set afterwards."""
    x = _cancelled(export_of(policy(), cert("a"), phase="Delivered"))
    plan = reconcile_reportexport(x, ReportExportObservation(), T0)
    assert plan.status is None and plan.asks == ()


def test_a_cancelled_export_is_pruned_after_the_failed_retention() -> None:
    """A Cancelled export whose Certification is gone is deleted after retention.failed
    (720h), not before."""
    p = policy()
    x = export_of(p, cert("a"), phase="Cancelled",
                  finishedAt=(T0 - timedelta(hours=700)).isoformat())
    plan = reconcile_reportexportpolicy(p, ReportExportPolicyObservation(exports=(x,)), T0)
    assert plan.deletes == () and plan.requeue_after == timedelta(hours=20).total_seconds()
    later = reconcile_reportexportpolicy(p, ReportExportPolicyObservation(exports=(x,)),
                                         T0 + timedelta(hours=20))
    assert [d.name for d in later.deletes] == [x.metadata.name]
