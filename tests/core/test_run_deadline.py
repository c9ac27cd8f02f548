"""The run-level ``deadline`` and ``maxNodes`` of a Workflow and a Certification: past the
deadline running groups are cancelled (Jobs deleted, nodes Uncertified) and the verdict is
Incomplete unless a genuine failure was already found; maxNodes caps the nodes one run takes."""

from __future__ import annotations

from datetime import datetime

import attrs

from cre.api.conditions import (
    CategoryState,
    CertificationReason,
    GroupPhase,
    IncompleteReason,
    Verdict,
    WorkflowReason,
)
from cre.api.job import Job, JobStatus
from cre.api.labels import GROUP_LABEL
from cre.core.workflow import noderesults as NR
from tests.core.jobtier import Story
from tests.core.tierworld import (
    CertificationWorld,
    WorkflowWorld,
    always_succeed,
    at,
    certification,
    nodes,
    told,
    workflow,
)


def _records(world: WorkflowWorld, kind: str) -> dict[str, str]:
    data = world.config_maps.get(NR.configmap_name(kind, world.wf.metadata.uid or ""))
    return {r.name: r.reason for r in NR.read_records(data, kind)}


def _never(job: Job, now: datetime) -> JobStatus | None:
    return None


def _world(**options: object) -> WorkflowWorld:
    pool = nodes(4)
    wf = workflow(pool, nodesPerJob=2, **options)
    return WorkflowWorld(wf=wf, nodes=pool)


def test_past_the_deadline_running_groups_are_cancelled_and_the_verdict_is_incomplete() -> None:
    """deadline 60s, Jobs that never finish: at 60 s both groups are Cancelled, their Jobs
    deleted, every node Uncertified (DeadlineExceeded), verdict Incomplete with the reason."""
    world = _world()
    world.wf = attrs.evolve(world.wf, spec=attrs.evolve(world.wf.spec, deadline="60s"))
    end = world.run(_never)
    assert end == 60.0
    assert {g.phase for g in world.wf.status.groups} == {GroupPhase.CANCELLED}
    assert world.jobs == {}
    assert set(_records(world, NR.UNCERTIFIED).values()) == {WorkflowReason.DEADLINE_EXCEEDED}
    assert len(_records(world, NR.UNCERTIFIED)) == 4
    assert world.wf.status.verdict == Verdict.INCOMPLETE
    succeeded = world.condition("Succeeded")
    assert succeeded.reason == WorkflowReason.DEADLINE_EXCEEDED
    assert "deadline (60s from its creation) passed" in succeeded.message
    assert world.condition("Incomplete").reason == IncompleteReason.DEADLINE_EXCEEDED


def test_requeues_never_overshoot_the_deadline() -> None:
    """A running Workflow 50 s into a 60 s deadline asks to be requeued within 10 s."""
    world = _world()
    world.wf = attrs.evolve(world.wf, spec=attrs.evolve(world.wf.spec, deadline="60s"))
    world.step(at(0))
    world.step(at(1))
    plan = world.step(at(50))
    assert plan.requeue_after is not None and plan.requeue_after <= 10.0


def test_a_genuine_failure_before_the_deadline_keeps_the_verdict_failed() -> None:
    """group-0 failed genuinely, group-1 is still running at the deadline: verdict Failed,
    group-1's nodes Uncertified, the Failed message says the run ended early."""
    world = _world()
    world.wf = attrs.evolve(world.wf, spec=attrs.evolve(world.wf.spec, deadline="30s"))

    def outcome(job: Job, now: datetime) -> JobStatus | None:
        if job.metadata.labels[GROUP_LABEL] == "group-0":
            return told(Story.CONTAINER_FAILED)(job, now)
        return None

    world.run(outcome)
    assert world.wf.status.verdict == Verdict.FAILED
    assert set(_records(world, NR.UNCERTIFIED)) == {"gpu-02", "gpu-03"}
    assert "ended early: the run's deadline (30s from its creation) passed" in \
        world.condition("Failed").message


def test_max_nodes_takes_the_first_nodes_and_excludes_the_rest() -> None:
    """maxNodes 2 of 4 eligible nodes: the run takes gpu-00 and gpu-01, the others are
    excluded (MaxNodes, with an event) and the verdict is Incomplete."""
    pool = nodes(4)
    world = WorkflowWorld(wf=workflow(pool, maxNodes=2), nodes=pool)
    world.run(always_succeed)
    orch = world.wf.status.orchestration
    assert orch is not None
    assert orch.total_nodes == 2 and orch.excluded_nodes == ("gpu-02", "gpu-03")
    assert "beyond maxNodes" in (orch.exclusion_reason or "")
    assert WorkflowReason.MAX_NODES_EXCLUDED in [r for r, _ in world.events]
    assert world.wf.status.verdict == Verdict.INCOMPLETE


def test_a_certification_passes_its_remaining_deadline_and_skips_late_categories() -> None:
    """A 120 s Certification deadline: the first category's Workflow gets what is left
    (120s at creation); a category not started by the deadline is not certified (verdict
    Incomplete, DeadlineExceeded)."""
    cert = certification(("communication", "nccl-all-reduce"),
                         ("communication", "nccl-loopback"), deadline="120s")
    world = CertificationWorld(cert=cert, nodes=nodes(2))
    world.step(at(0))
    first = world.workflows[world.created[0]]
    assert first.spec.deadline == "120s"
    world.finish(world.created[0], ok=True, verdict=Verdict.PASSED, now=at(130))
    for t in range(131, 136):
        world.step(at(t))
    assert len(world.created) == 1
    second = world.cert.status.category_statuses[1]
    assert (second.status, second.verdict) == (CategoryState.SUCCEEDED, Verdict.INCOMPLETE)
    assert (second.message or "").startswith("DeadlineExceeded")
    assert world.cert.status.verdict == Verdict.INCOMPLETE
    incomplete = next(c for c in world.cert.status.conditions if c.type == "Incomplete")
    assert incomplete.reason == IncompleteReason.DEADLINE_EXCEEDED
    succeeded = next(c for c in world.cert.status.conditions if c.type == "Succeeded")
    assert succeeded.reason == CertificationReason.ALL_WORKFLOWS_SUCCEEDED


def test_a_certification_max_nodes_reaches_its_workflows() -> None:
    """maxNodes on the Certification caps each category's discovery and is copied onto the
    Workflow."""
    world = CertificationWorld(cert=certification(("communication", "nccl-all-reduce"),
                                                  maxNodes=2), nodes=nodes(4))
    world.step(at(0))
    wf = world.workflows[world.created[0]]
    assert wf.spec.max_nodes == 2
    assert (wf.spec.job_template.spec.workload.train_job or {})["trainer"]["numNodes"] == 2
