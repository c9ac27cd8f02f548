"""Scenarios of the pure Workflow core, run in an in-memory world: launch gating, FailFast,
infra-abort deferral, outage detection, the kill switch, retries, iterations, final reasons,
node results, deletion order and bad input."""

from __future__ import annotations

from datetime import datetime

import attrs
import pytest

from cre.api.conditions import (
    ConditionType,
    FailureScope,
    GroupPhase,
    JobReason,
    Verdict,
    WorkflowReason,
)
from cre.api.job import Job, JobStatus
from cre.api.labels import GROUP_LABEL
from cre.api.meta import Condition, ConditionStatus
from cre.core.common.observed import NodeView
from cre.core.job.classify import group_nodes
from cre.core.workflow import noderesults as NR
from cre.core.workflow.reconcile import WorkflowSettings, live_read
from cre.core.workflow.run import VALIDATION_GRACE, VERDICT_MISSING, reconcile_workflow
from tests.core.jobtier import Story, check_emittable
from tests.core.tierworld import (
    WorkflowWorld,
    always_succeed,
    at,
    gpu_node,
    nodes,
    succeeded,
    told,
    workflow,
)

FAIL_FAST = {"failurePolicy": {"mode": "FailFast"}}


def _world(count: int = 8, *, settings: WorkflowSettings | None = None,
           **options: object) -> WorkflowWorld:
    pool = nodes(count)
    return WorkflowWorld(wf=workflow(pool, **options), nodes=pool,
                         settings=settings or WorkflowSettings())


def _group(job: Job) -> str:
    return job.metadata.labels[GROUP_LABEL]


def _records(world: WorkflowWorld, kind: str) -> set[str]:
    data = world.config_maps.get(NR.configmap_name(kind, world.wf.metadata.uid or ""))
    if kind == NR.SUCCEEDED:
        return set(NR.decode_names(data[NR.data_key(kind)])) if data else set()
    return {r.name for r in NR.read_records(data, kind)}


def _phases(world: WorkflowWorld) -> dict[str, GroupPhase]:
    return {g.name: g.phase for g in world.wf.status.groups}


def _reasons(world: WorkflowWorld) -> list[str]:
    return [r for r, _ in world.events]


def test_all_groups_pass() -> None:
    """8 nodes in 4 groups of 2, all succeed: Passed, every node in succeeded-nodes."""
    world = _world(nodesPerJob=2)
    world.run(always_succeed)
    assert world.wf.status.verdict == Verdict.PASSED
    assert world.condition("Succeeded").reason == WorkflowReason.JOB_COMPLETED
    assert world.condition("Incomplete").status == "False"
    assert _records(world, NR.SUCCEEDED) == {n.name for n in world.nodes}
    assert world.wf.status.succeeded_nodes_ref.name == "succeeded-nodes-wf-uid-1"


def test_one_job_per_group_pinned_with_group_nodes() -> None:
    """Each group's Job names its nodes in cre.dev/group-nodes and pins every replicated job
    to them; job-scoped dependencies are per-group copies the Job references."""
    world = _world(4, nodesPerJob=2)
    world.step(at(0))
    world.step(at(1))
    jobs = sorted(world.jobs.values(), key=_group)
    assert [group_nodes(j) for j in jobs] == [("gpu-00", "gpu-01"), ("gpu-02", "gpu-03")]
    for job in jobs:
        tj = job.spec.workload.train_job
        assert tj is not None
        for patch in tj["runtimePatches"]:
            for rj in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
                affinity = rj["template"]["spec"]["template"]["spec"]["affinity"]
                terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == list(
                    group_nodes(job))
        runtime = tj["runtimeRef"]["name"]
        assert ("TrainingRuntime", runtime) in world.deps
        assert tj["trainer"]["numNodes"] == 2
        assert job.spec.timeout_per_job == "1h"


def test_max_concurrent_bounds_running_groups() -> None:
    """maxConcurrent 2: never more than two groups run at once."""
    world = _world(nodesPerJob=2, maxConcurrent=2)
    world.run(always_succeed)
    for plan in world.plans:
        if plan.status is not None:
            assert sum(g.phase == GroupPhase.RUNNING for g in plan.status.groups) <= 2
    assert world.wf.status.verdict == Verdict.PASSED


