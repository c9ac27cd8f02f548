"""Table tests for failure classification: scope, reason and which nodes are blamed."""

from __future__ import annotations

import attrs
import pytest

from cre.api.conditions import FailureScope
from cre.api.job import FailureLog
from cre.core.common.observed import ContainerState, NodeView, PodCondition, PodView
from cre.core.job.classify import Cause, classify
from cre.testing.strategies.job import NODES, at, make_job, node, pod, terminated

ERROR_LOG = FailureLog(pod_name="l", exit_code=1, reason="Error", tail="boom")
OOM_LOG = FailureLog(pod_name="w", exit_code=137, reason="OOMKilled", tail="")
READY = tuple(node(n) for n in NODES)

CASES: list[tuple[str, Cause, FailureLog | None, tuple[PodView, ...], tuple[NodeView, ...],
                  FailureScope, str, tuple[str, ...]]] = [
    ("container-exit", Cause.WORKLOAD_FAILED, ERROR_LOG,
     (pod("l", launcher=True, state=terminated(finished=at(1))),), READY,
     FailureScope.WORKLOAD, "ContainerFailed", NODES),
    ("oom-killed", Cause.WORKLOAD_FAILED, OOM_LOG, (), READY,
     FailureScope.WORKLOAD, "OOMKilled", NODES),
    ("timeout-no-evidence", Cause.TIMEOUT, None, (pod("w"),), READY,
     FailureScope.WORKLOAD, "TimedOut", NODES),
    # A timeout where the test never started, or had already passed everywhere, judges no
    # node: a slow control plane (kubelet, JobSet, Trainer) ran out the clock.
    ("timeout-container-never-started", Cause.TIMEOUT, None,
     (pod("w", state=ContainerState(kind="waiting", reason="ContainerCreating")),), READY,
     FailureScope.PLATFORM, "WorkloadNotStarted", ()),
    ("timeout-no-pod", Cause.TIMEOUT, None, (), READY,
     FailureScope.PLATFORM, "WorkloadNotStarted", ()),
    ("timeout-every-pod-succeeded", Cause.TIMEOUT, None,
     (pod("w", state=terminated(exit_code=0, reason="Completed", finished=at(1))),
      pod("x", node="gpu-1", state=terminated(exit_code=0, reason="Completed"))), READY,
     FailureScope.CONTROL_PLANE, "CompletionNotReported", ()),
    ("timeout-one-pod-still-running", Cause.TIMEOUT, None,
     (pod("w", state=terminated(exit_code=0, reason="Completed", finished=at(1))),
      pod("x", node="gpu-1")), READY,
     FailureScope.WORKLOAD, "TimedOut", NODES),
    ("node-not-ready", Cause.WORKLOAD_FAILED, ERROR_LOG, (pod("w", node="gpu-1"),),
     (node("gpu-0"), node("gpu-1", ready="False"), node("gpu-2")),
     FailureScope.NODE, "NodeNotReady", ("gpu-1",)),
    ("disruption-target", Cause.WORKLOAD_FAILED, None,
     (pod("w", node="gpu-2", disruption="True", state=terminated(finished=at(1))),), READY,
     FailureScope.NODE, "PodDisrupted", ("gpu-2",)),
    ("evicted", Cause.WORKLOAD_FAILED, None, (pod("w", node="gpu-0", reason="Evicted"),), READY,
     FailureScope.NODE, "PodEvicted", ("gpu-0",)),
    # Higher-priority work took the node: the cluster's doing, no node is judged.
    ("preempted-by-scheduler", Cause.WORKLOAD_FAILED, ERROR_LOG,
     (pod("l", launcher=True, state=terminated(finished=at(1))),
      pod("w", node="gpu-1", conditions=(PodCondition(
          type="DisruptionTarget", status="True", reason="PreemptionByScheduler"),))), READY,
     FailureScope.PLATFORM, "Preempted", ()),
    ("preempted-by-kubelet", Cause.WORKLOAD_FAILED, None,
     (pod("w", node="gpu-0", reason="Preempting", phase="Failed"),), READY,
     FailureScope.PLATFORM, "Preempted", ()),
    ("preempted-seen-running", Cause.PREEMPTED, None, (), READY,
     FailureScope.PLATFORM, "Preempted", ()),
    # A node that went NotReady still speaks louder than a preemption.
    ("not-ready-beats-preempted", Cause.WORKLOAD_FAILED, None,
     (pod("w", node="gpu-1", reason="Preempting", phase="Failed"),),
     (node("gpu-0"), node("gpu-1", ready="False"), node("gpu-2")),
     FailureScope.NODE, "NodeNotReady", ("gpu-1",)),
    ("image-pull", Cause.TIMEOUT, None,
     (pod("w", state=ContainerState(kind="waiting", reason="ImagePullBackOff")),), READY,
     FailureScope.PLATFORM, "ImagePullFailed", ()),
    ("unschedulable", Cause.TIMEOUT, None,
     (pod("w", node=None, state=ContainerState(kind="waiting", reason="ContainerCreating"),
          conditions=(PodCondition(type="PodScheduled", status="False",
                                   reason="Unschedulable"),)),), READY,
     FailureScope.PLATFORM, "Unschedulable", ()),
    ("admission-rejected", Cause.WORKLOAD_FAILED, None,
     (pod("w", reason="UnexpectedAdmissionError", phase="Failed"),), READY,
     FailureScope.PLATFORM, "AdmissionRejected", ()),
    ("workload-deleted", Cause.WORKLOAD_DELETED, ERROR_LOG,
     (pod("w", node="gpu-1"),), (node("gpu-1", ready="False"),),
     FailureScope.CONTROL_PLANE, "WorkloadDeleted", ()),
    ("name-collision", Cause.NAME_COLLISION, None, (), READY,
     FailureScope.CONTROL_PLANE, "WorkloadNameCollision", ()),
]


