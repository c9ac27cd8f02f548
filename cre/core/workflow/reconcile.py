"""The Workflow lifecycle as a pure function: ``reconcile_workflow(wf, observation, now)``,
whose entry point and running phase are in :mod:`cre.core.workflow.run`; this module holds the
settings, the Observation, the context, the start and deletion phases and the shared helpers.

A Workflow runs one category over a set of nodes: it discovers and partitions the nodes once
(``cre.core.workflow.discovery``, ``cre.core.workflow.partition``), creates the workflow-scoped
dependencies, then launches one CRE Job per group (``cre.core.workflow.groupjob``) with its own
copies of the job-scoped dependencies (``cre.core.workflow.deps``), tracks the Jobs, decides retries
and infra-abort deferral (``cre.core.workflow.deferral``), cancels siblings under FailFast, runs the
iterations, writes the node-result ConfigMaps (``cre.core.workflow.noderesults``) and the final
verdict, and on deletion removes Jobs first, then dependencies, then its finalizer.

Rules the pure core keeps (each covered by a test):

* Launch gating: at most ``maxConcurrent`` running groups (0 = all), never two running groups
  sharing a node (an overflow group waits for its lenders), and nothing new after FailFast.
* A retried group gets a new Job name (``...-retry-<k>``) and new dependency copies, so a
  relaunch never waits for the previous Job's finalizer.
* A missing Job is only believed after a live read (a ``ListLive`` ask); someone deleted it: a
  user interrupt (the group fails ``UserInterrupted``, not re-created, nodes Uncertified).
* Iterations: all groups terminal -> the iteration's Jobs are deleted (and confirmed gone)
  before the groups reset; the last iteration ends in the final status instead.
* Final reason: the most severe blame row seen (``cre.core.workflow.deferral``, docs/design/013):
  ``JobHardwareFailed`` (a node Failed on node evidence, even if its group's re-run passed) >
  ``IterationsFailed`` (a workload failure) > ``JobValidationFailed`` (a threshold miss) >
  ``ConfigurationError`` > ``UserInterrupted``; ``ValidationFailed=True`` whenever a threshold
  was missed. Nothing failed -> ``JobCompleted``, with ``Incomplete`` when nodes went
  uncertified or were excluded.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

import attrs

from cre.api import labels as L
from cre.api.common import TargetSpec
from cre.api.conditions import (
    ConditionType,
    FailureScope,
    JobReason,
    Phase,
    WorkflowReason,
)
from cre.api.errors import describe
from cre.api.job import FailureClass, Job
from cre.api.meta import TypedLocalObjectReference
from cre.api.validate import validate
from cre.api.workflow import (
    AppliedOverride,
    DependencyRef,
    DependencyScope,
    GroupStatus,
    OrchestrationStatus,
    Workflow,
    WorkflowStatus,
)
from cre.core.common.conditions import set_trio
from cre.core.common.observed import NodeView, ObjectView
from cre.core.common.plan import (
    Create,
    Delete,
    EventSeverity,
    EventSpec,
    Feedback,
    ListLive,
    Patch,
    Plan,
)
from cre.core.common.wording import count
from cre.core.job.classify import ClassReason
from cre.core.job.health import encode_group_gpus
from cre.core.workflow import deferral as D
from cre.core.workflow import noderesults as NR
from cre.core.workflow.deps import (
    Dependency,
    DependencyError,
    applicable,
    job_copy,
    renames,
    suffix,
)
from cre.core.workflow.discovery import Discovery, DiscoveryFailure, capped, discover
from cre.core.workflow.groupjob import group_job, job_name
from cre.core.workflow.overrides import OverrideError, apply_overrides
from cre.core.workflow.partition import PartitionError, partition

WorkflowPlan = Plan[WorkflowStatus]
JOB_API: Final = L.API_VERSION
GPU_RESOURCE: Final = "nvidia.com/gpu"


@attrs.frozen(kw_only=True)
class WorkflowSettings:
    """Tunables of the Workflow core (the reference's timing constants)."""

    requeue: float = 15.0
    immediate: float = 0.05
    deletion_requeue: float = 5.0
    # The manager's --infra-scoped-failfast switch (a Workflow may override it).
    infra_scoped_fail_fast: bool = True
    # Whether the Job tier judges performance thresholds (writes ValidationFailed or
    # ThresholdsMet): it does since issue 13 (docs/design/015). False restores the earlier
    # behaviour: never wait for a threshold verdict, and say so (docs/design/013, "Thresholds").
    thresholds_judged: bool = True


DEFAULT_WORKFLOW_SETTINGS: Final = WorkflowSettings()


@attrs.frozen(kw_only=True)
class WorkflowObservation:
    """Everything the Workflow core may read about one Workflow's world at one instant.

    ``jobs``: the CRE Jobs labelled ``cre.dev/workflow=<name>`` in its namespace.
    ``dependencies``: the dependency objects found by the tracking label.
    ``config_maps``: the ``binaryData`` of the node-result ConfigMaps, by name.
    ``feedback``: creates whose names foreign objects hold, creates the API server refused
    for good (400/403/422), and whether the children were read live (:meth:`live_read`).
    ``active_pods``: per Job name, how many of its pods are not yet Succeeded/Failed.
    """

    nodes: tuple[NodeView, ...] = ()
    jobs: tuple[Job, ...] = ()
    dependencies: tuple[ObjectView, ...] = ()
    config_maps: Mapping[str, Mapping[str, bytes]] = attrs.field(factory=dict)
    active_pods: Mapping[str, int] = attrs.field(factory=dict)
    feedback: Feedback = attrs.field(factory=Feedback)

    def job(self, name: str) -> Job | None:
        """The observed Job of that name."""
        return next((j for j in self.jobs if j.metadata.name == name), None)


@attrs.frozen(kw_only=True)
class WorkflowCtx:
    """One pass over one Workflow: the object, its Observation, the injected time, the settings."""

    wf: Workflow
    obs: WorkflowObservation
    now: datetime
    settings: WorkflowSettings

    @property
    def name(self) -> str:
        return self.wf.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.wf.status.namespace or self.wf.spec.namespace or \
            self.wf.metadata.namespace or ""

    @property
    def uid(self) -> str:
        return self.wf.metadata.uid or ""

    @property
    def generation(self) -> int | None:
        return self.wf.metadata.generation

    def plan(self, **kwargs: Any) -> WorkflowPlan:
        return Plan(resource_version=self.wf.metadata.resource_version or "", **kwargs)

    @property
    def live(self) -> ListLive:
        """The ask: the Workflow's Jobs (with their pods and its dependencies), listed live."""
        return live_read(self.name)

    @property
    def read_live(self) -> bool:
        """Whether the children were read live on this pass."""
        return self.obs.feedback.has(self.live)

    @property
    def policy(self) -> D.EffectivePolicy:
        execution = self.wf.spec.orchestration.execution
        return D.effective_policy(
            self.wf.spec.failure_policy, manager_default=self.settings.infra_scoped_fail_fast,
            retry_failed_groups=execution.retry_failed_groups if execution else 0)

    @property
    def iterations(self) -> int:
        return self.wf.spec.orchestration.iterations


# --- status helpers ----------------------------------------------------------------------------


def write_status(ctx: WorkflowCtx, status: WorkflowStatus, *, member: ConditionType, reason: str,
                 message: str, events: tuple[EventSpec, ...] = (), **plan: Any) -> WorkflowPlan:
    """The plan that writes ``status`` with ``member`` the true lifecycle condition (and its
    event), or writes nothing when the status would not change."""
    conditions, event = set_trio(status.conditions, member=member, reason=reason,
                                 message=message, now=ctx.now, generation=ctx.generation)
    phase = {ConditionType.SUCCEEDED: Phase.SUCCEEDED, ConditionType.FAILED: Phase.FAILED}.get(
        member, Phase.RUNNING if status.groups else Phase.PENDING)
    status = attrs.evolve(status, conditions=conditions, phase=phase,
                          observed_generation=ctx.generation,
                          namespace=status.namespace or ctx.namespace)
    changed = status != ctx.wf.status
    all_events = (*((event,) if event is not None else ()), *events)
    return ctx.plan(status=status if changed else None, events=all_events if changed else
                    tuple(e for e in events), **plan)


def spec_errors(wf: Workflow) -> tuple[str, ...]:
    """The problems ``cre.api.validate`` finds in the spec, as ``path: problem``."""
    return tuple(str(e) for e in validate(wf) if e.path == "spec" or e.path.startswith("spec."))


def rendered_gpus(wf: Workflow) -> int | None:
    """The largest ``nvidia.com/gpu`` in any requests/limits of the job template's workload
    or the dependencies (the per-node request discovery checks capacity against)."""
    best: int | None = None

    def walk(value: Any, key: str | None = None) -> None:
        nonlocal best
        if isinstance(value, Mapping):
            for k, v in value.items():
                if k in ("requests", "limits") and isinstance(v, Mapping) and GPU_RESOURCE in v:
                    try:
                        n = int(str(v[GPU_RESOURCE]))
                    except ValueError:
                        n = 0
                    best = n if best is None else max(best, n)
                walk(v, k)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item, key)

    workload = wf.spec.job_template.spec.workload
    walk(workload.train_job or {})
    walk(list(wf.spec.dependencies))
    return best


