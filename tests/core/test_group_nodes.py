"""Which nodes a group's (re-)launch runs on: Failed, NotReady, cordoned and untolerated-tainted
nodes are left out (said in the group status), the Job is rendered for the rest, and a group
left with too few nodes ends InfraAborted with its nodes Uncertified."""

from __future__ import annotations

from datetime import datetime

import attrs

from cre.api.common import TaintSelector, TargetSpec
from cre.api.conditions import GroupPhase, Verdict, WorkflowReason
from cre.api.job import Job, JobStatus
from cre.api.labels import GROUP_LABEL
from cre.api.workflow import ExcludedNodeReason
from cre.core.common.observed import NodeTaint
from cre.core.job.classify import group_nodes
from cre.core.job.health import GROUP_GPUS
from cre.core.workflow import noderesults as NR
from cre.core.workflow.usable import blocking_taint, tolerates, usable_nodes
from tests.core.jobtier import Story
from tests.core.tierworld import (
    WorkflowWorld,
    at,
    gpu_node,
    nodes,
    succeeded,
    told,
    workflow,
)


def _group(job: Job) -> str:
    return job.metadata.labels[GROUP_LABEL]


def _records(world: WorkflowWorld, kind: str) -> dict[str, str]:
    data = world.config_maps.get(NR.configmap_name(kind, world.wf.metadata.uid or ""))
    return {r.name: r.reason for r in NR.read_records(data, kind)}


def _numbers(job: Job) -> tuple[int, list[str]]:
    tj = job.spec.workload.train_job or {}
    values: list[str] = []
    for patch in tj["runtimePatches"]:
        for rj in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
            affinity = rj["template"]["spec"]["template"]["spec"]["affinity"]
            terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            values = terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
    return tj["trainer"]["numNodes"], values


def _evict_group1_first(job: Job, now: datetime) -> JobStatus:
    if _group(job) == "group-1" and "-retry-" not in (job.metadata.name or ""):
        return told(Story.EVICTED, node="gpu-04")(job, now)
    return succeeded(job, now)


def test_infra_rerun_leaves_out_not_ready_and_cordoned_nodes() -> None:
    """group-1's first Job is evicted; by its re-run gpu-05 is NotReady and gpu-06 cordoned:
    the re-run Job runs on gpu-04 and gpu-07 only (numNodes, annotation, affinity), the group
    status says which nodes were left out and why, and they end Uncertified."""
    pool = nodes(8)
    world = WorkflowWorld(wf=workflow(pool, nodesPerJob=4), nodes=pool)
    world.step(at(0))
    world.step(at(1))
    world.finish(_evict_group1_first, at(1))
    t = 2.0
    world.nodes = tuple(gpu_node(n.name, ready="False") if n.name == "gpu-05"
                        else gpu_node(n.name, cordoned=True) if n.name == "gpu-06" else n
                        for n in pool)
    world.run(_evict_group1_first, start=t)
    retry = next(j for j in world.jobs.values() if "-retry-1" in (j.metadata.name or ""))
    assert group_nodes(retry) == ("gpu-04", "gpu-07")
    assert _numbers(retry) == (2, ["gpu-04", "gpu-07"])
    group1 = next(g for g in world.wf.status.groups if g.name == "group-1")
    assert group1.phase == GroupPhase.SUCCEEDED
    assert [(e.name, e.reason) for e in group1.excluded_nodes] == [
        ("gpu-05", ExcludedNodeReason.NOT_READY), ("gpu-06", ExcludedNodeReason.CORDONED)]
    assert _records(world, NR.UNCERTIFIED) == {"gpu-05": "NotReady", "gpu-06": "Cordoned"}
    assert world.wf.status.verdict == Verdict.INCOMPLETE
    assert WorkflowReason.NODES_EXCLUDED_FROM_GROUP in [r for r, _ in world.events]


