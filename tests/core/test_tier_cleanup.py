"""``CleanedUp`` on a finished Workflow and Certification (cre.core.workflow.cleanup): written with
the verdict, kept up to date from the Jobs' ``WorkloadReleased`` (the Workflows' ``CleanedUp``),
True once nothing of the run holds a workload."""

from __future__ import annotations

import attrs

from cre.api.conditions import CleanupReason, ConditionType, ReleaseReason, Verdict
from cre.api.job import Job, WorkloadRetention
from cre.api.meta import Condition, ConditionStatus
from cre.core.common.conditions import set_additive
from cre.core.workflow.groupjob import group_job
from tests.core.tierworld import (
    CertificationWorld,
    WorkflowWorld,
    always_succeed,
    at,
    certification,
    nodes,
    workflow,
)


def _cleaned(conditions: tuple[Condition, ...]) -> Condition | None:
    return next((c for c in conditions if c.type == ConditionType.CLEANED_UP), None)


def _release(job: Job, *, ok: bool, message: str) -> Job:
    conds, _ = set_additive(job.status.conditions, type_=ConditionType.WORKLOAD_RELEASED,
                            status=ok, reason=ReleaseReason.RELEASED if ok
                            else ReleaseReason.RELEASING, message=message, now=at(50),
                            generation=1)
    return attrs.evolve(job, status=attrs.evolve(job.status, conditions=conds))


def test_group_jobs_release_their_workload_unless_the_template_retains() -> None:
    """A Workflow's group Job asks for Release; a jobTemplate that says Retain is kept."""
    pool = nodes(2)
    wf = workflow(pool)
    body = group_job(wf, name="j", group="group-0", nodes=[n.name for n in pool], renames={})
    assert body["spec"]["workloadRetention"] == WorkloadRetention.RELEASE
    spec = attrs.evolve(wf.spec.job_template.spec, workload_retention=WorkloadRetention.RETAIN)
    kept = attrs.evolve(wf, spec=attrs.evolve(wf.spec, job_template=attrs.evolve(
        wf.spec.job_template, spec=spec)))
    body = group_job(kept, name="j", group="group-0", nodes=[n.name for n in pool], renames={})
    assert body["spec"]["workloadRetention"] == WorkloadRetention.RETAIN


def test_workflow_says_which_jobs_hold_workloads_then_cleaned_up() -> None:
    """The verdict write carries CleanedUp=False naming each Job still holding its workload;
    once every Job says Released, CleanedUp=True with one event, and the verdict is untouched."""
    pool = nodes(4)
    world = WorkflowWorld(wf=workflow(pool, nodesPerJob=2), nodes=pool)
    world.run(always_succeed)
    assert world.wf.status.verdict == Verdict.PASSED
    cond = _cleaned(world.wf.status.conditions)
    assert cond is not None and cond.status == ConditionStatus.FALSE
    assert cond.reason == CleanupReason.WORKLOADS_REMAINING
    names = sorted(world.jobs)
    assert cond.message.startswith("2 of 2 Jobs still hold workloads: ")
    assert all(f"Job {n} has not released its workload yet" in cond.message for n in names)
    world.jobs[names[0]] = _release(world.jobs[names[0]], ok=False,
                                    message="Deleting TrainJob x and its pods")
    world.jobs[names[1]] = _release(world.jobs[names[1]], ok=True, message="gone")
    world.step(at(100))
    cond = _cleaned(world.wf.status.conditions)
    assert cond is not None and cond.message == (
        f"1 of 2 Jobs still holds a workload: Job {names[0]}: Deleting TrainJob x and its pods")
    world.jobs[names[0]] = _release(world.jobs[names[0]], ok=True, message="gone")
    verdict = world.wf.status.verdict
    world.step(at(101))
    cond = _cleaned(world.wf.status.conditions)
    assert cond is not None and cond.status == ConditionStatus.TRUE
    assert cond.reason == CleanupReason.WORKLOADS_RELEASED
    assert world.events[-1][0] == CleanupReason.WORKLOADS_RELEASED
    assert world.wf.status.verdict == verdict
    assert world.step(at(102)).quiet


def test_certification_quotes_its_workflows_cleanup() -> None:
    """A finished Certification is CleanedUp=False quoting a Workflow that still holds
    workloads, True once each of its Workflows is."""
    world = CertificationWorld(cert=certification(("communication", "nccl-all-reduce")),
                               nodes=nodes(2))
    world.step(at(0))
    name = world.created[0]
    pending = Condition(type=ConditionType.CLEANED_UP, status=ConditionStatus.FALSE,
                        reason=CleanupReason.WORKLOADS_REMAINING, message="1 of 1 Job ...",
                        last_transition_time=at(1))
    world.finish(name, ok=True, verdict=Verdict.PASSED, now=at(1), extra=(pending,))
    for t in range(2, 5):
        world.step(at(t))
    cond = _cleaned(world.cert.status.conditions)
    assert cond is not None and cond.status == ConditionStatus.FALSE
    assert cond.message == f"1 of 1 Workflow still holds a workload: Workflow {name}: " \
                           "1 of 1 Job ..."
    done = attrs.evolve(pending, status=ConditionStatus.TRUE,
                        reason=CleanupReason.WORKLOADS_RELEASED, message="gone")
    wf = world.workflows[name]
    world.workflows[name] = attrs.evolve(wf, status=attrs.evolve(wf.status, conditions=tuple(
        done if c.type == ConditionType.CLEANED_UP else c for c in wf.status.conditions)))
    world.step(at(6))
    cond = _cleaned(world.cert.status.conditions)
    assert cond is not None and cond.status == ConditionStatus.TRUE
    assert cond.message == "Every workload of the run is gone (1 Workflow: TrainJobs and " \
                           "their pods deleted)"