def nodes_per_job(wf: Workflow) -> int | None:
    """``trainer.numNodes`` of the template's TrainJob (``None``/``<1``: all nodes)."""
    train_job = wf.spec.job_template.spec.workload.train_job or {}
    trainer = train_job.get("trainer")
    value = trainer.get("numNodes") if isinstance(trainer, Mapping) else None
    return value if isinstance(value, int) and value >= 1 else None


def _target(wf: Workflow) -> TargetSpec:
    return wf.spec.orchestration.target or TargetSpec()


# --- discovery and partitioning (once) ---------------------------------------------------------


_EXCLUSION_EVENTS: Final = (
    ("Cordoned", WorkflowReason.CORDONED_NODES_EXCLUDED),
    ("NotReady", WorkflowReason.NOT_READY_NODES_EXCLUDED),
    ("MinorityArchitecture", WorkflowReason.HETEROGENEOUS_GPU),
    ("InsufficientGPUs", WorkflowReason.INSUFFICIENT_GPU_CAPACITY),
    ("MaxNodes", WorkflowReason.MAX_NODES_EXCLUDED),
)


def start_plan(ctx: WorkflowCtx) -> WorkflowPlan:
    """The first pass: check the spec, discover and partition the nodes, record the groups."""
    wf = ctx.wf
    invalid = spec_errors(wf)
    if invalid:
        return write_status(ctx, wf.status, member=ConditionType.FAILED,
                            reason=WorkflowReason.INVALID_SPEC,
                            message=f"{describe(wf, 'Workflow')} has an invalid spec: "
                                    f"{'; '.join(invalid)}")
    applied: tuple[AppliedOverride, ...] = ()
    if wf.spec.overrides:
        # Overrides need the platform and architecture: detect them on the base target first.
        first = discover(target=_target(wf), nodes=ctx.obs.nodes)
        if isinstance(first, DiscoveryFailure):
            return write_status(ctx, wf.status, member=ConditionType.FAILED, reason=first.reason,
                                message=first.message)
        topo = wf.spec.orchestration.topology
        domains = {n.label(topo.topology_key) for n in first.nodes} - {None} if topo else set()
        try:
            wf, applied = apply_overrides(wf, platform=first.platform, arch=first.architecture,
                                          topology_mode="topology" if topo else "simple",
                                          domain_count=len(domains))
        except OverrideError as exc:
            return write_status(ctx, wf.status, member=ConditionType.FAILED,
                                reason=WorkflowReason.OVERRIDE_ERROR, message=str(exc))
        ctx = attrs.evolve(ctx, wf=wf)
    found = discover(target=_target(wf), nodes=ctx.obs.nodes, gpus_per_node=rendered_gpus(wf))
    if isinstance(found, DiscoveryFailure):
        return write_status(ctx, wf.status, member=ConditionType.FAILED, reason=found.reason,
                            message=found.message)
    found = capped(found, wf.spec.max_nodes)
    topology = wf.spec.orchestration.topology
    try:
        groups = partition(nodes=found.nodes, nodes_per_job=nodes_per_job(wf),
                           topology_key=topology.topology_key if topology else None,
                           strict_domain=topology.strict_domain if topology else False)
        deps = applicable(wf.spec.dependencies, _template_json(wf), platform=found.platform,
                          arch=found.architecture,
                          topology_mode="topology" if topology else "simple",
                          domain_count=len({d for g in groups for d in g.domains}))
    except PartitionError as exc:
        return write_status(ctx, wf.status, member=ConditionType.FAILED,
                            reason=WorkflowReason.PARTITION_ERROR,
                            message=f"Failed to partition nodes: {exc}")
    except DependencyError as exc:
        return write_status(ctx, wf.status, member=ConditionType.FAILED,
                            reason=WorkflowReason.INVALID_SPEC, message=str(exc))
    size = len(groups[0].nodes)
    orch = OrchestrationStatus(
        total_nodes=len(found.nodes), nodes_per_job=size, total_groups=len(groups),
        current_iteration=1, detected_platform=found.platform,
        detected_gpu_architecture=found.architecture,
        excluded_nodes=tuple(e.name for e in found.excluded),
        exclusion_reason=found.summary or None, applied_overrides=applied)
    status = attrs.evolve(wf.status, orchestration=orch, groups=tuple(
        GroupStatus(name=g.name, nodes=g.nodes, domains=g.domains,
                    domain_node_counts=dict(g.domain_node_counts), overflow=g.overflow)
        for g in groups))
    creates, refs = _workflow_deps(ctx, deps)
    status = attrs.evolve(status, dependency_refs=refs)
    message = (f"Discovered {count(len(found.nodes), 'node')}, partitioned into "
               f"{count(len(groups), 'group')} ({size} nodes/job)")
    return write_status(ctx, status, member=ConditionType.IN_PROGRESS,
                        reason=WorkflowReason.GROUPS_PARTITIONED, message=message,
                        events=_exclusion_events(found) + _override_events(applied)
                        + _thresholds_event(ctx), creates=creates,
                        requeue_after=ctx.settings.immediate)


