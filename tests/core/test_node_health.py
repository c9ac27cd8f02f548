"""The nodeHealthMonitor: compiled at validation, evaluated by the pure core on the Job's nodes
while it runs; a node it flags fails the Job (HardwareFailureDetected, Node class)."""

from __future__ import annotations

import attrs

from cre.api.common import TaintEffect
from cre.api.conditions import ConditionType, FailedNodeReason, FailureScope
from cre.api.job import (
    CelExpression,
    Job,
    NodeConditionSignal,
    NodeHealthMonitor,
    NodeTaintSignal,
)
from cre.api.meta import ConditionStatus
from cre.api.validate import validate
from cre.core.common.lifecycle import true_member
from cre.core.common.observed import NodeCondition, NodeTaint, NodeView
from cre.core.common.plan import Observation
from cre.core.job.health import (
    GROUP_GPUS,
    cel_verdict,
    check_monitor,
    check_node,
    check_nodes,
    group_gpus,
    node_object,
)
from cre.core.job.reconcile import reconcile_job, spec_errors
from cre.testing.strategies.job import NODES, at, make_job, node, running_status, trainjob

CORDONED = "node.spec.unschedulable == true"


def _monitored(expression: str, **kw: object) -> Job:
    job = make_job(**kw)  # type: ignore[arg-type]
    monitor = NodeHealthMonitor(cel=CelExpression(expression=expression))
    return attrs.evolve(job, spec=attrs.evolve(job.spec, node_health_monitor=monitor))


def test_syntax_error_is_a_field_error_and_fails_the_job_before_any_workload() -> None:
    """``node.((`` is reported at ``spec.nodeHealthMonitor.cel.expression``; a new Job carrying
    it fails InvalidSpec naming that path and creates nothing."""
    job = _monitored("node.((")
    (error,) = [e for e in validate(job) if "nodeHealthMonitor" in e.path]
    assert error.path == "spec.nodeHealthMonitor.cel.expression"
    assert error.message.startswith("invalid CEL expression: ")
    assert any(e.startswith("spec.nodeHealthMonitor.cel.expression: invalid CEL")
               for e in spec_errors(job))
    plan = reconcile_job(job, Observation(), at(0))
    assert not plan.creates and plan.status is not None
    failed = true_member(plan.status.conditions)
    assert failed is not None and failed.reason == "InvalidSpec"
    assert "spec.nodeHealthMonitor.cel.expression" in failed.message


def test_the_node_variable_has_go_zero_values() -> None:
    """A node that omits ``spec.unschedulable`` reads as false, as the typed Go object does."""
    plain, cordoned = node("a"), attrs.evolve(node("b"), unschedulable=True)
    verdict = cel_verdict(CORDONED, check_nodes(CORDONED, [cordoned, plain]))
    assert verdict.flagged == ("b",) and verdict.errors == ()
    assert node_object(plain)["spec"]["unschedulable"] is False


def test_conditions_taints_and_labels_are_visible() -> None:
    """Conditions (type/status/reason/message), taints and labels can be tested."""
    sick = attrs.evolve(node("a"), labels=(("nvidia.com/gpu.health", "bad"),),
                        conditions=(NodeCondition(type="GpuXid", status="True",
                                                  reason="Xid79", message="fell off the bus"),),
                        taints=(NodeTaint(key="nvidia.com/xid", effect="NoExecute"),))
    healthy = node("b")
    for expression in (
        "node.status.conditions.exists(c, c.type == 'GpuXid' && c.status == 'True')",
        "node.spec.taints.exists(t, t.effect == 'NoExecute')",
        "node.metadata.labels['nvidia.com/gpu.health'] == 'bad'",
    ):
        assert check_node(expression, sick).unhealthy, expression
    assert not check_node("node.spec.taints.exists(t, t.effect == 'NoExecute')",
                          healthy).unhealthy


def test_evaluation_errors_do_not_flag_and_are_named_in_the_running_message() -> None:
    """An expression that cannot be evaluated on a node (missing label key) flags nothing; the
    InProgress message names the node and the error."""
    job = _monitored("node.metadata.labels['rack'] == 'r1'", status=running_status())
    nodes = tuple(node(n) for n in NODES)
    obs = Observation(trainjob=trainjob(), nodes=nodes,
                      node_checks=check_nodes("node.metadata.labels['rack'] == 'r1'", nodes))
    plan = reconcile_job(job, obs, at(30))
    assert plan.status is not None
    current = true_member(plan.status.conditions)
    assert current is not None and current.reason == "WorkloadRunning"
    assert "nodeHealthMonitor could not be evaluated on gpu-0: " in current.message
    assert not plan.deletes


