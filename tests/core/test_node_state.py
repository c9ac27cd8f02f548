"""Per-node gauge values derived from NodeCertification records and running groups, merged
over sources (cre.core.certification.nodestate)."""

from __future__ import annotations

import attrs

from cre.api.conditions import GroupPhase
from cre.api.nodecertification import (
    CategoryResult,
    CertificationRef,
    NodeCertification,
    NodeCertificationSpec,
    NodeCertificationStatus,
)
from cre.api.nodecertification import NodeResult as Result
from cre.api.workflow import GroupStatus, Workflow, WorkflowStatus
from cre.core.certification.nodestate import (
    NodeResult,
    NodeState,
    fleet_view,
    record_results,
    under_test_results,
)
from tests.core.nodecertworld import T0, ended, later
from tests.core.tierworld import at, nodes, workflow

CATEGORY = "communication/nccl-all-reduce"


def _record(*results: CategoryResult) -> NodeCertification:
    return NodeCertification(spec=NodeCertificationSpec(node_name="n1"),
                             status=NodeCertificationStatus(categories=results))


def test_a_record_gives_one_gauge_value_per_category() -> None:
    """Failed is 2 (no last pass unless the record kept one), Uncertified 0, a valid pass 1 with
    its time as the last pass and its busBW, the same pass 4 (Expired) from its validUntil on."""
    ref = CertificationRef(namespace="ns", name="c")
    passed = CategoryResult(domain="communication", variant="nccl-all-reduce",
                            result=Result.PASSED, time=T0, certification=ref,
                            valid_until=later(60), bus_bandwidth_gbps="371.5")
    failed = attrs.evolve(passed, variant="dcgm", result=Result.FAILED, valid_until=None,
                          bus_bandwidth_gbps=None)
    aborted = attrs.evolve(failed, variant="loopback", result=Result.UNCERTIFIED)
    record = _record(passed, failed, aborted)
    now = {r.category: r for r in record_results(record, later(59))}
    assert now[CATEGORY] == NodeResult(node="n1", category=CATEGORY, state=NodeState.PASSED,
                                       at=T0, last_pass=T0, bus_bandwidth_gbps=371.5)
    assert now["communication/dcgm"].state == NodeState.FAILED
    assert now["communication/dcgm"].last_pass is None
    assert now["communication/loopback"].state == NodeState.UNCERTIFIED
    expired = {r.category: r.state for r in record_results(record, later(60))}
    assert expired[CATEGORY] == NodeState.EXPIRED
    refailed = _record(attrs.evolve(failed, last_pass_time=T0))
    (after_failure,) = record_results(refailed, later(59))
    assert after_failure.state == NodeState.FAILED and after_failure.last_pass == T0


def workflow_with_groups(*groups: GroupStatus) -> Workflow:
    return attrs.evolve(workflow(nodes(2)), status=WorkflowStatus(groups=groups))


def test_only_running_groups_are_testing() -> None:
    """The nodes of a running group of the Certification's Workflow are Testing from the
    group's start; a finished group's nodes and an unknown Workflow give nothing."""
    cert = ended()
    (cs,) = cert.status.category_statuses
    assert cs.workflow_ref is not None
    wf = workflow_with_groups(
        GroupStatus(name="g0", nodes=("a", "b"), phase=GroupPhase.RUNNING, start_time=at(3)),
        GroupStatus(name="g1", nodes=("c",), phase=GroupPhase.SUCCEEDED, start_time=at(1)))
    got = under_test_results(cert, {cs.workflow_ref.name: wf})
    assert [(r.node, r.state, r.at) for r in got] == [
        ("a", NodeState.TESTING, at(3)), ("b", NodeState.TESTING, at(3))]
    assert under_test_results(cert, {}) == ()


def test_fleet_view_keeps_the_latest_result_and_the_latest_pass() -> None:
    """Two sources report the same node and category: the later observation's state wins,
    the last pass is the latest of both, and other keys are kept as they are."""
    passed = NodeResult(node="n1", category=CATEGORY, state=NodeState.PASSED, at=at(10),
                        last_pass=at(10), bus_bandwidth_gbps=400.0)
    failed = NodeResult(node="n1", category=CATEGORY, state=NodeState.FAILED, at=at(20))
    other = attrs.evolve(passed, node="n2")
    view = fleet_view({"ns/b": [passed, other], "ns/a": [failed]})
    assert view[("n1", CATEGORY)] == attrs.evolve(failed, last_pass=at(10))
    assert view[("n2", CATEGORY)] == other
    older = fleet_view({"ns/a": [attrs.evolve(failed, at=at(5))], "ns/b": [passed]})
    assert older[("n1", CATEGORY)].state == NodeState.PASSED
