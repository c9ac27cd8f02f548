"""Table tests for the Job lifecycle core: creation, adoption, the trio, capture and restarts."""

from __future__ import annotations

import attrs

from cre.api.conditions import ConditionType, FailedNodeReason, FailureScope, Phase
from cre.api.job import FailureLog, Job
from cre.api.labels import JOB, JOB_FINALIZER, LAUNCHER, MANAGED_BY
from cre.api.meta import ConditionStatus
from cre.core.common.lifecycle import true_member
from cre.core.common.observed import ContainerState, PodCondition
from cre.core.common.plan import CreateError, EventSeverity, Feedback, Observation, Plan
from cre.core.job.reconcile import reconcile_job
from cre.core.job.workload import workload_name
from cre.testing.strategies.job import (
    NODES,
    apply_plan,
    at,
    crashloop,
    live_pods,
    make_job,
    name_taken,
    pod,
    running_status,
    tail,
    terminated,
    trainjob,
    workload_absence,
)

L1 = "j1-workload-launcher-0-0-aaaaa"
L2 = "j1-workload-launcher-0-0-bbbbb"
W0 = "j1-workload-node-0-0-ccccc"


def _true(plan: Plan) -> tuple[str, str]:
    assert plan.status is not None
    cond = true_member(plan.status.conditions)
    assert cond is not None
    return str(cond.type), cond.reason


def _run_to_rest(job: Job, obs: Observation, *, now_s: float = 60) -> tuple[Job, list[Plan]]:
    """Reconcile, apply, repeat until the plan is quiet; return the final Job and the plans."""
    plans = []
    for _ in range(8):
        plan = reconcile_job(job, obs, at(now_s))
        plans.append(plan)
        if plan.quiet:
            return job, plans
        job, obs = apply_plan(job, obs, plan, now=at(now_s))
    raise AssertionError("the core did not come to rest")


def test_finalizer_is_added_alone() -> None:
    """A Job without the finalizer gets only a finalizer patch, guarded by the plan's
    resourceVersion."""
    plan = reconcile_job(make_job(finalizer=False), Observation(), at(0))
    assert plan.status is None and not plan.creates
    (patch,) = plan.patches
    assert patch.body == {"metadata": {"finalizers": [JOB_FINALIZER]}}
    assert plan.resource_version == "100"


def test_new_job_creates_owned_labelled_trainjob() -> None:
    """A fresh Job creates <job>-workload owned by it and records InProgress WorkloadCreated."""
    plan = reconcile_job(make_job(launcher=False), Observation(), at(0))
    (create,) = plan.creates
    body = create.body
    assert body["metadata"]["name"] == "j1-workload"
    assert body["metadata"]["labels"][MANAGED_BY] == "cre"
    assert body["metadata"]["labels"][JOB] == "j1"
    (owner,) = body["metadata"]["ownerReferences"]
    assert (owner["uid"], owner["controller"]) == ("job-uid-1", True)
    patches = body["spec"]["runtimePatches"]
    labels = patches[-1]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert labels == [{"name": "node", "template": {"spec": {"template": {"metadata": {
        "labels": {JOB: "j1"}}}}}}]
    assert _true(plan) == ("InProgress", "WorkloadCreated")
    assert plan.status is not None and plan.status.phase == Phase.PENDING
    assert [(e.type, e.reason) for e in plan.events] == [(EventSeverity.NORMAL, "WorkloadCreated")]


