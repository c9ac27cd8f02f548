"""Hypothesis properties of the pure Workflow core over generated clusters, policies and Job
outcomes: plans are deterministic and come to rest; launch gating holds; no infra abort
cancels a sibling or blames a node; Failed only ever comes from a genuine failure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cre.api.conditions import GroupPhase, Verdict
from cre.api.job import Job, JobStatus
from cre.core.job.classify import group_nodes
from cre.core.workflow import noderesults as NR
from cre.core.workflow.reconcile import WorkflowSettings
from cre.core.workflow.run import active_nodes, reconcile_workflow
from tests.core.jobtier import Story, job_tier_status
from tests.core.tierworld import WorkflowWorld, at, nodes, succeeded, workflow

# "notready": the node is Ready again when the Workflow looks (a reboot); "down": it stays
# NotReady for the rest of the run (broken once the grace has passed).
OUTCOMES = ("succeed", "workload", "timeout", "evicted", "platform", "deleted", "config",
            "hardware", "notready", "down", "wait")
STORIES = {"succeed": Story.SUCCEEDED, "workload": Story.CONTAINER_FAILED,
           "timeout": Story.TIMED_OUT, "evicted": Story.EVICTED,
           "platform": Story.STARTUP_STALLED, "deleted": Story.WORKLOAD_DELETED,
           "config": Story.CREATE_REJECTED, "hardware": Story.HARDWARE,
           "notready": Story.NODE_NOT_READY, "down": Story.NODE_NOT_READY}
GENUINE = frozenset({"workload", "timeout"})
# Outcomes that fail the verdict without blaming a whole group.
FAILING = GENUINE | {"deleted", "config", "hardware", "down"}
INFRA = frozenset({"evicted", "platform", "notready", "hardware", "down"})


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
    """The Job tier's own status for ``kind`` (evidence about the group's first node)."""
    if kind == "wait":
        return None
    if kind == "succeed":
        return succeeded(job, now)
    return job_tier_status(job, now, STORIES[kind], node=group_nodes(job)[0])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_workflow_properties(case: dict[str, Any]) -> None:
    """Every generated run reaches a verdict, with deterministic plans, gating respected,
    no sibling cancelled by an infra abort; a node is Failed only if a Job outcome named it
    with hardware evidence or its group failed genuinely (Workload class; any infra failure
    with the kill switch), never by configuration, a user interrupt or an infra abort; a node
    is never both Failed and Passed; Failed only from a failing outcome."""
    pool = nodes(case["count"])
    wf = workflow(pool, nodesPerJob=case["per_job"], maxConcurrent=case["max_concurrent"],
                  repeatCount=case["repeat"],
                  failurePolicy={"mode": case["mode"], "infraRetries": case["infra_retries"],
                                 "nodeNotReadyGraceSeconds": 3})
    world = WorkflowWorld(wf=wf, nodes=pool,
                          settings=WorkflowSettings(infra_scoped_fail_fast=case["deferral"]))
    script: list[str] = list(case["script"])
    drawn: dict[str, str] = {}
    waited: dict[str, int] = {}
    members: dict[str, tuple[str, ...]] = {}

    def outcome(job: Job, now: datetime) -> JobStatus | None:
        name = job.metadata.name or ""
        if name not in drawn:
            drawn[name] = script[len(drawn) % len(script)]
            members[name] = group_nodes(job)
        kind = drawn[name]
        if kind == "down":
            first = members[name][0]
            world.nodes = tuple(attrs.evolve(n, ready="False") if n.name == first else n
                                for n in world.nodes)
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
        # A launch runs on the group's nodes less those it left out (e.g. a Failed node an
        # overflow group shares with its home group).
        busy = [n for g in running for n in active_nodes(g)]
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
    if not rest.quiet:
        # The final pass deleted Jobs (cancelled siblings): CleanedUp says they are gone, and
        # nothing else changes.
        assert rest.status is not None and not rest.deletes and not rest.creates
        assert [c for c in rest.status.conditions if c.type != "CleanedUp"] == [
            c for c in world.wf.status.conditions if c.type != "CleanedUp"]
        world.apply(rest)
        rest = reconcile_workflow(world.wf, world.observe(), at(t + 2), settings=world.settings)
    assert rest.quiet, "a finished Workflow keeps acting"
    verdict = world.wf.status.verdict
    kinds = set(drawn.values())
    uid = wf.metadata.uid or ""
    blamed = {r.name for r in NR.read_records(
        world.config_maps.get(NR.configmap_name(NR.FAILED, uid)), NR.FAILED)}
    passed_data = world.config_maps.get(NR.configmap_name(NR.SUCCEEDED, uid))
    passed = set(NR.decode_names(passed_data[NR.data_key(NR.SUCCEEDED)])) if passed_data \
        else set()
    assert not blamed & passed, "a node is both Failed and Passed"
    allowed = {members[j][0] for j, k in drawn.items() if k in ("hardware", "down")}
    allowed |= {n for j, k in drawn.items() if k in GENUINE for n in members[j]}
    if not case["deferral"]:
        allowed |= {n for j, k in drawn.items() if k in INFRA for n in members[j]}
    assert blamed <= allowed, "a node was Failed without evidence or a genuine group failure"
    if case["deferral"] and not kinds & FAILING:
        assert verdict != Verdict.FAILED
    phases = [g.phase for g in world.wf.status.groups]
    if GroupPhase.FAILED in phases or blamed:
        assert verdict == Verdict.FAILED
