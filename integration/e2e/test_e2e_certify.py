"""A user's Certification, written from the reference's example skeleton (nvcre-api.md §3.8)
in CRE's API group, applied with kubectl to the real cre-manager on the simulated cluster."""

from __future__ import annotations

import pytest
from e2e_helpers import NODES, create_namespace

from cre.testing.procs import Stack, wait_until

# The skeleton as a user adapts it: CRE's group, and the second category one CRE's catalog has
# (the reference's training/nemotron5-8b is not in it) with the skeleton's per-category options
# (its enableMNNVL is gone: CRE removed the Certification fields nothing read, CHANGELOG).
CERTIFICATION = """\
apiVersion: cre.dev/v1alpha1
kind: Certification
metadata: {name: gpu-cluster-cert, namespace: nvcre}
spec:
  target: {nodeSelector: {nvidia.com/gpu.present: "true"}}
  gangScheduler: {schedulerName: kai-scheduler, queue: high-priority}
  workloadMetadata: {labels: {environment: burn-in}}
  categories:
  - {domain: communication, variant: nccl-all-reduce}
  - domain: communication
    variant: nccl-all-gather
    options:
      nodesPerJob: 8
      resources: {limits: {cpu: "6", memory: 48Gi}, requests: {cpu: "4", memory: 32Gi}}
"""


def _certification(stack: Stack) -> dict[str, object]:
    return stack.kubectl_json("get", "certifications", "-n", "nvcre", "gpu-cluster-cert")


@pytest.mark.both_backends
def test_skeleton_certification_reaches_a_verdict(cluster_stack: Stack) -> None:
    """kubectl apply of the skeleton: both categories run one after another on the 8 GPU
    nodes, the Certification ends Succeeded with verdict Passed and 2/2, and
    ``kubectl get certifications`` shows Phase, Verdict, Passed and Age."""
    stack = cluster_stack
    create_namespace(stack, "nvcre")
    manager = stack.start_manager()
    stack.kubectl("apply", "-f", "-", stdin=CERTIFICATION)

    def verdict() -> object:
        status = _certification(stack).get("status") or {}
        assert isinstance(status, dict)
        return status.get("verdict")

    wait_until(lambda: verdict() is not None, timeout=240, what="the Certification's verdict",
               interval=0.5, alive=manager.check_alive)
    status = _certification(stack)["status"]
    assert isinstance(status, dict)
    assert (status["phase"], status["verdict"], status["categories"]) == \
        ("Succeeded", "Passed", "2/2"), status
    cats = status["categoryStatuses"]
    assert [(c["variant"], c["verdict"]) for c in cats] == [
        ("nccl-all-reduce", "Passed"), ("nccl-all-gather", "Passed")]
    wf = stack.kubectl_json("get", "workflows", "-n", "nvcre",
                            "gpu-cluster-cert-communication-nccl-all-gather")
    assert wf["status"]["orchestration"]["nodesPerJob"] == NODES
    table = stack.kubectl("get", "certifications", "-n", "nvcre").stdout.splitlines()
    assert table[0].split() == ["NAME", "PHASE", "VERDICT", "PASSED", "AGE"], table
    assert table[1].split()[:4] == ["gpu-cluster-cert", "Succeeded", "Passed", "2/2"], table
