"""Hypothesis properties of the pure Workflow core over generated clusters, policies and Job
outcomes: plans are deterministic and come to rest; launch gating holds; no infra abort
cancels a sibling or blames a node; Failed only ever comes from a genuine failure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cre.api.conditions import FailureScope, GroupPhase, JobReason, Verdict
from cre.api.job import Job, JobStatus
from cre.core import noderesults as NR
from cre.core.classify import ClassReason, group_nodes
from cre.core.workflow import WorkflowSettings, reconcile_workflow
from tests.core.tierworld import WorkflowWorld, at, failed, nodes, succeeded, workflow

OUTCOMES = ("succeed", "workload", "timeout", "evicted", "platform", "control", "wait")
GENUINE = frozenset({"workload", "timeout"})


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(2, 8))
    return {
        "count": count,
        "per_job": draw(st.integers(1, count)),
        "max_concurrent": draw(st.integers(0, 3)),
        "mode": draw(st.sampled_from(["Continue", "FailFast"])),
        "deferral": draw(st.booleans()),
        "infra_retries": draw(st.integers(0, 2)),
        "repeat": draw(st.integers(1, 2)),
        "script": draw(st.lists(st.sampled_from(OUTCOMES), min_size=1, max_size=40)),
    }


def _outcome(kind: str, job: Job, now: datetime) -> JobStatus | None:
    first = group_nodes(job)[0]
    if kind == "succeed":
        return succeeded(job, now)
    if kind == "workload":
        return failed(job, now)
    if kind == "timeout":
        return failed(job, now, reason=ClassReason.TIMED_OUT,
                      condition_reason=JobReason.JOB_TIMED_OUT)
    if kind == "evicted":
        return failed(job, now, scope=FailureScope.NODE, reason=ClassReason.POD_EVICTED,
                      blamed=(first,))
    if kind == "platform":
        return failed(job, now, scope=FailureScope.PLATFORM,
                      reason=ClassReason.IMAGE_PULL_FAILED)
    if kind == "control":
        return failed(job, now, scope=FailureScope.CONTROL_PLANE,
                      reason=ClassReason.WORKLOAD_DELETED)
    return None


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_workflow_properties(case: dict[str, Any]) -> None:
    """Every generated run reaches a verdict, with deterministic plans, gating respected,
    no sibling cancelled by an infra abort, no node blamed by one, and Failed only from a
    genuine failure (or any failure with the kill switch)."""
    pool = nodes(case["count"])
    wf = workflow(pool, nodesPerJob=case["per_job"], maxConcurrent=case["max_concurrent"],
                  repeatCount=case["repeat"],
                  failurePolicy={"mode": case["mode"], "infraRetries": case["infra_retries"]})
    world = WorkflowWorld(wf=wf, nodes=pool,
                          settings=WorkflowSettings(infra_scoped_fail_fast=case["deferral"]))
    script: list[str] = list(case["script"])
    drawn: dict[str, str] = {}
    waited: dict[str, int] = {}

    def outcome(job: Job, now: datetime) -> JobStatus | None:
        name = job.metadata.name or ""
        if name not in drawn:
            drawn[name] = script[len(drawn) % len(script)]
        kind = drawn[name]
        if kind == "wait":
            waited[name] = waited.get(name, 0) + 1
            if waited[name] < 3:
                return None
            kind = "succeed"
        return _outcome(kind, job, now)

    t = 0.0
    for _ in range(400):
        now = at(t)
        obs = world.observe()
        plan = reconcile_workflow(world.wf, obs, now, settings=world.settings)
        assert plan == reconcile_workflow(world.wf, obs, now, settings=world.settings)
        world.step(now)
        status = world.wf.status
        running = [g for g in status.groups if g.phase == GroupPhase.RUNNING]
        busy = [n for g in running for n in g.nodes]
        assert len(busy) == len(set(busy)), "two running groups share a node"
        if case["max_concurrent"]:
            assert len(running) <= case["max_concurrent"]
        if any(g.phase == GroupPhase.CANCELLED for g in status.groups):
            assert any(g.phase == GroupPhase.FAILED for g in status.groups), \
                "a sibling was cancelled without a genuine failure"
        if world.terminal:
            break
        if plan.quiet:
            world.finish(outcome, now)
        t += 1.0
    else:
        raise AssertionError("no verdict")
    rest = reconcile_workflow(world.wf, world.observe(), at(t + 1), settings=world.settings)
    assert rest.quiet, "a finished Workflow keeps acting"
    verdict = world.wf.status.verdict
    kinds = set(drawn.values())
    if case["deferral"]:
        if not kinds & GENUINE:
            assert verdict != Verdict.FAILED
        orch = world.wf.status.orchestration
        assert orch is not None
        failed_groups = {g.name for r in orch.iteration_history for g in r.groups
                         if g.phase == GroupPhase.FAILED} | {
            g.name for g in world.wf.status.groups if g.phase == GroupPhase.FAILED}
        allowed = {n for g in world.wf.status.groups if g.name in failed_groups
                   for n in g.nodes}
        data = world.config_maps.get(NR.configmap_name(NR.FAILED, wf.metadata.uid or ""))
        blamed = {r.name for r in NR.read_records(data, NR.FAILED)}
        assert blamed <= allowed, "an infra abort blamed a node"
    phases = [g.phase for g in world.wf.status.groups]
    if GroupPhase.FAILED in phases:
        assert verdict == Verdict.FAILED