def test_a_flagged_node_fails_the_job_as_a_node_failure() -> None:
    """A cordoned group node under ``node.spec.unschedulable == true``: HardwareFailed True,
    the node listed as HardwareFailureDetected, the Job Failed naming the node and the
    expression, failure class Node/GPUUnhealthy, and the workload deleted."""
    job = _monitored(CORDONED, status=running_status())
    nodes = (node("gpu-0"), attrs.evolve(node("gpu-1"), unschedulable=True), node("gpu-2"))
    obs = Observation(trainjob=trainjob(), nodes=nodes, node_checks=check_nodes(CORDONED, nodes))
    plan = reconcile_job(job, obs, at(30))
    status = plan.status
    assert status is not None
    failed = true_member(status.conditions)
    assert failed is not None and failed.type == ConditionType.FAILED
    assert failed.reason == "HardwareFailureDetected"
    assert "gpu-1" in failed.message and CORDONED in failed.message
    hardware = next(c for c in status.conditions if c.type == ConditionType.HARDWARE_FAILED)
    assert hardware.status == ConditionStatus.TRUE
    assert [(f.name, f.reason) for f in status.failed_nodes] == [
        ("gpu-1", FailedNodeReason.HARDWARE_FAILURE_DETECTED)]
    assert status.failure_class is not None
    assert (status.failure_class.scope, status.failure_class.reason) == (
        FailureScope.NODE, "GPUUnhealthy")
    assert [d.name for d in plan.deletes] == ["j1-workload"]
    assert [e.reason for e in plan.events] == ["HardwareFailureDetected"]


def test_healthy_nodes_leave_the_run_alone() -> None:
    """No node flagged: the running plan is what it is without a monitor."""
    job = _monitored(CORDONED, status=running_status())
    nodes = tuple(node(n) for n in NODES)
    obs = Observation(trainjob=trainjob(), nodes=nodes, node_checks=check_nodes(CORDONED, nodes))
    plain = make_job(status=running_status())
    assert reconcile_job(job, obs, at(30)) == reconcile_job(plain, obs, at(30))


def test_monitor_compiles_once() -> None:
    """The compiled program is cached by expression (pure: same input, same program)."""
    from cre.api.cel import compile_cel

    before = compile_cel.cache_info().hits
    nodes = [NodeView(name=f"n{i}") for i in range(5)]
    check_nodes(CORDONED, nodes)
    check_nodes(CORDONED, nodes)
    assert compile_cel.cache_info().hits >= before + 1


def _signals(**fields: object) -> NodeHealthMonitor:
    return NodeHealthMonitor(**fields)  # type: ignore[arg-type]


def test_a_gpu_health_condition_flags_the_node() -> None:
    """``conditions: [{type: GpuUnhealthy}]`` flags the node whose condition is True, not the
    one where it is False, and says which condition."""
    monitor = _signals(conditions=(NodeConditionSignal(type="GpuUnhealthy"),))
    sick = NodeView(name="a", conditions=(NodeCondition(type="GpuUnhealthy", status="True"),))
    fine = NodeView(name="b", conditions=(NodeCondition(type="GpuUnhealthy", status="False"),))
    verdict = check_monitor(monitor, [sick, fine])
    assert verdict.flagged == ("a",)
    assert verdict.message() == ("Hardware failure detected on node(s) a: a: condition "
                                 "GpuUnhealthy=True")


def test_a_matching_taint_flags_the_node() -> None:
    """``taints: [{key: nvidia.com/gpu-error, effect: NoExecute}]`` flags a node with that
    taint and effect (any value), not one with another effect."""
    monitor = _signals(taints=(NodeTaintSignal(key="nvidia.com/gpu-error",
                                               effect=TaintEffect("NoExecute")),))
    sick = NodeView(name="a", taints=(NodeTaint(key="nvidia.com/gpu-error", value="xid79",
                                                effect="NoExecute"),))
    soft = NodeView(name="b", taints=(NodeTaint(key="nvidia.com/gpu-error",
                                                effect="NoSchedule"),))
    verdict = check_monitor(monitor, [sick, soft])
    assert verdict.flagged == ("a",)
    assert "a: taint nvidia.com/gpu-error=xid79:NoExecute" in verdict.message()