def test_overflow_group_waits_for_its_lenders() -> None:
    """5 nodes by 2: the overflow group shares a node with group-0 and never runs with it."""
    world = _world(5, nodesPerJob=2)
    world.run(always_succeed)
    for plan in world.plans:
        if plan.status is None:
            continue
        running = [g for g in plan.status.groups if g.phase == GroupPhase.RUNNING]
        seen = [n for g in running for n in g.nodes]
        assert len(seen) == len(set(seen))
    assert _phases(world)["group-2-overflow"] == GroupPhase.SUCCEEDED


def test_fail_fast_cancels_siblings_and_blames_only_the_failed_group() -> None:
    """FailFast: a genuine NCCL failure in group-1 cancels the running siblings (Cancelled,
    Uncertified), the verdict is Failed, and only group-1's nodes are Failed."""
    world = _world(nodesPerJob=2, **FAIL_FAST)

    def outcome(job: Job, now: datetime) -> JobStatus | None:
        return told(Story.CONTAINER_FAILED)(job, now) if _group(job) == "group-1" else None

    world.run(outcome)
    assert world.wf.status.verdict == Verdict.FAILED
    phases = _phases(world)
    assert phases["group-1"] == GroupPhase.FAILED
    assert {phases[g] for g in ("group-0", "group-2", "group-3")} == {GroupPhase.CANCELLED}
    assert _records(world, NR.FAILED) == {"gpu-02", "gpu-03"}
    assert _records(world, NR.UNCERTIFIED) == {n.name for n in world.nodes} - {
        "gpu-02", "gpu-03"}
    assert _reasons(world).count(WorkflowReason.GROUPS_CANCELLED) == 1
    assert not world.jobs.keys() - {j for j in world.jobs if "group-1" in j}


def test_continue_mode_lets_every_group_finish() -> None:
    """Continue (default): a failed group cancels nothing; the rest still run and pass."""
    world = _world(nodesPerJob=2)
    world.run(lambda job, now: told(Story.CONTAINER_FAILED)(job, now)
              if _group(job) == "group-1" else succeeded(job, now))
    phases = _phases(world)
    assert phases["group-1"] == GroupPhase.FAILED
    assert [phases[g] for g in ("group-0", "group-2", "group-3")] == [GroupPhase.SUCCEEDED] * 3
    assert world.wf.status.verdict == Verdict.FAILED
    assert world.condition("Failed").reason == WorkflowReason.ITERATIONS_FAILED


def _evict_first_attempt(job: Job, now: datetime) -> JobStatus:
    if _group(job) == "group-2" and not (job.metadata.name or "").endswith("-retry-1"):
        return told(Story.EVICTED, node="gpu-04")(job, now)
    return succeeded(job, now)


def test_eviction_is_deferred_and_the_infra_retry_passes() -> None:
    """FailFast + a node eviction in group-2: deferred, siblings keep running, the infra
    retry (a new Job) passes and the verdict is Passed with no node blamed."""
    world = _world(nodesPerJob=2, **FAIL_FAST)
    world.run(_evict_first_attempt)
    assert world.wf.status.verdict == Verdict.PASSED
    assert set(_phases(world).values()) == {GroupPhase.SUCCEEDED}
    assert WorkflowReason.GROUPS_CANCELLED not in _reasons(world)
    assert WorkflowReason.INFRA_ABORT_DEFERRED in _reasons(world)
    group2 = next(g for g in world.wf.status.groups if g.name == "group-2")
    assert (group2.infra_retries, group2.retries) == (1, 0)
    assert group2.job_ref is not None and group2.job_ref.name.endswith("-retry-1")
    assert _records(world, NR.FAILED) == set()


def test_repeated_eviction_ends_incomplete_with_the_node_uncertified() -> None:
    """Evicted again after the infra retry: InfraAborted, verdict Incomplete, its nodes
    Uncertified (the evicted one too), nothing Failed, siblings Succeeded."""
    world = _world(nodesPerJob=2, **FAIL_FAST)
    world.run(lambda job, now: told(Story.EVICTED, node="gpu-04")(job, now)
              if _group(job) == "group-2" else succeeded(job, now))
    assert _phases(world)["group-2"] == GroupPhase.INFRA_ABORTED
    assert world.wf.status.verdict == Verdict.INCOMPLETE
    assert world.condition("Succeeded").status == "True"
    incomplete = world.condition("Incomplete")
    assert (incomplete.status, incomplete.reason) == ("True", "InfraAborted")
    assert _records(world, NR.UNCERTIFIED) == {"gpu-04", "gpu-05"}
    assert _records(world, NR.FAILED) == set()
    assert _records(world, NR.SUCCEEDED) == {n.name for n in world.nodes} - {"gpu-04", "gpu-05"}


