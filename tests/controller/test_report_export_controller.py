"""ReportExport on the emulator: the real controllers, a webhook receiver that misbehaves.

Each test applies a ReportExportPolicy and a Certification that ends (its status written the
way the Certification controller writes it), runs the ReportExportPolicy and ReportExport
controllers against the emulator, and reads what the receiver got."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from cre.controller.export.controller import ReportExportController
from cre.controller.export.policy import ReportExportPolicyController, export_from_dict
from cre.kube.client import (
    CERTIFICATIONS,
    CONFIGMAPS,
    EVENTS,
    NAMESPACES,
    REPORTEXPORTPOLICIES,
    REPORTEXPORTS,
    SECRETS,
    WORKFLOWS,
    ApiError,
    KubeClient,
)
from cre.kube.runtime.base import utcnow
from cre.testing.apiserver import Emulator
from cre.testing.cluster.clock import SimClock
from cre.testing.webhook import WebhookReceiver, webhook_receiver

TOKEN = "tok-5f1d0c2a9b7e4e31-do-not-leak"
_namespaces = itertools.count()
pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(shared_emulator: Emulator) -> AsyncIterator[KubeClient]:
    kube = await KubeClient.from_kubeconfig(str(shared_emulator.kubeconfig_path))
    try:
        yield kube
    finally:
        await kube.close()


@contextlib.asynccontextmanager
async def exporting(client: KubeClient, ns: str, registry: CollectorRegistry, *,
                    clock: Callable[[], datetime] = utcnow,
                    time_scale: float = 1.0) -> AsyncIterator[ReportExportController]:
    """Both controllers, watching ``ns``, until the block ends (a manager that stops), on
    ``clock`` running ``time_scale`` times the wall clock."""
    policies = ReportExportPolicyController(client, namespaces=[ns], registry=registry,
                                            clock=clock, time_scale=time_scale)
    exports = ReportExportController(client, namespaces=[ns], registry=registry, clock=clock,
                                     time_scale=time_scale)
    async with anyio.create_task_group() as tg:
        tg.start_soon(policies.run)
        tg.start_soon(exports.run)
        with anyio.fail_after(20):
            await policies.wait_synced()
            await exports.wait_synced()
        yield exports
        tg.cancel_scope.cancel()


async def setup(client: KubeClient, receiver: WebhookReceiver, *, retry: dict[str, Any],
                token_key: str = "token", kind: str = "Certification") -> str:
    """A namespace with the token Secret, a policy to ``receiver`` and a passed Certification;
    returns the namespace."""
    ns = f"rex-{next(_namespaces)}"
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": ns}})
    await client.create(SECRETS, {"apiVersion": "v1", "kind": "Secret",
                                  "metadata": {"name": "report-token", "namespace": ns},
                                  "data": {"token": base64.b64encode(TOKEN.encode()).decode()}},
                        namespace=ns)
    await client.create(REPORTEXPORTPOLICIES, {
        "apiVersion": "cre.dev/v1alpha1", "kind": "ReportExportPolicy",
        "metadata": {"name": "fleet", "namespace": ns},
        "spec": {"kind": kind, "selector": {"export": "yes"},
                 "webhook": {"url": receiver.url, "timeout": "20s",
                             "tokenSecretRef": {"name": "report-token", "key": token_key}},
                 "retry": retry}}, namespace=ns)
    cert = await client.create(CERTIFICATIONS, {
        "apiVersion": "cre.dev/v1alpha1", "kind": "Certification",
        "metadata": {"name": "nightly", "namespace": ns, "labels": {"export": "yes"}},
        "spec": {"target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
                 "categories": [{"domain": "communication", "variant": "nccl-all-reduce"}]}},
        namespace=ns)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cert["status"] = {"phase": "Succeeded", "verdict": "Passed", "conditions": [
        {"type": "Succeeded", "status": "True", "reason": "AllCategoriesPassed",
         "message": "every category passed", "lastTransitionTime": now}]}
    await client.replace(CERTIFICATIONS, cert, subresource="status")
    return ns


async def export_of(client: KubeClient, ns: str) -> dict[str, Any] | None:
    items = (await client.list(REPORTEXPORTS, namespace=ns))["items"]
    assert len(items) <= 1, items
    return items[0] if items else None


async def wait_export(client: KubeClient, ns: str, done: Callable[[dict[str, Any]], bool],
                      *, timeout: float = 60) -> dict[str, Any]:
    with anyio.fail_after(timeout):
        while True:
            x = await export_of(client, ns)
            if x is not None and done(x.get("status") or {}):
                return x
            await anyio.sleep(0.05)


def _phase(phase: str) -> Callable[[dict[str, Any]], bool]:
    return lambda st: st.get("phase") == phase


def _count(registry: CollectorRegistry, result: str) -> float:
    return registry.get_sample_value("cre_report_exports_total", {"result": result}) or 0.0


async def test_failures_and_lost_answers_deliver_one_report_under_one_key(
        client: KubeClient) -> None:
    """Two refused POSTs and one whose answer is lost: the report arrives (at least once, the
    receiver holding one copy), every POST carries the same Idempotency-Key and the bearer
    token, the export records four attempts and the counters say 3 retries, 1 delivery."""
    registry = CollectorRegistry()
    async with webhook_receiver(fail_first=2, lose_first=1, expect_token=TOKEN) as receiver:
        ns = await setup(client, receiver, retry={"backoffBase": "100ms",
                                                  "backoffMax": "200ms"})
        async with exporting(client, ns, registry):
            x = await wait_export(client, ns, _phase("Delivered"))
    st = x["status"]
    assert st["attempts"] == 4 and st["lastHttpStatus"] == 202
    assert receiver.distinct_keys == {st["idempotencyKey"]}
    assert len(receiver.reports) == 1 and receiver.duplicates() == 1
    assert [r.authorization for r in receiver.requests] == [f"Bearer {TOKEN}"] * 4
    body = receiver.requests[-1].json()
    assert body["schemaVersion"] == "cre.dev/report-export/v1"
    assert body["source"]["name"] == "nightly" and body["source"]["uid"] == \
        x["spec"]["source"]["uid"]
    assert body["report"]["certification"]["verdict"] == "Passed"
    assert (_count(registry, "retry"), _count(registry, "delivered")) == (3.0, 1.0)


async def test_a_manager_restart_mid_retry_loses_nothing_and_keeps_the_key(
        client: KubeClient) -> None:
    """The receiver refuses until the controllers stop mid-retry; new controllers (a restarted
    manager) deliver the same snapshot under the same key, and no second export appears."""
    async with webhook_receiver(fail_first=1_000_000) as receiver:
        ns = await setup(client, receiver, retry={"backoffBase": "200ms", "backoffMax": "1s"})
        async with exporting(client, ns, CollectorRegistry()):
            before = await wait_export(client, ns, lambda st: st.get("attempts", 0) >= 2)
        snapshot = await client.get(CONFIGMAPS, before["status"]["snapshotRef"], namespace=ns)
        receiver.fail_first = 0  # the receiver is back while no manager runs
        async with exporting(client, ns, CollectorRegistry()):
            after = await wait_export(client, ns, _phase("Delivered"))
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["status"]["idempotencyKey"] == before["status"]["idempotencyKey"]
    assert after["status"]["attempts"] > before["status"]["attempts"]
    assert receiver.distinct_keys == {before["status"]["idempotencyKey"]}
    again = await client.get(CONFIGMAPS, before["status"]["snapshotRef"], namespace=ns)
    assert again["metadata"]["uid"] == snapshot["metadata"]["uid"]
    assert again["binaryData"] == snapshot["binaryData"]


@pytest.mark.parametrize(("knobs", "reason", "posts"), [
    ({"fail_first": 1_000_000}, "RetriesExhausted", 3),
    ({"reject": 400}, "Rejected", 1),
], ids=["always-503", "400"])
async def test_attempts_are_bounded(client: KubeClient, knobs: dict[str, Any], reason: str,
                                    posts: int) -> None:
    """A receiver that always answers 503 gets exactly maxAttempts POSTs, then the export is
    Failed (RetriesExhausted); a 400 is final after one POST (Rejected)."""
    registry = CollectorRegistry()
    async with webhook_receiver(**knobs) as receiver:
        ns = await setup(client, receiver, retry={"maxAttempts": 3, "backoffBase": "50ms",
                                                  "backoffMax": "100ms"})
        async with exporting(client, ns, registry):
            x = await wait_export(client, ns, _phase("Failed"))
            await anyio.sleep(0.3)  # nothing more is sent once Failed
    assert x["status"]["reason"] == reason and x["status"]["attempts"] == posts
    assert len(receiver.requests) == posts
    assert _count(registry, "failed") == 1.0


async def test_the_token_appears_in_no_log_event_status_or_metric(
        client: KubeClient, caplog: pytest.LogCaptureFixture) -> None:
    """With every CRE logger at DEBUG, a delivery that fails, retries and succeeds, and a
    second policy whose Secret key is missing: the token is in no log record, no Event, no
    ReportExport or policy, no metric; the missing key is reported by Secret and key name."""
    caplog.set_level(logging.DEBUG)
    registry = CollectorRegistry()
    async with webhook_receiver(fail_first=1, expect_token=TOKEN) as receiver:
        ns = await setup(client, receiver, retry={"backoffBase": "50ms", "backoffMax": "50ms"})
        async with exporting(client, ns, registry):
            await wait_export(client, ns, _phase("Delivered"))
        bad = await setup(client, receiver, token_key="missing",
                          retry={"maxAttempts": 2, "backoffBase": "50ms", "backoffMax": "50ms"})
        async with exporting(client, bad, registry):
            failed = await wait_export(client, bad, _phase("Failed"))
    assert failed["status"]["lastError"] == \
        f"Secret {bad}/report-token has no key 'missing'"
    outputs = [r.getMessage() + " " + str(r.args) + " " + (r.exc_text or "")
               for r in caplog.records if not r.name.startswith("cre.testing")]
    for space in (ns, bad):
        outputs.append(json.dumps((await client.list(EVENTS, namespace=space))["items"]))
        outputs.append(json.dumps((await client.list(REPORTEXPORTS, namespace=space))["items"]))
        outputs.append(json.dumps(
            (await client.list(REPORTEXPORTPOLICIES, namespace=space))["items"]))
    outputs.append(generate_latest(registry).decode())
    assert any("attempt" in o for o in outputs)  # the channels were written to
    assert not [o for o in outputs if TOKEN in o]


async def test_a_workflow_source_is_exported_as_its_one_category(client: KubeClient) -> None:
    """A ``kind: Workflow`` policy: a labelled Workflow that ends is delivered once, its report
    the one category ``workflow/<name>`` with the Workflow's verdict; the namespace's
    Certification (also labelled) is not sent."""
    async with webhook_receiver() as receiver:
        ns = await setup(client, receiver, retry={}, kind="Workflow")
        wf = await client.create(WORKFLOWS, {
            "apiVersion": "cre.dev/v1alpha1", "kind": "Workflow",
            "metadata": {"name": "user-wf", "namespace": ns, "labels": {"export": "yes"}},
            "spec": {"jobTemplate": {"spec": {"workload": {"trainJob": {
                "runtimeRef": {"name": "rt"}}}}}, "orchestration": {}}}, namespace=ns)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        wf["status"] = {"phase": "Failed", "verdict": "Failed", "conditions": [
            {"type": "Failed", "status": "True", "reason": "GroupsFailed",
             "message": "a group failed", "lastTransitionTime": now}]}
        await client.replace(WORKFLOWS, wf, subresource="status")
        async with exporting(client, ns, CollectorRegistry()):
            x = await wait_export(client, ns, _phase("Delivered"))
    assert x["spec"]["source"]["kind"] == "Workflow"
    (got,) = receiver.requests
    body = got.json()
    assert body["source"]["name"] == "user-wf"
    assert [(c["entry"], c["verdict"]) for c in body["report"]["categories"]] == [
        ("workflow/user-wf", "Failed")]


async def test_an_attempt_starts_from_the_live_export_not_a_lagging_cache(
        client: KubeClient) -> None:
    """Once snapshotted, a reconcile starts from the export read live: a cached copy one
    attempt behind (its status write's event not seen yet) is replaced by the served one, so no
    attempt is made twice; a Pending copy is used as cached; a deleted export ends the pass."""
    async with webhook_receiver() as receiver:
        ns = await setup(client, receiver, retry={})
    body = {"apiVersion": "cre.dev/v1alpha1", "kind": "ReportExport",
            "metadata": {"name": "x", "namespace": ns},
            "spec": {"source": {"name": "nightly", "uid": "u"}, "policyRef": {"name": "fleet"},
                     "webhook": {"url": "http://127.0.0.1:9/"}}}
    served = await client.create(REPORTEXPORTS, body, namespace=ns)
    pending = export_from_dict(served)
    served["status"] = {"phase": "Delivering", "payloadDigest": "sha256:0", "attempts": 0,
                        "idempotencyKey": "k"}
    lagging = await client.replace(REPORTEXPORTS, served, subresource="status")
    lagging["status"]["attempts"] = 1
    await client.replace(REPORTEXPORTS, lagging, subresource="status")
    controller = ReportExportController(client, namespaces=[ns])
    assert await controller.current(pending) is pending
    fresh = await controller.current(export_from_dict(lagging | {"status": {
        **lagging["status"], "attempts": 0}}))
    assert fresh is not None and fresh.status.attempts == 1
    await client.delete(REPORTEXPORTS, "x", namespace=ns)
    assert await controller.current(fresh) is None


async def _suspend(client: KubeClient, ns: str, value: bool) -> None:
    await client.patch(REPORTEXPORTPOLICIES, "fleet", {"spec": {"suspend": value}}, namespace=ns)


async def test_suspending_the_policy_pauses_retries_and_resuming_delivers_under_the_key(
        client: KubeClient) -> None:
    """A delivery in backoff (the receiver refused once) is paused when its policy is
    suspended: the export turns Suspended and nothing is POSTed however long it stays so; once
    the policy is resumed the next attempt is made and the report is delivered under the first
    attempt's Idempotency-Key. Each transition is one Event (PolicySuspended, Resumed)."""
    async with webhook_receiver(fail_first=1) as receiver:
        ns = await setup(client, receiver, retry={"backoffBase": "2s", "backoffMax": "2s"})
        async with exporting(client, ns, CollectorRegistry()):
            first = await wait_export(client, ns, lambda st: st.get("attempts", 0) >= 1)
            await _suspend(client, ns, True)
            paused = await wait_export(client, ns, _phase("Suspended"))
            await anyio.sleep(3)  # past the 2 s the next attempt was due after
            assert len(receiver.requests) == 1
            still = await export_of(client, ns)
            assert still is not None and still["status"]["phase"] == "Suspended"
            await _suspend(client, ns, False)
            done = await wait_export(client, ns, _phase("Delivered"))
            suspended = await _events(client, ns, "PolicySuspended")
            resumed = await _events(client, ns, "Resumed")
    assert paused["status"]["reason"] == "PolicySuspended" and paused["status"]["attempts"] == 1
    assert done["status"]["attempts"] == 2
    assert [e.get("count", 1) for e in suspended + resumed] == [1, 1]  # one per transition
    assert receiver.distinct_keys == {first["status"]["idempotencyKey"]}
    assert len(receiver.reports) == 1


async def test_cancel_stops_a_delivery_and_the_policy_does_not_send_it_again(
        client: KubeClient) -> None:
    """spec.cancel on an export whose receiver keeps refusing: it ends Cancelled, no POST
    follows, and the policy creates no second export for the same verdict."""
    async with webhook_receiver(fail_first=1_000_000) as receiver:
        ns = await setup(client, receiver, retry={"backoffBase": "500ms", "backoffMax": "1s"})
        async with exporting(client, ns, CollectorRegistry()):
            x = await wait_export(client, ns, lambda st: st.get("attempts", 0) >= 1)
            await client.patch(REPORTEXPORTS, x["metadata"]["name"], {"spec": {"cancel": True}},
                               namespace=ns)
            done = await wait_export(client, ns, _phase("Cancelled"))
            posts = len(receiver.requests)
            await anyio.sleep(1.5)  # longer than the backoff: nothing more is sent
            items = (await client.list(REPORTEXPORTS, namespace=ns))["items"]
    assert done["status"]["reason"] == "Cancelled" and done["status"]["finishedAt"]
    assert len(receiver.requests) == posts == done["status"]["attempts"]
    assert [i["metadata"]["uid"] for i in items] == [x["metadata"]["uid"]]


async def test_backoff_waits_run_on_the_controllers_clock(client: KubeClient) -> None:
    """On a clock running 1000 times the wall clock, two 100 s backoffs pass in a fraction of
    a wall second: the workqueue waits the scaled time (unscaled, the test would time out)."""
    clock = SimClock(scale=1000, start=datetime.now(UTC).timestamp())

    def now() -> datetime:
        return datetime.fromtimestamp(clock.now(), tz=UTC)

    async with webhook_receiver(fail_first=2) as receiver:
        ns = await setup(client, receiver, retry={"backoffBase": "100s", "backoffMax": "100s"})
        async with exporting(client, ns, CollectorRegistry(), clock=now, time_scale=1000):
            x = await wait_export(client, ns, _phase("Delivered"), timeout=30)
    assert x["status"]["attempts"] == 3 and len(receiver.requests) == 3


async def test_only_cancel_and_retry_nonce_may_change_and_cancel_cannot_be_unset(
        client: KubeClient) -> None:
    """The API server takes patches of spec.retryNonce and spec.cancel and refuses one of the
    receiver's URL (422, naming the field): editing a delivery under way is not possible,
    retrying or cancelling it is; once set, cancel cannot be set back to false (422)."""
    async with webhook_receiver() as receiver:
        ns = await setup(client, receiver, retry={})
    await client.create(REPORTEXPORTS, {
        "apiVersion": "cre.dev/v1alpha1", "kind": "ReportExport",
        "metadata": {"name": "x", "namespace": ns},
        "spec": {"source": {"name": "nightly", "uid": "u"}, "policyRef": {"name": "fleet"},
                 "webhook": {"url": "http://127.0.0.1:9/"}}}, namespace=ns)
    with pytest.raises(ApiError) as refused:
        await client.patch(REPORTEXPORTS, "x", {"spec": {"webhook": {
            "url": "http://elsewhere.example/"}}}, namespace=ns)
    assert refused.value.status == 422 and "webhook" in str(refused.value)
    patched = await client.patch(REPORTEXPORTS, "x", {"spec": {"retryNonce": "r1"}},
                                 namespace=ns)
    assert patched["spec"]["retryNonce"] == "r1"
    patched = await client.patch(REPORTEXPORTS, "x", {"spec": {"cancel": True}}, namespace=ns)
    assert patched["spec"]["cancel"] is True
    for undo in (False, None):
        with pytest.raises(ApiError) as unset:
            await client.patch(REPORTEXPORTS, "x", {"spec": {"cancel": undo}}, namespace=ns)
        assert unset.value.status == 422 and "cancel cannot be unset" in str(unset.value)


async def _events(client: KubeClient, ns: str, reason: str) -> list[dict[str, Any]]:
    """The Events of ``ns`` with ``reason`` (the recorder writes in the background: waits up
    to 10 s for the first one)."""
    with anyio.fail_after(10):
        while True:
            items = [e for e in (await client.list(EVENTS, namespace=ns))["items"]
                     if e.get("reason") == reason]
            if items:
                return items
            await anyio.sleep(0.05)


async def test_a_new_retry_nonce_delivers_a_failed_export_under_the_same_key(
        client: KubeClient) -> None:
    """A receiver refuses both attempts of the first cycle (maxAttempts 2): Failed,
    RetriesExhausted. A new spec.retryNonce starts a second cycle: the third POST, under the
    same Idempotency-Key, is taken; the export is Delivered with attempts 3, cycleAttempts 1,
    the nonce observed, and one RetryRequested Event (none for the resyncs)."""
    async with webhook_receiver(fail_first=2) as receiver:
        ns = await setup(client, receiver, retry={"maxAttempts": 2, "backoffBase": "50ms",
                                                  "backoffMax": "50ms"})
        async with exporting(client, ns, CollectorRegistry()):
            failed = await wait_export(client, ns, _phase("Failed"))
            assert failed["status"]["reason"] == "RetriesExhausted"
            await client.patch(REPORTEXPORTS, failed["metadata"]["name"],
                               {"spec": {"retryNonce": "again-1"}}, namespace=ns)
            done = await wait_export(client, ns, _phase("Delivered"))
            retried = await _events(client, ns, "RetryRequested")
            await anyio.sleep(0.5)  # time for a resync to (not) tell it again
            retried = await _events(client, ns, "RetryRequested")
    st = done["status"]
    assert (st["attempts"], st["cycleAttempts"], st["observedRetryNonce"]) == (3, 1, "again-1")
    assert st["cycleStartedAt"] and st["finishedAt"]
    assert receiver.distinct_keys == {failed["status"]["idempotencyKey"]}
    assert len(receiver.requests) == 3 and len(receiver.reports) == 1
    assert len(retried) == 1 and retried[0].get("count", 1) == 1
    assert retried[0]["type"] == "Normal" and TOKEN not in json.dumps(retried)


async def test_a_retry_after_longer_than_backoff_max_is_honoured(client: KubeClient) -> None:
    """A 503 with Retry-After: 2 under backoffMax 100ms: the export schedules the next attempt
    2 s after the failed one (status.nextAttemptAt, on the controller's clock, and the
    message), not at the 100 ms cap, and delivers on attempt 2."""
    async with webhook_receiver(fail_first=1, retry_after="2") as receiver:
        ns = await setup(client, receiver, retry={"backoffBase": "50ms", "backoffMax": "100ms"})
        async with exporting(client, ns, CollectorRegistry()):
            first = await wait_export(client, ns, lambda st: st.get("attempts", 0) == 1)
            done = await wait_export(client, ns, _phase("Delivered"))
    st = first["status"]
    last, due = (datetime.fromisoformat(st[k].replace("Z", "+00:00"))
                 for k in ("lastAttemptAt", "nextAttemptAt"))
    assert (due - last).total_seconds() == 2.0
    assert st["message"].endswith("next in 2s") and st["lastHttpStatus"] == 503
    assert done["status"]["attempts"] == 2 and len(receiver.requests) == 2
