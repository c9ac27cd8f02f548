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
