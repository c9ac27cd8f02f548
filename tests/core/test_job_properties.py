"""Hypothesis properties of the pure Job core over generated Jobs and Observations."""

from __future__ import annotations

import itertools
from datetime import datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cre.api.conditions import LIFECYCLE_CONDITIONS, ConditionType, FailedNodeReason, FailureScope
from cre.api.job import Job, JobStatus
from cre.api.meta import ConditionStatus
from cre.core.common.plan import Observation, Plan
from cre.core.job.classify import group_nodes
from cre.core.job.reconcile import reconcile_job
from cre.testing.strategies.job import apply_plan, jobs, observations, plan_summary, times

COMMON = settings(max_examples=150, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow])


@st.composite
def worlds(draw: st.DrawFn) -> tuple[Job, Observation, datetime]:
    job = draw(jobs())
    return job, draw(observations(job)), draw(times())


def _trio_true(status: JobStatus) -> list[str]:
    return [str(c.type) for c in status.conditions
            if c.type in LIFECYCLE_CONDITIONS and c.status == ConditionStatus.TRUE]


def _run(job: Job, obs: Observation, now: datetime) -> tuple[list[Plan], Job]:
    plans: list[Plan] = []
    for _ in range(8):
        plan = reconcile_job(job, obs, now)
        plans.append(plan)
        if plan.quiet:
            return plans, job
        job, obs = apply_plan(job, obs, plan, now=now)
    raise AssertionError(f"no rest after 8 steps: {[plan_summary(p) for p in plans]}")


@COMMON
@given(worlds())
def test_plan_is_deterministic(world: tuple[Job, Observation, datetime]) -> None:
    """The same Job, Observation and instant always give the same Plan."""
    job, obs, now = world
    assert reconcile_job(job, obs, now) == reconcile_job(job, obs, now)


@COMMON
@given(worlds())
def test_applied_plan_is_not_redone(world: tuple[Job, Observation, datetime]) -> None:
    """Applying plans comes to rest within a few steps, a plan at rest stays at rest, and no
    step repeats the create, delete, event or log read of the step before it."""
    job, obs, now = world
    plans, _rested = _run(job, obs, now)
    for before, after in itertools.pairwise(plans):
        assert not {(c.kind, c.name) for c in before.creates} & {
            (c.kind, c.name) for c in after.creates}
        assert not set(before.deletes) & set(after.deletes)
        assert not set(before.events) & set(after.events)
        assert not set(before.asks) & set(after.asks)
    assert plans[-1].quiet


@COMMON
@given(worlds())
def test_at_most_one_trio_condition_true(world: tuple[Job, Observation, datetime]) -> None:
    """Every status the core writes has at most one of InProgress/Succeeded/Failed True."""
    job, obs, now = world
    plans, _ = _run(job, obs, now)
    for plan in plans:
        if plan.status is not None:
            assert len(_trio_true(plan.status)) <= 1


@COMMON
@given(worlds())
def test_succeeded_never_carries_failure_log(world: tuple[Job, Observation, datetime]) -> None:
    """A status with Succeeded True never has a failureLog or failureClass."""
    job, obs, now = world
    plans, _ = _run(job, obs, now)
    for plan in plans:
        if plan.status is not None and _trio_true(plan.status) == [ConditionType.SUCCEEDED]:
            assert plan.status.failure_log is None and plan.status.failure_class is None


@COMMON
@given(worlds())
def test_failure_class_blames_the_right_nodes(world: tuple[Job, Observation, datetime]) -> None:
    """Every Failed status has a failureClass; Workload blames every group node, Platform and
    ControlPlane blame none, Node blames only nodes of the group or hosting its pods."""
    job, obs, now = world
    plans, _ = _run(job, obs, now)
    group = set(group_nodes(job))
    hosting = {p.node_name for p in obs.launcher_pods + obs.worker_pods if p.node_name}
    for plan in plans:
        status = plan.status
        if status is None or _trio_true(status) != [ConditionType.FAILED]:
            continue
        assert status.failure_class is not None and status.failure_log is not None
        blamed = {f.name for f in status.failed_nodes
                  if f.reason == FailedNodeReason.WORKLOAD_FAILED}
        scope = status.failure_class.scope
        if scope == FailureScope.WORKLOAD:
            assert blamed == group
        elif scope in (FailureScope.PLATFORM, FailureScope.CONTROL_PLANE):
            assert blamed == set()
        else:
            assert blamed <= group | hosting


@COMMON
@given(worlds())
def test_requests_never_carry_writes(world: tuple[Job, Observation, datetime]) -> None:
    """A plan that asks for log tails, a live confirmation or Events writes nothing: the shell
    must come back with the answer first, so the record and its condition land in one status
    write."""
    job, obs, now = world
    plans, _ = _run(job, obs, now)
    for plan in plans:
        if plan.asks:
            assert not plan.writes
