"""The Job's goodput side (cre.core.job.goodput via the Job core): its GoodputMeasurement,
training stall detection and the checkpoint-restart trigger."""

from __future__ import annotations

from datetime import timedelta

import attrs
import pytest

from cre.api.conditions import ConditionType, JobReason
from cre.api.goodput import (
    GoodputMeasurement,
    GoodputMeasurementSpec,
    GoodputMeasurementStatus,
    GoodputTally,
)
from cre.api.job import CheckpointSpec, FailureLog, GoodputMeasurementRequest, Job
from cre.api.meta import ObjectMeta, TypedLocalObjectReference
from cre.core.common.lifecycle import true_member
from cre.core.common.plan import Observation
from cre.core.job.bandwidth import JOB_UID_ANNOTATION
from cre.core.job.classify import ClassReason
from cre.core.job.goodput import check_stall, goodput_manifest
from cre.core.job.reconcile import reconcile_job
from cre.testing.strategies.job import T0, at, make_job, pod, running_status, tail, trainjob


def _job(*, multiplier: int | None = 3, max_restarts: int | None = None, restarts: int = 0,
         startup: int = 1200) -> Job:
    job = make_job()
    spec = attrs.evolve(job.spec, goodput_measurement=GoodputMeasurementRequest(
        log_profile_ref="megatron-training", sample_interval="10s"),
        stall_multiplier=multiplier, startup_stall_timeout_seconds=startup,
        checkpoint=CheckpointSpec(pvc_name="ckpt", max_restarts=max_restarts)
        if max_restarts is not None else None)
    return attrs.evolve(job, spec=spec, status=attrs.evolve(running_status(),
                                                             restart_count=restarts))


def _gm(*, last_step: float | None = None, app_start: float | None = 0, avg: str | None = "1.000",
        interval: int | None = 10, interruptions: int = 0, checkpoint_run: int | None = None,
        run: int = 1, interrupted_run: int | None = None, uid: str = "job-uid-1"
        ) -> GoodputMeasurement:
    status = GoodputMeasurementStatus(
        last_step_timestamp=at(last_step) if last_step is not None else None,
        application_start_time=at(app_start) if app_start is not None else None,
        avg_step_time_sec=avg, log_interval=interval, interruption_count=interruptions,
        current_step=70, last_checkpoint_step=50 if checkpoint_run is not None else None,
        tally=GoodputTally(run=run, checkpoint_run=checkpoint_run,
                           interrupted_run=interrupted_run))
    return GoodputMeasurement(
        metadata=ObjectMeta(name="j1-goodput", namespace="team-a", uid="gm-1",
                            annotations={JOB_UID_ANNOTATION: uid}),
        spec=GoodputMeasurementSpec(job_ref=TypedLocalObjectReference(
            api_group="cre.dev", kind="Job", name="j1"), log_profile_ref="megatron-training",
            sample_interval="10s"),
        status=status)


def test_new_job_creates_its_goodput_measurement_with_the_workload() -> None:
    """A fresh Job asking for goodput creates <job>-goodput (owned, uid-annotated) before its
    workload; a leftover of an earlier Job of the same name is deleted first."""
    job = attrs.evolve(_job(), status=make_job().status)
    plan = reconcile_job(job, Observation(), at(0))
    assert [c.kind for c in plan.creates] == ["GoodputMeasurement", "TrainJob"]
    assert plan.creates[0].body == goodput_manifest(job)
    assert plan.creates[0].body["spec"]["sampleInterval"] == "10s"
    stale = reconcile_job(job, Observation(goodput_measurement=_gm(uid="old")), at(0))
    assert [d.kind for d in stale.deletes] == ["GoodputMeasurement"] and not stale.creates


@pytest.mark.parametrize(("gm", "restarts", "now", "stalled"), [
    # No step yet: 1200 s startup budget + 20 s grace from the application start.
    (_gm(app_start=100), 0, 1320, False),
    (_gm(app_start=100), 0, 1321, True),
    # The application start is never before the workload was seen running (queued time).
    (_gm(app_start=-500), 0, 1220, False),
    (_gm(app_start=None), 0, 1221, True),
    # Steps flowing: 3 x 1 s x 10 + 20 s after the last step.
    (_gm(last_step=100), 0, 150, False),
    (_gm(last_step=100), 0, 151, True),
    # The measurement has not caught up with the Job's restart: its steps do not count, the
    # startup budget runs from the (new) start.
    (_gm(last_step=100), 1, 1220, False),
    (_gm(last_step=100), 1, 1221, True),
])
def test_stall_budgets(gm: GoodputMeasurement, restarts: int, now: float,
                       stalled: bool) -> None:
    """Startup and steady-state stall budgets, each with two sample intervals of grace."""
    check = check_stall(_job(restarts=restarts), gm, at(now))
    assert (check.stall is not None) == stalled


def test_no_multiplier_no_stall_check() -> None:
    """Without stallMultiplier the Job never judges a stall."""
    assert check_stall(_job(multiplier=None), _gm(last_step=0), at(10_000)).stall is None


def _stalled_obs(gm: GoodputMeasurement, *, with_tail: bool) -> Observation:
    worker = pod("j1-workload-node-0-0-aaaaa")
    tails = (tail(worker, text=" iteration 70/ 200 | elapsed time per iteration (ms): 1000\n"),
             ) if with_tail else ()
    return Observation(trainjob=trainjob(), worker_pods=(worker,), goodput_measurement=gm,
                       log_tails=tails)


