"""The one executor (cre.kube.executor) applies a Workflow's Plan in its documented order: a
foreign holder of a name stops the plan before the status (and is reported), a holder the object
controls counts as created, ``replace`` creates replace, and the status lands only after them."""

from __future__ import annotations

import base64
import itertools
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from cre.api import labels as L
from cre.api.converter import from_dict
from cre.api.workflow import Workflow
from cre.controller.workflow.shell import involved_workflow, workflow_from_dict
from cre.core.common.plan import Create, Plan
from cre.kube.client import CONFIGMAPS, NAMESPACES, TRAINING_RUNTIMES, WORKFLOWS, KubeClient
from cre.kube.events import EventRecorder
from cre.kube.executor import (
    OutcomeKind,
    PlanExecutor,
    controlled_by,
    kind_batches,
    resource_for,
)
from cre.testing.apiserver import Emulator

pytestmark = pytest.mark.anyio
_namespaces = itertools.count()


def test_resources_of_dependency_kinds() -> None:
    """Dependency kinds map to their API resources (plural, scope) without a discovery call."""
    assert resource_for("v1", "ConfigMap") == CONFIGMAPS
    assert resource_for("trainer.kubeflow.org/v1alpha1", "TrainingRuntime") == TRAINING_RUNTIMES
    cd = resource_for("resource.nvidia.com/v1beta1", "ComputeDomain")
    assert (cd.group, cd.version, cd.plural, cd.namespaced) == (
        "resource.nvidia.com", "v1beta1", "computedomains", True)
    assert resource_for("resource.k8s.io/v1", "ResourceClaimTemplate").plural == \
        "resourceclaimtemplates"
    assert not resource_for("trainer.kubeflow.org/v1alpha1",
                            "ClusterTrainingRuntime").namespaced
    assert controlled_by({"metadata": {"ownerReferences": [{"uid": "u", "controller": True}]}},
                         "u")
    assert not controlled_by({"metadata": {"ownerReferences": [{"uid": "u"}]}}, "u")


@pytest.fixture
async def setup(shared_emulator: Emulator) -> AsyncIterator[tuple[KubeClient, Workflow]]:
    """A client and a served Workflow (in a fresh namespace) to apply plans for."""
    ns = f"exec-{next(_namespaces)}"
    client = await KubeClient.from_kubeconfig(str(shared_emulator.kubeconfig_path))
    try:
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": ns}})
        body = {"apiVersion": L.API_VERSION, "kind": "Workflow",
                "metadata": {"name": "wf", "namespace": ns},
                "spec": {"jobTemplate": {"spec": {"workload": {"trainJob": {
                    "runtimeRef": {"name": "rt"}}}}}, "orchestration": {}}}
        served = await client.create(WORKFLOWS, body, namespace=ns)
        yield client, workflow_from_dict(served)
    finally:
        await client.close()


def _cm(name: str, ns: str, *, owner: str | None, data: bytes = b"x") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": L.API_VERSION, "kind": "Workflow",
                                    "name": "wf", "uid": owner, "controller": True}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            "binaryData": {"k": base64.b64encode(data).decode()}}


def _create(body: dict[str, Any]) -> Create:
    meta = body["metadata"]
    return Create(api_version="v1", kind="ConfigMap", namespace=meta["namespace"],
                  name=meta["name"], body=body)