def test_a_node_failed_in_an_earlier_iteration_gets_no_more_work() -> None:
    """Iteration 1's health monitor flags gpu-01 (Failed at once; the infra re-run passes on
    the rest); iteration 2's group-0 Job runs without it, the group says it was left out as
    Failed, and it stays Failed."""
    pool = nodes(6)
    world = WorkflowWorld(wf=workflow(pool, nodesPerJob=3, repeatCount=2), nodes=pool)

    def outcome(job: Job, now: datetime) -> JobStatus:
        name = job.metadata.name or ""
        if _group(job) == "group-0" and "iter-1" in name and "-retry-" not in name:
            return told(Story.HARDWARE, node="gpu-01")(job, now)
        return succeeded(job, now)

    world.run(outcome)
    second = next(j for j in world.jobs.values() if _group(j) == "group-0")
    assert "iter-2" in (second.metadata.name or "")
    assert group_nodes(second) == ("gpu-00", "gpu-02")
    group0 = next(g for g in world.wf.status.groups if g.name == "group-0")
    assert [(e.name, e.reason) for e in group0.excluded_nodes] == [
        ("gpu-01", ExcludedNodeReason.FAILED)]
    assert set(_records(world, NR.FAILED)) == {"gpu-01"}
    assert world.wf.status.verdict == Verdict.FAILED


def test_too_few_usable_nodes_end_the_group_infra_aborted() -> None:
    """A two-node group whose re-run has one usable node does not launch: InfraAborted with
    reason TooFewUsableNodes, both nodes Uncertified, no re-run Job created."""
    pool = nodes(4)
    world = WorkflowWorld(wf=workflow(pool, nodesPerJob=2), nodes=pool)

    def outcome(job: Job, now: datetime) -> JobStatus:
        if _group(job) == "group-1":
            return told(Story.EVICTED, node="gpu-02")(job, now)
        return succeeded(job, now)

    world.step(at(0))
    world.step(at(1))
    world.finish(outcome, at(1))
    world.nodes = tuple(gpu_node(n.name, ready="False") if n.name == "gpu-03" else n
                        for n in pool)
    world.run(outcome, start=2)
    group1 = next(g for g in world.wf.status.groups if g.name == "group-1")
    assert group1.phase == GroupPhase.INFRA_ABORTED
    assert group1.failure_reason == WorkflowReason.TOO_FEW_USABLE_NODES
    assert group1.message is not None and "1 of its 2 node(s) usable" in group1.message
    assert not any("-retry-" in name for _, name in world.created)
    assert _records(world, NR.UNCERTIFIED) == {"gpu-02": WorkflowReason.TOO_FEW_USABLE_NODES,
                                               "gpu-03": "NotReady"}
    assert world.wf.status.verdict == Verdict.INCOMPLETE


def test_a_first_launch_records_each_node_gpus_for_the_monitor() -> None:
    """Every group Job carries cre.dev/group-gpus: each node's allocatable GPUs at launch."""
    pool = nodes(2)
    world = WorkflowWorld(wf=workflow(pool), nodes=pool)
    world.step(at(0))
    world.step(at(1))
    (job,) = world.jobs.values()
    assert job.metadata.annotations[GROUP_GPUS] == "gpu-00=8,gpu-01=8"


def test_untolerated_blocking_taints_are_left_out_and_tolerated_ones_kept() -> None:
    """A NoSchedule taint no toleration covers excludes the node (Tainted); PreferNoSchedule
    never does; an Exists toleration without a key, or one naming the key, tolerates it."""
    taint = NodeTaint(key="gpu-broken", value="yes", effect="NoSchedule")
    soft = NodeTaint(key="busy", effect="PreferNoSchedule")
    views = (gpu_node("a", taints=(taint,)), gpu_node("b", taints=(soft,)))
    got = usable_nodes(nodes=("a", "b"), views=views, failed={}, target=TargetSpec(),
                       tolerations=({"key": "other", "operator": "Exists"},))
    assert got.nodes == ("b",)
    assert [(e.name, e.reason) for e in got.excluded] == [("a", ExcludedNodeReason.TAINTED)]
    assert "gpu-broken=yes:NoSchedule" in got.excluded[0].message
    assert tolerates({"operator": "Exists"}, taint)
    assert tolerates({"key": "gpu-broken", "operator": "Equal", "value": "yes"}, taint)
    assert not tolerates({"key": "gpu-broken", "value": "no"}, taint)
    assert not tolerates({"key": "gpu-broken", "operator": "Exists", "effect": "NoExecute"},
                         taint)
    assert blocking_taint(views[0], ({"operator": "Exists"},)) is None


