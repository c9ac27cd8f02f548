"""The WorkloadRun tier, purely: build the run's Workflow once, then mirror its verdict.

``reconcile_workloadrun(run, observation, now, catalog=...)`` returns a ``Plan`` of the run's
status; the shell applies it (``cre.controller.workloadrun.controller``). The rules, in order:

1. A terminal run (Succeeded or Failed) is left alone, except for its goodput (below), which
   may complete after the run's verdict.
2. With ``status.workflowRef`` set, the Workflow is mirrored: gone (confirmed by a live read)
   -> Failed ``WorkflowDeleted``; the detected platform, architecture and node-result refs
   are copied; the Workflow's ``ValidationFailed`` is mirrored (``ThresholdViolation``)
   *before* the terminal mirror, so a run that ends on a threshold miss still says so, and
   so is its ``SuspectedClusterOutage``;
   Workflow Succeeded -> Succeeded ``WorkflowSucceeded``; Workflow Failed -> Failed
   ``WorkflowValidationFailed`` when the Workflow failed on ``JobValidationFailed``, else
   ``WorkflowFailed``, with the Workflow's message; otherwise InProgress ``WorkflowRunning``.
3. Otherwise the run is built: discovery over the GPU node cache gives the platform, the
   architecture and the eligible nodes (no node yet: ``WaitingForNodes`` for up to five
   minutes, then Failed ``BuildFailed`` naming ``spec.target``); the hardware defaults come
   (and the platform file's fabric spec the platform table shares) from the catalog;
   on-prem GB200/GB300 without ``nicResourceName`` use the
   one ``rdma/*`` or ``nvidia.com/mlnxnics`` resource every eligible node advertises.
   ``cre.render.workloadrun.build_run`` gives the Workflow; a run it cannot build is Failed
   ``BuildFailed`` with the message naming the field. The Workflow is created (a Workflow of
   that name this run already controls is adopted; a foreign one is Failed
   ``WorkflowNameCollision``) and the run goes InProgress ``WorkflowCreated``.

The trio members that are not True carry reason ``Superseded`` on this tier.

Goodput (a CRE addition: the reference's run status has no place for it): ``status.goodput``
holds, per Job of the run's Workflow, the ``result`` of its GoodputMeasurement once that is
Complete with a ratio above 0 (the reference's rule for the ``goodputRatio`` threshold). Entries
are only added, in Job-name order, so the Jobs of earlier iterations keep theirs.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Final

import attrs

from cre.api import labels as L
from cre.api.common import TargetSpec
from cre.api.conditions import (
    LIFECYCLE_CONDITIONS,
    CommonReason,
    ConditionType,
    MeasurementPhase,
    Phase,
    WorkflowReason,
    WorkloadRunReason,
)
from cre.api.goodput import GoodputMeasurement
from cre.api.meta import Condition, ConditionStatus, NamespacedName
from cre.api.workflow import Workflow
from cre.api.workloadrun import JobGoodput, WorkloadRun, WorkloadRunStatus
from cre.catalog.model import Catalog
from cre.core.common.conditions import condition, set_additive, set_trio
from cre.core.common.lifecycle import true_member
from cre.core.common.observed import NodeView
from cre.core.common.plan import ConfirmAbsent, Create, EventSpec, Feedback, Plan
from cre.core.workflow.discovery import DiscoveryFailure, describe_target, discover, waiting_detail
from cre.render.workloadrun import RunBuildError, RunEnvironment, build_run, framework_of

WorkloadRunPlan = Plan[WorkloadRunStatus]
NODE_WAIT: Final = timedelta(minutes=5)
NIC_ARCHS: Final = ("gb200", "gb300")


@attrs.frozen(kw_only=True)
class WorkloadRunSettings:
    """Tunables of the WorkloadRun core."""

    requeue: float = 15.0
    node_wait: timedelta = NODE_WAIT


DEFAULT_WORKLOADRUN_SETTINGS: Final = WorkloadRunSettings()


@attrs.frozen(kw_only=True)
class WorkloadRunObservation:
    """What the core reads: GPU nodes and the Workflow named like the run (if any; read live
    when ``feedback`` holds the answered :func:`workflow_absence`)."""

    nodes: tuple[NodeView, ...] = ()
    workflow: Workflow | None = None
    feedback: Feedback = attrs.field(factory=Feedback)
    goodput: tuple[GoodputMeasurement, ...] = ()  # the measurements of the Workflow's Jobs


def default_target() -> TargetSpec:
    """No target: every GPU node."""
    return TargetSpec(node_selector={L.GPU_PRESENT: "true"})


def detect_nic(nodes: tuple[NodeView, ...]) -> str | None:
    """The one ``rdma/*`` or ``nvidia.com/mlnxnics`` resource every node advertises, else
    ``None`` (none, or several: nothing is injected)."""
    common: set[str] | None = None
    for node in nodes:
        names = {r for r in node.extended_resources
                 if r.startswith("rdma/") or r == "nvidia.com/mlnxnics"}
        common = names if common is None else common & names
    return next(iter(common)) if common is not None and len(common) == 1 else None


def hardware_defaults(catalog: Catalog, *, platform: str, arch: str) -> tuple[int, int] | None:
    """(GPUs, NICs) per node for ``arch`` on ``platform`` from the catalog, or ``None``."""
    pdata = catalog.platforms.get(platform)
    found = (pdata.architectures.get(arch) if pdata is not None else None) or \
        catalog.gpu_defaults.get(arch)
    return None if found is None else (found.gpus_per_node, found.mlnx_per_node)


def merge_goodput(known: tuple[JobGoodput, ...], measurements: tuple[GoodputMeasurement, ...]
                  ) -> tuple[JobGoodput, ...]:
    """``known`` plus the goodput of each Complete measurement of a Job not in it yet (ratio
    above 0), in Job-name order."""
    by_job = {g.job: g for g in known}
    for gm in measurements:
        job = gm.spec.job_ref.name
        ratio = gm.status.result
        if job in by_job or gm.status.phase != MeasurementPhase.COMPLETE or ratio is None:
            continue
        try:
            positive = float(ratio) > 0
        except ValueError:
            positive = False
        if positive:
            by_job[job] = JobGoodput(job=job, goodput_ratio=ratio)
    return tuple(by_job[j] for j in sorted(by_job))


def superseded(conditions: tuple[Condition, ...]) -> tuple[Condition, ...]:
    """The trio members that are not True with reason ``Superseded`` (this tier's word)."""
    return tuple(attrs.evolve(c, reason=CommonReason.SUPERSEDED)
                 if c.type in LIFECYCLE_CONDITIONS and c.status != ConditionStatus.TRUE
                 and c.reason == CommonReason.NOT_APPLICABLE else c for c in conditions)


@attrs.frozen(kw_only=True)
class _Ctx:
    run: WorkloadRun
    obs: WorkloadRunObservation
    now: datetime
    catalog: Catalog
    settings: WorkloadRunSettings

    def plan(self, **kwargs: Any) -> WorkloadRunPlan:
        return Plan(resource_version=self.run.metadata.resource_version or "", **kwargs)

    def owns(self, wf: Workflow) -> bool:
        return any(o.controller and o.uid == self.run.metadata.uid
                   for o in wf.metadata.owner_references)


def workflow_absence(name: str) -> ConfirmAbsent:
    """The ask: is the run's Workflow ``name`` really gone?"""
    return ConfirmAbsent(kind="Workflow", name=name)


def reconcile_workloadrun(run: WorkloadRun, observation: WorkloadRunObservation, now: datetime, *,
                  catalog: Catalog,
                  settings: WorkloadRunSettings = DEFAULT_WORKLOADRUN_SETTINGS) -> WorkloadRunPlan:
    """The Plan that moves ``run`` one step on (see the module docstring)."""
    ctx = _Ctx(run=run, obs=observation, now=now, catalog=catalog, settings=settings)
    current = true_member(run.status.conditions)
    if current is not None and current.type != ConditionType.IN_PROGRESS:
        measured = merge_goodput(run.status.goodput, observation.goodput)
        if measured == run.status.goodput:
            return ctx.plan()
        return ctx.plan(status=attrs.evolve(run.status, goodput=measured))
    if run.status.workflow_ref is not None:
        return _mirror(ctx)
    return _build(ctx)


def _write(ctx: _Ctx, status: WorkloadRunStatus, *, member: ConditionType, reason: str,
           message: str, events: tuple[EventSpec, ...] = (), **plan: Any) -> WorkloadRunPlan:
    conditions, event = set_trio(status.conditions, member=member, reason=reason,
                                 message=message, now=ctx.now,
                                 generation=ctx.run.metadata.generation)
    phase = {ConditionType.SUCCEEDED: Phase.SUCCEEDED, ConditionType.FAILED: Phase.FAILED}.get(
        member, Phase.RUNNING if status.workflow_ref is not None else Phase.PENDING)
    status = attrs.evolve(status, conditions=superseded(conditions), phase=phase,
                          observed_generation=ctx.run.metadata.generation)
    changed = status != ctx.run.status
    all_events = (*((event,) if event is not None else ()), *events)
    return ctx.plan(status=status if changed else None,
                    events=all_events if changed else events, **plan)


def _fail(ctx: _Ctx, reason: WorkloadRunReason, message: str) -> WorkloadRunPlan:
    return _write(ctx, ctx.run.status, member=ConditionType.FAILED, reason=reason,
                  message=message)


def _mirror(ctx: _Ctx) -> WorkloadRunPlan:
    ref = ctx.run.status.workflow_ref
    assert ref is not None
    wf = ctx.obs.workflow
    if wf is None:
        absence = workflow_absence(ctx.run.metadata.name or "")
        if not ctx.obs.feedback.has(absence):
            return ctx.plan(asks=(absence,))
        return _fail(ctx, WorkloadRunReason.WORKFLOW_DELETED,
                     f"Workflow {ref.name} was deleted before it finished")
    status = ctx.run.status
    orch = wf.status.orchestration
    status = attrs.evolve(
        status,
        detected_platform=orch.detected_platform if orch and orch.detected_platform
        else status.detected_platform,
        detected_gpu_architecture=orch.detected_gpu_architecture
        if orch and orch.detected_gpu_architecture else status.detected_gpu_architecture,
        succeeded_nodes_ref=wf.status.succeeded_nodes_ref or status.succeeded_nodes_ref,
        failed_nodes_ref=wf.status.failed_nodes_ref or status.failed_nodes_ref,
        goodput=merge_goodput(status.goodput, ctx.obs.goodput))
    events: tuple[EventSpec, ...] = ()
    invalid = condition(wf.status.conditions, ConditionType.VALIDATION_FAILED)
    if invalid is not None and invalid.status == ConditionStatus.TRUE:
        conditions, event = set_additive(
            status.conditions, type_=ConditionType.VALIDATION_FAILED, status=True,
            reason=WorkloadRunReason.THRESHOLD_VIOLATION, message=invalid.message or "",
            now=ctx.now, generation=ctx.run.metadata.generation, warn=True)
        status = attrs.evolve(status, conditions=conditions)
        events = (event,) if event is not None else ()
    outage = condition(wf.status.conditions, ConditionType.SUSPECTED_CLUSTER_OUTAGE)
    if outage is not None and outage.status == ConditionStatus.TRUE:
        # Copied from the Workflow: the cause is the cluster, not the user's workload.
        conditions, event = set_additive(
            status.conditions, type_=ConditionType.SUSPECTED_CLUSTER_OUTAGE, status=True,
            reason=WorkloadRunReason.SUSPECTED_CLUSTER_OUTAGE, message=outage.message or "",
            now=ctx.now, generation=ctx.run.metadata.generation, warn=True)
        status = attrs.evolve(status, conditions=conditions)
        events = (*events, *((event,) if event is not None else ()))
    member = true_member(wf.status.conditions)
    if member is not None and member.type == ConditionType.SUCCEEDED:
        return _write(ctx, status, member=ConditionType.SUCCEEDED,
                      reason=WorkloadRunReason.WORKFLOW_SUCCEEDED,
                      message=member.message or f"Workflow {ref.name} succeeded", events=events)
    if member is not None and member.type == ConditionType.FAILED:
        reason = WorkloadRunReason.WORKFLOW_VALIDATION_FAILED \
            if member.reason == WorkflowReason.JOB_VALIDATION_FAILED \
            else WorkloadRunReason.WORKFLOW_FAILED
        return _write(ctx, status, member=ConditionType.FAILED, reason=reason,
                      message=member.message or f"Workflow {ref.name} failed", events=events)
    return _write(ctx, status, member=ConditionType.IN_PROGRESS,
                  reason=WorkloadRunReason.WORKFLOW_RUNNING,
                  message=f"Workflow {ref.name} is running", events=events,
                  requeue_after=ctx.settings.requeue)


def _build(ctx: _Ctx) -> WorkloadRunPlan:
    run = ctx.run
    name = run.metadata.name or ""
    namespace = run.metadata.namespace or ""
    wf = ctx.obs.workflow
    if ctx.obs.feedback.held(name) or (wf is not None and not ctx.owns(wf)):
        return _fail(ctx, WorkloadRunReason.WORKFLOW_NAME_COLLISION,
                     f"Workflow {name} already exists and is not controlled by this WorkloadRun")
    target = run.spec.target or default_target()
    try:
        framework_of(run)
    except RunBuildError as exc:
        return _fail(ctx, WorkloadRunReason.BUILD_FAILED, str(exc))
    found = discover(target=target, nodes=ctx.obs.nodes)
    if isinstance(found, DiscoveryFailure):
        created = run.metadata.creation_timestamp or ctx.now
        left = created + ctx.settings.node_wait - ctx.now
        if left > timedelta(0):
            return _write(ctx, run.status, member=ConditionType.IN_PROGRESS,
                          reason=WorkloadRunReason.WAITING_FOR_NODES,
                          message=f"No eligible node for {describe_target(target)} yet "
                                  f"({waiting_detail(found, target=target, nodes=ctx.obs.nodes)}"
                                  "); waiting "
                                  f"{int(left.total_seconds())}s more",
                          requeue_after=min(ctx.settings.requeue, left.total_seconds()))
        return _fail(ctx, WorkloadRunReason.BUILD_FAILED, f"spec.target: {found.message}")
    defaults = hardware_defaults(ctx.catalog, platform=found.platform,
                                 arch=found.architecture)
    if defaults is None and run.spec.gpus_per_node is None:
        return _fail(ctx, WorkloadRunReason.BUILD_FAILED,
                     f"spec.gpusPerNode: the GPU architecture {found.architecture!r} of the "
                     "target nodes has no default GPU count; set gpusPerNode")
    gpus, mlnx = defaults or (run.spec.gpus_per_node or 1, 0)
    gpus = run.spec.gpus_per_node or gpus
    found = discover(target=target, nodes=ctx.obs.nodes, gpus_per_node=gpus)
    if isinstance(found, DiscoveryFailure):
        return _fail(ctx, WorkloadRunReason.BUILD_FAILED, f"spec.target: {found.message}")
    nic = detect_nic(found.nodes) if found.platform == "onprem" and \
        found.architecture in NIC_ARCHS else None
    fabric = ctx.catalog.fabric_spec(platform=found.platform, arch=found.architecture,
                                     num_nodes=run.spec.num_nodes, entry=name)
    environment = RunEnvironment(platform=found.platform, architecture=found.architecture,
                                 nodes=found.names, gpus_per_node=gpus, mlnx_per_node=mlnx,
                                 nic_resource_name=nic, fabric=fabric)
    try:
        built = build_run(run, env=environment)
    except RunBuildError as exc:
        return _fail(ctx, WorkloadRunReason.BUILD_FAILED, str(exc))
    status = attrs.evolve(run.status, workflow_ref=NamespacedName(name=name, namespace=namespace),
                          detected_platform=found.platform,
                          detected_gpu_architecture=found.architecture,
                          resolved_gpus_per_node=built.gpus_per_node)
    creates: tuple[Create, ...] = ()
    if wf is None:  # else: ours already (created on a pass whose status write conflicted)
        creates = (Create(api_version=L.API_VERSION, kind="Workflow", namespace=namespace,
                          name=name, body=built.workflow),)
    return _write(ctx, status, member=ConditionType.IN_PROGRESS,
                  reason=WorkloadRunReason.WORKFLOW_CREATED,
                  message=f"Created Workflow {name} for {found.platform}/"
                          f"{found.architecture}: {len(found.nodes)} eligible node(s), "
                          f"{built.nodes_per_job} per group",
                  creates=creates, requeue_after=ctx.settings.requeue)
