"""The Job controller evaluates a nodeHealthMonitor expression once per node copy."""

from __future__ import annotations

import attrs

from cre.controller.job.nodechecks import NodeChecks
from cre.core.common.observed import NodeView
from cre.core.job.health import check_node

CORDONED = "node.spec.unschedulable == true"


def test_a_node_copy_is_evaluated_once_per_expression() -> None:
    """Asking again for the same node copies evaluates nothing; a new copy of one node (a new
    resourceVersion) or another expression is evaluated, and every result is the core's."""
    nodes = [NodeView(name=f"n{i}", resource_version="1") for i in range(3)]
    checks = NodeChecks()
    first = checks.checks(CORDONED, nodes)
    assert checks.checks(CORDONED, nodes) == first and checks.evaluations == 3
    cordoned = attrs.evolve(nodes[1], unschedulable=True, resource_version="2")
    again = checks.checks(CORDONED, [nodes[0], cordoned, nodes[2]])
    assert checks.evaluations == 4
    assert [c.unhealthy for c in again] == [False, True, False]
    assert again == tuple(check_node(CORDONED, v) for v in (nodes[0], cordoned, nodes[2]))
    checks.checks("node.metadata.name == 'n0'", nodes[:1])
    assert checks.evaluations == 5 and len(checks) == 4


def test_the_job_controller_evaluates_only_while_the_core_judges() -> None:
    """The Job controller evaluates its Job's monitor only when the core will judge it (the
    workload observed, the Job not terminal): a Job without a workload, or one that ended,
    evaluates nothing (the CEL library need not even load)."""
    from cre.api.conditions import ConditionType
    from cre.api.job import CelExpression, NodeHealthMonitor
    from cre.api.meta import Condition, ConditionStatus
    from cre.controller.job.controller import JobController
    from cre.core.common.plan import Observation
    from cre.testing.strategies.job import at, make_job, node, running_status, trainjob

    class NoClient:
        pass

    controller = JobController(NoClient(), namespaces=["a"])  # type: ignore[arg-type]
    job = make_job(status=running_status())
    job = attrs.evolve(job, spec=attrs.evolve(job.spec, node_health_monitor=NodeHealthMonitor(
        cel=CelExpression(expression=CORDONED))))
    nodes = (node("gpu-0"), attrs.evolve(node("gpu-1"), unschedulable=True))
    assert controller._checked(job, Observation(nodes=nodes)).node_checks == ()
    done = attrs.evolve(job, status=attrs.evolve(job.status, conditions=(Condition(
        type=ConditionType.SUCCEEDED, status=ConditionStatus.TRUE, reason="WorkloadCompleted",
        message="done", last_transition_time=at(60)),)))
    assert controller._checked(done, Observation(trainjob=trainjob(), nodes=nodes)
                               ).node_checks == ()
    assert controller.node_checks.evaluations == 0
    checked = controller._checked(job, Observation(trainjob=trainjob(), nodes=nodes))
    assert [c.unhealthy for c in checked.node_checks] == [False, True]


def test_a_deleted_node_takes_its_results_with_it() -> None:
    """forget(node) drops that node's result under every expression and only those."""
    nodes = [NodeView(name=f"n{i}", resource_version="1") for i in range(3)]
    checks = NodeChecks()
    checks.checks(CORDONED, nodes)
    checks.checks("node.metadata.name == 'n1'", nodes[1:])
    assert len(checks) == 5
    checks.forget("n1")
    checks.forget("never-seen")
    assert len(checks) == 3
    checks.checks(CORDONED, nodes)
    assert checks.evaluations == 6, "only the forgotten node is evaluated again"


def test_the_job_controller_forgets_a_deleted_nodes_results() -> None:
    """A GPU node's DELETED watch event empties the Job controller's results for that node;
    an update of another node keeps them."""
    from cre.api.watch import WatchEventType
    from cre.controller.job.controller import JobController
    from cre.testing.strategies.job import node

    class NoClient:
        pass

    controller = JobController(NoClient(), namespaces=["a"])  # type: ignore[arg-type]
    gone, kept = node("gpu-0"), node("gpu-1")
    controller.node_checks.checks(CORDONED, (gone, kept))
    controller.nodes._dispatch(WatchEventType.MODIFIED, kept, attrs.evolve(kept, ready=False))
    assert len(controller.node_checks) == 2
    controller.nodes._dispatch(WatchEventType.DELETED, gone, None)
    assert len(controller.node_checks) == 1
    controller.node_checks.checks(CORDONED, (kept,))
    assert controller.node_checks.evaluations == 2