def unjudged_thresholds(ctx: WorkflowCtx) -> bool:
    """Thresholds are set, but the Job tier does not judge them (yet)."""
    perf = ctx.wf.spec.validation.performance if ctx.wf.spec.validation else None
    return (not ctx.settings.thresholds_judged and perf is not None
            and perf.thresholds is not None and bool(perf.thresholds.thresholds))


def _thresholds_event(ctx: WorkflowCtx) -> tuple[EventSpec, ...]:
    if not unjudged_thresholds(ctx):
        return ()
    return (EventSpec(type=EventSeverity.WARNING, reason=WorkflowReason.THRESHOLDS_NOT_JUDGED,
                      message="spec.validation.performance.thresholds: this version of CRE does "
                              "not judge performance thresholds yet; they are copied onto each "
                              "Job, and the verdict covers the runs' outcomes only"),)


def _exclusion_events(found: Discovery) -> tuple[EventSpec, ...]:
    out = []
    for key, reason in _EXCLUSION_EVENTS:
        names = [e for e in found.excluded if e.reason == key]
        if names:
            shown = ", ".join(e.name for e in names[:10])
            more = f" and {len(names) - 10} more" if len(names) > 10 else ""
            detail = f" ({names[0].detail})" if names[0].detail else ""
            out.append(EventSpec(type=EventSeverity.WARNING, reason=reason,
                                 message=f"Excluded {len(names)} node(s): {shown}{more}{detail}"))
    return tuple(out)


