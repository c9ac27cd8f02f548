"""Per-node certification results derived from a Workflow run by the real core, and merged over
sources (cre.core.certification.nodestate)."""

from __future__ import annotations

from datetime import datetime

import attrs

from cre.api.job import Job, JobStatus
from cre.core.certification.nodestate import (
    CategoryEvidence,
    NodeResult,
    NodeState,
    category_results,
    fleet_view,
)
from cre.core.job.classify import group_nodes
from cre.core.workflow import noderesults as NR
from tests.core.jobtier import Story
from tests.core.tierworld import WorkflowWorld, at, nodes, succeeded, told, workflow

CATEGORY = "communication/nccl-all-reduce"


def _names(world: WorkflowWorld, kind: str) -> frozenset[str]:
    data = world.config_maps.get(NR.configmap_name(kind, world.wf.metadata.uid or ""))
    return frozenset(r.name for r in NR.read_records(data, kind))


def _evidence(world: WorkflowWorld) -> CategoryEvidence:
    return CategoryEvidence(category=CATEGORY, workflow=world.wf,
                            failed=_names(world, NR.FAILED),
                            uncertified=_names(world, NR.UNCERTIFIED))


def _gpu02_broken(job: Job, now: datetime) -> JobStatus:
    if "gpu-02" in group_nodes(job):
        return told(Story.HARDWARE, node="gpu-02")(job, now)
    return succeeded(job, now)


def test_running_groups_are_testing_and_pending_ones_have_no_result() -> None:
    """Once the groups' Jobs run, every node of the run is Testing, with no pass and no
    bandwidth yet; before partitioning there is no result at all."""
    pool = nodes(4)
    world = WorkflowWorld(wf=workflow(pool, nodesPerJob=2), nodes=pool)
    assert category_results(_evidence(world)) == ()
    world.step(at(0))
    world.step(at(1))
    results = category_results(_evidence(world))
    assert [(r.node, r.state) for r in results] == [
        (f"gpu-0{i}", NodeState.TESTING) for i in range(4)]
    assert all(r.last_pass is None and r.bus_bandwidth_gbps is None for r in results)


def test_only_recorded_nodes_are_failed_and_passing_nodes_keep_their_pass_time() -> None:
    """gpu-02's GPU breaks: it alone is Failed (the failed-nodes record names it); its peer
    gpu-03 is never called Failed; the nodes of the passing group are Passed, last passed when
    their group completed."""
    pool = nodes(4)
    world = WorkflowWorld(wf=workflow(pool, nodesPerJob=2), nodes=pool)
    world.run(_gpu02_broken)
    by_node = {r.node: r for r in category_results(_evidence(world))}
    assert by_node["gpu-02"].state == NodeState.FAILED
    assert by_node["gpu-03"].state != NodeState.FAILED
    group0 = next(g for g in world.wf.status.groups if "gpu-00" in g.nodes)
    for name in ("gpu-00", "gpu-01"):
        assert by_node[name].state == NodeState.PASSED
        assert by_node[name].last_pass == group0.completion_time is not None
        assert by_node[name].category == CATEGORY


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