@pytest.mark.parametrize(("cause", "log", "pods", "nodes", "scope", "reason", "blamed"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_classification(cause: Cause, log: FailureLog | None, pods: tuple[PodView, ...],
                        nodes: tuple[NodeView, ...], scope: FailureScope, reason: str,
                        blamed: tuple[str, ...]) -> None:
    """Each kind of evidence yields its scope and blames exactly the nodes its rule allows."""
    verdict = classify(job=make_job(), cause=cause, message="m", failure_log=log, pods=pods,
                       nodes=nodes)
    assert (verdict.failure_class.scope, verdict.failure_class.reason) == (scope, reason)
    assert verdict.blamed == blamed


def test_claim_message_is_resource_claim_not_ready() -> None:
    """A pod waiting on a DRA claim or ComputeDomain is a Platform ResourceClaimNotReady."""
    waiting = pod("w", node=None, conditions=(PodCondition(
        type="PodScheduled", status="False", reason="Unschedulable"),))
    waiting = attrs.evolve(waiting, message="waiting for resourceclaim channel to be allocated")
    verdict = classify(job=make_job(), cause=Cause.TIMEOUT, message="m", failure_log=None,
                       pods=(waiting,), nodes=READY)
    assert verdict.failure_class.reason == "ResourceClaimNotReady"


def test_standalone_job_blames_no_node() -> None:
    """A Job without the group-nodes annotation attributes no node even for a Workload failure."""
    verdict = classify(job=make_job(group_nodes=()), cause=Cause.WORKLOAD_FAILED, message="m",
                       failure_log=ERROR_LOG, pods=(), nodes=READY)
    assert verdict.failure_class.scope == FailureScope.WORKLOAD and verdict.blamed == ()


def test_disrupted_launcher_replaced_is_not_node_evidence() -> None:
    """A disrupted launcher whose slot a replacement took does not make the failure Node class."""
    first = pod("j1-workload-launcher-0-0-aaaaa", launcher=True, disruption="True",
                state=terminated(exit_code=137, finished=at(1)))
    retry = pod("j1-workload-launcher-0-0-bbbbb", launcher=True,
                state=terminated(finished=at(20)))
    verdict = classify(job=make_job(), cause=Cause.WORKLOAD_FAILED, message="m",
                       failure_log=ERROR_LOG, pods=(first, retry), nodes=READY)
    assert verdict.failure_class.scope == FailureScope.WORKLOAD


def test_node_that_stopped_reporting_is_not_ready() -> None:
    """Ready=Unknown with NodeStatusUnknown is NotReady; Unknown with no reason is no evidence."""
    lost = attrs.evolve(node("gpu-1", ready="Unknown"), ready_reason="NodeStatusUnknown")
    verdict = classify(job=make_job(), cause=Cause.WORKLOAD_FAILED, message="m",
                       failure_log=ERROR_LOG, pods=(pod("w", node="gpu-1"),),
                       nodes=(node("gpu-0"), lost))
    assert (verdict.failure_class.scope, verdict.blamed) == (FailureScope.NODE, ("gpu-1",))
    silent = node("gpu-1", ready="Unknown")
    verdict = classify(job=make_job(), cause=Cause.WORKLOAD_FAILED, message="m",
                       failure_log=ERROR_LOG, pods=(), nodes=(silent,))
    assert verdict.failure_class.scope == FailureScope.WORKLOAD


def test_evicted_launcher_replaced_is_not_node_evidence() -> None:
    """A kubelet-evicted launcher whose slot a replacement took does not make the failure Node
    class: the replacement's own exit decided the run."""
    first = pod("j1-workload-launcher-0-0-aaaaa", launcher=True, node="gpu-0", reason="Evicted",
                phase="Failed")
    retry = pod("j1-workload-launcher-0-0-bbbbb", launcher=True, node="gpu-1",
                state=terminated(finished=at(20)))
    verdict = classify(job=make_job(), cause=Cause.WORKLOAD_FAILED, message="m",
                       failure_log=ERROR_LOG, pods=(first, retry), nodes=READY)
    assert verdict.failure_class.scope == FailureScope.WORKLOAD
    assert verdict.blamed == NODES
