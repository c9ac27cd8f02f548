"""A user's WorkloadRun, written from the reference's example (nvcre-api.md §6.1) in CRE's API
group, applied with kubectl to the real cre-manager on the simulated cluster."""

from __future__ import annotations

import pytest
from e2e_helpers import NODES, create_namespace

from cre.testing.procs import REPO, Stack, wait_until

# The example as a user adapts it: CRE's group and a namespace. Everything else is the
# reference's: 4 nodes per group, nccl-tests' all_reduce_perf_mpi in the NGC PyTorch image, a
# bandwidth measurement with the nccl-bandwidth LogProfile.
WORKLOAD_RUN = """\
apiVersion: cre.dev/v1alpha1
kind: WorkloadRun
metadata: {name: nccl-all-reduce, namespace: runs}
spec:
  image: nvcr.io/nvidia/pytorch:26.01-py3
  numNodes: 4
  framework:
    mpi: {binary: /usr/local/bin/all_reduce_perf_mpi, mpirunPath: /usr/local/mpi/bin/mpirun,
          args: ["-b","8","-e","32G","-f","2","-n","100"]}
  bandwidthMeasurement: {logProfileRef: nccl-bandwidth, testType: all_reduce}
"""


def _run(stack: Stack) -> dict[str, object]:
    return stack.kubectl_json("get", "workloadruns", "-n", "runs", "nccl-all-reduce")


@pytest.mark.both_backends
def test_reference_example_workloadrun_reaches_a_verdict(cluster_stack: Stack) -> None:
    """kubectl apply of the example: the run builds its Workflow (owned by it), the 8 GPU nodes
    run in two groups of 4 with a measured bus bandwidth each, the run ends Succeeded, and
    ``kubectl get workloadruns`` shows Phase, Reason and Nodes."""
    stack = cluster_stack
    create_namespace(stack, "runs")
    stack.kubectl("apply", "-k", str(REPO / "deploy" / "logprofiles"))
    manager = stack.start_manager()
    stack.kubectl("apply", "-f", "-", stdin=WORKLOAD_RUN)

    def phase() -> object:
        status = _run(stack).get("status") or {}
        assert isinstance(status, dict)
        return status.get("phase") if status.get("phase") in ("Succeeded", "Failed") else None

    wait_until(phase, timeout=240, what="the WorkloadRun's verdict", interval=0.5,
               alive=manager.check_alive)
    status = _run(stack)["status"]
    assert isinstance(status, dict)
    assert (status["phase"], status["detectedPlatform"], status["detectedGPUArchitecture"],
            status["resolvedGpusPerNode"]) == ("Succeeded", "aws", "h100", 8), status
    wf = stack.kubectl_json("get", "workflows", "-n", "runs", "nccl-all-reduce")
    assert [(o["kind"], o["name"]) for o in wf["metadata"]["ownerReferences"]] == [
        ("WorkloadRun", "nccl-all-reduce")]
    assert wf["status"]["orchestration"]["nodesPerJob"] == 4
    assert len(wf["status"]["groups"]) == NODES // 4
    jobs = stack.kubectl_json("get", "jobs.cre.dev", "-n", "runs")["items"]
    assert len(jobs) == NODES // 4
    assert all(float(j["status"]["busBandwidthGBps"]) > 0 for j in jobs), jobs
    table = stack.kubectl("get", "workloadruns", "-n", "runs").stdout.splitlines()
    assert table[0].split() == ["NAME", "PHASE", "REASON", "NODES", "AGE"], table
    assert table[1].split()[:4] == ["nccl-all-reduce", "Succeeded", "WorkflowSucceeded",
                                    "4"], table
