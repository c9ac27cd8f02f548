"""Jobs that can never run, through a running Job controller: a TrainJob that never makes a pod
(its runtime is missing) fails WorkloadStalled with its Events; pods the scheduler cannot place
turn the Job InProgress/WorkloadSchedulingBlocked with the scheduler's message and the nodes,
and back to WorkloadRunning once placed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from cre.api.labels import API_VERSION, GROUP_NODES
from cre.core.common.plan import JobSettings
from cre.kube.client import JOBS
from cre.testing.apiserver import Emulator
from cre.testing.jobharness import JobHarness, condition, is_true, running_harness

pytestmark = pytest.mark.anyio

# Re-check often: the stall clocks are seconds long here, not minutes.
FAST = JobSettings(poll_interval=0.2)
SCHEDULER = ("0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. "
             "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")


@pytest.fixture
async def fast(shared_emulator: Emulator) -> AsyncIterator[JobHarness]:
    async with running_harness(shared_emulator, namespace="stalls", settings=FAST) as harness:
        yield harness


async def _create(h: JobHarness, name: str, *, nodes: tuple[str, ...] = (),
                  **spec: Any) -> None:
    meta: dict[str, Any] = {"name": name, "namespace": h.namespace}
    if nodes:
        meta["annotations"] = {GROUP_NODES: ",".join(nodes)}
    body = {"apiVersion": API_VERSION, "kind": "Job", "metadata": meta, "spec": {
        "workload": {"trainJob": {"runtimeRef": {"name": "missing-runtime"}}}, **spec}}
    await h.client.create(JOBS, body, namespace=h.namespace)


async def test_trainjob_that_never_starts_fails_with_its_events(fast: JobHarness) -> None:
    """No pod within startupStallTimeoutSeconds: Failed/WorkloadStalled, the TrainJob's Warning
    in the message and the failure record, Platform class, the TrainJob deleted."""
    h = fast
    await _create(h, "never", startupStallTimeoutSeconds=2)
    await h.wait_trainjob("never")
    await h.script.workload_event("never", reason="TrainJobResourcesCreationFailed",
                                  message="TrainJob resources reconciliation failed: "
                                          "ClusterTrainingRuntime missing-runtime not found")
    failed = await h.wait_job("never", is_true("Failed"))
    cond = condition(failed, "Failed") or {}
    assert cond["reason"] == "WorkloadStalled"
    assert "did not start within startupStallTimeoutSeconds 2s" in cond["message"]
    assert ("Warning TrainJobResourcesCreationFailed: TrainJob resources reconciliation failed: "
            "ClusterTrainingRuntime missing-runtime not found") in cond["message"]
    status = failed["status"]
    assert status["failureClass"]["scope"] == "Platform"
    assert "ClusterTrainingRuntime missing-runtime not found" in status["failureLog"]["tail"]
    assert not status.get("failedNodes")
    trainjob = await h.script.trainjob("never")
    assert trainjob is None or trainjob["metadata"].get("deletionTimestamp")


async def test_unschedulable_pods_are_reported_then_resume(fast: JobHarness) -> None:
    """Pods that stay Unschedulable past schedulingStallGraceSeconds: InProgress
    WorkloadSchedulingBlocked with the scheduler's message and the group's nodes (one does not
    exist); once the pods run, WorkloadRunning again with schedulingResumedTime recorded."""
    h = fast
    await h.add_gpu_node("sb-1")
    await _create(h, "blocked", nodes=("sb-missing-0", "sb-1"), schedulingStallGraceSeconds=1,
                  timeoutPerJob="1h")
    await h.wait_trainjob("blocked")
    for i in range(2):
        await h.script.unschedulable_pod(f"blocked-workload-node-0-{i}-x", job="blocked",
                                         message=SCHEDULER)
    job = await h.wait_job("blocked", lambda j: (condition(j, "InProgress") or {}).get(
        "reason") == "WorkloadSchedulingBlocked")
    message = (condition(job, "InProgress") or {})["message"]
    assert SCHEDULER in message
    assert "group nodes: sb-missing-0 (not found), sb-1" in message
    assert "blocked-workload-node-0-0-x" in message
    assert job["status"]["schedulingBlockedSince"]
    for i in range(2):
        await h.script.delete_pod(f"blocked-workload-node-0-{i}-x")
        await h.script.create_pod(f"blocked-workload-node-0-{i}-y", job="blocked",
                                  launcher=False, node="sb-1")
    job = await h.wait_job("blocked", lambda j: (condition(j, "InProgress") or {}).get(
        "reason") == "WorkloadRunning" and bool((j.get("status") or {}).get(
            "schedulingResumedTime")))
    assert not job["status"].get("schedulingBlockedSince")