def test_a_cordoned_node_is_kept_when_the_target_asks_for_cordoned_nodes() -> None:
    """A target selecting the unschedulable taint wants cordoned nodes: none is left out."""
    target = TargetSpec(taint_selectors=(TaintSelector(key="node.kubernetes.io/unschedulable"),))
    views = (gpu_node("a", cordoned=True),)
    got = usable_nodes(nodes=("a",), views=views, failed={}, target=target,
                       tolerations=({"operator": "Exists"},))
    assert got.nodes == ("a",) and got.excluded == ()


def test_a_certification_monitor_reaches_every_group_job() -> None:
    """nodeHealthMonitor on the Certification is copied onto the category's Workflow and from
    there onto each group Job (it replaces the Job tier's default cordon expression)."""
    pool = nodes(2)
    monitor = {"conditions": [{"type": "GpuUnhealthy"}], "gpuAllocatableDrop": True}
    wf = workflow(pool, nodeHealthMonitor=monitor)
    assert wf.spec.node_health_monitor is not None
    assert wf.spec.node_health_monitor.gpu_allocatable_drop
    world = WorkflowWorld(wf=wf, nodes=pool)
    world.step(at(0))
    world.step(at(1))
    (job,) = world.jobs.values()
    got = job.spec.node_health_monitor
    assert got is not None and got.cel is None
    assert [c.type for c in got.conditions] == ["GpuUnhealthy"] and got.gpu_allocatable_drop


def test_without_a_monitor_the_job_gets_the_default_cordon_expression() -> None:
    """No monitor on the Certification or Workflow: the group Job gets the Job tier's
    default (a node cordoned mid-run is broken)."""
    pool = nodes(2)
    world = WorkflowWorld(wf=workflow(pool), nodes=pool)
    world.step(at(0))
    world.step(at(1))
    (job,) = world.jobs.values()
    got = job.spec.node_health_monitor
    assert got is not None and got.cel is not None
    assert got.cel.expression == "node.spec.unschedulable == true"


def test_a_rerun_waits_for_a_node_that_blinked_not_ready() -> None:
    """group-1's first Job is evicted while gpu-05 is NotReady; gpu-05 is back 20 s later,
    within the grace: the re-run waits for it and runs on all four nodes, nothing left out."""
    pool = nodes(8)
    world = WorkflowWorld(wf=workflow(pool, nodesPerJob=4), nodes=pool)
    world.step(at(0))
    world.step(at(1))
    world.finish(_evict_group1_first, at(1))
    world.nodes = tuple(gpu_node(n.name, ready="False") if n.name == "gpu-05" else n
                        for n in pool)
    for t in range(2, 22):
        world.step(at(t))
    assert not any("-retry-" in name for _, name in world.created)
    world.nodes = pool
    world.run(_evict_group1_first, start=22)
    retry = next(j for j in world.jobs.values() if "-retry-1" in (j.metadata.name or ""))
    assert group_nodes(retry) == ("gpu-04", "gpu-05", "gpu-06", "gpu-07")
    assert world.wf.status.verdict == Verdict.PASSED


def test_a_group_whose_nodes_all_failed_earlier_raises_no_outage() -> None:
    """One group, two iterations: iteration 1 fails both nodes genuinely; iteration 2's group
    cannot launch (both left out as Failed): it ends InfraAborted, the verdict stays Failed, and
    no SuspectedClusterOutage is raised (nothing points at the cluster)."""
    pool = nodes(2)
    world = WorkflowWorld(wf=workflow(pool, repeatCount=2), nodes=pool)
    world.run(told(Story.CONTAINER_FAILED))
    (group,) = world.wf.status.groups
    assert group.phase == GroupPhase.INFRA_ABORTED
    assert {e.reason for e in group.excluded_nodes} == {ExcludedNodeReason.FAILED}
    assert world.wf.status.verdict == Verdict.FAILED
    outage = world.condition("SuspectedClusterOutage")
    assert outage is None or outage.status != "True"