def _down(name: str) -> tuple[NodeView, ...]:
    return tuple(gpu_node(n.name, ready="False") if n.name == name else n for n in nodes(8))


def test_node_not_ready_past_the_grace_fails_the_node_and_the_verdict() -> None:
    """A node that went NotReady under running group-2 and stays down past
    nodeNotReadyGraceSeconds: Failed (scope Node); a re-run without it would leave one node for
    a two-node test, so the group ends Failed (HardwareFailed) at once, its mate Uncertified
    (PeerBroken), the verdict Failed with JobHardwareFailed naming the node."""
    pool = nodes(8)
    world = WorkflowWorld(wf=workflow(pool, nodesPerJob=2,
                                      failurePolicy={"nodeNotReadyGraceSeconds": 30}),
                          nodes=pool)
    world.step(at(0))
    world.step(at(1))  # the groups launch with every node Ready
    world.nodes = _down("gpu-05")
    world.run(start=2, outcome=lambda job, now:
              told(Story.NODE_NOT_READY, node="gpu-05")(job, now)
              if _group(job) == "group-2" else succeeded(job, now))
    assert _records(world, NR.FAILED) == {"gpu-05"}
    assert _records(world, NR.UNCERTIFIED) == {"gpu-04"}
    assert _phases(world)["group-2"] == GroupPhase.FAILED
    assert not any("-retry-" in name for _, name in world.created)
    assert world.wf.status.verdict == Verdict.FAILED
    failed_cond = world.condition("Failed")
    assert failed_cond.reason == WorkflowReason.JOB_HARDWARE_FAILED
    assert failed_cond.message.startswith("Broken node(s) found: gpu-05: NotReady")
    assert WorkflowReason.NODE_NOT_READY_GRACE in _reasons(world)


def test_node_back_within_the_grace_is_not_blamed() -> None:
    """The NotReady node comes back Ready within the grace: nothing Failed; the infra retry
    re-runs the group and it passes (verdict Passed)."""
    pool = nodes(8)
    world = WorkflowWorld(wf=workflow(pool, nodesPerJob=2), nodes=pool)
    world.step(at(0))
    world.step(at(1))  # the groups launch with every node Ready
    world.nodes = _down("gpu-05")
    first = {"done": False}

    def outcome(job: Job, now: datetime) -> JobStatus:
        if _group(job) == "group-2" and not first["done"]:
            first["done"] = True
            return told(Story.NODE_NOT_READY, node="gpu-05")(job, now)
        return succeeded(job, now)

    for t in range(2, 20):
        plan = world.step(at(t))
        if plan.quiet:
            world.finish(outcome, at(t))
    assert first["done"] and not world.terminal  # waiting on gpu-05 within the grace
    world.nodes = tuple(gpu_node(n.name) for n in world.nodes)  # back within 300 s
    world.run(outcome, start=20)
    assert _records(world, NR.FAILED) == set()
    assert world.wf.status.verdict == Verdict.PASSED


def test_health_monitor_node_is_failed_and_the_rerun_judges_the_rest() -> None:
    """The health monitor flags gpu-05 in the three-node group-1: gpu-05 is Failed (scope
    Node) at once; the infra re-run runs on gpu-03 and gpu-04 and passes, so they are Passed;
    the verdict is still Failed (JobHardwareFailed) and FailFast cancelled nothing."""
    world = _world(9, nodesPerJob=3, **FAIL_FAST)

    def outcome(job: Job, now: datetime) -> JobStatus:
        if _group(job) == "group-1" and not (job.metadata.name or "").endswith("-retry-1"):
            return told(Story.HARDWARE, node="gpu-05")(job, now)
        return succeeded(job, now)

    world.run(outcome)
    # The broken node is in failed-nodes before (in the same plan as) the re-run's launch.
    failed_cm = NR.configmap_name(NR.FAILED, world.wf.metadata.uid or "")
    relaunch = next(p for p in world.plans
                    if any(c.name.endswith("-retry-1") and c.kind == "Job" for c in p.creates)
                    or any(d.kind == "Job" and "group-1" in d.name for d in p.deletes))
    assert any(c.name == failed_cm and c.replace for c in relaunch.creates)
    retry = next(j for j in world.jobs.values() if (j.metadata.name or "").endswith("-retry-1"))
    assert group_nodes(retry) == ("gpu-03", "gpu-04")
    assert _records(world, NR.FAILED) == {"gpu-05"}
    assert {"gpu-03", "gpu-04"} <= _records(world, NR.SUCCEEDED)
    assert _records(world, NR.UNCERTIFIED) == set()
    assert set(_phases(world).values()) == {GroupPhase.SUCCEEDED}
    assert world.wf.status.verdict == Verdict.FAILED
    cond = world.condition("Failed")
    assert cond.reason == WorkflowReason.JOB_HARDWARE_FAILED
    assert cond.message.startswith("Broken node(s) found: gpu-05: Hardware failure detected")
    assert WorkflowReason.GROUPS_CANCELLED not in _reasons(world)


