"""The Certification, Workflow and NodeCertification controllers' gauges against the API
emulator: phase and verdict series follow a Certification as its Jobs finish and go with it;
the per-node series come from the NodeCertification records alone (they agree with what
``kubectl get nodecertifications`` shows, outlive the Certification and go with the record).
(No Job controller runs: the test writes the Jobs' verdicts itself.)"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry

from cre.api import labels as L
from cre.api.converter import structure, to_dict
from cre.api.nodecertification import NodeCertification
from cre.catalog import load_catalog
from cre.controller.certification.controller import CertificationController
from cre.controller.nodecertification.controller import NodeCertificationController
from cre.controller.workflow.controller import WorkflowController
from cre.core.certification.nodestate import record_results
from cre.kube.client import (
    CERTIFICATIONS,
    JOBS,
    NAMESPACES,
    NODECERTIFICATIONS,
    NODES,
    ApiError,
    KubeClient,
)
from cre.testing.apiserver import Emulator
from cre.testing.cluster.profiles import get_profile, node_manifest
from tests.core.tierworld import certification

pytestmark = pytest.mark.anyio

NAMESPACE = "metrics"
CATEGORY = "communication/nccl-all-reduce"
WORKFLOW = "cert-communication-nccl-all-reduce"
NODE_NAMES = tuple(f"aws-h100-node-{i}" for i in range(4))


@pytest.fixture
async def client(shared_emulator: Emulator) -> AsyncIterator[KubeClient]:
    """A client of the shared emulator, with four Ready GPU nodes and the test's namespace."""
    kube = await KubeClient.from_kubeconfig(str(shared_emulator.kubeconfig_path))
    try:
        for i in range(len(NODE_NAMES)):
            body = node_manifest(get_profile("aws-h100"), i)
            body["status"]["conditions"] = [{"type": "Ready", "status": "True",
                                             "reason": "KubeletReady"}]
            with contextlib.suppress(ApiError):
                await kube.create(NODES, body)
            await kube.patch(NODES, body["metadata"]["name"], {"status": body["status"]},
                             subresource="status")
        with contextlib.suppress(ApiError):
            await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": NAMESPACE}})
        yield kube
    finally:
        await kube.close()


async def _until(what: str, check: Callable[[], Any], *, limit: float = 20.0) -> Any:
    """Poll ``check`` until it returns something truthy (``limit``: a safety net)."""
    with anyio.move_on_after(limit):
        while True:
            if found := check():
                return found
            await anyio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def _series(registry: CollectorRegistry, prefix: str) -> list[tuple[str, dict[str, str]]]:
    return [(s.name, s.labels) for metric in registry.collect() for s in metric.samples
            if s.name.startswith(prefix)]


async def _succeed_jobs(kube: KubeClient) -> int:
    page = await kube.list(JOBS, namespace=NAMESPACE,
                           query={"labelSelector": f"{L.WORKFLOW}={WORKFLOW}"})
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for job in page.get("items") or []:
        await kube.patch(JOBS, job["metadata"]["name"], {"status": {
            "phase": "Succeeded",
            "conditions": [{"type": "Succeeded", "status": "True", "reason": "WorkloadCompleted",
                            "message": "done", "lastTransitionTime": now,
                            "observedGeneration": job["metadata"].get("generation", 1)}]}},
            namespace=NAMESPACE, subresource="status")
    return len(page.get("items") or [])


async def test_gauges_follow_a_certification_and_leave_no_series_behind(
        client: KubeClient) -> None:
    """While its groups run the Certification and its Workflow are Running (1 on that phase,
    0 on the others, no verdict) and the target nodes are Testing (3); once both Jobs succeed
    the verdicts are Passed, every node is Passed (1) with a last-pass time, exactly what its
    NodeCertification says; deleting the Certification removes its phase and verdict series
    but not the node series (the records stay), deleting the records removes those."""
    registry = CollectorRegistry()
    workflows = WorkflowController(client, namespaces=[NAMESPACE], registry=registry)
    certs = CertificationController(client, catalog=load_catalog(), namespaces=[NAMESPACE],
                                    registry=registry)
    records = NodeCertificationController(client, registry=registry)
    body = to_dict(certification(("communication", "nccl-all-reduce"), nodesPerJob=2))
    body["metadata"] = {"name": "cert", "namespace": NAMESPACE}
    body["spec"]["target"] = {"nodeNames": list(NODE_NAMES)}
    async with anyio.create_task_group() as tg:
        tg.start_soon(workflows.run)
        tg.start_soon(certs.run)
        tg.start_soon(records.run)
        with anyio.fail_after(20):
            await workflows.wait_synced()
            await certs.wait_synced()
            await records.wait_synced()
        await client.create(CERTIFICATIONS, body, namespace=NAMESPACE)
        cert = {"namespace": NAMESPACE, "certification": "cert"}
        wf = {"namespace": NAMESPACE, "workflow": WORKFLOW}

        await _until("nodes Testing", lambda: all(
            _value(registry, "cre_node_certification_state", node=n, category=CATEGORY) == 3
            for n in NODE_NAMES))
        assert _value(registry, "cre_certification_phase", **cert, phase="Running") == 1
        assert _value(registry, "cre_certification_phase", **cert, phase="Succeeded") == 0
        assert _value(registry, "cre_workflow_phase", **wf, phase="Running") == 1
        assert _value(registry, "cre_certification_verdict", **cert, verdict="Passed") == 0
        assert _value(registry, "cre_node_last_pass_timestamp_seconds", node=NODE_NAMES[0],
                      category=CATEGORY) is None

        assert await _succeed_jobs(client) == 2
        await _until("the Certification Passed", lambda: _value(
            registry, "cre_certification_verdict", **cert, verdict="Passed") == 1)
        await _until("the Workflow Passed", lambda: _value(
            registry, "cre_workflow_verdict", **wf, verdict="Passed") == 1)
        assert _value(registry, "cre_certification_phase", **cert, phase="Succeeded") == 1
        assert _value(registry, "cre_certification_phase", **cert, phase="Running") == 0
        await _until("every node Passed", lambda: all(
            _value(registry, "cre_node_certification_state", node=n, category=CATEGORY) == 1
            for n in NODE_NAMES))
        served = [structure({"apiVersion": L.API_VERSION, "kind": "NodeCertification", **raw},
                            NodeCertification)
                  for raw in (await client.list(NODECERTIFICATIONS))["items"]
                  if raw["metadata"]["name"] in NODE_NAMES]
        assert sorted(r.spec.node_name for r in served) == list(NODE_NAMES)
        for record in served:
            assert record.status.state == "Passed"
            for result in record_results(record, datetime.now(UTC)):
                labels = {"node": result.node, "category": result.category}
                assert _value(registry, "cre_node_certification_state",
                              **labels) == int(result.state)
                assert result.last_pass is not None
                assert _value(registry, "cre_node_last_pass_timestamp_seconds",
                              **labels) == result.last_pass.timestamp()

        await client.delete(CERTIFICATIONS, "cert", namespace=NAMESPACE)

        await _until("the Certification gone", lambda: certs.certifications.store.get(
            f"{NAMESPACE}/cert") is None)
        await _until("no Certification or Workflow series left", lambda: not (
            _series(registry, "cre_certification_") + _series(registry, "cre_workflow_")))
        assert {s[1]["node"] for s in _series(registry, "cre_node_certification_state")} \
            == set(NODE_NAMES)
        for node in NODE_NAMES:
            await client.delete(NODECERTIFICATIONS, node)
        await _until("no node series left", lambda: not _series(registry, "cre_node_"))
        tg.cancel_scope.cancel()