def _override_events(applied: tuple[AppliedOverride, ...]) -> tuple[EventSpec, ...]:
    return tuple(
        EventSpec(type=EventSeverity.WARNING if a.no_op else EventSeverity.NORMAL,
                  reason=WorkflowReason.OVERRIDE_NO_OP if a.no_op
                  else WorkflowReason.OVERRIDE_APPLIED,
                  message=f"Override {a.index} ({a.when}) "
                          + ("changed nothing" if a.no_op else f"applied: {a.patches}"))
        for a in applied)


def _template_json(wf: Workflow) -> Mapping[str, Any]:
    return {"trainJob": wf.spec.job_template.spec.workload.train_job or {}}


def dependencies_of(wf: Workflow) -> tuple[Dependency, ...]:
    """The Workflow's applicable dependencies for what discovery recorded."""
    orch = wf.status.orchestration
    topology = wf.spec.orchestration.topology
    return applicable(wf.spec.dependencies, _template_json(wf),
                      platform=orch.detected_platform or "" if orch else "",
                      arch=orch.detected_gpu_architecture or "" if orch else "",
                      topology_mode="topology" if topology else "simple",
                      domain_count=len({d for g in wf.status.groups for d in g.domains}))


def _owned(ctx: WorkflowCtx, obj: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    meta.setdefault("namespace", ctx.namespace)
    meta["labels"] = {**dict(meta.get("labels") or {}), L.WORKFLOW: ctx.name,
                      L.MANAGED_BY: L.MANAGED_BY_VALUE}
    meta["annotations"] = {**dict(meta.get("annotations") or {}), WORKFLOW_UID: ctx.uid}
    meta["ownerReferences"] = [{"apiVersion": L.API_VERSION, "kind": "Workflow",
                                "name": ctx.name, "uid": ctx.uid, "controller": True,
                                "blockOwnerDeletion": True}]
    out["metadata"] = meta
    return out


WORKFLOW_UID: Final = "cre.dev/workflow-uid"


def _create(obj: Mapping[str, Any]) -> Create:
    meta = obj["metadata"]
    return Create(api_version=str(obj["apiVersion"]), kind=str(obj["kind"]),
                  namespace=str(meta.get("namespace") or ""), name=str(meta["name"]), body=obj)


def _ref(obj: Mapping[str, Any], *, scope: DependencyScope, group: str | None = None,
         iteration: int | None = None) -> DependencyRef:
    meta = obj["metadata"]
    return DependencyRef(api_version=str(obj["apiVersion"]), kind=str(obj["kind"]),
                         name=str(meta["name"]), namespace=meta.get("namespace"), scope=scope,
                         group_name=group, iteration=iteration)


def _workflow_deps(ctx: WorkflowCtx, deps: tuple[Dependency, ...]
                   ) -> tuple[tuple[Create, ...], tuple[DependencyRef, ...]]:
    objs = [_owned(ctx, d.obj) for d in deps if d.scope == DependencyScope.WORKFLOW]
    return (tuple(_create(o) for o in objs),
            tuple(_ref(o, scope=DependencyScope.WORKFLOW) for o in objs))


def group_launch(ctx: WorkflowCtx, group: GroupStatus, *, iteration: int,
                 nodes: tuple[str, ...] | None = None,
                 ) -> tuple[tuple[Create, ...], tuple[DependencyRef, ...], str]:
    """The creates (dependency copies first, then the Job) of one group's next attempt, on
    ``nodes`` (default: all of the group's)."""
    nodes = group.nodes if nodes is None else nodes
    single = single_job(ctx)
    attempt = group.retries + group.infra_retries
    name = job_name(ctx.name, group=group.name, iteration=iteration, single=single,
                    attempt=attempt)
    sfx = suffix(workflow_uid=ctx.uid, group=group.name, iteration=iteration, single=single)
    if attempt:
        sfx += f"-r{attempt}"
    deps = dependencies_of(ctx.wf)
    mapping = renames(deps, sfx)
    copies = [_owned(ctx, job_copy(d, mapping, nodes=len(nodes)))
              for d in deps if d.scope == DependencyScope.JOB]
    chosen = set(nodes)
    views = [v for v in ctx.obs.nodes if v.name in chosen]
    job = group_job(ctx.wf, name=name, group=group.name, nodes=nodes, renames=mapping,
                    group_gpus=encode_group_gpus(views))
    refs = tuple(_ref(o, scope=DependencyScope.JOB, group=group.name, iteration=iteration)
                 for o in copies)
    return (*(_create(o) for o in copies), _create(job)), refs, name


def single_job(ctx: WorkflowCtx) -> bool:
    """Whether the run is one Job (``<workflow>-job``): one group, one iteration, no diagnose
    (whose later rounds add groups)."""
    return (len(ctx.wf.status.groups) == 1 and ctx.iterations == 1
            and ctx.wf.spec.orchestration.diagnose is None)


# --- deletion ----------------------------------------------------------------------------------


def deletion_plan(ctx: WorkflowCtx) -> WorkflowPlan:
    """A deleted Workflow: its Jobs go first, then its dependencies, then its finalizer."""
    wf = ctx.wf
    if L.WORKFLOW_FINALIZER not in wf.metadata.finalizers:
        return ctx.plan()
    jobs = ctx.obs.jobs
    if jobs:
        deletes = tuple(delete_job(j) for j in jobs if j.metadata.deletion_timestamp is None)
        return ctx.plan(deletes=deletes, requeue_after=ctx.settings.requeue)
    if not ctx.read_live:
        return ctx.plan(asks=(ctx.live,))
    present = {(o.kind, o.name): o for o in ctx.obs.dependencies}
    pending = [present[(r.kind, r.name)] for r in reversed(wf.status.dependency_refs)
               if (r.kind, r.name) in present]
    if pending:
        deletes = tuple(delete_object(o) for o in pending if o.owned and not o.terminating)
        return ctx.plan(deletes=deletes, requeue_after=ctx.settings.deletion_requeue)
    finalizers = [f for f in wf.metadata.finalizers if f != L.WORKFLOW_FINALIZER]
    return ctx.plan(patches=(Patch(body={"metadata": {"finalizers": finalizers}}),))


def delete_job(job: Job) -> Delete:
    """The delete of a group Job, guarded by its uid."""
    return Delete(api_version=JOB_API, kind="Job", namespace=job.metadata.namespace or "",
                  name=job.metadata.name or "", uid=job.metadata.uid or "")


def delete_object(obj: ObjectView) -> Delete:
    """The delete of a dependency object, guarded by its uid."""
    return Delete(api_version=obj.api_version, kind=obj.kind, namespace=obj.namespace or "",
                  name=obj.name, uid=obj.uid)


# --- shared with the running phase --------------------------------------------------------------


def configmap_ref(kind: str, uid: str) -> TypedLocalObjectReference:
    """The status reference of a node-result ConfigMap."""
    return TypedLocalObjectReference(kind="ConfigMap", name=NR.configmap_name(kind, uid))


def live_read(workflow: str) -> ListLive:
    """The ask: the Jobs of ``workflow`` (with their pods and its dependencies), listed live."""
    return ListLive(kind="Job", selector=f"{L.WORKFLOW}={workflow}")


def result_upsert(ctx: WorkflowCtx, kind: str, blob: bytes) -> Create:
    """The create-or-replace of one node-result ConfigMap."""
    body = NR.configmap(kind=kind, uid=ctx.uid, namespace=ctx.namespace, workflow=ctx.name,
                        blob=blob)
    return Create(api_version="v1", kind="ConfigMap", namespace=ctx.namespace,
                  name=body["metadata"]["name"], body=body, replace=True)


def missing_job_outcome(name: str) -> D.JobOutcome:
    """A Job that vanished under a running group: someone deleted it (ControlPlane class
    ``WorkloadDeleted``, which the blame table reads as a user interrupt)."""
    message = f"Job {name} was deleted while its group was running"
    return D.JobOutcome(succeeded=False, reason=JobReason.WORKLOAD_FAILED, message=message,
                        failure_class=FailureClass(scope=FailureScope.CONTROL_PLANE,
                                                   reason=ClassReason.WORKLOAD_DELETED,
                                                   message=message))
