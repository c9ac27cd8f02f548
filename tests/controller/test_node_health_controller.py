"""The nodeHealthMonitor through a running Job controller: a node cordoned under the catalog's
default expression fails the Job as a hardware (Node-class) failure; a syntax error fails it
as an invalid spec before any workload."""

from __future__ import annotations

from typing import Any

import pytest

from cre.api.labels import API_VERSION, GROUP_NODES
from cre.kube.client import JOBS, NODES
from cre.testing.jobharness import JobHarness, condition, is_true

pytestmark = pytest.mark.anyio


async def _create(h: JobHarness, name: str, expression: str, nodes: tuple[str, ...]) -> None:
    spec: dict[str, Any] = {"workload": {"trainJob": {"runtimeRef": {"name": "mpi-runtime"}}},
                            "nodeHealthMonitor": {"cel": {"expression": expression}}}
    meta = {"name": name, "namespace": h.namespace,
            "annotations": {GROUP_NODES: ",".join(nodes)}}
    await h.client.create(JOBS, {"apiVersion": API_VERSION, "kind": "Job", "metadata": meta,
                                 "spec": spec}, namespace=h.namespace)


async def test_cordoned_node_fails_the_job_as_hardware_failure(job_harness: JobHarness) -> None:
    """With ``node.spec.unschedulable == true``, cordoning a group node while the workload runs
    fails the Job: HardwareFailureDetected naming the node and expression, HardwareFailed True,
    the node in failedNodes, Node class, the workload deleted."""
    h = job_harness
    for name in ("hm-0", "hm-1"):
        await h.add_gpu_node(name)
    await _create(h, "monitored", "node.spec.unschedulable == true", ("hm-0", "hm-1"))
    await h.wait_job("monitored", is_true("InProgress"))
    await h.wait_trainjob("monitored")
    await h.client.patch(NODES, "hm-1", {"spec": {"unschedulable": True}})
    failed = await h.wait_job("monitored", is_true("Failed"))
    cond = condition(failed, "Failed") or {}
    assert cond["reason"] == "HardwareFailureDetected"
    assert "hm-1" in cond["message"] and "node.spec.unschedulable == true" in cond["message"]
    assert (condition(failed, "HardwareFailed") or {}).get("status") == "True"
    assert [(n["name"], n["reason"]) for n in failed["status"]["failedNodes"]] == [
        ("hm-1", "HardwareFailureDetected")]
    assert failed["status"]["failureClass"]["scope"] == "Node"
    trainjob = await h.script.trainjob("monitored")
    assert trainjob is None or trainjob["metadata"].get("deletionTimestamp")
    event = await h.wait_event("monitored", "HardwareFailureDetected")
    assert event["type"] == "Warning"


async def test_monitor_syntax_error_fails_as_invalid_spec(job_harness: JobHarness) -> None:
    """``node.((`` is not accepted silently: the Job fails InvalidSpec naming the field."""
    h = job_harness
    await _create(h, "broken", "node.((", ("hm-9",))
    failed = await h.wait_job("broken", is_true("Failed"))
    cond = condition(failed, "Failed") or {}
    assert cond["reason"] == "InvalidSpec"
    assert "spec.nodeHealthMonitor.cel.expression: invalid CEL expression" in cond["message"]
    assert await h.script.trainjob("broken") is None
