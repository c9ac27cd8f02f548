"""The WorkloadRun core: build once, mirror the Workflow (ValidationFailed before the terminal
mirror), BuildFailed naming the field, name collisions and missing Workflows confirmed live."""

from __future__ import annotations

from typing import Any

import attrs

from cre.api.conditions import ConditionType, Phase, WorkflowReason, WorkloadRunReason
from cre.api.converter import structure, to_dict
from cre.api.goodput import GoodputMeasurement
from cre.api.meta import Condition, ConditionStatus, NamespacedName, OwnerReference
from cre.api.workflow import OrchestrationStatus, Workflow
from cre.api.workloadrun import JobGoodput, WorkloadRun
from cre.core.common.lifecycle import set_exclusive
from cre.core.common.observed import NodeView
from cre.core.common.plan import ConfirmAbsent, CreateConflict, Feedback
from cre.core.workloadrun.reconcile import (
    WorkloadRunObservation,
    WorkloadRunPlan,
    detect_nic,
    merge_goodput,
    reconcile_workloadrun,
)
from tests.core.tierworld import T0, at, catalog, gpu_node, nodes

MPI = {"binary": "/b", "mpirunPath": "/usr/local/mpi/bin/mpirun"}


def run_of(**spec: Any) -> WorkloadRun:
    return structure({"apiVersion": "cre.dev/v1alpha1", "kind": "WorkloadRun",
                      "metadata": {"name": "wr", "namespace": "ns", "uid": "run-uid",
                                   "generation": 1, "creationTimestamp": T0.isoformat()},
                      "spec": {"image": "img", "numNodes": 2, "framework": {"mpi": MPI},
                               **spec}}, WorkloadRun)


def reason(plan: WorkloadRunPlan, type_: ConditionType = ConditionType.FAILED) -> tuple[str, str]:
    assert plan.status is not None
    c = next(c for c in plan.status.conditions if c.type == type_)
    assert c.status == ConditionStatus.TRUE
    return c.reason, c.message or ""


def reconcile(run: WorkloadRun, obs: WorkloadRunObservation, seconds: float = 1) -> WorkloadRunPlan:
    return reconcile_workloadrun(run, obs, at(seconds), catalog=catalog())


def started(run: WorkloadRun, found: tuple[NodeView, ...]) -> tuple[WorkloadRun, Workflow]:
    plan = reconcile(run, WorkloadRunObservation(nodes=found))
    assert plan.status is not None and len(plan.creates) == 1
    wf = structure(dict(plan.creates[0].body), Workflow)
    return attrs.evolve(run, status=plan.status), wf


def with_trio(wf: Workflow, member: ConditionType, why: str, message: str,
              *extra: Condition) -> Workflow:
    conditions, _ = set_exclusive(wf.status.conditions, member=member, reason=why,
                                  message=message, now=T0, generation=1)
    orch = OrchestrationStatus(detected_platform="aws", detected_gpu_architecture="h100")
    return attrs.evolve(wf, status=attrs.evolve(wf.status, conditions=(*extra, *conditions),
                                                orchestration=orch))


def test_builds_the_workflow_once_and_goes_in_progress() -> None:
    """The first pass creates the owned Workflow and records what detection found."""
    run, wf = started(run_of(), nodes(4))
    assert wf.metadata.name == "wr"
    assert [(o.kind, o.uid, o.controller) for o in wf.metadata.owner_references] == [
        ("WorkloadRun", "run-uid", True)]
    assert run.status.workflow_ref == NamespacedName(name="wr", namespace="ns")
    assert (run.status.detected_platform, run.status.detected_gpu_architecture,
            run.status.resolved_gpus_per_node) == ("aws", "h100", 8)
    assert run.status.phase == Phase.RUNNING
    member = next(c for c in run.status.conditions if c.status == ConditionStatus.TRUE)
    assert member.reason == WorkloadRunReason.WORKFLOW_CREATED
    assert {c.reason for c in run.status.conditions if c.status != ConditionStatus.TRUE} == {
        "Superseded"}
    again = reconcile(run, WorkloadRunObservation(nodes=nodes(4), workflow=wf))
    assert again.creates == ()