async def test_plan_order_and_answers(setup: tuple[KubeClient, Workflow]) -> None:
    """Own holders count as created, replace creates replace, then the status is written; a
    foreign holder stops the next plan before its replaces and status and is reported."""
    client, wf = setup
    ns, uid = wf.metadata.namespace or "", wf.metadata.uid or ""
    executor = PlanExecutor(client, EventRecorder(client, component="test"), owner=WORKFLOWS,
                            involved=involved_workflow)
    await client.create(CONFIGMAPS, _cm("mine", ns, owner=uid), namespace=ns)
    await client.create(CONFIGMAPS, _cm("theirs", ns, owner=None), namespace=ns)
    await client.create(CONFIGMAPS, _cm("result", ns, owner=uid, data=b"old"), namespace=ns)
    status = attrs.evolve(wf.status, namespace=ns)
    plan: Plan[Any] = Plan(
        resource_version=wf.metadata.resource_version or "",
        creates=(_create(_cm("mine", ns, owner=uid)), _create(_cm("new", ns, owner=uid)),
                 Create(api_version="v1", kind="ConfigMap", namespace=ns, name="result",
                        body=_cm("result", ns, owner=uid, data=b"new"), replace=True)),
        status=status)
    outcome = await executor.apply(wf, plan)
    assert outcome.kind == OutcomeKind.APPLIED
    assert [c["metadata"]["name"] for c in outcome.created] == ["mine", "new", "result"]
    result = await client.get(CONFIGMAPS, "result", namespace=ns)
    assert base64.b64decode(result["binaryData"]["k"]) == b"new"
    served = from_dict(await client.get(WORKFLOWS, "wf", namespace=ns))
    assert served.status.namespace == ns

    conflicted = Plan(
        resource_version=served.metadata.resource_version or "",
        creates=(_create(_cm("theirs", ns, owner=uid)),
                 Create(api_version="v1", kind="ConfigMap", namespace=ns, name="result",
                        body=_cm("result", ns, owner=uid, data=b"newer"), replace=True)),
        status=attrs.evolve(served.status, namespace="elsewhere"))
    outcome = await executor.apply(served, conflicted)
    assert outcome.kind == OutcomeKind.CREATE_CONFLICTS
    assert [(c.kind, c.name) for c in outcome.conflicts] == [("ConfigMap", "theirs")]
    result = await client.get(CONFIGMAPS, "result", namespace=ns)
    assert base64.b64decode(result["binaryData"]["k"]) == b"new"
    again = from_dict(await client.get(WORKFLOWS, "wf", namespace=ns))
    assert again.status.namespace == ns


async def test_stale_status_write_is_a_conflict(setup: tuple[KubeClient, Workflow]) -> None:
    """A status computed from an old resourceVersion is not written: the outcome is CONFLICT
    (the controller re-reads and runs the core again)."""
    client, wf = setup
    executor = PlanExecutor(client, EventRecorder(client, component="test"), owner=WORKFLOWS,
                            involved=involved_workflow)
    ns = wf.metadata.namespace or ""
    await client.patch(WORKFLOWS, "wf", {"metadata": {"labels": {"touched": "yes"}}},
                       namespace=ns)
    plan: Plan[Any] = Plan(resource_version=wf.metadata.resource_version or "",
                                   status=attrs.evolve(wf.status, namespace=ns))
    outcome = await executor.apply(wf, plan)
    assert outcome.kind == OutcomeKind.CONFLICT


async def test_no_create_for_a_stale_copy(setup: tuple[KubeClient, Workflow]) -> None:
    """Creates are applied only for the object as served now: a copy behind the server is a
    CONFLICT, a deleted object (a cache that missed the deletion) or a replaced one (another
    uid) is GONE, and in neither case is anything created."""
    client, wf = setup
    executor = PlanExecutor(client, EventRecorder(client, component="test"), owner=WORKFLOWS,
                            involved=involved_workflow)
    ns, uid = wf.metadata.namespace or "", wf.metadata.uid or ""

    def plan(of: Workflow, name: str) -> Plan[Any]:
        return Plan(resource_version=of.metadata.resource_version or "",
                        creates=(_create(_cm(name, ns, owner=uid)),))

    async def exists(name: str) -> bool:
        page = await client.list(CONFIGMAPS, namespace=ns)
        return any(c["metadata"]["name"] == name for c in page.get("items") or [])

    await client.patch(WORKFLOWS, "wf", {"metadata": {"labels": {"touched": "yes"}}},
                       namespace=ns)
    assert (await executor.apply(wf, plan(wf, "behind"))).kind == OutcomeKind.CONFLICT
    assert not await exists("behind")
    served = from_dict(await client.get(WORKFLOWS, "wf", namespace=ns))
    assert (await executor.apply(served, plan(served, "current"))).kind == \
        OutcomeKind.APPLIED
    assert await exists("current")
    await client.delete(WORKFLOWS, "wf", namespace=ns)
    assert (await executor.apply(served, plan(served, "gone"))).kind == OutcomeKind.GONE
    assert not await exists("gone")
    body = {"apiVersion": L.API_VERSION, "kind": "Workflow",
            "metadata": {"name": "wf", "namespace": ns},
            "spec": {"jobTemplate": {"spec": {"workload": {"trainJob": {
                "runtimeRef": {"name": "rt"}}}}}, "orchestration": {}}}
    await client.create(WORKFLOWS, body, namespace=ns)
    assert (await executor.apply(served, plan(served, "replaced"))).kind == \
        OutcomeKind.GONE
    assert not await exists("replaced")