def test_a_matching_label_flags_the_node() -> None:
    """``labels: {nvidia.com/gpu.health: unhealthy}`` flags the node carrying that value."""
    monitor = _signals(labels={"nvidia.com/gpu.health": "unhealthy"})
    sick = NodeView(name="a", labels=(("nvidia.com/gpu.health", "unhealthy"),))
    fine = NodeView(name="b", labels=(("nvidia.com/gpu.health", "ok"),))
    assert check_monitor(monitor, [sick, fine]).flagged == ("a",)


def test_allocatable_gpus_below_the_count_at_start_flag_the_node() -> None:
    """``gpuAllocatableDrop``: 8 GPUs at the group's start, 7 now: flagged, with both counts;
    a node at its start count, or one with no baseline, is not."""
    monitor = _signals(gpu_allocatable_drop=True)
    views = [NodeView(name="a", allocatable_gpus=7), NodeView(name="b", allocatable_gpus=8),
             NodeView(name="c", allocatable_gpus=0)]
    verdict = check_monitor(monitor, views, baseline=group_gpus({GROUP_GPUS: "a=8,b=8"}))
    assert verdict.flagged == ("a",)
    assert "a: allocatable nvidia.com/gpu fell from 8 to 7" in verdict.message()
    off = check_monitor(_signals(), views, baseline={"a": 8})
    assert off.flagged == ()


def test_the_job_tier_reads_the_baseline_from_the_group_gpus_annotation() -> None:
    """A running Job whose monitor has gpuAllocatableDrop fails HardwareFailureDetected when a
    node lost a GPU since the Workflow launched it (cre.dev/group-gpus)."""
    job = make_job(status=running_status())
    meta = attrs.evolve(job.metadata, annotations={**job.metadata.annotations,
                                                   GROUP_GPUS: "gpu-0=8,gpu-1=8,gpu-2=8"})
    job = attrs.evolve(job, metadata=meta, spec=attrs.evolve(
        job.spec, node_health_monitor=_signals(gpu_allocatable_drop=True)))
    nodes = (node("gpu-0"), attrs.evolve(node("gpu-1"), allocatable_gpus=6), node("gpu-2"))
    plan = reconcile_job(job, Observation(trainjob=trainjob(), nodes=nodes), at(30))
    assert plan.status is not None
    assert [(f.name, f.reason) for f in plan.status.failed_nodes] == [
        ("gpu-1", FailedNodeReason.HARDWARE_FAILURE_DETECTED)]


def test_a_monitor_with_cel_and_signals_names_both() -> None:
    """The expression and a signal both hold on a node: the message names each."""
    monitor = _signals(cel=CelExpression(expression=CORDONED), labels={"bad": "yes"})
    view = NodeView(name="a", unschedulable=True, labels=(("bad", "yes"),))
    views = [view, NodeView(name="b", unschedulable=True)]
    verdict = check_monitor(monitor, views, checks=check_nodes(CORDONED, views))
    assert verdict.flagged == ("a", "b")
    assert f"a: nodeHealthMonitor `{CORDONED}` is true, label bad=yes" in verdict.message()
    assert f"b: nodeHealthMonitor `{CORDONED}` is true" in verdict.message()


def test_the_core_reads_the_checks_of_its_own_expression_only() -> None:
    """The core judges a Job's expression by the results handed to it: a check of another
    expression, or none at all, flags nothing; a compile error is said once, on node ``*``."""
    cordoned = attrs.evolve(node("gpu-1"), unschedulable=True)
    other = check_nodes("true", [cordoned])
    assert cel_verdict(CORDONED, other).flagged == ()
    assert cel_verdict(CORDONED, ()).flagged == ()
    assert cel_verdict(CORDONED, check_nodes(CORDONED, [cordoned])).flagged == ("gpu-1",)
    broken = cel_verdict("node.((", check_nodes("node.((", [cordoned, node("gpu-2")]))
    assert [n for n, _ in broken.errors] == ["*"] and broken.flagged == ()