def test_a_broken_node_in_a_pair_fails_the_group_and_leaves_its_mate_uncertified() -> None:
    """The monitor flags gpu-05 in the two-node group-2: a re-run without it would have one
    node for a multi-node test, so no re-run is made; the group is Failed (HardwareFailed),
    gpu-05 Failed, gpu-04 Uncertified (PeerBroken, never judged), the other groups Passed,
    the verdict Failed (JobHardwareFailed), no outage and FailFast cancelled nothing."""
    world = _world(nodesPerJob=2, **FAIL_FAST)
    world.run(lambda job, now: told(Story.HARDWARE, node="gpu-05")(job, now)
              if _group(job) == "group-2" else succeeded(job, now))
    assert not any("-retry-" in name for _, name in world.created)
    group2 = next(g for g in world.wf.status.groups if g.name == "group-2")
    assert (group2.phase, group2.infra_retries) == (GroupPhase.FAILED, 0)
    assert _records(world, NR.FAILED) == {"gpu-05"}
    assert _records(world, NR.UNCERTIFIED) == {"gpu-04"}
    assert _records(world, NR.SUCCEEDED) == {n.name for n in world.nodes} - {"gpu-04", "gpu-05"}
    assert [_phases(world)[g] for g in ("group-0", "group-1", "group-3")] == \
        [GroupPhase.SUCCEEDED] * 3
    assert world.wf.status.verdict == Verdict.FAILED
    assert world.condition("Failed").reason == WorkflowReason.JOB_HARDWARE_FAILED
    assert world.condition("SuspectedClusterOutage") is None or \
        world.condition("SuspectedClusterOutage").status != "True"
    assert WorkflowReason.GROUPS_CANCELLED not in _reasons(world)


@pytest.mark.parametrize("story", [Story.CREATE_REJECTED, Story.INVALID_SPEC,
                                   Story.NAME_COLLISION])
def test_configuration_errors_fail_at_once_and_never_blame_nodes(story: Story) -> None:
    """The API refused the create / the spec is invalid / the name is taken: the group is
    Failed without any retry (infra or genuine), ConfigurationError with the cause's message,
    its nodes Uncertified (scope Configuration) and nothing Failed."""
    world = _world(4, nodesPerJob=2, failurePolicy={"infraRetries": 2})
    world.run(lambda job, now: told(story)(job, now) if _group(job) == "group-0"
              else succeeded(job, now))
    group0 = next(g for g in world.wf.status.groups if g.name == "group-0")
    assert (group0.phase, group0.retries, group0.infra_retries) == (GroupPhase.FAILED, 0, 0)
    assert group0.failure_reason == WorkflowReason.CONFIGURATION_ERROR
    assert world.wf.status.verdict == Verdict.FAILED
    cond = world.condition("Failed")
    assert cond.reason == WorkflowReason.CONFIGURATION_ERROR
    assert group0.message is not None and cond.message.startswith(f"group-0: {group0.message}")
    assert _records(world, NR.FAILED) == set()
    assert _records(world, NR.UNCERTIFIED) == {"gpu-00", "gpu-01"}