def test_validation_failed_is_mirrored_before_the_terminal_mirror() -> None:
    """A Workflow that ends Failed on JobValidationFailed with ValidationFailed True gives a
    run Failed WorkflowValidationFailed that also carries ValidationFailed/ThresholdViolation
    in the same write."""
    run, wf = started(run_of(), nodes(2))
    invalid = Condition(type=ConditionType.VALIDATION_FAILED, status=ConditionStatus.TRUE,
                        reason="ThresholdViolation", message="busbw 10 < 400",
                        last_transition_time=T0)
    wf = with_trio(wf, ConditionType.FAILED, WorkflowReason.JOB_VALIDATION_FAILED,
                   "1 group failed validation", invalid)
    plan = reconcile(run, WorkloadRunObservation(nodes=nodes(2), workflow=wf))
    assert reason(plan) == (WorkloadRunReason.WORKFLOW_VALIDATION_FAILED,
                            "1 group failed validation")
    assert reason(plan, ConditionType.VALIDATION_FAILED) == (
        WorkloadRunReason.THRESHOLD_VIOLATION, "busbw 10 < 400")
    # Succeeded with a threshold miss recorded: still mirrored.
    ok = with_trio(wf, ConditionType.SUCCEEDED, "AllIterationsSucceeded", "done", invalid)
    plan = reconcile(run, WorkloadRunObservation(nodes=nodes(2), workflow=ok))
    assert reason(plan, ConditionType.SUCCEEDED)[0] == WorkloadRunReason.WORKFLOW_SUCCEEDED
    assert reason(plan, ConditionType.VALIDATION_FAILED)[0] == \
        WorkloadRunReason.THRESHOLD_VIOLATION


def test_terminal_mirrors_copy_the_workflow_message() -> None:
    """Workflow Failed -> run Failed WorkflowFailed with its message; a terminal run stays."""
    run, wf = started(run_of(), nodes(2))
    wf = with_trio(wf, ConditionType.FAILED, "IterationsFailed", "2 groups failed")
    plan = reconcile(run, WorkloadRunObservation(nodes=nodes(2), workflow=wf))
    assert reason(plan) == (WorkloadRunReason.WORKFLOW_FAILED, "2 groups failed")
    assert plan.status is not None and plan.status.phase == Phase.FAILED
    assert plan.status.detected_platform == "aws"
    done = attrs.evolve(run, status=plan.status)
    assert reconcile(done, WorkloadRunObservation(nodes=nodes(2), workflow=wf)).status is None


def test_suspected_outage_is_copied_from_the_workflow() -> None:
    """A Workflow that raised SuspectedClusterOutage gives the run the same condition (its
    own reason, the Workflow's message) next to the mirrored verdict."""
    run, wf = started(run_of(), nodes(2))
    outage = Condition(type=ConditionType.SUSPECTED_CLUSTER_OUTAGE, status=ConditionStatus.TRUE,
                       reason="SuspectedClusterOutage", message="2 of 2 groups aborted",
                       last_transition_time=T0)
    wf = with_trio(wf, ConditionType.SUCCEEDED, "JobCompleted", "done", outage)
    plan = reconcile(run, WorkloadRunObservation(nodes=nodes(2), workflow=wf))
    assert reason(plan, ConditionType.SUSPECTED_CLUSTER_OUTAGE) == (
        WorkloadRunReason.SUSPECTED_CLUSTER_OUTAGE, "2 of 2 groups aborted")
    assert reason(plan, ConditionType.SUCCEEDED)[0] == WorkloadRunReason.WORKFLOW_SUCCEEDED


