"""The NodeCertification controller against the API emulator: a pass expires on time (record
Expired, label expired, gauge 4, one Warning event) with no Certification left to wake it, and
the blast-radius breaker raises the Certification's NodeTaintsHeldBack condition, its Warning
event and the cre_node_taints_held_back gauge, then clears them once room frees up."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import attrs
import pytest
from prometheus_client import CollectorRegistry

from cre.api.converter import to_dict
from cre.api.labels import GPU_PRESENT, WORKFLOW
from cre.api.meta import ObjectMeta
from cre.api.nodecertification import (
    CategoryResult,
    CertificationRef,
    NodeCertification,
    NodeCertificationSpec,
    NodeCertificationStatus,
    NodeResult,
)
from cre.api.watch import WatchEventType
from cre.controller.nodecertification.controller import (
    EXPIRY_KEY,
    NodeCertificationController,
)
from cre.core.nodecertification.nodestate import STATE_LABEL, TAINT_KEY
from cre.core.nodecertification.reconcile import NodeWrite
from cre.core.workflow import noderesults as NR
from cre.kube.client import (
    CERTIFICATIONS,
    CONFIGMAPS,
    EVENTS,
    NAMESPACES,
    NODECERTIFICATIONS,
    NODES,
    ApiError,
    KubeClient,
)
from cre.kube.runtime import WatchEvent
from cre.testing.apiserver import Emulator
from tests.core.nodecertworld import broken, ended

pytestmark = pytest.mark.anyio

CATEGORY = "communication/nccl-all-reduce"


@pytest.fixture
async def client(shared_emulator: Emulator) -> AsyncIterator[KubeClient]:
    """A client of the module's emulator."""
    kube = await KubeClient.from_kubeconfig(str(shared_emulator.kubeconfig_path))
    try:
        yield kube
    finally:
        await kube.close()


@contextlib.asynccontextmanager
async def _running(client: KubeClient, registry: CollectorRegistry
                   ) -> AsyncIterator[NodeCertificationController]:
    controller = NodeCertificationController(client, registry=registry)
    async with anyio.create_task_group() as tg:
        tg.start_soon(controller.run)
        with anyio.fail_after(20):
            await controller.wait_synced()
        yield controller
        tg.cancel_scope.cancel()


async def _until(what: str, check: Callable[[], Any], *, limit: float = 20.0) -> Any:
    """Poll ``check`` (sync or async) until it returns something truthy."""
    with anyio.move_on_after(limit):
        while True:
            found = check()
            if hasattr(found, "__await__"):
                found = await found
            if found:
                return found
            await anyio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def _node(client: KubeClient, name: str, *, labels: dict[str, str] | None = None,
                taints: list[dict[str, str]] | None = None) -> None:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": {GPU_PRESENT: "true", **(labels or {})}},
        "spec": {"taints": taints} if taints else {}}
    await client.create(NODES, body)


async def _events(client: KubeClient, namespace: str, reason: str) -> list[dict[str, Any]]:
    page = await client.list(EVENTS, namespace=namespace)
    return [e for e in page.get("items") or [] if e.get("reason") == reason]


async def test_a_pass_expires_on_time_and_says_so_once(client: KubeClient) -> None:
    """A record whose only pass is valid for one more second, on a node labelled passed,
    turns Expired by itself: the label becomes expired, the state gauge reads 4 and one
    Warning NodeCertificationExpired names the node."""
    node = "expiry-node"
    await _node(client, node, labels={STATE_LABEL: "passed"})
    now = datetime.now(UTC).replace(microsecond=0)
    passed = CategoryResult(domain="communication", variant="nccl-all-reduce",
                            result=NodeResult.PASSED, time=now - timedelta(hours=1),
                            certification=CertificationRef(namespace="x", name="gone"),
                            valid_until=now + timedelta(seconds=2))
    record = to_dict(NodeCertification(spec=NodeCertificationSpec(node_name=node)))
    record["metadata"] = {"name": node}
    created = await client.create(NODECERTIFICATIONS, record)
    created["status"] = to_dict(NodeCertificationStatus(
        state="Passed", categories=(passed,), categories_passed="1/1",
        valid_until=passed.valid_until))
    await client.replace(NODECERTIFICATIONS, created, subresource="status")
    registry = CollectorRegistry()
    labels = {"node": node, "category": CATEGORY}
    async with _running(client, registry):
        await _until("the gauge Passed", lambda: registry.get_sample_value(
            "cre_node_certification_state", labels) == 1)

        async def expired() -> bool:
            got = await client.get(NODECERTIFICATIONS, node)
            return bool(got["status"]["state"] == "Expired")

        await _until("the record Expired", expired)
        await _until("the gauge Expired", lambda: registry.get_sample_value(
            "cre_node_certification_state", labels) == 4)

        async def relabelled() -> bool:
            got = await client.get(NODES, node)
            return bool(got["metadata"]["labels"].get(STATE_LABEL) == "expired")

        await _until("the node labelled expired", relabelled)
        await _until("the event", lambda: _events(client, "default", "NodeCertificationExpired"))
        await anyio.sleep(0.5)  # a later pass must not say it again
        (event,) = [e for e in await _events(client, "default", "NodeCertificationExpired")
                    if e["involvedObject"]["name"] == node]
        assert event["type"] == "Warning"
        assert event["involvedObject"]["kind"] == "NodeCertification"