def test_a_deleted_trainjob_is_a_user_interrupt() -> None:
    """A person deleted group-0's TrainJob: the group fails UserInterrupted saying what was
    deleted, is not re-created, its nodes Uncertified; the other group passes; FailFast
    cancels nothing."""
    world = _world(4, nodesPerJob=2, **FAIL_FAST)
    world.run(lambda job, now: told(Story.WORKLOAD_DELETED)(job, now)
              if _group(job) == "group-0" else succeeded(job, now))
    group0 = next(g for g in world.wf.status.groups if g.name == "group-0")
    assert group0.phase == GroupPhase.FAILED and group0.infra_retries == 0
    assert group0.message is not None and "was deleted" in group0.message
    assert _phases(world)["group-1"] == GroupPhase.SUCCEEDED
    assert world.condition("Failed").reason == WorkflowReason.USER_INTERRUPTED
    assert _records(world, NR.FAILED) == set()
    assert _records(world, NR.UNCERTIFIED) == {"gpu-00", "gpu-01"}
    assert len([n for k, n in world.created if k == "Job"]) == 2


def test_startup_stall_is_deferred_and_never_blames() -> None:
    """A workload that never started (Platform class) in the only group: infra retry, then
    InfraAborted, verdict Incomplete, nothing Failed, and no outage flag for one group."""
    world = _world(2)
    world.run(told(Story.STARTUP_STALLED))
    assert world.wf.status.verdict == Verdict.INCOMPLETE
    assert _records(world, NR.FAILED) == set()
    assert world.condition("SuspectedClusterOutage") is None


def test_the_contract_rejects_a_status_the_job_tier_never_writes() -> None:
    """A hand-written hardware failure (Workload class with HardwareFailed, the old test's
    status) is refused by the tier-contract helper."""
    world = _world(2)
    world.step(at(0))
    world.step(at(1))
    (job,) = world.jobs.values()
    status = told(Story.HARDWARE)(job, at(2))
    check_emittable(status)
    forged = attrs.evolve(status, failure_class=attrs.evolve(
        status.failure_class, scope=FailureScope.WORKLOAD, reason="ContainerFailed"))
    with pytest.raises(AssertionError, match="never writes"):
        check_emittable(forged)


def _api_outage(job: Job, now: datetime) -> JobStatus:
    return told(Story.STARTUP_STALLED)(job, now)


def test_every_group_aborting_flags_a_suspected_outage() -> None:
    """Every group's workload never starts (Platform class, as failing API calls leave it):
    SuspectedClusterOutage with the shared scope and one Warning event, verdict Incomplete,
    no node blamed."""
    world = _world(nodesPerJob=2, **FAIL_FAST)
    world.run(_api_outage)
    outage = world.condition("SuspectedClusterOutage")
    assert outage.status == "True"
    assert "4 of 4 groups" in outage.message
    assert "Platform/WorkloadNotStarted" in outage.message
    assert _reasons(world).count(WorkflowReason.SUSPECTED_CLUSTER_OUTAGE) == 1
    assert world.wf.status.verdict == Verdict.INCOMPLETE
    assert _records(world, NR.FAILED) == set()
    assert world.wf.status.failed_nodes_ref is None


def test_kill_switch_restores_plain_failures() -> None:
    """--infra-scoped-failfast=false: an infra abort is a plain failure: Failed, the whole
    group blamed, FailFast cancels the running siblings; a full outage raises no outage flag."""
    world = _world(nodesPerJob=2, settings=WorkflowSettings(infra_scoped_fail_fast=False),
                   **FAIL_FAST)
    world.run(lambda job, now: _api_outage(job, now) if _group(job) == "group-0" else None)
    assert world.wf.status.verdict == Verdict.FAILED
    assert _records(world, NR.FAILED) == {"gpu-00", "gpu-01"}
    assert WorkflowReason.GROUPS_CANCELLED in _reasons(world)
    outage = _world(nodesPerJob=2, settings=WorkflowSettings(infra_scoped_fail_fast=False))
    outage.run(_api_outage)
    assert outage.wf.status.verdict == Verdict.FAILED
    assert outage.condition("SuspectedClusterOutage") is None
    assert _records(outage, NR.FAILED) == {n.name for n in outage.nodes}


def test_per_workflow_override_beats_the_manager_switch() -> None:
    """infraScopedFailFast: false on the Workflow turns deferral off even when the manager
    has it on."""
    world = _world(nodesPerJob=2, failurePolicy={"infraScopedFailFast": False})
    world.run(_api_outage)
    assert world.wf.status.verdict == Verdict.FAILED


