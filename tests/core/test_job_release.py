"""A finished Job's workload release (cre.core.job.release through the Job core): held while a
measurement reads the pods, deleted, verified gone, and said in ``WorkloadReleased``."""

from __future__ import annotations

import attrs

from cre.api.conditions import ConditionType, MeasurementReason, ReleaseReason
from cre.api.job import BandwidthMeasurementRequest, Job, WorkloadRetention
from cre.api.measurement import BandwidthMeasurement, BandwidthMeasurementSpec
from cre.api.measurement import BandwidthMeasurementStatus as BMStatus
from cre.api.meta import Condition, ConditionStatus, ObjectMeta, TypedLocalObjectReference
from cre.core.common.observed import TrainJobView
from cre.core.common.plan import ConfirmAbsent, Feedback, Observation, Plan
from cre.core.job.bandwidth import JOB_UID_ANNOTATION
from cre.core.job.reconcile import reconcile_job
from cre.core.job.release import is_released
from cre.testing.strategies.job import (
    apply_plan,
    at,
    make_job,
    pod,
    running_status,
    tail,
    terminated,
    trainjob,
)

L1 = "j1-workload-launcher-0-0-aaaaa"


def _released(plan: Plan) -> Condition | None:
    assert plan.status is not None
    return next((c for c in plan.status.conditions
                 if c.type == ConditionType.WORKLOAD_RELEASED), None)


def _job(*, measured: bool = False, retention: WorkloadRetention | None = (
        WorkloadRetention.RELEASE), timeout: str | None = None) -> Job:
    job = make_job(status=running_status(), timeout=timeout)
    spec = attrs.evolve(job.spec, workload_retention=retention)
    if measured:
        spec = attrs.evolve(spec, bandwidth_measurement=BandwidthMeasurementRequest(
            log_profile_ref="nccl-bandwidth"))
    return attrs.evolve(job, spec=spec)


def _bm(job: Job, *, complete: str | None = None, measuring: str | None = None
        ) -> BandwidthMeasurement:
    conds: tuple[Condition, ...] = ()
    if complete is not None:
        conds = (Condition(type=ConditionType.COMPLETE, status=ConditionStatus.TRUE,
                           reason=complete, message="m", last_transition_time=at(0)),)
    if measuring is not None:
        conds = (Condition(type=ConditionType.MEASURING, status=ConditionStatus.FALSE,
                           reason=measuring, message="LogProfile nccl-bandwidth not found",
                           last_transition_time=at(0)),)
    return BandwidthMeasurement(
        metadata=ObjectMeta(name="j1-bandwidth", namespace="team-a", uid="bm-1",
                            annotations={JOB_UID_ANNOTATION: job.metadata.uid or ""}),
        spec=BandwidthMeasurementSpec(job_ref=TypedLocalObjectReference(
            api_group="cre.dev", kind="Job", name="j1"), log_profile_ref="nccl-bandwidth"),
        status=BMStatus(conditions=conds))


def _failed_launcher_obs(*, workload: TrainJobView | None = None) -> Observation:
    launcher = pod(L1, launcher=True, state=terminated(finished=at(30)))
    return Observation(trainjob=workload or trainjob(state="failed"),
                       launcher_pods=(launcher,), log_tails=(tail(launcher),))


def test_failure_write_deletes_the_workload_and_says_releasing() -> None:
    """A Release Job that fails (nothing measuring it) deletes its TrainJob, uid-guarded, in the
    same write as Failed, with WorkloadReleased=False / Releasing naming it."""
    job = _job()
    plan = reconcile_job(job, _failed_launcher_obs(), at(60))
    cond = _released(plan)
    assert cond is not None and cond.status == ConditionStatus.FALSE
    assert cond.reason == ReleaseReason.RELEASING
    assert cond.message == "Deleting TrainJob team-a/j1-workload and its pods"
    assert [(d.kind, d.name, d.uid) for d in plan.deletes] == [("TrainJob", "j1-workload",
                                                               "tj-uid-1")]
    assert plan.requeue_after is not None


def test_release_is_verified_by_live_reads_before_it_is_said() -> None:
    """Released is written only after a live read confirmed the TrainJob gone and a live list
    found no pod; a pod still listed keeps it Releasing (same message, no new write)."""
    job = _job()
    obs = _failed_launcher_obs()
    job, obs = apply_plan(job, obs, reconcile_job(job, obs, at(60)), now=at(60))
    assert obs.trainjob is None  # the delete landed
    # The launcher pod is still there (the garbage collector has not removed it yet).
    absent = ConfirmAbsent(kind="TrainJob", name="j1-workload")
    waiting = reconcile_job(job, attrs.evolve(obs, feedback=Feedback()), at(61))
    assert waiting.asks == (absent,) and not waiting.writes
    confirmed = attrs.evolve(obs, feedback=Feedback(answered=(absent,)))
    assert reconcile_job(job, confirmed, at(61)).status is None  # still Releasing
    gone = attrs.evolve(confirmed, launcher_pods=(), log_tails=())
    ask = reconcile_job(job, gone, at(62))
    assert {a.kind for a in ask.asks} == {"Pod"} and len(ask.asks) == 2 and not ask.writes
    done = reconcile_job(job, attrs.evolve(gone, feedback=gone.feedback.answering(*ask.asks)),
                         at(62))
    cond = _released(done)
    assert cond is not None and cond.status == ConditionStatus.TRUE
    assert cond.reason == ReleaseReason.RELEASED
    assert cond.message == "TrainJob team-a/j1-workload and its pods are gone"
    assert [e.reason for e in done.events] == [ReleaseReason.RELEASED]
    assert done.status is not None and is_released(done.status)
    again = reconcile_job(attrs.evolve(job, status=done.status), gone, at(63))
    assert again.quiet and again.requeue_after is None


