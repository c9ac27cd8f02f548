"""The Workflow and Certification controllers against the API emulator: groups become Jobs with
their own dependency copies, deletion is ordered (Jobs, then dependencies, then the finalizer),
and bad input the CRD admits ends Failed naming the field, with nothing created, while the
objects next to it keep reconciling. (No Job controller runs here: the Jobs stay as created;
the runs themselves are covered by the golden scenarios under integration/cases/tiers.)"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import attrs
import pytest

from cre.api import labels as L
from cre.api.converter import to_dict
from cre.catalog import load_catalog
from cre.controller.certification.controller import CertificationController
from cre.controller.workflow.controller import WorkflowController
from cre.core.certification.build import build_workflow, discover_for
from cre.core.common.projections import node_view
from cre.core.workflow.discovery import Discovery
from cre.kube.client import (
    CERTIFICATIONS,
    JOBS,
    NAMESPACES,
    NODES,
    TRAINING_RUNTIMES,
    WORKFLOWS,
    ApiError,
    KubeClient,
)
from cre.testing.apiserver import Emulator
from cre.testing.cluster.profiles import get_profile, node_manifest
from tests.core.tierworld import certification

pytestmark = pytest.mark.anyio

NODE_COUNT = 4
_namespaces = itertools.count()


@attrs.define
class Tiers:
    """Both tier controllers running in one namespace of the shared emulator."""

    client: KubeClient
    namespace: str

    async def create(self, resource: Any, body: dict[str, Any]) -> dict[str, Any]:
        body["metadata"]["namespace"] = self.namespace
        return await self.client.create(resource, body, namespace=self.namespace)

    async def get(self, resource: Any, name: str) -> dict[str, Any] | None:
        try:
            return await self.client.get(resource, name, namespace=self.namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def items(self, resource: Any, selector: str) -> list[dict[str, Any]]:
        page = await self.client.list(resource, namespace=self.namespace,
                                      query={"labelSelector": selector})
        return list(page.get("items") or [])

    async def wait(self, what: str, check: Callable[[], Any], *, limit: float = 20.0) -> Any:
        """Poll ``check`` (async) until it returns something truthy (``limit``: a safety net)."""
        last: Any = None
        with anyio.move_on_after(limit):
            while True:
                last = await check()
                if last:
                    return last
                await anyio.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}; last: {last}")

    async def condition(self, resource: Any, name: str, type_: str) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            obj = await self.get(resource, name)
            conds = ((obj or {}).get("status") or {}).get("conditions") or []
            return next((c for c in conds if c["type"] == type_ and c["status"] == "True"),
                        None)
        found: dict[str, Any] = await self.wait(f"{name} {type_}", check)
        return found


@pytest.fixture(scope="module")
async def gpu_nodes(shared_emulator: Emulator) -> tuple[dict[str, Any], ...]:
    """Four Ready AWS H100 GPU nodes in the shared emulator."""
    client = await KubeClient.from_kubeconfig(str(shared_emulator.kubeconfig_path))
    made = []
    try:
        for i in range(NODE_COUNT):
            body = node_manifest(get_profile("aws-h100"), i)
            body["status"]["conditions"] = [{"type": "Ready", "status": "True",
                                             "reason": "KubeletReady"}]
            with contextlib.suppress(ApiError):
                await client.create(NODES, body)
            await client.patch(NODES, body["metadata"]["name"], {"status": body["status"]},
                               subresource="status")
            made.append(await client.get(NODES, body["metadata"]["name"]))
    finally:
        await client.close()
    return tuple(made)


@pytest.fixture
async def tiers(shared_emulator: Emulator, gpu_nodes: tuple[dict[str, Any], ...]
                ) -> AsyncIterator[Tiers]:
    """A WorkflowController and a CertificationController in a fresh namespace."""
    del gpu_nodes
    namespace = f"tiers-{next(_namespaces)}"
    client = await KubeClient.from_kubeconfig(str(shared_emulator.kubeconfig_path))
    try:
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": namespace}})
        workflows = WorkflowController(client, namespaces=[namespace])
        certs = CertificationController(client, catalog=load_catalog(), namespaces=[namespace])
        async with anyio.create_task_group() as tg:
            tg.start_soon(workflows.run)
            tg.start_soon(certs.run)
            with anyio.fail_after(20):
                await workflows.wait_synced()
                await certs.wait_synced()
            yield Tiers(client=client, namespace=namespace)
            tg.cancel_scope.cancel()
    finally:
        await client.close()


def _workflow(name: str, nodes: tuple[dict[str, Any], ...], namespace: str,
              **options: Any) -> dict[str, Any]:
    """A Workflow for nccl-all-reduce over ``nodes``, as a Certification in ``namespace``
    would build it."""
    cert = certification(("communication", "nccl-all-reduce"), **options)
    cert = attrs.evolve(cert, metadata=attrs.evolve(cert.metadata, namespace=namespace))
    found = discover_for(cert, 0, tuple(node_view(n) for n in nodes), load_catalog())
    assert isinstance(found, Discovery)
    body = build_workflow(cert, 0, found=found, catalog=load_catalog())
    body["metadata"] = {"name": name}
    return body


async def test_groups_become_jobs_and_deletion_is_ordered(
        tiers: Tiers, gpu_nodes: tuple[dict[str, Any], ...]) -> None:
    """A Workflow of 4 nodes in groups of 2 gets its finalizer, one Job per group (pinned to
    its nodes, controlled by the Workflow) and one TrainingRuntime copy per group; deleting it
    removes the Jobs, then the copies, then the finalizer, and the Workflow is gone."""
    await tiers.create(WORKFLOWS, _workflow("wf", gpu_nodes, tiers.namespace, nodesPerJob=2))
    jobs = await tiers.wait("two Jobs", lambda: _at_least(tiers, JOBS, "wf", 2))
    assert sorted(j["metadata"]["annotations"][L.GROUP_NODES] for j in jobs) == [
        "aws-h100-node-0,aws-h100-node-1", "aws-h100-node-2,aws-h100-node-3"]
    for job in jobs:
        owner = job["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("Workflow", "wf", True)
    runtimes = await tiers.wait("two runtime copies",
                                lambda: _at_least(tiers, TRAINING_RUNTIMES, "wf", 2))
    refs = {j["spec"]["workload"]["trainJob"]["runtimeRef"]["name"] for j in jobs}
    assert refs == {r["metadata"]["name"] for r in runtimes}
    wf = await tiers.get(WORKFLOWS, "wf")
    assert wf is not None and L.WORKFLOW_FINALIZER in wf["metadata"]["finalizers"]
    assert wf["status"]["phase"] == "Running"

    await tiers.client.delete(WORKFLOWS, "wf", namespace=tiers.namespace)
    await tiers.wait("the Workflow gone", lambda: _gone(tiers, "wf"))
    assert await tiers.items(JOBS, f"{L.WORKFLOW}=wf") == []
    assert await tiers.items(TRAINING_RUNTIMES, f"{L.WORKFLOW}=wf") == []


async def _at_least(tiers: Tiers, resource: Any, wf: str, count: int
                    ) -> list[dict[str, Any]] | None:
    items = await tiers.items(resource, f"{L.WORKFLOW}={wf}")
    return items if len(items) >= count else None


async def _gone(tiers: Tiers, name: str) -> bool:
    return await tiers.get(WORKFLOWS, name) is None


async def test_bad_workflows_fail_naming_the_field_and_others_keep_running(
        tiers: Tiers, gpu_nodes: tuple[dict[str, Any], ...]) -> None:
    """Workflows the CRD admits but CRE cannot run end Failed with a reason and a message
    naming the field, with nothing created for them: more nodes per Job than the cluster has
    (PartitionError saying what to set) and an override whose patch cannot apply
    (OverrideError naming spec.overrides[0]). A valid Workflow next to them gets its Jobs."""
    too_big = _workflow("too-big", gpu_nodes, tiers.namespace)
    too_big["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]["numNodes"] = 8
    bad_patch = _workflow("bad-patch", gpu_nodes, tiers.namespace)
    bad_patch["spec"]["overrides"] = [{
        "when": {"platform": {"equals": "aws"}},
        "jobTemplatePatch": [{"op": "remove", "path": "/spec/noSuchField"}]}]
    await tiers.create(WORKFLOWS, too_big)
    await tiers.create(WORKFLOWS, bad_patch)
    await tiers.create(WORKFLOWS, _workflow("good", gpu_nodes, tiers.namespace, nodesPerJob=2))

    cond = await tiers.condition(WORKFLOWS, "too-big", "Failed")
    assert cond["reason"] == "PartitionError"
    assert "Set nodesPerJob to 4 or less" in cond["message"]
    cond = await tiers.condition(WORKFLOWS, "bad-patch", "Failed")
    assert cond["reason"] == "OverrideError"
    assert "spec.overrides[0]" in cond["message"]
    assert await tiers.wait("the good Workflow's Jobs", lambda: _at_least(tiers, JOBS, "good", 2))
    for name in ("too-big", "bad-patch"):
        assert await tiers.items(JOBS, f"{L.WORKFLOW}={name}") == []
        assert await tiers.items(TRAINING_RUNTIMES, f"{L.WORKFLOW}={name}") == []


async def test_a_job_name_held_by_a_foreign_object_fails_the_workflow(
        tiers: Tiers, gpu_nodes: tuple[dict[str, Any], ...]) -> None:
    """The Job name of the only group is taken by a Job the Workflow does not control: the
    Workflow fails JobNameCollision naming it, and the foreign Job is left alone."""
    await tiers.create(JOBS, {"apiVersion": L.API_VERSION, "kind": "Job",
                              "metadata": {"name": "taken-job"},
                              "spec": {"workload": {"trainJob": {
                                  "runtimeRef": {"name": "someone-elses"}}}}})
    await tiers.create(WORKFLOWS, _workflow("taken", gpu_nodes, tiers.namespace))
    cond = await tiers.condition(WORKFLOWS, "taken", "Failed")
    assert cond["reason"] == "JobNameCollision"
    assert "Job/taken-job" in cond["message"]
    foreign = await tiers.get(JOBS, "taken-job")
    assert foreign is not None and not foreign["metadata"].get("ownerReferences")


async def test_bad_certification_fails_before_anything_is_created(tiers: Tiers) -> None:
    """A Certification asking for an option its entry does not take fails InvalidSpec naming
    the field; no Workflow is created for it, and a valid Certification next to it gets its
    Workflow."""
    bad = to_dict(certification(("communication", "nccl-loopback"), numCycles=3))
    bad["metadata"] = {"name": "greedy"}
    good = to_dict(certification(("communication", "nccl-all-reduce")))
    good["metadata"] = {"name": "fine"}
    await tiers.create(CERTIFICATIONS, bad)
    await tiers.create(CERTIFICATIONS, good)
    cond = await tiers.condition(CERTIFICATIONS, "greedy", "Failed")
    assert cond["reason"] == "InvalidSpec"
    assert f"Certification {tiers.namespace}/greedy" in cond["message"]
    assert "options.numCycles: communication/nccl-loopback takes no cycles parameter" in \
        cond["message"]
    greedy = await tiers.get(CERTIFICATIONS, "greedy")
    assert greedy is not None and greedy["status"]["verdict"] == "Failed"
    assert await tiers.wait("the valid Certification's Workflow",
                            lambda: tiers.get(WORKFLOWS, "fine-communication-nccl-all-reduce"))
    assert await tiers.items(WORKFLOWS, f"{L.CERTIFICATION}=greedy") == []


async def test_deleting_a_certification_removes_its_workflows_first(tiers: Tiers) -> None:
    """Deleting a running Certification deletes the Workflow it controls (which removes its
    own Jobs first), waits until it is gone, then drops the finalizer: nothing is left."""
    body = to_dict(certification(("communication", "nccl-all-reduce"), nodesPerJob=2))
    body["metadata"] = {"name": "gone"}
    await tiers.create(CERTIFICATIONS, body)
    name = "gone-communication-nccl-all-reduce"
    await tiers.wait("the Workflow's Jobs", lambda: _at_least(tiers, JOBS, name, 2))
    await tiers.client.delete(CERTIFICATIONS, "gone", namespace=tiers.namespace)

    async def all_gone() -> bool:
        return (await tiers.get(CERTIFICATIONS, "gone") is None
                and await tiers.get(WORKFLOWS, name) is None)

    await tiers.wait("the Certification and its Workflow gone", all_gone)
    assert await tiers.items(JOBS, f"{L.WORKFLOW}={name}") == []


async def test_a_refused_workflow_create_is_a_terminal_error(
        tiers: Tiers, shared_emulator: Emulator) -> None:
    """The Certification's Workflow create denied by admission (403) is not retried with
    backoff: the runtime records it (a Warning CreateRefused event on the Certification with
    the API's message, the terminal-error metric) and the Workflow is never created."""
    from prometheus_client import REGISTRY

    from cre.kube.client import EVENTS

    def terminal() -> float:
        return REGISTRY.get_sample_value("controller_runtime_terminal_reconcile_errors_total",
                                         {"controller": "certification"}) or 0.0

    before = terminal()
    denial = 'admission webhook "wf-policy.example.com" denied the request: not today'
    shared_emulator.faults.refuse_create("workflows", 403, denial,
                                         name="refused-communication-nccl-all-reduce")
    try:
        body = to_dict(certification(("communication", "nccl-all-reduce")))
        body["metadata"] = {"name": "refused"}
        await tiers.create(CERTIFICATIONS, body)

        async def warning() -> dict[str, Any] | None:
            page = await tiers.client.list(EVENTS, namespace=tiers.namespace)
            return next((e for e in page.get("items") or []
                         if e["involvedObject"]["name"] == "refused"
                         and e["reason"] == "CreateRefused"), None)

        event = await tiers.wait("the CreateRefused event", warning)
        assert event["type"] == "Warning"
        assert event["message"] == (
            f"the API server refused Workflow {tiers.namespace}/refused-communication-nccl-"
            f'all-reduce (403 Forbidden): workflows.cre.dev "refused-communication-nccl-all-'
            f'reduce" is forbidden: {denial}')
        assert terminal() >= before + 1
        assert await tiers.get(WORKFLOWS, "refused-communication-nccl-all-reduce") is None
    finally:
        shared_emulator.faults.configure({"refuseCreate": {"resource": "workflows",
                                                           "remove": True}})