async def test_the_breaker_condition_event_and_gauge_follow_the_held_back_nodes(
        client: KubeClient) -> None:
    """With maxTainted 2 and one node already carrying CRE's taint, an ended Certification
    that failed two nodes taints one and holds the other back: NodeTaintsHeldBack True on the
    Certification, a Warning event, the gauge at 1, and on each record one
    NodeCertificationFailed plus NodeTainted or NodeTaintHeldBack. Once the old taint is gone,
    the next pass taints the held node (its one NodeTainted): the condition turns False and the
    gauge reads 0; no record event is ever repeated."""
    ns = "breaker"
    with contextlib.suppress(ApiError):
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": ns}})
    taint = {"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"}
    await _node(client, "breaker-a", taints=[taint])
    for name in ("breaker-b", "breaker-c"):
        await _node(client, name)
    cert = ended(name="brk", failed=True, node_state={"taint": True, "maxTainted": 2})
    body = to_dict(cert)
    body["metadata"] = {"name": "brk", "namespace": ns}
    status = body.pop("status")
    created = await client.create(CERTIFICATIONS, body, namespace=ns)
    created["status"] = status
    await client.replace(CERTIFICATIONS, created, subresource="status")
    blobs = {NR.SUCCEEDED: NR.encode_names(()),
             NR.FAILED: NR.encode_records([broken("breaker-b"), broken("breaker-c")]),
             NR.UNCERTIFIED: NR.encode_records(())}
    for kind, blob in blobs.items():
        await client.create(CONFIGMAPS, {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{kind}-brk", "namespace": ns,
                         "labels": {WORKFLOW: "brk-wf"}},
            "binaryData": {NR.data_key(kind): base64.b64encode(blob).decode()}}, namespace=ns)
    registry = CollectorRegistry()
    gauge = {"namespace": ns, "certification": "brk"}

    async def held_condition(status_: str) -> dict[str, Any] | None:
        got = await client.get(CERTIFICATIONS, "brk", namespace=ns)
        return next((c for c in got["status"].get("conditions") or []
                     if c["type"] == "NodeTaintsHeldBack" and c["status"] == status_), None)

    async with _running(client, registry):
        raised = await _until("NodeTaintsHeldBack True", lambda: held_condition("True"))
        assert raised["reason"] == "TaintCapReached"
        assert "1 failed node(s)" in raised["message"] and "allows 2" in raised["message"]
        assert registry.get_sample_value("cre_node_taints_held_back", gauge) == 1
        (event,) = await _until("the Warning event",
                                lambda: _events(client, ns, "NodeTaintsHeldBack"))
        assert event["type"] == "Warning" and "breaker-c" in event["message"]
        b = await client.get(NODES, "breaker-b")
        assert [t["key"] for t in b["spec"]["taints"]] == [TAINT_KEY]

        await client.patch(NODES, "breaker-a", {"spec": {"taints": None}})
        await client.patch(CERTIFICATIONS, "brk", {"metadata": {"annotations": {"poke": "1"}}},
                           namespace=ns)
        cleared = await _until("NodeTaintsHeldBack False", lambda: held_condition("False"))
        assert cleared["reason"] == "NoTaintsHeldBack"
        assert registry.get_sample_value("cre_node_taints_held_back", gauge) == 0
        c = await client.get(NODES, "breaker-c")
        assert [t["key"] for t in c["spec"]["taints"]] == [TAINT_KEY]
        await _until("breaker-c's NodeTainted", lambda: _record_events(client, "breaker-c"))
        await anyio.sleep(0.5)  # later passes must not say anything again
        assert await _record_events(client, "breaker-b") == [
            ("Warning", "NodeCertificationFailed"), ("Warning", "NodeTainted")]
        assert await _record_events(client, "breaker-c") == [
            ("Warning", "NodeCertificationFailed"), ("Warning", "NodeTaintHeldBack"),
            ("Warning", "NodeTainted")]