def test_stalled_training_fails_with_the_trainers_tail() -> None:
    """Past the budget: the core asks for the running trainer's tail, then fails the Job
    WorkloadStalled (Workload class TrainingStalled), the tail in failureLog, and deletes the
    hung workload."""
    job, gm = _job(), _gm(last_step=100)
    ask = reconcile_job(job, _stalled_obs(gm, with_tail=False), at(200))
    assert [r.pod for r in ask.asks] == ["j1-workload-node-0-0-aaaaa"]
    plan = reconcile_job(job, _stalled_obs(gm, with_tail=True), at(200))
    assert plan.status is not None
    member = true_member(plan.status.conditions)
    assert member is not None
    assert (member.type, member.reason) == (ConditionType.FAILED, JobReason.WORKLOAD_STALLED)
    assert "none after step 70" in member.message
    log = plan.status.failure_log
    assert log is not None and log.reason == JobReason.WORKLOAD_STALLED
    assert "iteration 70" in log.tail
    assert plan.status.failure_class is not None
    assert plan.status.failure_class.reason == ClassReason.TRAINING_STALLED
    assert [d.kind for d in plan.deletes] == ["TrainJob"]


@pytest.mark.parametrize(("gm", "allowed"), [
    (_gm(last_step=100, checkpoint_run=1), True),  # checkpoint in the current run
    (_gm(last_step=100, checkpoint_run=None), False),  # never checkpointed
])
def test_stall_restarts_from_a_checkpoint_when_one_was_logged(gm: GoodputMeasurement,
                                                              allowed: bool) -> None:
    """A stall with a checkpoint logged in this run restarts the workload (failure log
    dropped); without one the Job fails."""
    job = attrs.evolve(_job(max_restarts=2), status=attrs.evolve(
        _job(max_restarts=2).status, failure_log=FailureLog(reason="Error", tail="old")))
    plan = reconcile_job(job, _stalled_obs(gm, with_tail=True), at(200))
    assert plan.status is not None
    member = true_member(plan.status.conditions)
    assert member is not None
    if allowed:
        assert member.reason == JobReason.WORKLOAD_RESTARTING
        assert plan.status.restart_count == 1 and plan.status.failure_log is None
        assert plan.status.workload_start_time is None
    else:
        assert member.reason == JobReason.WORKLOAD_STALLED


@pytest.mark.parametrize(("gm", "restarts", "allowed"), [
    (_gm(checkpoint_run=1), 0, True),
    (_gm(checkpoint_run=1, run=2), 1, False),  # the checkpoint is from before the restart
    (_gm(checkpoint_run=2, run=2, interruptions=1), 1, True),
    (_gm(checkpoint_run=2, run=2, interruptions=1), 2, False),  # restarts used up
    (_gm(checkpoint_run=1, interrupted_run=1, interruptions=1), 1, False),
    (None, 0, False),  # no measurement seen: no checkpoint known
])
def test_failed_workload_restarts_only_after_a_checkpoint(
        gm: GoodputMeasurement | None, restarts: int, allowed: bool) -> None:
    """A failed workload restarts from a checkpoint only when the measurement saw one
    complete since the last restart and restarts are left (maxRestarts 2)."""
    job = _job(max_restarts=2, restarts=restarts)
    worker = pod("j1-workload-node-0-0-aaaaa")
    obs = Observation(trainjob=trainjob(state="failed"), worker_pods=(worker,),
                      goodput_measurement=gm, log_tails=(tail(worker),))
    plan = reconcile_job(job, obs, at(300))
    assert plan.status is not None
    member = true_member(plan.status.conditions)
    assert member is not None
    want = JobReason.WORKLOAD_RESTARTING if allowed else JobReason.WORKLOAD_FAILED
    assert member.reason == want


def test_without_goodput_the_budget_alone_decides() -> None:
    """A Job with a checkpoint but no goodputMeasurement restarts on its budget (it cannot see
    checkpoints)."""
    job = make_job()
    job = attrs.evolve(job, spec=attrs.evolve(job.spec, checkpoint=CheckpointSpec(
        pvc_name="c", max_restarts=1)), status=running_status())
    plan = reconcile_job(job, Observation(trainjob=trainjob(state="failed")),
                         T0 + timedelta(seconds=30))
    assert plan.status is not None and plan.status.restart_count == 1


@pytest.mark.parametrize(("sampled", "now", "waits"), [
    (None, 300, True),  # failed at 290, not sampled since: wait (grace 2 x 10 s)
    (285, 305, True),
    (None, 311, False),  # the grace is over: judge
    (291, 300, False),  # sampled after the failure: it saw what there was to see
])
def test_failed_workload_waits_for_the_measurements_last_sample(
        sampled: float | None, now: float, waits: bool) -> None:
    """A restart is left but no checkpoint is known yet, and the measurement has not sampled
    since the workload failed: the Job waits (no write) for one more sample, bounded."""
    job = _job(max_restarts=1)
    gm = _gm()
    gm = attrs.evolve(gm, status=attrs.evolve(
        gm.status, last_sample_time=at(sampled) if sampled is not None else None))
    view = trainjob(state="failed")
    view = attrs.evolve(view, conditions=tuple(
        attrs.evolve(c, last_transition_time=at(290)) for c in view.conditions))
    worker = pod("j1-workload-node-0-0-aaaaa")
    obs = Observation(trainjob=view, worker_pods=(worker,), goodput_measurement=gm,
                      log_tails=(tail(worker),))
    plan = reconcile_job(job, obs, at(now))
    if waits:
        assert plan.status is None and plan.requeue_after is not None
        assert 0 < plan.requeue_after <= 10
    else:
        assert plan.status is not None
        member = true_member(plan.status.conditions)
        assert member is not None and member.reason == JobReason.WORKLOAD_FAILED
