"""Every kind's Plan goes through the one executor (cre.kube.executor), in its one write order
(owner read live, creates, status, events, deletes, owner patch) and with its one
status-conflict rule, against the API emulator: Job, Workflow, Certification, WorkloadRun,
BandwidthMeasurement and GoodputMeasurement."""

from __future__ import annotations

import base64
import itertools
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest

from cre.api import labels as L
from cre.api.conditions import ConditionType
from cre.api.converter import from_dict
from cre.api.meta import ConditionStatus
from cre.core.common.plan import Create, Delete, EventSeverity, EventSpec, Patch, Plan
from cre.core.measure.logread import set_condition
from cre.kube.client import (
    BANDWIDTHMEASUREMENTS,
    CERTIFICATIONS,
    CONFIGMAPS,
    EVENTS,
    GOODPUTMEASUREMENTS,
    JOBS,
    NAMESPACES,
    WORKFLOWS,
    WORKLOADRUNS,
    KubeClient,
    Resource,
)
from cre.kube.events import EventRecorder
from cre.kube.executor import OutcomeKind, PlanExecutor
from cre.testing.apiserver import Emulator

pytestmark = pytest.mark.anyio
_namespaces = itertools.count()
NOW = datetime(2026, 12, 6, tzinfo=UTC)
JOB_SPEC = {"workload": {"trainJob": {"runtimeRef": {"name": "mpi-runtime"}}}}

#: One served object of every kind (name ``owner``), by its resource.
KINDS: dict[str, tuple[Resource, dict[str, Any]]] = {
    "Job": (JOBS, JOB_SPEC),
    "Workflow": (WORKFLOWS, {"jobTemplate": {"spec": JOB_SPEC}, "orchestration": {}}),
    "Certification": (CERTIFICATIONS, {"categories": [
        {"domain": "communication", "variant": "nccl-all-reduce"}]}),
    "WorkloadRun": (WORKLOADRUNS, {"image": "img", "numNodes": 2,
                                   "framework": {"exec": {"command": ["true"]}}}),
    "BandwidthMeasurement": (BANDWIDTHMEASUREMENTS, {
        "jobRef": {"kind": "Job", "name": "j"}, "logProfileRef": "nccl-bandwidth"}),
    "GoodputMeasurement": (GOODPUTMEASUREMENTS, {
        "jobRef": {"kind": "Job", "name": "j"}, "logProfileRef": "megatron-training"}),
}


@pytest.fixture
async def client(shared_emulator: Emulator) -> AsyncIterator[KubeClient]:
    """A client of the shared emulator."""
    kube = await KubeClient.from_kubeconfig(str(shared_emulator.kubeconfig_path))
    try:
        yield kube
    finally:
        await kube.close()


async def _owner(client: KubeClient, kind: str) -> tuple[Any, PlanExecutor]:
    """A served ``kind`` object in a fresh namespace, and the executor of its plans."""
    ns = f"one-{kind.lower()}-{next(_namespaces)}"
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": ns}})
    res, spec = KINDS[kind]
    served = await client.create(res, {"apiVersion": L.API_VERSION, "kind": kind,
                                       "metadata": {"name": "owner", "namespace": ns},
                                       "spec": spec}, namespace=ns)
    involved: Callable[[Any], dict[str, Any]] = lambda o: {  # noqa: E731
        "apiVersion": L.API_VERSION, "kind": kind, "name": o.metadata.name,
        "namespace": o.metadata.namespace, "uid": o.metadata.uid}
    return from_dict(served), PlanExecutor(client, EventRecorder(client, component="test"),
                                           owner=res, involved=involved)


def _configmap(name: str, ns: str, *, owner: Any = None, data: bytes = b"x") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": L.API_VERSION, "kind": owner.kind,
                                    "name": owner.metadata.name, "uid": owner.metadata.uid,
                                    "controller": True}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            "binaryData": {"k": base64.b64encode(data).decode()}}


def _create(body: dict[str, Any], *, replace: bool = False) -> Create:
    meta = body["metadata"]
    return Create(api_version="v1", kind="ConfigMap", namespace=meta["namespace"],
                  name=meta["name"], body=body, replace=replace)


def _status(obj: Any) -> Any:
    """``obj``'s status with a condition only this test writes."""
    conds = set_condition(obj.status.conditions, type_=ConditionType.IN_PROGRESS,
                          status=ConditionStatus.TRUE, reason="Planned",
                          message="written by the one executor", now=NOW)
    return attrs.evolve(obj.status, conditions=conds)