def test_a_broken_node_of_a_single_node_test_fails_its_own_group_only() -> None:
    """nccl-loopback over 4 nodes runs one Job per node; the monitor flags gpu-02: its group
    is Failed (HardwareFailed) with no re-run (a one-node group has no node left), gpu-02 is
    Failed, the three other nodes Passed, the verdict Failed (JobHardwareFailed)."""
    pool = nodes(4)
    world = WorkflowWorld(wf=workflow(pool, entry=("communication", "nccl-loopback")),
                          nodes=pool)
    world.run(lambda job, now: told(Story.HARDWARE, node="gpu-02")(job, now)
              if group_nodes(job) == ("gpu-02",) else succeeded(job, now))
    assert not any("-retry-" in name for _, name in world.created)
    phases = {g.nodes: (g.phase, g.failure_reason) for g in world.wf.status.groups}
    assert phases[("gpu-02",)] == (GroupPhase.FAILED, "HardwareFailed")
    assert {p for n, p in phases.items() if n != ("gpu-02",)} == {(GroupPhase.SUCCEEDED, None)}
    assert set(_records(world, NR.FAILED)) == {"gpu-02"}
    assert _records(world, NR.UNCERTIFIED) == {}
    passed = world.config_maps[NR.configmap_name(NR.SUCCEEDED, world.wf.metadata.uid or "")]
    assert set(NR.decode_names(passed[NR.data_key(NR.SUCCEEDED)])) == {"gpu-00", "gpu-01",
                                                                        "gpu-03"}
    assert world.wf.status.verdict == Verdict.FAILED
    assert world.condition("Failed").reason == WorkflowReason.JOB_HARDWARE_FAILED


def test_a_checkpointing_training_group_mounts_and_names_its_own_pvc_copy() -> None:
    """A training category with enableCheckpoint: the PVC is job-scoped, so each group Job
    gets its own copy, and both the runtime copy's claim and the Job's checkpoint.pvcName
    name that copy (a group never reads another group's checkpoints)."""
    pool = nodes(2)
    wf = workflow(pool, entry=("training", "nemotron5-8b"), enableCheckpoint=True)
    world = WorkflowWorld(wf=wf, nodes=pool)
    world.step(at(0))
    world.step(at(1))
    (job,) = world.jobs.values()
    assert job.spec.checkpoint is not None
    claim = job.spec.checkpoint.pvc_name
    assert claim.startswith("cert-training-nemotron5-8b-checkpoint-") and claim.endswith("-job")
    runtime = job.spec.workload.train_job["runtimeRef"]["name"]
    assert runtime.startswith("cert-training-nemotron5-8b-runtime-")
    assert ("PersistentVolumeClaim", claim) in world.created


def test_the_jobs_outliers_are_aggregated_on_the_workflow_status() -> None:
    """A group Job that listed fleet-relative outliers hands them to the Workflow's
    status.outliers (node, busBW, reference, basis, domain) once the group is judged (the
    Certification's copy is pinned by the golden measurement/fleet-outlier-report)."""
    from cre.api.conditions import OutlierBasis
    from cre.api.job import NodeOutlier
    from tests.core.tierworld import succeeded

    flag = NodeOutlier(node_name="gpu-01", bus_bw="287.38", reference="478.91",
                       basis=OutlierBasis.FLEET_P10, peers=3, message="Outlier: gpu-01")

    def flagged(job: Job, now: datetime) -> JobStatus:
        return attrs.evolve(succeeded(job, now), outliers=(flag,))

    pool = nodes(4)
    world = WorkflowWorld(wf=workflow(pool), nodes=pool)
    world.run(flagged)
    assert world.wf.status.outliers == (flag,)