def test_missing_workflow_is_confirmed_live_before_failing() -> None:
    """A Workflow absent from the cache is read live first; gone live -> WorkflowDeleted."""
    run, _ = started(run_of(), nodes(2))
    asked = reconcile(run, WorkloadRunObservation(nodes=nodes(2))).asks
    assert asked == (ConfirmAbsent(kind="Workflow", name=run.metadata.name or ""),)
    plan = reconcile(run, WorkloadRunObservation(nodes=nodes(2), feedback=Feedback(answered=asked)))
    assert reason(plan)[0] == WorkloadRunReason.WORKFLOW_DELETED


def test_foreign_workflow_of_the_same_name_fails_the_run() -> None:
    """A Workflow named like the run that another object controls is a name collision."""
    run = run_of()
    _, wf = started(run, nodes(2))
    foreign = attrs.evolve(wf, metadata=attrs.evolve(wf.metadata, owner_references=(
        OwnerReference(api_version="cre.dev/v1alpha1", kind="WorkloadRun", name="x",
                       uid="other", controller=True),)))
    plan = reconcile(run, WorkloadRunObservation(nodes=nodes(2), workflow=foreign))
    assert reason(plan)[0] == WorkloadRunReason.WORKFLOW_NAME_COLLISION
    held = CreateConflict(kind="Workflow", name=run.metadata.name or "",
                          holder=to_dict(foreign))
    plan = reconcile(run, WorkloadRunObservation(nodes=nodes(2),
                                         feedback=Feedback(create_conflicts=(held,))))
    assert reason(plan)[0] == WorkloadRunReason.WORKFLOW_NAME_COLLISION


def test_build_failed_names_the_field() -> None:
    """More nodes per group than eligible nodes, or an unknown architecture without
    gpusPerNode, fail BuildFailed naming the field; nothing is created."""
    plan = reconcile(run_of(numNodes=3), WorkloadRunObservation(nodes=nodes(2)))
    why, message = reason(plan)
    assert why == WorkloadRunReason.BUILD_FAILED and message.startswith("spec.numNodes:")
    assert plan.creates == ()
    odd = tuple(gpu_node(f"g{i}", product="NVIDIA-X9-1") for i in range(2))
    why, message = reason(reconcile(run_of(), WorkloadRunObservation(nodes=odd)))
    assert why == WorkloadRunReason.BUILD_FAILED and message.startswith("spec.gpusPerNode:")
    plan = reconcile(run_of(gpusPerNode=2), WorkloadRunObservation(nodes=odd))
    assert plan.creates and plan.status is not None
    assert plan.status.resolved_gpus_per_node == 2


def test_waits_for_nodes_then_fails_naming_the_target() -> None:
    """No eligible node: WaitingForNodes for five minutes, then BuildFailed on spec.target."""
    plan = reconcile(run_of(), WorkloadRunObservation(), seconds=10)
    assert reason(plan, ConditionType.IN_PROGRESS)[0] == WorkloadRunReason.WAITING_FOR_NODES
    assert plan.requeue_after is not None and plan.requeue_after > 0
    why, message = reason(reconcile(run_of(), WorkloadRunObservation(), seconds=301))
    assert why == WorkloadRunReason.BUILD_FAILED and message.startswith("spec.target:")


def test_nic_detection_needs_one_common_candidate() -> None:
    """One rdma/* or mlnxnics resource on every node is used; none or several: nothing."""
    def n(*res: str) -> NodeView:
        return NodeView(name="x", extended_resources=res)
    assert detect_nic((n("rdma/a", "nvidia.com/gpu"), n("rdma/a"))) == "rdma/a"
    assert detect_nic((n("rdma/a", "rdma/b"), n("rdma/a", "rdma/b"))) is None
    assert detect_nic((n("rdma/a"), n("rdma/b"))) is None
    assert detect_nic((n("nvidia.com/mlnxnics"),)) == "nvidia.com/mlnxnics"
    assert detect_nic(()) is None