def _step(record: Any, plural: str) -> str:
    """An audit record of the plan's writes, as ``verb resource[/subresource]``."""
    what = "owner" if record.resource == plural else record.resource
    return f"{record.verb} {what}{'/' + record.subresource if record.subresource else ''}"


@pytest.mark.parametrize("kind", list(KINDS))
async def test_every_kind_is_written_in_the_one_order(
        kind: str, client: KubeClient, shared_emulator: Emulator) -> None:
    """A plan with every kind of write lands whole, in the documented order: the owner read
    live, the creates (a replace replacing), the status, its event, the delete, the owner's
    patch (guarded by the resourceVersion the status write returned)."""
    obj, executor = await _owner(client, kind)
    ns = obj.metadata.namespace
    old = await client.create(CONFIGMAPS, _configmap("old", ns), namespace=ns)
    await client.create(CONFIGMAPS, _configmap("result", ns, data=b"before"), namespace=ns)
    plan: Plan[Any] = Plan(
        resource_version=obj.metadata.resource_version or "",
        creates=(_create(_configmap("made", ns, owner=obj)),
                 _create(_configmap("result", ns, owner=obj, data=b"after"), replace=True)),
        deletes=(Delete(api_version="v1", kind="ConfigMap", namespace=ns, name="old",
                        uid=old["metadata"]["uid"]),),
        patches=(Patch(body={"metadata": {"labels": {"planned": "yes"}}}),),
        status=_status(obj),
        events=(EventSpec(type=EventSeverity.NORMAL, reason="Planned", message="m"),))
    since = shared_emulator.audit.seq
    outcome = await executor.apply(obj, plan)
    steps = [_step(r, executor.owner.plural) for r in shared_emulator.audit.since(since)
             if r.namespace == ns]

    assert outcome.kind == OutcomeKind.APPLIED
    served = from_dict(await client.get(executor.owner, "owner", namespace=ns))
    assert served.status.conditions == plan.status.conditions
    assert served.metadata.labels == {"planned": "yes"}
    assert [c["metadata"]["name"] for c in outcome.created] == ["made", "result"]
    result = await client.get(CONFIGMAPS, "result", namespace=ns)
    assert base64.b64decode(result["binaryData"]["k"]) == b"after"
    names = {c["metadata"]["name"]
             for c in (await client.list(CONFIGMAPS, namespace=ns))["items"]}
    assert names >= {"made", "result"} and "old" not in names
    events = (await client.list(EVENTS, namespace=ns))["items"]
    assert [(e["involvedObject"]["kind"], e["reason"]) for e in events] == [(kind, "Planned")]
    assert steps == ["get owner", "create configmaps", "create configmaps", "get configmaps",
                     "update configmaps", "update owner/status", "create events",
                     "delete configmaps", "patch owner"]


@pytest.mark.parametrize("kind", list(KINDS))
async def test_every_kind_follows_the_one_status_conflict_rule(
        kind: str, client: KubeClient) -> None:
    """A plan computed from a copy the server has moved past writes nothing: no create (the
    owner is read live first), no status, no event; the outcome carries the live copy for the
    core to plan again. A deleted owner is GONE."""
    obj, executor = await _owner(client, kind)
    ns = obj.metadata.namespace
    touched = await client.patch(executor.owner, "owner",
                                 {"metadata": {"labels": {"touched": "yes"}}}, namespace=ns)
    events = EventSpec(type=EventSeverity.WARNING, reason="Stale", message="m")
    plan: Plan[Any] = Plan(resource_version=obj.metadata.resource_version or "",
                           status=_status(obj), events=(events,))
    for creates in ((), (_create(_configmap("never", ns, owner=obj)),)):
        outcome = await executor.apply(obj, attrs.evolve(plan, creates=creates))
        assert outcome.kind == OutcomeKind.CONFLICT
        assert outcome.fresh is not None
        assert outcome.fresh["metadata"]["resourceVersion"] == \
            touched["metadata"]["resourceVersion"]
    served = from_dict(await client.get(executor.owner, "owner", namespace=ns))
    assert served.status.conditions == obj.status.conditions
    assert (await client.list(EVENTS, namespace=ns))["items"] == []
    left = (await client.list(CONFIGMAPS, namespace=ns))["items"]
    assert "never" not in {c["metadata"]["name"] for c in left}
    await client.delete(executor.owner, "owner", namespace=ns)
    gone = await executor.apply(served, attrs.evolve(
        plan, resource_version=served.metadata.resource_version or ""))
    assert gone.kind == OutcomeKind.GONE