def test_kind_batches_keep_dependency_kinds_first_and_plan_order() -> None:
    """Creates split by kind in the order kinds first appear (a replace of a kind apart from
    its creates); each batch keeps plan order."""
    def mk(kind: str, name: str) -> Create:
        return Create(api_version="v1", kind=kind, namespace="ns", name=name, body={})
    plan = [mk("TrainingRuntime", "rt-0"), mk("Job", "j-0"), mk("TrainingRuntime", "rt-1"),
            mk("Job", "j-1"), mk("ConfigMap", "cm")]
    upsert = Create(api_version="v1", kind="ConfigMap", namespace="ns", name="r", body={},
                    replace=True)
    assert [[c.name for c in b] for b in kind_batches([*plan, upsert])] == [
        ["rt-0", "rt-1"], ["j-0", "j-1"], ["cm"], ["r"]]
    assert kind_batches([]) == []


async def test_many_creates_of_a_kind_land_in_plan_order_with_foreign_holders_named(
        setup: tuple[KubeClient, Workflow]) -> None:
    """40 creates of one kind (more than are sent at once) all land and come back in plan
    order; a foreign holder among them is named and stops the plan before its status."""
    client, wf = setup
    ns, uid = wf.metadata.namespace or "", wf.metadata.uid or ""
    executor = PlanExecutor(client, EventRecorder(client, component="test"), owner=WORKFLOWS,
                            involved=involved_workflow)
    names = [f"cm-{i:02d}" for i in range(40)]
    plan: Plan[Any] = Plan(
        resource_version=wf.metadata.resource_version or "",
        creates=tuple(_create(_cm(n, ns, owner=uid)) for n in names))
    outcome = await executor.apply(wf, plan)
    assert outcome.kind == OutcomeKind.APPLIED
    assert [c["metadata"]["name"] for c in outcome.created] == names
    await client.create(CONFIGMAPS, _cm("foreign", ns, owner=None), namespace=ns)
    served = from_dict(await client.get(WORKFLOWS, "wf", namespace=ns))
    mixed: Plan[Any] = Plan(
        resource_version=served.metadata.resource_version or "",
        creates=tuple(_create(_cm(n, ns, owner=uid)) for n in ["x-1", "foreign", "x-2"]),
        status=attrs.evolve(served.status, namespace="elsewhere"))
    outcome = await executor.apply(served, mixed)
    assert outcome.kind == OutcomeKind.CREATE_CONFLICTS
    assert [(c.kind, c.name) for c in outcome.conflicts] == [("ConfigMap", "foreign")]
    assert sorted(c["metadata"]["name"] for c in outcome.created) == ["x-1", "x-2"]
    again = from_dict(await client.get(WORKFLOWS, "wf", namespace=ns))
    assert again.status.namespace is None  # the status was not written


async def test_a_refused_create_stops_the_plan_and_is_reported(
        setup: tuple[KubeClient, Workflow], shared_emulator: Emulator) -> None:
    """A create the API server refuses for good (422) stops the plan before the status and
    comes back as a CreateError carrying the code, reason and API message."""
    client, wf = setup
    ns, uid = wf.metadata.namespace or "", wf.metadata.uid or ""
    executor = PlanExecutor(client, EventRecorder(client, component="test"), owner=WORKFLOWS,
                            involved=involved_workflow)
    name = f"refused-{ns}"
    shared_emulator.faults.refuse_create("configmaps", 422, "runtime policy says no",
                                         name=name, times=1)
    plan: Plan[Any] = Plan(
        resource_version=wf.metadata.resource_version or "",
        creates=(_create(_cm(name, ns, owner=uid)),),
        status=attrs.evolve(wf.status, namespace="never-written"))
    outcome = await executor.apply(wf, plan)
    assert outcome.kind == OutcomeKind.CREATE_REJECTED
    (refused,) = outcome.rejections
    assert (refused.kind, refused.name, refused.namespace, refused.code, refused.reason) == (
        "ConfigMap", name, ns, 422, "Invalid")
    assert refused.message == f'ConfigMap "{name}" is invalid: runtime policy says no'
    served = from_dict(await client.get(WORKFLOWS, "wf", namespace=ns))
    assert served.status.namespace != "never-written"