def test_a_running_workflow_writes_the_run_once() -> None:
    """While the Workflow runs, the first mirror writes InProgress/WorkflowRunning; the next
    pass over the same state writes nothing (no status churn every requeue)."""
    run, wf = started(run_of(), nodes(2))
    wf = with_trio(wf, ConditionType.IN_PROGRESS, "GroupsRunning", "running")
    first = reconcile(run, WorkloadRunObservation(nodes=nodes(2), workflow=wf))
    assert reason(first, ConditionType.IN_PROGRESS)[0] == WorkloadRunReason.WORKFLOW_RUNNING
    assert first.status is not None
    again = reconcile(attrs.evolve(run, status=first.status),
                      WorkloadRunObservation(nodes=nodes(2), workflow=wf), seconds=30)
    assert again.status is None and again.requeue_after is not None


def goodput_of(job: str, *, result: str | None, complete: bool) -> GoodputMeasurement:
    status: dict[str, Any] = {"phase": "Complete" if complete else "Measuring"}
    if result is not None:
        status["result"] = result
    return structure({"apiVersion": "cre.dev/v1alpha1", "kind": "GoodputMeasurement",
                      "metadata": {"name": f"{job}-goodput", "namespace": "ns"},
                      "spec": {"jobRef": {"apiGroup": "cre.dev", "kind": "Job", "name": job},
                               "logProfileRef": "megatron-training"},
                      "status": status}, GoodputMeasurement)


def test_goodput_merge_takes_complete_positive_ratios_once() -> None:
    """Only a Complete measurement with a ratio above 0 counts; a known Job keeps its entry;
    entries are in Job-name order."""
    known = (JobGoodput(job="wr-job", goodput_ratio="0.9000"),)
    got = merge_goodput(known, (
        goodput_of("wr-job", result="0.5000", complete=True),   # known: kept as it was
        goodput_of("wr-b", result="0.8000", complete=True),
        goodput_of("wr-c", result="0.7000", complete=False),   # still measuring
        goodput_of("wr-d", result="0.0000", complete=True),    # no useful figure
        goodput_of("wr-e", result=None, complete=True)))
    assert got == (JobGoodput(job="wr-b", goodput_ratio="0.8000"),
                   JobGoodput(job="wr-job", goodput_ratio="0.9000"))


def test_goodput_is_mirrored_while_running_and_after_the_verdict() -> None:
    """A running run mirrors its Jobs' goodput with the Workflow; a Succeeded run whose
    measurement completes later gets the goodput and nothing else changes."""
    run, wf = started(run_of(), nodes(2))
    running = with_trio(wf, ConditionType.IN_PROGRESS, "IterationRunning", "running")
    gm = goodput_of("wr-job", result="0.8203", complete=True)
    plan = reconcile(run, WorkloadRunObservation(nodes=nodes(2), workflow=running, goodput=(gm,)))
    assert plan.status is not None and plan.status.goodput == (
        JobGoodput(job="wr-job", goodput_ratio="0.8203"),)
    ok = with_trio(wf, ConditionType.SUCCEEDED, "AllIterationsSucceeded", "done")
    plan = reconcile(run, WorkloadRunObservation(nodes=nodes(2), workflow=ok))
    assert plan.status is not None and plan.status.goodput == ()
    done = attrs.evolve(run, status=plan.status)
    late = reconcile(done, WorkloadRunObservation(nodes=nodes(2), workflow=ok, goodput=(gm,)))
    assert late.status == attrs.evolve(done.status, goodput=(
        JobGoodput(job="wr-job", goodput_ratio="0.8203"),))
    assert late.events == () and late.creates == ()
    final = attrs.evolve(done, status=late.status)
    assert reconcile(final, WorkloadRunObservation(nodes=nodes(2), workflow=ok, goodput=(gm,))
                     ).status is None
