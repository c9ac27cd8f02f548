"""A Job that cannot run says so: unschedulable pods past the grace give InProgress
WorkloadSchedulingBlocked (timeout clock paused), and a TrainJob that never makes a pod fails
WorkloadStalled with its Events."""

from __future__ import annotations

from datetime import timedelta

import attrs

from cre.api.conditions import FailureScope
from cre.api.job import Job
from cre.api.validate import validate
from cre.core.common.lifecycle import true_member
from cre.core.common.observed import ContainerState, ObjectEvent, PodCondition, PodView
from cre.core.common.plan import Feedback, Observation, Plan, ReadEvents
from cre.core.job.reconcile import reconcile_job
from cre.testing.strategies.job import T0, at, make_job, node, pod, running_status, trainjob

SCHEDULER = ("0/8 nodes are available: 8 node(s) didn't match Pod's node affinity/selector. "
             "preemption: 0/8 nodes are available: 8 Preemption is not helpful for scheduling.")
W0, W1 = "j1-workload-node-0-0-aaaaa", "j1-workload-node-0-1-bbbbb"


def _pending(name: str) -> PodView:
    return pod(name, node=None, state=ContainerState(kind="waiting", reason="ContainerCreating"),
               phase="Pending", conditions=(PodCondition(
                   type="PodScheduled", status="False", reason="Unschedulable",
                   message=SCHEDULER),))


def _current(plan: Plan) -> tuple[str, str]:
    assert plan.status is not None
    cond = true_member(plan.status.conditions)
    assert cond is not None
    return cond.reason, cond.message


def _blocked_world(job: Job) -> Observation:
    return Observation(trainjob=trainjob(), worker_pods=(_pending(W0), _pending(W1)),
                       nodes=(node("gpu-0"), attrs.evolve(node("gpu-1"), unschedulable=True)))


def test_unschedulable_within_the_grace_records_when_it_started() -> None:
    """Unschedulable pods first seen: blocked-since recorded, still WorkloadRunning, requeued no
    later than the end of the grace."""
    job = make_job(status=running_status())
    plan = reconcile_job(job, _blocked_world(job), at(60))
    assert plan.status is not None and plan.status.scheduling_blocked_since == at(60)
    assert _current(plan)[0] == "WorkloadRunning"
    assert plan.requeue_after == 15.0


def test_unschedulable_past_the_grace_is_reported_with_the_scheduler_message() -> None:
    """Past schedulingStallGraceSeconds: InProgress WorkloadSchedulingBlocked naming the
    scheduler's message, the pods and the group nodes with their problems."""
    job = make_job(status=attrs.evolve(running_status(), scheduling_blocked_since=at(60)))
    plan = reconcile_job(job, _blocked_world(job), at(60 + 300))
    reason, message = _current(plan)
    assert reason == "WorkloadSchedulingBlocked"
    assert SCHEDULER in message
    assert f"pods: {W0}, {W1}" in message
    assert "group nodes: gpu-0, gpu-1 (cordoned), gpu-2 (not found)" in message
    assert "cannot be scheduled for 300s" in message
    assert plan.status is not None and plan.status.phase == "Pending"


def test_blocked_time_is_excluded_from_the_timeout() -> None:
    """A 10m timeout does not fire while pods are blocked for 29m (within the 30m
    schedulingStallTimeout); once they are placed, the start moves forward by the blocked time
    and the timeout counts from there."""
    job = make_job(timeout="10m", status=attrs.evolve(running_status(started=T0),
                                                      scheduling_blocked_since=at(60)))
    blocked = reconcile_job(job, _blocked_world(job), at(60 + 1740))
    assert _current(blocked)[0] == "WorkloadSchedulingBlocked"
    placed = Observation(trainjob=trainjob(), worker_pods=(pod(W0), pod(W1)),
                         nodes=(node("gpu-0"),))
    resumed = reconcile_job(job, placed, at(60 + 1740))
    assert resumed.status is not None
    assert resumed.status.workload_start_time == T0 + timedelta(seconds=1740)
    assert resumed.status.scheduling_blocked_since is None
    assert _current(resumed)[0] == "WorkloadRunning"