def test_retry_failed_groups_then_pass_and_timeout_never_retried() -> None:
    """retryFailedGroups 1: a failed group re-runs as a new Job and passes; a timed-out group
    is not retried."""
    world = _world(4, nodesPerJob=2, failurePolicy={"mode": "Continue"})
    wf = world.wf
    execution = attrs.evolve(wf.spec.orchestration.execution, retry_failed_groups=1)
    world.wf = attrs.evolve(wf, spec=attrs.evolve(wf.spec, orchestration=attrs.evolve(
        wf.spec.orchestration, execution=execution)))

    def outcome(job: Job, now: datetime) -> JobStatus:
        name = job.metadata.name or ""
        if _group(job) == "group-0" and not name.endswith("-retry-1"):
            return told(Story.CONTAINER_FAILED)(job, now)
        if _group(job) == "group-1":
            return told(Story.TIMED_OUT)(job, now)
        return succeeded(job, now)

    world.run(outcome)
    phases = _phases(world)
    assert phases == {"group-0": GroupPhase.SUCCEEDED, "group-1": GroupPhase.FAILED}
    retries = {g.name: g.retries for g in world.wf.status.groups}
    assert retries == {"group-0": 1, "group-1": 0}


def test_iterations_delete_jobs_before_the_next_pass() -> None:
    """Two iterations: the first iteration's Jobs are deleted (and confirmed gone) before the
    groups reset; the history keeps the first iteration."""
    world = _world(4, nodesPerJob=2, repeatCount=2)
    world.run(always_succeed)
    orch = world.wf.status.orchestration
    assert orch is not None
    assert (orch.current_iteration, orch.completed_iterations) == (2, 2)
    assert [r.iteration for r in orch.iteration_history] == [1]
    assert all(name.endswith("iter-2") for name in world.jobs)
    deleted_jobs = [n for k, n in world.deleted if k == "Job"]
    assert sorted(deleted_jobs) == sorted(n.replace("iter-2", "iter-1") for n in world.jobs)
    assert world.condition("Succeeded").message == "All 2 iterations completed successfully"


def test_final_reason_precedence() -> None:
    """Hardware beats a workload failure beats validation; ValidationFailed is set whenever a
    threshold was missed."""
    def run(fail: str) -> WorkflowWorld:
        world = _world(4, nodesPerJob=2)

        def outcome(job: Job, now: datetime) -> JobStatus:
            group = _group(job)
            if group == "group-0" and fail in ("hardware", "both"):
                return told(Story.HARDWARE)(job, now)
            if group == "group-1" and fail in ("validation", "both", "workload+validation"):
                return told(Story.THRESHOLD_MISSED)(job, now)
            if fail in ("plain", "workload+validation") and group == "group-0":
                return told(Story.CONTAINER_FAILED)(job, now)
            return succeeded(job, now)

        world.run(outcome)
        return world

    both = run("both")
    assert both.condition("Failed").reason == WorkflowReason.JOB_HARDWARE_FAILED
    assert both.condition("Failed").message.startswith("Broken node(s) found: gpu-00: ")
    assert both.condition("ValidationFailed").status == "True"
    mixed = run("workload+validation")
    assert mixed.condition("Failed").reason == WorkflowReason.ITERATIONS_FAILED
    assert mixed.condition("ValidationFailed").status == "True"
    assert run("validation").condition("Failed").reason == WorkflowReason.JOB_VALIDATION_FAILED
    plain = run("plain")
    assert plain.condition("Failed").reason == WorkflowReason.ITERATIONS_FAILED
    assert plain.condition("Failed").message == "1 group failed across 1 iteration"
    assert plain.condition("ValidationFailed") is None


def test_missing_job_needs_a_live_read_then_is_a_user_interrupt() -> None:
    """A Job gone from the cache is only believed after a live read; someone deleted it: the
    group fails UserInterrupted (not re-created), its nodes Uncertified, nothing Failed."""
    world = _world(2)
    world.step(at(0))
    world.step(at(1))
    world.jobs.clear()
    plan = reconcile_workflow(world.wf, world.observe(), at(2))
    assert plan.asks == (live_read(world.wf.metadata.name or ""),) and not plan.writes
    world.step(at(2))
    group = world.wf.status.groups[0]
    assert group.failure_class is not None
    assert group.failure_class.scope == FailureScope.CONTROL_PLANE
    assert group.infra_retries == 0 and group.retries == 0
    assert group.phase == GroupPhase.FAILED
    assert group.failure_reason == WorkflowReason.USER_INTERRUPTED
    assert group.message is not None and "was deleted while its group was running" \
        in group.message
    assert not world.jobs
    assert world.condition("Failed").reason == WorkflowReason.USER_INTERRUPTED
    assert _records(world, NR.FAILED) == set()