async def _record_events(client: KubeClient, node: str) -> list[tuple[str, str]] | None:
    """(type, reason) of the Events about ``node``'s record, sorted, once it has a NodeTainted
    one (``None`` before)."""
    page = await client.list(EVENTS, namespace="default")
    out = sorted((e["type"], e["reason"]) for e in page.get("items") or []
                 if e["involvedObject"].get("kind") == "NodeCertification"
                 and e["involvedObject"]["name"] == node)
    return out if ("Warning", "NodeTainted") in out else None


async def test_a_node_that_moved_on_under_its_patch_is_planned_again_not_failed(
        client: KubeClient) -> None:
    """A node patch whose resourceVersion test fails (422: the Node changed since the decision)
    leaves the Node as it is and asks for another pass, not a reconcile error; the same patch
    over the current resourceVersion applies."""
    await _node(client, "moved-on-node")
    node = await client.get(NODES, "moved-on-node")
    rv = node["metadata"]["resourceVersion"]
    await client.patch(NODES, "moved-on-node", {"metadata": {"labels": {"other": "write"}}})
    label = {"op": "add", "path": f"/metadata/labels/{STATE_LABEL.replace('/', '~1')}",
             "value": "passed"}
    controller = NodeCertificationController(client, registry=CollectorRegistry())
    stale = NodeWrite(node="moved-on-node", node_patch=(
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv}, label))
    assert await controller._apply(stale) is False
    assert STATE_LABEL not in (await client.get(NODES, "moved-on-node"))["metadata"]["labels"]
    current = (await client.get(NODES, "moved-on-node"))["metadata"]["resourceVersion"]
    fresh = attrs.evolve(stale, node_patch=(
        {"op": "test", "path": "/metadata/resourceVersion", "value": current}, label))
    assert await controller._apply(fresh) is True
    got = (await client.get(NODES, "moved-on-node"))["metadata"]["labels"]
    assert got[STATE_LABEL] == "passed"


class _Keys:
    """The handler's queue: the keys added, in order."""

    def __init__(self) -> None:
        self.added: list[str] = []

    def add(self, key: str, *, priority: int = 0) -> None:
        self.added.append(key)

    def add_after(self, key: str, delay: float) -> None:
        self.added.append(key)


def _passed_record(node: str, until: datetime) -> NodeCertification:
    result = CategoryResult(domain="communication", variant="nccl-all-reduce",
                            result=NodeResult.PASSED, time=until - timedelta(days=7),
                            certification=CertificationRef(namespace="x", name="c"),
                            valid_until=until)
    return NodeCertification(metadata=ObjectMeta(name=node),
                             spec=NodeCertificationSpec(node_name=node),
                             status=NodeCertificationStatus(
                                 state="Passed", categories=(result,), categories_passed="1/1",
                                 valid_until=until, last_certification=result.certification))


async def test_a_record_event_wakes_the_expiry_pass_only_when_due_before_its_next_look(
        client: KubeClient) -> None:
    """The hundreds of record writes of one fold do not each enqueue the expiry pass: a record
    due no earlier than the pass's next look enqueues only its Certification; one due earlier
    (or with no look planned) enqueues the pass too."""
    now = datetime.now(UTC)
    controller = NodeCertificationController(client, registry=CollectorRegistry())
    keys = _Keys()

    def event(until: datetime) -> WatchEvent[NodeCertification]:
        return WatchEvent(type=WatchEventType.ADDED, old=None,
                          new=_passed_record("n", until))

    controller._on_record(event(now + timedelta(days=7)), keys)
    assert keys.added == ["x/c", EXPIRY_KEY]  # no look planned yet
    controller._next_expiry = now + timedelta(days=7)
    keys.added.clear()
    controller._on_record(event(now + timedelta(days=7, seconds=5)), keys)
    assert keys.added == ["x/c"]
    controller._on_record(event(now + timedelta(days=1)), keys)
    assert keys.added == ["x/c", "x/c", EXPIRY_KEY]