def test_measurement_holds_the_workload_until_it_completes() -> None:
    """A Succeeded Job whose BandwidthMeasurement has not completed keeps its workload
    (MeasurementPending, naming it); once the measurement completed, the workload goes."""
    job = _job(measured=True)
    obs = Observation(trainjob=trainjob(state="complete"), bandwidth_measurement=_bm(job))
    plan = reconcile_job(job, obs, at(60))
    cond = _released(plan)
    assert cond is not None and cond.reason == ReleaseReason.MEASUREMENT_PENDING
    assert "BandwidthMeasurement j1-bandwidth has not completed" in cond.message
    assert not plan.deletes
    assert plan.status is not None
    done = attrs.evolve(job, status=plan.status)
    complete = attrs.evolve(obs, bandwidth_measurement=_bm(
        job, complete=MeasurementReason.JOB_SUCCEEDED))
    after = reconcile_job(done, complete, at(70))
    assert [d.kind for d in after.deletes] == ["TrainJob"]
    cond = _released(after)
    assert cond is not None and cond.reason == ReleaseReason.RELEASING


def test_hold_is_bounded_and_skips_a_measurement_that_cannot_run() -> None:
    """The hold ends measurementTimeout and 30 s after the Job ended, and a measurement whose
    LogProfile is missing (it reads nothing) holds nothing."""
    job = _job(measured=True)
    obs = Observation(trainjob=trainjob(state="complete"), bandwidth_measurement=_bm(job))
    plan = reconcile_job(job, obs, at(60))
    assert plan.status is not None and not plan.deletes
    done = attrs.evolve(job, status=plan.status)
    assert not reconcile_job(done, obs, at(60 + 300 + 29)).deletes
    assert [d.kind for d in reconcile_job(done, obs, at(60 + 300 + 30)).deletes] == ["TrainJob"]
    missing = attrs.evolve(obs, bandwidth_measurement=_bm(
        job, measuring=MeasurementReason.LOG_PROFILE_NOT_FOUND))
    assert [d.kind for d in reconcile_job(done, missing, at(61)).deletes] == ["TrainJob"]


def test_a_finalizer_holding_the_terminating_workload_is_named() -> None:
    """A TrainJob that stays terminating because of a foreign finalizer is HeldByFinalizer,
    naming it; the garbage collector's own foregroundDeletion is just Releasing."""
    job = _job()
    plan = reconcile_job(job, _failed_launcher_obs(), at(60))
    assert plan.status is not None
    done = attrs.evolve(job, status=plan.status)
    held = attrs.evolve(trainjob(state="failed", deleting=True),
                        finalizers=("example.com/hold", "foregroundDeletion"))
    cond = _released(reconcile_job(done, _failed_launcher_obs(workload=held), at(61)))
    assert cond is not None and cond.reason == ReleaseReason.HELD_BY_FINALIZER
    assert "finalizer(s) example.com/hold keep it" in cond.message
    gc = attrs.evolve(held, finalizers=("foregroundDeletion",))
    assert reconcile_job(done, _failed_launcher_obs(workload=gc), at(61)).quiet


def test_foreign_workload_is_never_deleted() -> None:
    """An object holding the workload's name that another owner controls is not released."""
    job = _job()
    plan = reconcile_job(job, _failed_launcher_obs(), at(60))
    assert plan.status is not None
    done = attrs.evolve(job, status=plan.status)
    foreign = reconcile_job(done, _failed_launcher_obs(workload=trainjob(owned=False)), at(61))
    assert not foreign.deletes


def test_retain_keeps_the_workload_and_writes_no_release_condition() -> None:
    """workloadRetention unset (Retain): a failed workload stays and no WorkloadReleased is
    written; a timed-out one is still deleted at once (it would hold its GPUs)."""
    job = _job(retention=None)
    plan = reconcile_job(job, _failed_launcher_obs(), at(60))
    assert _released(plan) is None and not plan.deletes
    timed = _job(retention=None, timeout="1m")
    launcher = pod(L1, launcher=True)
    obs = Observation(trainjob=trainjob(), launcher_pods=(launcher,), log_tails=(tail(launcher),))
    plan = reconcile_job(timed, obs, at(120))
    assert _released(plan) is None and [d.kind for d in plan.deletes] == ["TrainJob"]