def test_deletion_removes_jobs_then_dependencies_then_the_finalizer() -> None:
    """Deletion: every Job first (and wait), then dependencies in reverse order, then the
    finalizer; the dependency deletes never come before the last Job is gone."""
    world = _world(4, nodesPerJob=2)
    world.step(at(0))
    world.step(at(1))
    assert world.jobs and world.deps
    world.delete(at(2))
    kinds = []
    for t in range(3, 10):
        plan = world.step(at(t))
        kinds.append([d.kind for d in plan.deletes] + (["finalizer"] if plan.patches else []))
        if plan.patches:
            break
    flat = [k for step in kinds for k in step]
    assert flat[-1] == "finalizer"
    last_job = max(i for i, k in enumerate(flat) if k == "Job")
    first_dep = min(i for i, k in enumerate(flat) if k == "TrainingRuntime")
    assert last_job < first_dep
    assert world.wf.metadata.finalizers == ()


def test_no_node_fails_without_creating_anything() -> None:
    """No node left (all cordoned): NodeDiscoveryError, nothing created."""
    pool = nodes(4)
    world = WorkflowWorld(wf=workflow(pool), nodes=tuple(
        attrs.evolve(n, unschedulable=True) for n in pool))
    world.step(at(0))
    assert world.condition("Failed").reason == WorkflowReason.NODE_DISCOVERY_ERROR
    assert world.created == []


def test_nodes_per_job_above_the_cluster_fails_naming_the_fix() -> None:
    """The template asks for 4 nodes per Job but only 3 remain: PartitionError naming what
    to set; nothing created."""
    pool = nodes(4)
    world = WorkflowWorld(wf=workflow(pool), nodes=pool[:3])
    world.step(at(0))
    failed_cond = world.condition("Failed")
    assert failed_cond.reason == WorkflowReason.PARTITION_ERROR
    assert "Set nodesPerJob to 3" in failed_cond.message
    assert world.created == []


def test_invalid_spec_fails_before_anything_is_created() -> None:
    """A spec CRE's validation rejects (an unknown threshold key) fails InvalidSpec, naming
    the field, with nothing created."""
    pool = nodes(2)
    world = WorkflowWorld(wf=workflow(pool, thresholds={"speed": "value > 1"}), nodes=pool)
    world.step(at(0))
    cond = world.condition("Failed")
    assert cond.reason == WorkflowReason.INVALID_SPEC
    assert "validation.performance.thresholds.thresholds" in cond.message
    assert world.created == []


def test_excluded_nodes_make_a_pass_incomplete() -> None:
    """Discovery excluded a cordoned node and everything else passed: Succeeded, verdict
    Incomplete, reason NodesExcluded, a CordonedNodesExcluded warning."""
    pool = (*nodes(2), gpu_node("gpu-99", cordoned=True))
    world = WorkflowWorld(wf=workflow(pool[:2]), nodes=pool)
    world.run(always_succeed)
    assert world.wf.status.verdict == Verdict.INCOMPLETE
    assert world.condition("Incomplete").reason == "NodesExcluded"
    assert WorkflowReason.CORDONED_NODES_EXCLUDED in _reasons(world)


def test_unjudged_thresholds_never_wait_and_say_so() -> None:
    """Until the Job tier judges thresholds, a Workflow with thresholds does not wait for a
    verdict nobody writes: the groups finish as their runs do, one ThresholdsNotJudged warning
    names the field, and the final message says the thresholds were not judged."""
    world = _world(4, nodesPerJob=2, thresholds={"busBandwidthGBps": "value >= 100"},
                   settings=WorkflowSettings(thresholds_judged=False))
    finished = world.run(always_succeed)
    assert world.wf.status.verdict == Verdict.PASSED
    assert finished < 60, "waited for a threshold verdict"
    assert _reasons(world).count(WorkflowReason.THRESHOLDS_NOT_JUDGED) == 1
    assert "thresholds were not judged" in world.condition("Succeeded").message