def test_launcher_label_only_when_runtime_patches_a_launcher() -> None:
    """The launcher gets cre.dev/launcher (never cre.dev/job) only when the spec patches one."""
    job = make_job()
    rjs = [{"name": "launcher"}, {"name": "node"}]
    spec = {"runtimeRef": {"name": "mpi"}, "runtimePatches": [{
        "manager": "render", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": rjs}}},
    }]}
    job = attrs.evolve(job, spec=attrs.evolve(job.spec, workload=attrs.evolve(
        job.spec.workload, train_job=spec)))
    (create,) = reconcile_job(job, Observation(), at(0)).creates
    ours = create.body["spec"]["runtimePatches"][-1]
    got = {rj["name"]: rj["template"]["spec"]["template"]["metadata"]["labels"]
           for rj in ours["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]}
    assert got == {"node": {JOB: "j1"}, "launcher": {LAUNCHER: "j1"}}


def test_already_exists_own_holder_is_adopted() -> None:
    """AlreadyExists with a holder the Job controls adopts it (WorkloadAdopted)."""
    plan = reconcile_job(make_job(), Observation(feedback=name_taken(trainjob())), at(1))
    assert not plan.creates
    assert _true(plan) == ("InProgress", "WorkloadAdopted")
    assert plan.status is not None and plan.status.workload_ref is not None
    assert plan.status.workload_ref.uid == "tj-uid-1"


def test_foreign_holder_is_terminal_name_collision() -> None:
    """A foreign holder of the name fails the Job as a ControlPlane name collision."""
    plan = reconcile_job(make_job(), Observation(feedback=name_taken(trainjob(owned=False))), at(1))
    assert _true(plan) == ("Failed", "WorkloadNameCollision")
    assert plan.status is not None and plan.status.failure_class is not None
    assert plan.status.failure_class.scope == FailureScope.CONTROL_PLANE
    assert plan.status.failed_nodes == ()
    assert [e.type for e in plan.events] == [EventSeverity.WARNING]


def test_foreign_holder_terminating_waits() -> None:
    """A foreign holder that is already terminating is waited for, not treated as a collision."""
    plan = reconcile_job(make_job(), Observation(
        feedback=name_taken(trainjob(owned=False, deleting=True))), at(1))
    assert plan.status is None and plan.requeue_after is not None and not plan.creates


def test_suspended_workload_is_pending_and_not_timed() -> None:
    """A suspended TrainJob maps to WorkloadPending and does not start the timeout clock."""
    job = attrs.evolve(make_job(timeout="1m"), status=attrs.evolve(
        running_status(), workload_start_time=None))
    plan = reconcile_job(job, Observation(trainjob=trainjob(state="suspended")), at(600))
    assert _true(plan) == ("InProgress", "WorkloadPending")
    assert plan.status is not None and plan.status.workload_start_time is None
    assert plan.status.phase == Phase.PENDING


def test_running_records_start_time_once_without_event() -> None:
    """The first Running observation persists workloadStartTime; a reason change emits nothing."""
    created = reconcile_job(make_job(), Observation(), at(0))
    job, obs = apply_plan(make_job(), Observation(), created, now=at(0))
    plan = reconcile_job(job, obs, at(5))
    assert _true(plan) == ("InProgress", "WorkloadRunning")
    assert plan.status is not None and plan.status.workload_start_time == at(5)
    assert plan.events == ()


def test_early_capture_reads_then_writes_once_with_in_progress() -> None:
    """A failed launcher while running: one log read, then one status write carrying both the
    InProgress condition and the failureLog."""
    job = make_job(status=running_status())
    launcher = pod(L1, launcher=True, state=terminated(finished=at(8)))
    obs = Observation(trainjob=trainjob(), launcher_pods=(launcher,))
    first = reconcile_job(job, obs, at(9))
    assert [(r.pod, r.container, r.tail_lines, r.limit_bytes) for r in first.asks] == [
        (L1, "node", 800, 8 * 32768)]
    assert not first.writes
    second = reconcile_job(job, attrs.evolve(obs, log_tails=(tail(launcher),)), at(9))
    assert second.status is not None and second.status.failure_log is not None
    assert second.status.failure_log.pod_name == L1
    assert "[stub] log of" in second.status.failure_log.tail
    assert _true(second) == ("InProgress", "WorkloadRunning")


def test_early_capture_pod_gone_records_identity() -> None:
    """When the launcher was deleted before its log was read, the record keeps its identity."""
    job = make_job(status=running_status())
    launcher = pod(L1, launcher=True, node="gpu-2", state=terminated(exit_code=1,
                                                                     finished=at(8)))
    obs = Observation(trainjob=trainjob(), launcher_pods=(launcher,),
                      log_tails=(tail(launcher, error="pods not found"),))
    log = reconcile_job(job, obs, at(9)).status
    assert log is not None and log.failure_log is not None
    assert (log.failure_log.pod_name, log.failure_log.exit_code, log.failure_log.node_name) == (
        L1, 1, "gpu-2")
    assert "could not be read" in log.failure_log.tail


RECORDED = FailureLog(pod_name=L1, container_name="node", exit_code=1, reason="Error",
                      finished_at=at(8), tail="first attempt")


def test_first_attempt_kept_over_replacement() -> None:
    """A replacement launcher's failure never overwrites the first attempt's record."""
    job = make_job(status=attrs.evolve(running_status(), failure_log=RECORDED))
    replacement = pod(L2, launcher=True, state=terminated(finished=at(30)))
    plan = reconcile_job(job, Observation(trainjob=trainjob(), launcher_pods=(replacement,)),
                         at(31))
    assert plan.quiet


def test_replacement_after_disrupted_record_replaces_it() -> None:
    """A recorded launcher that became a disruption target gives way to the replacement."""
    job = make_job(status=attrs.evolve(running_status(), failure_log=RECORDED))
    first = pod(L1, launcher=True, state=terminated(finished=at(8)), disruption="True")
    replacement = pod(L2, launcher=True, state=terminated(finished=at(30)))
    obs = Observation(trainjob=trainjob(), launcher_pods=(first, replacement))
    job, _ = _run_to_rest(job, obs, now_s=31)
    assert job.status.failure_log is not None and job.status.failure_log.pod_name == L2


def test_success_after_retry_drops_failure_log() -> None:
    """A run that succeeds after the launcher retry carries no failureLog or failureClass."""
    job = make_job(status=attrs.evolve(running_status(), failure_log=RECORDED))
    plan = reconcile_job(job, Observation(trainjob=trainjob(state="complete")), at(60))
    assert _true(plan) == ("Succeeded", "WorkloadCompleted")
    assert plan.status is not None and plan.status.failure_log is None
    assert plan.status.failure_class is None and plan.status.phase == Phase.SUCCEEDED
    assert [(e.type, e.reason) for e in plan.events] == [
        (EventSeverity.NORMAL, "WorkloadCompleted")]


def test_failed_keeps_early_record_and_blames_group() -> None:
    """A TrainJob failure after the launcher pod vanished keeps the early record, is Workload
    class and blames every group node."""
    job = make_job(status=attrs.evolve(running_status(), failure_log=RECORDED))
    plan = reconcile_job(job, Observation(trainjob=trainjob(state="failed")), at(60))
    assert _true(plan) == ("Failed", "WorkloadFailed")
    status = plan.status
    assert status is not None and status.failure_log == RECORDED
    assert status.failure_class is not None
    assert (status.failure_class.scope, status.failure_class.reason) == (
        FailureScope.WORKLOAD, "ContainerFailed")
    assert [(f.name, f.reason) for f in status.failed_nodes] == [
        (n, FailedNodeReason.WORKLOAD_FAILED) for n in NODES]
    assert [e.type for e in plan.events] == [EventSeverity.WARNING]


def test_failed_without_record_reads_launcher_on_same_second_tie() -> None:
    """With no early record, the terminal capture reads the launcher on a same-second tie."""
    job = make_job(status=running_status())
    launcher = pod(L1, launcher=True, state=terminated(finished=at(10)))
    worker = pod(W0, state=terminated(exit_code=255, finished=at(10)))
    obs = Observation(trainjob=trainjob(state="failed"), launcher_pods=(launcher,),
                      worker_pods=(worker,))
    assert [r.pod for r in reconcile_job(job, obs, at(11)).asks] == [L1]


def test_failed_with_nothing_left_says_pod_not_found() -> None:
    """A failure with no pods at all records PodNotFound."""
    job = make_job(status=running_status())
    plan = reconcile_job(job, Observation(trainjob=trainjob(state="failed")), at(60))
    assert plan.status is not None and plan.status.failure_log is not None
    assert plan.status.failure_log.reason == "PodNotFound"


def test_missing_workload_is_confirmed_live_first() -> None:
    """A cache miss of the workload asks for a live read before anything irreversible."""
    plan = reconcile_job(make_job(status=running_status()), Observation(), at(60))
    assert plan.asks == (workload_absence(),) and not plan.writes


def test_workload_gone_keeps_pods_and_replaces_record() -> None:
    """A confirmed-deleted workload fails the Job from the pods still present, replacing an
    earlier launcher record, as a ControlPlane failure that blames no node."""
    job = make_job(status=attrs.evolve(running_status(), failure_log=RECORDED))
    worker = pod(W0, state=terminated(exit_code=2, finished=at(40)))
    obs = Observation(feedback=Feedback(answered=(workload_absence(),)),
                      worker_pods=(worker,))
    job, _ = _run_to_rest(job, obs)
    cond = true_member(job.status.conditions)
    assert cond is not None and (cond.type, cond.reason) == ("Failed", "WorkloadFailed")
    assert "was deleted" in cond.message
    assert job.status.failure_log is not None and job.status.failure_log.pod_name == W0
    assert job.status.failure_class is not None
    assert job.status.failure_class.scope == FailureScope.CONTROL_PLANE
    assert job.status.failed_nodes == ()


def test_timeout_reads_launcher_first_and_deletes_workload() -> None:
    """timeoutPerJob counts from the first Running observation; the capture reads the launcher
    before any worker, and the workload is deleted with a UID precondition."""
    job = make_job(timeout="10m", status=running_status(started=at(0)))
    launcher = pod(L1, launcher=True)
    worker = pod(W0)
    obs = Observation(trainjob=trainjob(), launcher_pods=(launcher,), worker_pods=(worker,))
    assert reconcile_job(job, obs, at(599)).asks == ()
    first = reconcile_job(job, obs, at(600))
    assert [r.pod for r in first.asks] == [L1]
    final = reconcile_job(job, attrs.evolve(obs, log_tails=(tail(launcher),)), at(600))
    assert _true(final) == ("Failed", "JobTimedOut")
    assert final.status is not None and final.status.failure_log is not None
    assert (final.status.failure_log.reason, final.status.failure_log.pod_name) == ("Timeout", L1)
    assert [(d.name, d.uid) for d in final.deletes] == [("j1-workload", "tj-uid-1")]


def test_a_timeout_with_the_test_done_or_never_started_blames_no_node() -> None:
    """Regression (bench fleet's Failed nodes): at timeoutPerJob a workload whose every pod had
    already succeeded (its TrainJob not yet reported complete) ends ControlPlane /
    CompletionNotReported, and one whose container never left ContainerCreating ends Platform /
    WorkloadNotStarted; neither lists a failed node."""
    job = make_job(timeout="10m", status=running_status(started=at(0)))
    done = pod(W0, state=terminated(exit_code=0, reason="Completed", finished=at(30)))
    creating = pod(W0, state=ContainerState(kind="waiting", reason="ContainerCreating"))
    for worker, scope, reason in (
            (done, FailureScope.CONTROL_PLANE, "CompletionNotReported"),
            (creating, FailureScope.PLATFORM, "WorkloadNotStarted")):
        obs = Observation(trainjob=trainjob(), worker_pods=(worker,), log_tails=(tail(worker),))
        final = reconcile_job(job, obs, at(600))
        assert _true(final) == ("Failed", "JobTimedOut")
        assert final.status is not None and final.status.failure_class is not None
        assert (final.status.failure_class.scope, final.status.failure_class.reason) == (
            scope, reason)
        assert final.status.failed_nodes == ()


def test_timeout_replaces_early_record() -> None:
    """A run that ends by timeout records the timeout, not an earlier launcher failure."""
    job = make_job(timeout="1m", status=attrs.evolve(running_status(), failure_log=RECORDED))
    launcher = pod(L2, launcher=True)
    obs = Observation(trainjob=trainjob(), launcher_pods=(launcher,),
                      log_tails=(tail(launcher),))
    final = reconcile_job(job, obs, at(120))
    assert final.status is not None and final.status.failure_log is not None
    assert final.status.failure_log.reason == "Timeout"


def test_checkpoint_restart_clears_record_and_recreates_later() -> None:
    """A failed workload with restarts left is deleted, the record dropped, restartCount
    bumped, and recreated only once the old workload is confirmed gone."""
    job = make_job(max_restarts=1, status=attrs.evolve(running_status(), failure_log=RECORDED))
    plan = reconcile_job(job, Observation(trainjob=trainjob(state="failed")), at(60))
    assert _true(plan) == ("InProgress", "WorkloadRestarting")
    status = plan.status
    assert status is not None and status.failure_log is None and status.restart_count == 1
    assert status.workload_start_time is None
    assert [d.uid for d in plan.deletes] == ["tj-uid-1"]
    job = attrs.evolve(job, status=status)
    going = trainjob(state="failed", deleting=True)
    assert not reconcile_job(job, Observation(trainjob=going), at(61)).writes
    assert reconcile_job(job, Observation(), at(62)).asks == (workload_absence(),)
    again = reconcile_job(job, Observation(feedback=Feedback(answered=(workload_absence(),))),
                         at(62))
    assert [c.name for c in again.creates] == ["j1-workload"]
    assert again.status is not None and again.status.workload_ref is not None
    assert again.status.workload_ref.uid is None


def test_terminal_job_is_left_alone() -> None:
    """A Failed or Succeeded Job gets no further action from the lifecycle."""
    plan = reconcile_job(make_job(status=running_status()),
                         Observation(trainjob=trainjob(state="complete")), at(60))
    assert plan.status is not None
    done = make_job(status=plan.status)
    assert reconcile_job(done, Observation(trainjob=trainjob(state="failed")), at(90)).quiet


def test_event_messages_are_bounded() -> None:
    """An event note longer than 1024 bytes is cut and marked; the condition keeps it whole."""
    job = make_job(status=running_status())
    view = trainjob(state="failed")
    long_message = "x" * 3000
    view = attrs.evolve(view, conditions=(attrs.evolve(view.conditions[0],
                                                       message=long_message),))
    plan = reconcile_job(job, Observation(trainjob=view), at(60))
    (event,) = plan.events
    assert len(event.message.encode()) <= 1024 and event.message.endswith("... [truncated]")
    assert plan.status is not None
    cond = true_member(plan.status.conditions)
    assert cond is not None and long_message in cond.message


def test_deletion_drains_pods_bounded_then_drops_finalizer() -> None:
    """A deleted Job deletes its workload, keeps the finalizer while pods run (anchored on
    drainStartTime, at most 5 minutes), then removes it."""
    job = make_job(status=running_status(), deleting_at=at(10))
    obs = Observation(trainjob=trainjob(), worker_pods=(pod(W0),))
    first = reconcile_job(job, obs, at(10))
    assert [d.uid for d in first.deletes] == ["tj-uid-1"]
    assert first.status is not None and first.status.drain_start_time == at(10)
    job = attrs.evolve(job, status=first.status)
    waiting = reconcile_job(job, obs, at(100))
    assert not waiting.patches and waiting.requeue_after is not None
    done = reconcile_job(job, obs, at(311))
    assert [p.body for p in done.patches] == [{"metadata": {"finalizers": []}}]
    drained = attrs.evolve(obs, worker_pods=())
    asked = reconcile_job(job, drained, at(20))
    assert asked.asks == live_pods() and not asked.writes
    listed = Feedback(answered=live_pods())
    assert reconcile_job(job, attrs.evolve(drained, feedback=listed), at(20)).patches
    still_running = attrs.evolve(obs, feedback=listed)
    assert not reconcile_job(job, still_running, at(20)).patches


def test_suspension_after_start_is_not_charged_to_the_timeout() -> None:
    """Time suspended after the first Running observation moves the timeout anchor forward."""
    job = make_job(timeout="10m", status=running_status(started=at(0)))
    suspended = reconcile_job(job, Observation(trainjob=trainjob(state="suspended")), at(100))
    assert suspended.status is not None
    assert suspended.status.scheduling_blocked_since == at(100)
    job = attrs.evolve(job, status=suspended.status)
    resumed = reconcile_job(job, Observation(trainjob=trainjob()), at(400))
    assert resumed.status is not None and resumed.status.workload_start_time == at(300)
    assert resumed.status.scheduling_blocked_since is None
    job = attrs.evolve(job, status=resumed.status)
    assert reconcile_job(job, Observation(trainjob=trainjob()), at(850)).asks == ()
    assert _true(reconcile_job(job, Observation(trainjob=trainjob()), at(900))) == (
        "Failed", "JobTimedOut")


def test_workload_name_is_truncated_with_a_hash() -> None:
    """A long Job name yields a TrainJob name of at most 44 characters ending in a hash."""
    name = workload_name("a-very-long-workflow-name-for-a-certification-job")
    assert len(name) <= 44 and name != workload_name("a-very-long-workflow-name-for-a-cert-x")
    assert workload_name("j1") == "j1-workload"


def test_conditions_keep_transition_time_on_reason_change() -> None:
    """A reason change on the same True member keeps its lastTransitionTime."""
    job = make_job(status=running_status(started=at(0)))
    plan = reconcile_job(job, Observation(trainjob=trainjob(state="suspended")), at(50))
    assert plan.status is not None
    cond = true_member(plan.status.conditions)
    assert cond is not None and cond.last_transition_time == at(0)
    assert all(c.status != ConditionStatus.TRUE for c in plan.status.conditions
               if c.type != ConditionType.IN_PROGRESS)


def test_running_launcher_is_not_captured() -> None:
    """A launcher that is still running (or exited 0) asks for no log and records nothing."""
    job = make_job(status=running_status())
    running = pod(L1, launcher=True)
    done = pod(L2, launcher=True, state=terminated(exit_code=0, reason="Completed",
                                                   finished=at(5)))
    plan = reconcile_job(job, Observation(trainjob=trainjob(), launcher_pods=(running, done)),
                         at(9))
    assert plan.quiet


def test_failed_launcher_before_workload_exists_is_not_captured() -> None:
    """With no workload yet, a stray failed launcher is not recorded: the Job creates first."""
    stray = pod(L1, launcher=True, state=terminated(finished=at(5)))
    plan = reconcile_job(make_job(), Observation(launcher_pods=(stray,)), at(9))
    assert plan.creates and plan.asks == ()
    assert plan.status is not None and plan.status.failure_log is None


def test_previous_generation_launcher_is_not_captured_early() -> None:
    """A failed launcher created before the current workload is ignored by the early capture."""
    job = make_job(status=running_status())
    old = pod(L1, launcher=True, state=terminated(finished=at(5)), created=at(-100))
    plan = reconcile_job(job, Observation(trainjob=trainjob(created=at(0)),
                                          launcher_pods=(old,)), at(9))
    assert plan.quiet


def test_single_pod_workload_captures_its_worker_early() -> None:
    """Without a launcher (loopback, DCGM) the failed worker pod is captured early instead."""
    job = make_job(launcher=False, status=running_status())
    worker = pod(W0, state=terminated(finished=at(8)))
    obs = Observation(trainjob=trainjob(), worker_pods=(worker,))
    assert [r.pod for r in reconcile_job(job, obs, at(9)).asks] == [W0]


def test_launcher_workload_does_not_capture_workers_early() -> None:
    """With a launcher, a worker's exit while running is not recorded early (it is teardown)."""
    job = make_job(status=running_status())
    worker = pod(W0, state=terminated(exit_code=143, finished=at(8)))
    assert reconcile_job(job, Observation(trainjob=trainjob(), worker_pods=(worker,)),
                         at(9)).quiet


def test_crashlooping_worker_is_recorded_from_its_previous_run() -> None:
    """A worker back-off waiting after a crash (exit only in lastState) is the recorded failure:
    its previous-run log is read, its own exit is recorded, and the class stays Workload with
    every group node blamed."""
    job = make_job(status=running_status())
    worker = pod(W0, state=crashloop(), phase="Running",
                 last_state=terminated(exit_code=1, finished=at(30)))
    obs = Observation(trainjob=trainjob(state="failed"), worker_pods=(worker,))
    first = reconcile_job(job, obs, at(60))
    assert [(r.pod, r.container, r.previous) for r in first.asks] == [(W0, "node", True)]
    # A tail of the current run does not answer the request for the previous one.
    current = attrs.evolve(obs, log_tails=(tail(worker, text="current run\n"),))
    assert reconcile_job(job, current, at(60)).asks == first.asks
    answered = attrs.evolve(obs, log_tails=(tail(worker, text="sshd exited\n", previous=True),))
    plan = reconcile_job(job, answered, at(60))
    assert _true(plan) == ("Failed", "WorkloadFailed")
    status = plan.status
    assert status is not None and status.failure_log is not None
    assert (status.failure_log.pod_name, status.failure_log.exit_code, status.failure_log.reason,
            status.failure_log.finished_at, status.failure_log.tail) == (
        W0, 1, "Error", at(30), "sshd exited\n")
    assert status.failure_class is not None
    assert (status.failure_class.scope, status.failure_class.reason) == (
        FailureScope.WORKLOAD, "ContainerFailed")
    assert [f.name for f in status.failed_nodes] == list(NODES)


def test_restart_repeats_a_delete_that_did_not_land() -> None:
    """If the restart's status write landed but its delete failed, the next pass deletes the old
    workload again (UID precondition) instead of waiting for it forever."""
    job = make_job(max_restarts=1, status=running_status())
    plan = reconcile_job(job, Observation(trainjob=trainjob(state="failed")), at(60))
    assert plan.status is not None
    job = attrs.evolve(job, status=plan.status)
    again = reconcile_job(job, Observation(trainjob=trainjob(state="failed")), at(61))
    assert [(d.name, d.uid) for d in again.deletes] == [("j1-workload", "tj-uid-1")]
    assert again.status is None and not again.creates and again.requeue_after is not None


def test_timed_out_job_repeats_a_delete_that_did_not_land() -> None:
    """A Job Failed by JobTimedOut whose running workload is still there (the delete after the
    status write failed) deletes it again; a failed or foreign workload is left alone."""
    job = make_job(timeout="1m", status=running_status(started=at(0)))
    launcher = pod(L1, launcher=True)
    obs = Observation(trainjob=trainjob(), launcher_pods=(launcher,), log_tails=(tail(launcher),))
    plan = reconcile_job(job, obs, at(120))
    assert _true(plan) == ("Failed", "JobTimedOut") and plan.status is not None
    done = attrs.evolve(job, status=plan.status)
    again = reconcile_job(done, obs, at(121))
    assert [(d.name, d.uid) for d in again.deletes] == [("j1-workload", "tj-uid-1")]
    assert again.status is None and not again.events
    assert reconcile_job(done, attrs.evolve(obs, trainjob=trainjob(deleting=True)), at(122)).quiet
    assert reconcile_job(done, attrs.evolve(obs, trainjob=trainjob(uid="other")), at(122)).quiet
    assert reconcile_job(done, Observation(), at(122)).quiet


def test_previous_generation_disruption_is_not_node_evidence() -> None:
    """A disrupted pod left over from the workload before a checkpoint restart does not make the
    current workload's own failure a Node failure."""
    old = pod("j1-workload-node-0-0-zzzzz", node="gpu-2", disruption="True", created=at(-100),
              state=terminated(exit_code=137, finished=at(-50)))
    launcher = pod(L1, launcher=True, state=terminated(finished=at(30)))
    job = make_job(status=attrs.evolve(running_status(), failure_log=RECORDED))
    obs = Observation(trainjob=trainjob(state="failed"), launcher_pods=(launcher,),
                      worker_pods=(old,))
    plan = reconcile_job(job, obs, at(60))
    assert _true(plan) == ("Failed", "WorkloadFailed") and plan.status is not None
    assert plan.status.failure_class is not None
    assert plan.status.failure_class.scope == FailureScope.WORKLOAD


def test_workload_refused_for_good_is_platform_failure() -> None:
    """A create the API server refused for good fails the Job with WorkloadCreationError, a
    Platform AdmissionRejected class, no blamed node and a Warning event."""
    refused = CreateError(kind="TrainJob", name="j1-workload", namespace="ns", code=403,
                          reason="Forbidden",
                          message='admission webhook "v.trainer" denied the request: bad')
    obs = Observation(feedback=Feedback(create_rejections=(refused,)))
    plan = reconcile_job(make_job(), obs, at(0))
    assert _true(plan) == ("Failed", "WorkloadCreationError")
    assert plan.status is not None and plan.status.failure_class is not None
    assert plan.status.failure_class.scope == FailureScope.PLATFORM
    assert plan.status.failure_class.reason == "AdmissionRejected"
    assert plan.status.failed_nodes == () and not plan.creates
    assert plan.status.failure_log is not None and "denied the request" in (
        plan.status.failure_log.tail)
    assert [e.type for e in plan.events] == [EventSeverity.WARNING]


def test_a_preempted_pod_ends_the_run_at_once_and_blames_no_node() -> None:
    """A worker the scheduler preempts while the workload runs fails the Job at once
    (WorkloadPreempted, Platform class Preempted, the pod and node named), with no failed node
    and the workload released in the same write."""
    job = make_job(status=running_status())
    preempted = pod(W0, node="gpu-1", conditions=(PodCondition(
        type="DisruptionTarget", status="True", reason="PreemptionByScheduler"),))
    plan = reconcile_job(job, Observation(trainjob=trainjob(), worker_pods=(preempted,)),
                         at(30))
    assert _true(plan) == ("Failed", "WorkloadPreempted")
    status = plan.status
    assert status is not None and status.failure_class is not None
    assert (status.failure_class.scope, status.failure_class.reason) == (
        FailureScope.PLATFORM, "Preempted")
    assert f"pod {W0} on node gpu-1" in status.failure_class.message
    assert status.failed_nodes == ()
    assert status.failure_log is not None and status.failure_log.reason == "WorkloadPreempted"
    assert plan.deletes, "the rest of the workload is released at once"