def test_a_trainjob_that_never_starts_fails_with_its_events() -> None:
    """No pod 1200 s after the TrainJob's creation: the core asks for its Events, then fails the
    Job WorkloadStalled with them (Platform class, no node blamed, workload deleted)."""
    job = make_job(status=running_status())
    early = reconcile_job(job, Observation(trainjob=trainjob()), at(1199))
    assert not early.asks and early.status is None  # still running
    asks = reconcile_job(job, Observation(trainjob=trainjob()), at(1200))
    assert asks.asks == (ReadEvents(kind="TrainJob", name="j1-workload"),)
    assert not asks.writes
    events = (ObjectEvent(type="Warning", reason="TrainJobResourcesCreationFailed",
                          message="TrainJob resources reconciliation failed: "
                                  "TrainingRuntime mpi-runtime not found", count=7),)
    answered = Feedback(answered=asks.asks)
    plan = reconcile_job(job, Observation(trainjob=trainjob(), workload_events=events,
                                          feedback=answered), at(1200))
    reason, message = _current(plan)
    assert reason == "WorkloadStalled"
    assert "did not start within startupStallTimeoutSeconds 1200s" in message
    assert ("Warning TrainJobResourcesCreationFailed: TrainJob resources reconciliation failed:"
            " TrainingRuntime mpi-runtime not found (x7)") in message
    status = plan.status
    assert status is not None and status.failure_class is not None
    assert (status.failure_class.scope, status.failure_class.reason) == (
        FailureScope.PLATFORM, "WorkloadNotStarted")
    assert status.failed_nodes == ()
    assert status.failure_log is not None and "not found" in status.failure_log.tail
    assert [d.name for d in plan.deletes] == ["j1-workload"]


def test_a_suspended_trainjob_is_not_a_startup_stall() -> None:
    """A suspended (queued) TrainJob without pods is pending, however long it waits."""
    job = make_job(status=running_status())
    plan = reconcile_job(job, Observation(trainjob=trainjob(state="suspended")), at(7200))
    assert not plan.asks
    assert _current(plan)[0] == "WorkloadPending"


def test_a_workload_whose_jobset_was_built_is_no_startup_stall() -> None:
    """No pod for a while after Trainer built the JobSet (a JobSet restart recreating its
    Jobs) is not a workload that never started."""
    job = make_job(status=running_status())
    built = attrs.evolve(trainjob(), jobs_built=True)
    plan = reconcile_job(job, Observation(trainjob=built), at(7200))
    assert not plan.asks and plan.status is None


def test_unschedulable_past_the_stall_timeout_fails_platform_unschedulable() -> None:
    """Blocked since t=60 with the default 30m bound: at t=60+1799 still blocked (requeued no
    later than the bound), at t=60+1800 Failed WorkloadUnschedulable, Platform/Unschedulable,
    the scheduler's message and the pods named, no node blamed, workload deleted."""
    job = make_job(status=attrs.evolve(running_status(), scheduling_blocked_since=at(60)))
    before = reconcile_job(job, _blocked_world(job), at(60 + 1799))
    assert _current(before)[0] == "WorkloadSchedulingBlocked"
    assert before.requeue_after == 1.0
    plan = reconcile_job(job, _blocked_world(job), at(60 + 1800))
    reason, message = _current(plan)
    assert reason == "WorkloadUnschedulable"
    assert "j1-workload stayed unschedulable past schedulingStallTimeout 30m: " in message
    assert SCHEDULER in message and f"pods: {W0}, {W1}" in message
    status = plan.status
    assert status is not None and status.failure_class is not None
    assert (status.failure_class.scope, status.failure_class.reason) == (
        FailureScope.PLATFORM, "Unschedulable")
    assert status.failed_nodes == ()
    assert status.failure_log is not None and f"{W0}: {SCHEDULER}" in status.failure_log.tail
    assert [d.name for d in plan.deletes] == ["j1-workload"]


def test_the_stall_timeout_is_read_from_the_spec_and_bounded() -> None:
    """schedulingStallTimeout 10m fails at 600 s blocked; a value over 720h is refused by
    validation with its field path."""
    job = make_job(status=attrs.evolve(running_status(), scheduling_blocked_since=at(0)))
    short = attrs.evolve(job, spec=attrs.evolve(job.spec, scheduling_stall_timeout="10m"))
    assert _current(reconcile_job(short, _blocked_world(short), at(599)))[0] == \
        "WorkloadSchedulingBlocked"
    assert _current(reconcile_job(short, _blocked_world(short), at(600)))[0] == \
        "WorkloadUnschedulable"
    huge = attrs.evolve(job, spec=attrs.evolve(job.spec, scheduling_stall_timeout="721h"))
    assert any("spec.schedulingStallTimeout" in str(e) for e in validate(huge))


def test_pods_placed_before_the_bound_resume_the_run() -> None:
    """Blocked for 29 minutes, then placed: the Job runs on (no failure), the clock resumed."""
    job = make_job(status=attrs.evolve(running_status(), scheduling_blocked_since=at(0)))
    placed = Observation(trainjob=trainjob(), worker_pods=(pod(W0), pod(W1)),
                         nodes=(node("gpu-0"),))
    plan = reconcile_job(job, placed, at(29 * 60))
    assert _current(plan)[0] == "WorkloadRunning"
    assert not plan.deletes
