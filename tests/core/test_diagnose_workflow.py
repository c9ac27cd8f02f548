"""The diagnose run through the pure Workflow core, with Job statuses the Job tier writes:
rounds become groups whose Jobs are named from the steps, only confirmed nodes are Failed,
an infrastructure abort in a bisection step blames nobody, and planning is deterministic."""

from __future__ import annotations

from datetime import datetime

from cre.api.conditions import Verdict, WorkflowReason
from cre.api.job import Job, JobStatus
from cre.api.workflow import DiagnoseStage, StepOutcome
from cre.core.job.classify import group_nodes
from cre.core.workflow import noderesults as NR
from cre.core.workflow.run import reconcile_workflow
from tests.core.jobtier import Story
from tests.core.tierworld import WorkflowWorld, at, nodes, succeeded, told, workflow

BAD = "gpu-13"


def _world() -> WorkflowWorld:
    pool = nodes(16)
    return WorkflowWorld(wf=workflow(pool, testScale="diagnose"), nodes=pool)


def _records(world: WorkflowWorld, kind: str) -> set[str]:
    data = world.config_maps.get(NR.configmap_name(kind, world.wf.metadata.uid or ""))
    return {r.name for r in NR.read_records(data, kind)}


def _broken(job: Job, now: datetime) -> JobStatus:
    if BAD in group_nodes(job):
        return told(Story.CONTAINER_FAILED)(job, now)
    return succeeded(job, now)


def test_the_bad_node_alone_is_failed_and_jobs_are_named_from_steps() -> None:
    """One bad node among 16: screening in 4 groups of 4, bisection with peers, confirmation;
    only the bad node is Failed, each step ran as one Job named from the step."""
    world = _world()
    world.run(_broken)
    diag = world.wf.status.orchestration.diagnose if world.wf.status.orchestration else None
    assert diag is not None and diag.stage == DiagnoseStage.COMPLETE
    assert world.wf.status.verdict == Verdict.FAILED
    assert diag.failed_nodes == (BAD,)
    assert _records(world, NR.FAILED) == {BAD}
    assert _records(world, NR.UNCERTIFIED) == set()
    assert diag.round <= 2 and diag.jobs_spent <= diag.job_budget
    name = world.wf.metadata.name
    assert sorted(n for k, n in world.created if k == "Job") == sorted(
        f"{name}-{s.name}-iter-1" for s in diag.steps)
    assert WorkflowReason.DIAGNOSE_ROUND in [r for r, _ in world.events]
    assert world.condition("Failed").message.startswith(f"Diagnose: confirmed bad node(s) {BAD}")


def test_an_infra_abort_mid_bisection_blames_nobody() -> None:
    """The bisection step holding the bad node is evicted on every attempt: it is not judged,
    its suspects are Uncertified, its known-good peers stay Passed, nobody is Failed."""
    world = _world()

    def outcome(job: Job, now: datetime) -> JobStatus:
        if "bisect" in (job.metadata.name or "") and BAD in group_nodes(job):
            return told(Story.EVICTED, node=BAD)(job, now)
        return _broken(job, now)

    world.run(outcome)
    diag = world.wf.status.orchestration.diagnose if world.wf.status.orchestration else None
    assert diag is not None
    aborted = next(s for s in diag.steps if s.outcome == StepOutcome.NOT_JUDGED)
    assert _records(world, NR.FAILED) == set()
    assert _records(world, NR.UNCERTIFIED) == set(aborted.suspects)
    assert world.wf.status.verdict == Verdict.INCOMPLETE
    passed = NR.decode_names(world.config_maps[NR.configmap_name(
        NR.SUCCEEDED, world.wf.metadata.uid or "")][NR.data_key(NR.SUCCEEDED)])
    assert set(aborted.peers) <= set(passed)


def test_planning_a_round_is_deterministic() -> None:
    """The pass that plans a diagnose round gives the same plan every time it runs on the same
    input (a restart re-plans the same steps, hence the same Job names)."""
    world = _world()
    t = 0.0
    while True:
        obs, now = world.observe(), at(t)
        plan = reconcile_workflow(world.wf, obs, now)
        if plan.status is not None and plan.status.orchestration is not None \
                and plan.status.orchestration.diagnose is not None:
            assert plan == reconcile_workflow(world.wf, obs, now)
            assert any(g.name.startswith("bisect-") for g in plan.status.groups)
            return
        world.step(now)
        if plan.quiet:
            world.finish(_broken, now)
        t += 1.0
        assert t < 200


def test_a_slow_node_missing_the_threshold_is_narrowed_down_too() -> None:
    """A threshold miss is a genuine failure: every group holding the slow node misses the
    busBW threshold; diagnose names the slow node alone, the run fails JobValidationFailed
    with ValidationFailed=True."""
    world = _world()

    def outcome(job: Job, now: datetime) -> JobStatus:
        if BAD in group_nodes(job):
            return told(Story.THRESHOLD_MISSED)(job, now)
        return succeeded(job, now)

    world.run(outcome)
    assert _records(world, NR.FAILED) == {BAD}
    assert world.condition("Failed").reason == WorkflowReason.JOB_VALIDATION_FAILED
    assert world.condition("ValidationFailed").status == "True"


def test_a_restart_before_the_launch_was_recorded_creates_the_same_jobs() -> None:
    """A manager that created a round's Jobs but died before writing the status re-plans from
    the status it finds: the same Job names (a create conflict on its own objects), no
    duplicate and no other step."""
    world = _world()
    t = 0.0
    while True:
        before, now = world.wf, at(t)
        plan = world.step(now)
        launched = sorted(c.name for c in plan.creates if c.kind == "Job" and "bisect" in c.name)
        if launched:
            break
        if plan.quiet:
            world.finish(_broken, now)
        t += 1.0
        assert t < 200
    replanned = reconcile_workflow(before, world.observe(), now)
    assert sorted(c.name for c in replanned.creates if c.kind == "Job") == launched