def test_judged_thresholds_wait_for_the_verdict() -> None:
    """Once the Job tier judges thresholds (settings.thresholds_judged), a succeeded Job
    without a verdict holds its group; a verdict that never comes is never a pass: past the
    safety bound the group ends an infrastructure abort (ThresholdVerdictMissing), its nodes
    Uncertified and the verdict Incomplete."""
    world = _world(2, settings=WorkflowSettings(thresholds_judged=True),
                   thresholds={"busBandwidthGBps": "value >= 100"})
    finished = world.run(always_succeed, limit=20000)
    assert finished >= 300 + 30 + VALIDATION_GRACE.total_seconds(), \
        "did not wait for a threshold verdict"
    assert WorkflowReason.THRESHOLDS_NOT_JUDGED not in _reasons(world)
    assert world.wf.status.verdict == Verdict.INCOMPLETE
    assert all(g.phase == GroupPhase.INFRA_ABORTED for g in world.wf.status.groups)
    assert all(g.failure_class is not None and g.failure_class.reason == VERDICT_MISSING
               for g in world.wf.status.groups)


def test_a_threshold_miss_carries_the_value_and_the_busbw_up() -> None:
    """A Succeeded Job with ValidationFailed=True: its group fails with the validation reason,
    the group and the Workflow's Failed message carry the measured value and the expression,
    and every judged group shows its busBandwidthGBps."""
    world = _world(4, nodesPerJob=2)
    message = 'Threshold "busBandwidthGBps" violated: measured 191.6000, expression: value >= 300'

    def outcome(job: Job, now: datetime) -> JobStatus:
        status = succeeded(job, now)
        if _group(job) == "group-1":
            verdict = Condition(type=ConditionType.VALIDATION_FAILED,
                                status=ConditionStatus.TRUE,
                                reason=JobReason.THRESHOLD_VIOLATED, message=message,
                                last_transition_time=now)
            return attrs.evolve(status, conditions=(*status.conditions, verdict),
                                bus_bandwidth_gbps="191.60")
        return attrs.evolve(status, bus_bandwidth_gbps="478.92")

    world.run(outcome)
    groups = {g.name: g for g in world.wf.status.groups}
    assert {n: g.bus_bandwidth_gbps for n, g in groups.items()} == {
        "group-0": "478.92", "group-1": "191.60"}
    assert groups["group-1"].phase == GroupPhase.FAILED
    assert groups["group-1"].message == message
    failed = world.condition("Failed")
    assert failed.reason == WorkflowReason.JOB_VALIDATION_FAILED
    assert failed.message == f"1 group failed across 1 iteration; group-1: {message}"
    assert message in world.condition("ValidationFailed").message


def test_a_refused_dependency_create_fails_the_workflow_with_the_api_message() -> None:
    """The shell reports a TrainingRuntime create refused for good (422): the Workflow fails
    DependencyCreationError at once with the API's message, creating nothing more (no retry
    loop); a refused Job create fails JobCreationError the same way."""
    from cre.core.common.plan import CreateError, Feedback

    world = _world(4, nodesPerJob=2)
    plan = world.step(at(0))
    while not any(c.kind == "TrainingRuntime" for c in plan.creates):
        plan = reconcile_workflow(world.wf, world.observe(), at(1), settings=world.settings)
        if not plan.creates:
            world.apply(plan)
    runtime = next(c for c in plan.creates if c.kind == "TrainingRuntime")
    said = ('TrainingRuntime.trainer.kubeflow.org "x" is invalid: spec.mlPolicy: Required '
            'value')
    refused = CreateError(kind="TrainingRuntime", name=runtime.name, namespace="team-a",
                          code=422, reason="Invalid", message=said)
    obs = attrs.evolve(world.observe(), feedback=Feedback(create_rejections=(refused,)))
    failed_plan = reconcile_workflow(world.wf, obs, at(1), settings=world.settings)
    assert failed_plan.creates == ()
    world.apply(failed_plan)
    cond = world.condition("Failed")
    assert cond.reason == WorkflowReason.DEPENDENCY_CREATION_ERROR
    assert cond.message == (f"the API server refused TrainingRuntime team-a/{runtime.name} "
                            f"(422 Invalid): {said}")
    other = _world(4, nodesPerJob=2)
    other.step(at(0))  # the finalizer
    other.step(at(1))  # discovery, groups, first creates
    job_refused = attrs.evolve(refused, kind="Job", name="wf-g0-iter-0", code=403,
                               reason="Forbidden", message="denied")
    obs2 = attrs.evolve(other.observe(),
                        feedback=Feedback(create_rejections=(job_refused,)))
    other.apply(reconcile_workflow(other.wf, obs2, at(2), settings=other.settings))
    assert other.condition("Failed").reason == WorkflowReason.JOB_CREATION_ERROR
    assert "(403 Forbidden): denied" in other.condition("Failed").message
