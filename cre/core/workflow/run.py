"""The Workflow core's entry point, ``reconcile_workflow(wf, observation, now)``, and the
running phase: track group Jobs, defer or fail, cancel, launch, iterate, and finish with the
verdict. The start (discovery, partition) and deletion phases, the Workflow's settings,
Observation and context, and the helpers both phases share live in
:mod:`cre.core.workflow.reconcile`, which never imports this module; its docstring states the rules
both implement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

import attrs

from cre.api import labels as L
from cre.api.common import TargetSpec
from cre.api.conditions import (
    ConditionType,
    FailureScope,
    GroupPhase,
    IncompleteReason,
    JobReason,
    Verdict,
    WorkflowReason,
)
from cre.api.job import FailureClass, Job, NodeOutlier
from cre.api.meta import NamespacedName
from cre.api.workflow import (
    DependencyRef,
    DependencyScope,
    DiagnoseStage,
    DiagnoseStatus,
    ExcludedNode,
    ExcludedNodeReason,
    GroupStatus,
    IterationGroup,
    IterationRecord,
    StepOutcome,
    StepResolution,
    Workflow,
    WorkflowStatus,
)
from cre.core.common.conditions import set_additive
from cre.core.common.lifecycle import true_member
from cre.core.common.plan import Create, CreateError, Delete, EventSeverity, EventSpec, Patch
from cre.core.common.timeouts import parse_duration
from cre.core.common.wording import count, every
from cre.core.job.thresholds import COMPLETION_GRACE
from cre.core.workflow import deferral as D
from cre.core.workflow import diagnose as DG
from cre.core.workflow import noderesults as NR
from cre.core.workflow.cleanup import job_remains, with_cleanup
from cre.core.workflow.deps import suffix
from cre.core.workflow.groupfleet import judge_groups
from cre.core.workflow.groupjob import workload_tolerations
from cre.core.workflow.overrides import OverrideError, apply_overrides
from cre.core.workflow.reconcile import (
    DEFAULT_WORKFLOW_SETTINGS,
    WorkflowCtx,
    WorkflowObservation,
    WorkflowPlan,
    WorkflowSettings,
    configmap_ref,
    delete_job,
    delete_object,
    deletion_plan,
    group_launch,
    missing_job_outcome,
    result_upsert,
    single_job,
    start_plan,
    unjudged_thresholds,
    write_status,
)
from cre.core.workflow.usable import Usable, too_few, usable_nodes

# A safety bound, not a deadline: the Job tier owns the threshold clock (it gives its verdict
# by measurementTimeout + COMPLETION_GRACE after the Job succeeded, requeued on the injected
# clock and capped). The Workflow waits for that verdict; a Job that still has none this long
# past the Job tier's own deadline is never counted Passed: its group ends as a ControlPlane
# infrastructure abort (ThresholdVerdictMissing), its nodes Uncertified.
VALIDATION_GRACE = timedelta(minutes=5)
#: failureClass.reason of a group whose Job never gave its threshold verdict.
VERDICT_MISSING = "ThresholdVerdictMissing"
# How long a group's re-run waits for a NotReady node of it to come back before leaving it out.
NOT_READY_GRACE = timedelta(seconds=60)


def reconcile_workflow(
    wf: Workflow, observation: WorkflowObservation, now: datetime, *,
    settings: WorkflowSettings = DEFAULT_WORKFLOW_SETTINGS,
) -> WorkflowPlan:
    """The Plan that moves ``wf`` one step towards what ``observation`` calls for."""
    ctx = WorkflowCtx(wf=wf, obs=observation, now=now, settings=settings)
    if wf.metadata.deletion_timestamp is not None:
        return deletion_plan(ctx)
    remaining = (job_remains(j) for j in observation.jobs)
    return with_cleanup(_reconcile(ctx), wf.status, remaining,
                        noun="Job", now=now, generation=ctx.generation)


def _reconcile(ctx: WorkflowCtx) -> WorkflowPlan:
    wf, observation = ctx.wf, ctx.obs
    if L.WORKFLOW_FINALIZER not in wf.metadata.finalizers:
        body = {"metadata": {"finalizers": [*wf.metadata.finalizers, L.WORKFLOW_FINALIZER]}}
        return ctx.plan(patches=(Patch(body=body),))
    current = true_member(wf.status.conditions)
    if current is not None and current.type != ConditionType.IN_PROGRESS:
        return ctx.plan()
    orch = wf.status.orchestration
    if orch is None or orch.total_groups == 0:
        return start_plan(ctx)
    if wf.spec.overrides:
        try:
            effective, _ = apply_overrides(
                wf, platform=orch.detected_platform or "",
                arch=orch.detected_gpu_architecture or "",
                topology_mode="topology" if wf.spec.orchestration.topology else "simple",
                domain_count=len({d for g in wf.status.groups for d in g.domains}))
        except OverrideError as exc:
            return write_status(ctx, wf.status, member=ConditionType.FAILED,
                          reason=WorkflowReason.OVERRIDE_ERROR, message=str(exc))
        ctx = attrs.evolve(ctx, wf=effective)
    conflicts = observation.feedback.create_conflicts
    if conflicts:
        held = ", ".join(f"{c.kind}/{c.name}" for c in conflicts)
        dep = any(c.kind != "Job" for c in conflicts)
        reason = WorkflowReason.DEPENDENCY_NAME_COLLISION if dep \
            else WorkflowReason.JOB_NAME_COLLISION
        return write_status(ctx, ctx.wf.status, member=ConditionType.FAILED, reason=reason,
                      message=f"{held} already exist(s) and is not controlled by Workflow "
                              f"{ctx.name}")
    if observation.feedback.create_rejections:
        return _create_refused(ctx, observation.feedback.create_rejections)
    return advance(ctx)


def _create_refused(ctx: WorkflowCtx, errors: tuple[CreateError, ...]) -> WorkflowPlan:
    """A create refused for good (``DependencyCreationError`` for a dependency such as a
    TrainingRuntime, ``JobCreationError`` for a group's Job): no retry can make it, so the
    Workflow fails at once with the API's message instead of retrying forever."""
    dep = any(e.kind != "Job" for e in errors)
    reason = WorkflowReason.DEPENDENCY_CREATION_ERROR if dep \
        else WorkflowReason.JOB_CREATION_ERROR
    return write_status(ctx, ctx.wf.status, member=ConditionType.FAILED, reason=reason,
                  message="; ".join(e.describe() for e in errors))


@attrs.define
class _Pass:
    """What one pass accumulates before it becomes a Plan."""

    groups: list[GroupStatus]
    refs: list[DependencyRef]
    creates: list[Create] = attrs.field(factory=list)
    deletes: list[Delete] = attrs.field(factory=list)
    # Create-or-replace (the node-result ConfigMaps): after the creates, before the status.
    upserts: list[Create] = attrs.field(factory=list)
    events: list[EventSpec] = attrs.field(factory=list)
    failed: list[D.NodeRecord] = attrs.field(factory=list)
    uncertified: list[D.NodeRecord] = attrs.field(factory=list)
    # The soonest a group waiting on a NotReady node's grace must be looked at (seconds).
    wait: float | None = None
    # Fleet-relative outliers of the Jobs judged in this pass (status.outliers).
    outliers: list[NodeOutlier] = attrs.field(factory=list)

    def status(self, status: WorkflowStatus) -> WorkflowStatus:
        """``status`` with this pass's groups, dependency refs and outliers (a node judged
        again replaces its earlier entry; sorted by node name)."""
        outliers = {o.node_name: o for o in (*status.outliers, *self.outliers)}
        return attrs.evolve(status, groups=tuple(self.groups), dependency_refs=tuple(self.refs),
                            outliers=tuple(outliers[n] for n in sorted(outliers))[:1024])

    def plan_args(self) -> dict[str, Any]:
        return {"creates": (*self.creates, *self.upserts), "deletes": tuple(self.deletes),
                "events": tuple(self.events)}


def deadline_left(ctx: WorkflowCtx) -> timedelta | None:
    """Time left before ``spec.deadline`` (from the Workflow's creation); ``None``: no limit."""
    created = ctx.wf.metadata.creation_timestamp
    if not ctx.wf.spec.deadline or created is None:
        return None
    return created + parse_duration(ctx.wf.spec.deadline) - ctx.now


def advance(ctx: WorkflowCtx) -> WorkflowPlan:
    """One pass of the running phase (bounded by the run's deadline, if it has one)."""
    left = deadline_left(ctx)
    if left is not None and left <= timedelta(0):
        return _deadline_passed(ctx)
    plan = _advance(ctx)
    if left is not None and plan.requeue_after is not None:
        plan = attrs.evolve(plan, requeue_after=min(plan.requeue_after, left.total_seconds()))
    return plan


def _deadline_passed(ctx: WorkflowCtx) -> WorkflowPlan:
    """The deadline passed: cancel every group not finished (their Jobs deleted, their nodes
    Uncertified) and end with the verdict of what finished."""
    status = ctx.wf.status
    p = _Pass(groups=list(status.groups), refs=list(status.dependency_refs))
    why = f"the run's deadline ({ctx.wf.spec.deadline} from its creation) passed"
    cancelled = _cancel_unfinished(
        ctx, p, message=f"Cancelled: {why}",
        records=lambda nodes: [D.NodeRecord(name=n, reason=WorkflowReason.DEADLINE_EXCEEDED,
                                            message=f"not certified: {why}") for n in nodes])
    state = status.orchestration.diagnose if status.orchestration else None
    if state is not None:
        # Suspects a diagnose run had not cleared or confirmed yet are not certified.
        open_ = {n for s in state.steps if s.outcome in (StepOutcome.FAILED, StepOutcome.PENDING)
                 and s.resolution not in (StepResolution.CONFIRMED, StepResolution.LINK_FOUND)
                 for n in s.suspects} - set(state.failed_nodes)
        p.uncertified += [D.NodeRecord(name=n, reason=WorkflowReason.DEADLINE_EXCEEDED,
                                       message=f"not certified: {why} before diagnose judged it")
                          for n in sorted(open_)]
    p.events.append(EventSpec(
        type=EventSeverity.WARNING, reason=WorkflowReason.DEADLINE_EXCEEDED,
        message=f"{why[0].upper()}{why[1:]}: cancelled {len(cancelled)} group(s)"
                + (f": {', '.join(cancelled[:10])}" if cancelled else "")))
    status = p.status(_with_results(ctx, status, p))
    return _final(ctx, status, p, deadline=why)


def _advance(ctx: WorkflowCtx) -> WorkflowPlan:
    status = ctx.wf.status
    assert status.orchestration is not None
    p = _Pass(groups=list(status.groups), refs=list(status.dependency_refs))
    diagnosing = ctx.wf.spec.orchestration.diagnose is not None
    # Under diagnose a failure is narrowed down, never a reason to cancel the siblings.
    tripped = None if diagnosing else _tripped_by(status.groups, ctx.policy)
    for i, group in enumerate(p.groups):
        if group.phase != GroupPhase.RUNNING:
            continue
        result = _track(ctx, group, p)
        if result == "confirm":
            return ctx.plan(asks=(ctx.live,))
        if isinstance(result, GroupStatus):
            p.groups[i] = result
            if tripped is None and not diagnosing and D.trips_fail_fast(
                    phase=result.phase, failure_reason=result.failure_reason,
                    policy=ctx.policy):
                tripped = result.name
    if tripped is not None:
        _cancel(ctx, p, tripped)
    else:
        _launch(ctx, p)
    _sweep_dependencies(ctx, p)
    if not diagnosing and not all(g.phase.terminal for g in status.groups):
        _judge_groups(ctx, p)
    status = p.status(_with_results(ctx, status, p))
    if all(g.phase.terminal for g in p.groups):
        if diagnosing:
            return _diagnose_round(ctx, status, p)
        return _iteration_done(ctx, status, p)
    orch = status.orchestration
    assert orch is not None
    running = sum(1 for g in p.groups if g.phase == GroupPhase.RUNNING)
    reason = WorkflowReason.JOB_CREATED if p.creates else WorkflowReason.JOB_RUNNING
    requeue = ctx.settings.requeue if p.wait is None else min(ctx.settings.requeue, p.wait)
    return write_status(ctx, status, member=ConditionType.IN_PROGRESS, reason=reason,
                        message=f"Iteration {orch.current_iteration}/{ctx.iterations}: "
                                f"{count(running, 'group')} running",
                        requeue_after=requeue, **p.plan_args())


def _judge_groups(ctx: WorkflowCtx, p: _Pass) -> None:
    """The group-level relative rule, in the pass where the iteration's last group finished
    (cre.core.workflow.groupfleet): outlier groups' nodes in status.outliers, a Warning event
    per outlier group, and under Fail the group Failed with its nodes recorded."""
    perf = ctx.wf.spec.validation.performance if ctx.wf.spec.validation else None
    judged = judge_groups(p.groups, perf.relative_threshold if perf is not None else None)
    p.groups = list(judged.groups)
    p.outliers += judged.outliers
    p.failed += judged.failed
    p.events += [EventSpec(type=EventSeverity.WARNING, reason=WorkflowReason.GROUP_OUTLIER,
                           message=o.message) for o in judged.found]


def _tripped_by(groups: tuple[GroupStatus, ...], policy: D.EffectivePolicy) -> str | None:
    return next((g.name for g in groups if D.trips_fail_fast(
        phase=g.phase, failure_reason=g.failure_reason, policy=policy)), None)


def _awaiting_validation(ctx: WorkflowCtx, job: Job) -> D.JobOutcome | bool:
    """Whether a Job that succeeded with thresholds still waits for its threshold verdict
    (``True``), has it or needs none (``False``), or is past the safety bound without it (the
    outcome that group ends on: never Passed). Never while the Job tier does not judge."""
    if not ctx.settings.thresholds_judged or not job.spec.thresholds:
        return False
    if any(c.type == ConditionType.VALIDATION_FAILED for c in job.status.conditions):
        return False
    done = next((c.last_transition_time for c in job.status.conditions
                 if c.type == ConditionType.SUCCEEDED), ctx.now)
    bound = parse_duration(job.spec.measurement_timeout) + COMPLETION_GRACE + VALIDATION_GRACE
    if ctx.now < done + bound:
        return True
    message = (f"Job {job.metadata.name} gave no threshold verdict within "
               f"{int(bound.total_seconds())}s after it "
               "succeeded: thresholds not evaluated, nodes not certified")
    return D.JobOutcome(succeeded=False, reason=JobReason.THRESHOLD_NO_DATA, message=message,
                        failure_class=FailureClass(scope=FailureScope.CONTROL_PLANE,
                                                   reason=VERDICT_MISSING, message=message))


def _unmeasured_cause(outcome: D.JobOutcome) -> D.JobOutcome:
    """A threshold the Job tier could not evaluate (``ThresholdNoData``) is judged by its cause,
    not as a miss: the user's configuration (scope Configuration: group Failed at once, nodes
    Uncertified) or the infrastructure (ControlPlane / Platform: deferred, Incomplete). Only a
    Workload cause (the workload printed no table) stays a threshold failure of the group."""
    fc = outcome.failure_class
    if (outcome.validation and outcome.reason == JobReason.THRESHOLD_NO_DATA and fc is not None
            and fc.scope in (FailureScope.CONFIGURATION, FailureScope.CONTROL_PLANE,
                             FailureScope.PLATFORM)):
        return attrs.evolve(outcome, validation=False)
    return outcome


def _track(ctx: WorkflowCtx, group: GroupStatus, p: _Pass) -> GroupStatus | str | None:
    name = group.job_ref.name if group.job_ref else ""
    job = ctx.obs.job(name)
    if job is None:
        if not ctx.read_live:
            return "confirm"
        outcome = missing_job_outcome(name)
    else:
        if job.metadata.deletion_timestamp is not None:
            return None
        found = D.job_outcome(job)
        if found is None:
            return None
        if found.succeeded:
            verdict = _awaiting_validation(ctx, job)
            if verdict is True:
                return None
            if isinstance(verdict, D.JobOutcome):
                found = verdict
        outcome = _unmeasured_cause(found)
    decision = D.decide(nodes=active_nodes(group), retries=group.retries,
                        infra_retries=group.infra_retries, outcome=outcome, policy=ctx.policy,
                        now=ctx.now, observed={n.name: n for n in ctx.obs.nodes})
    if decision.action == D.Action.WAIT:
        # A NotReady node the failure names may still come back: look again at the deadline.
        p.wait = decision.wait if p.wait is None else min(p.wait, decision.wait)
        if group.message is None or not group.message.startswith("Waiting"):
            p.events.append(EventSpec(
                type=EventSeverity.NORMAL, reason=WorkflowReason.NODE_NOT_READY_GRACE,
                message=f"Group {group.name}: waiting up to {int(decision.wait)}s for NotReady "
                        f"node(s) {', '.join(r.name for r in outcome.blamed)} to come back "
                        "before blaming them"))
        waiting = ", ".join(r.name for r in outcome.blamed)
        return attrs.evolve(group, failure_class=outcome.failure_class,
                            message=f"Waiting for NotReady node(s) {waiting} to come back")
    failed, uncertified = decision.failed, decision.uncertified
    if ctx.wf.spec.orchestration.diagnose is not None:
        # Diagnose names the nodes of a genuine failure itself (only when confirmed); a
        # step's peers are known-good and its suspects are judged by the run.
        failed = tuple(r for r in failed if r.hardware)
        if _diagnose_probe(ctx, group.name):
            uncertified = ()
    p.failed += failed
    p.uncertified += uncertified
    if job is not None:
        p.outliers += job.status.outliers
    group = attrs.evolve(group, failure_class=outcome.failure_class,
                         failure_reason=None if outcome.succeeded
                         else decision.reason or outcome.failure_reason,
                         message=None if outcome.succeeded
                         else decision.message or outcome.message,
                         bus_bandwidth_gbps=job.status.bus_bandwidth_gbps if job else None)
    if decision.action in (D.Action.RETRY, D.Action.INFRA_RETRY):
        if job is not None:
            p.deletes.append(delete_job(job))
        infra = decision.action == D.Action.INFRA_RETRY
        new = attrs.evolve(group, phase=GroupPhase.PENDING, job_ref=None, start_time=None,
                           completion_time=ctx.now, retries=group.retries + (not infra),
                           infra_retries=group.infra_retries + infra)
        if infra:
            fc = outcome.failure_class
            p.events.append(EventSpec(
                type=EventSeverity.NORMAL, reason=WorkflowReason.INFRA_ABORT_DEFERRED,
                message=f"Group {group.name}: {fc.scope if fc else 'infrastructure'} abort "
                        f"({fc.reason if fc else outcome.reason}) deferred, siblings continue; "
                        f"infra retry {new.infra_retries}/{ctx.policy.infra_retries}"))
        return new
    if decision.action == D.Action.INFRA_ABORT:
        fc = outcome.failure_class
        p.events.append(EventSpec(
            type=EventSeverity.WARNING, reason=WorkflowReason.INFRA_ABORT_DEFERRED,
            message=f"Group {group.name} ended on an infrastructure abort "
                    f"({f'{fc.scope}/{fc.reason}' if fc else outcome.reason}) after "
                    f"{count(group.infra_retries, 'infra retry')}: "
                    f"{len(decision.uncertified)} node(s) "
                    "Uncertified, siblings continue"))
    return attrs.evolve(group, phase=decision.phase, completion_time=ctx.now)


def _cancel_unfinished(
    ctx: WorkflowCtx, p: _Pass, *, message: str,
    records: Callable[[tuple[str, ...]], Iterable[D.NodeRecord]],
) -> list[str]:
    """Cancel every group not finished: delete a running group's Job, mark the group
    Cancelled with ``message``, record its nodes as ``records`` says; the cancelled names."""
    cancelled = []
    for i, g in enumerate(p.groups):
        if g.phase.terminal:
            continue
        if g.phase == GroupPhase.RUNNING and g.job_ref is not None:
            job = ctx.obs.job(g.job_ref.name)
            if job is not None and job.metadata.deletion_timestamp is None:
                p.deletes.append(delete_job(job))
        p.groups[i] = attrs.evolve(g, phase=GroupPhase.CANCELLED, completion_time=ctx.now,
                                   message=message)
        p.uncertified += list(records(active_nodes(g)))
        cancelled.append(g.name)
    return cancelled


def _cancel(ctx: WorkflowCtx, p: _Pass, by: str) -> None:
    cancelled = _cancel_unfinished(
        ctx, p, message=f"Cancelled by FailFast: group {by} failed",
        records=lambda nodes: D.cancelled_records(nodes, by_group=by))
    if cancelled:
        p.events.append(EventSpec(
            type=EventSeverity.WARNING, reason=WorkflowReason.GROUPS_CANCELLED,
            message=f"FailFast: group {by} failed; cancelled {len(cancelled)} sibling "
                    f"group(s): {', '.join(cancelled[:10])}"))


def active_nodes(group: GroupStatus) -> tuple[str, ...]:
    """The nodes the group's current launch runs on (its nodes less the excluded ones)."""
    left_out = {e.name for e in group.excluded_nodes}
    return tuple(n for n in group.nodes if n not in left_out)


def _launch(ctx: WorkflowCtx, p: _Pass) -> None:
    orch = ctx.wf.status.orchestration
    assert orch is not None
    execution = ctx.wf.spec.orchestration.execution
    limit = execution.max_concurrent if execution else 0
    running = [g for g in p.groups if g.phase == GroupPhase.RUNNING]
    busy = {n for g in running for n in active_nodes(g)}
    failed: dict[str, str] | None = None
    tolerations = workload_tolerations(ctx.wf)
    target = ctx.wf.spec.orchestration.target or TargetSpec()
    for i, g in enumerate(p.groups):
        if g.phase != GroupPhase.PENDING:
            continue
        if limit > 0 and len(running) >= limit:
            break
        if failed is None:
            failed = {r.name: r.message or r.reason for r in _records(ctx, NR.FAILED, p)}
        usable = usable_nodes(nodes=g.nodes, views=ctx.obs.nodes, failed=failed,
                              target=target, tolerations=tolerations)
        if busy & set(usable.nodes):
            continue  # never two running groups on one node (overflow groups wait)
        if _may_return(ctx, g, usable):
            continue  # a re-run waits a little for a node that just went NotReady
        _left_out(ctx, p, g, usable.excluded)
        if too_few(planned=len(g.nodes), left=len(usable.nodes)):
            p.groups[i] = _unlaunchable(ctx, p, g, usable)
            continue
        creates, refs, name = group_launch(ctx, g, iteration=orch.current_iteration,
                                           nodes=usable.nodes)
        p.creates += creates
        p.refs += refs
        new = attrs.evolve(g, phase=GroupPhase.RUNNING, start_time=ctx.now,
                           completion_time=None, excluded_nodes=usable.excluded,
                           job_ref=NamespacedName(name=name, namespace=ctx.namespace))
        p.groups[i] = new
        running.append(new)
        busy |= set(usable.nodes)


def _may_return(ctx: WorkflowCtx, g: GroupStatus, usable: Usable) -> bool:
    """A re-run (the group's last attempt ended at ``completion_time``) holds back for up to
    ``NOT_READY_GRACE`` while one of its nodes is NotReady: a node that blinks comes back and
    is tested; one that stays away is left out after the grace."""
    if g.completion_time is None or ctx.now >= g.completion_time + NOT_READY_GRACE:
        return False
    return any(e.reason == ExcludedNodeReason.NOT_READY for e in usable.excluded)


def _left_out(ctx: WorkflowCtx, p: _Pass, g: GroupStatus,
              excluded: tuple[ExcludedNode, ...]) -> None:
    """Record the nodes a launch left out: Uncertified (a Failed one stays Failed), one event."""
    if not excluded:
        return
    p.uncertified += [D.NodeRecord(name=e.name, reason=str(e.reason), message=e.message,
                                   scope=str(FailureScope.NODE))
                      for e in excluded if e.reason != ExcludedNodeReason.FAILED]
    shown = "; ".join(f"{e.name} ({e.reason}: {e.message})" for e in excluded[:5])
    more = f" and {len(excluded) - 5} more" if len(excluded) > 5 else ""
    p.events.append(EventSpec(
        type=EventSeverity.WARNING, reason=WorkflowReason.NODES_EXCLUDED_FROM_GROUP,
        message=f"Group {g.name}: left out {len(excluded)} of {len(g.nodes)} node(s): "
                f"{shown}{more}"))


def _unlaunchable(ctx: WorkflowCtx, p: _Pass, g: GroupStatus, usable: Usable) -> GroupStatus:
    """A group too few of whose nodes are usable: it ends InfraAborted, the rest Uncertified."""
    message = (f"Group {g.name} cannot run: {len(usable.nodes)} of its {len(g.nodes)} node(s) "
               f"usable ({', '.join(f'{e.name}: {e.reason}' for e in usable.excluded[:5])})")
    fc = FailureClass(scope=FailureScope.NODE, reason=WorkflowReason.TOO_FEW_USABLE_NODES,
                      message=message)
    p.uncertified += [D.NodeRecord(name=n, reason=WorkflowReason.TOO_FEW_USABLE_NODES,
                                   message=message, scope=str(FailureScope.NODE))
                      for n in usable.nodes]
    p.events.append(EventSpec(type=EventSeverity.WARNING,
                              reason=WorkflowReason.TOO_FEW_USABLE_NODES, message=message))
    return attrs.evolve(g, phase=GroupPhase.INFRA_ABORTED, completion_time=ctx.now,
                        excluded_nodes=usable.excluded, failure_class=fc,
                        failure_reason=WorkflowReason.TOO_FEW_USABLE_NODES, message=message,
                        job_ref=None)


def _needed(ctx: WorkflowCtx, p: _Pass) -> set[str]:
    """Suffixes of the dependency copies running groups use."""
    orch = ctx.wf.status.orchestration
    assert orch is not None
    single = single_job(ctx)
    out = set()
    for g in p.groups:
        if g.phase == GroupPhase.RUNNING:
            sfx = suffix(workflow_uid=ctx.uid, group=g.name, iteration=orch.current_iteration,
                         single=single)
            attempt = g.retries + g.infra_retries
            out.add(sfx + (f"-r{attempt}" if attempt else ""))
    return out


def _sweep_dependencies(ctx: WorkflowCtx, p: _Pass) -> None:
    """Delete job-scoped copies no running group uses once their pods drained; drop the refs
    of copies that are gone."""
    # The suffixes by length: a name ends with one when its tail of that length is among
    # them (a set lookup per length, not an endswith per running group: 625 groups made the
    # sweep quadratic).
    tails: dict[int, set[str]] = {}
    for sfx in _needed(ctx, p):
        tails.setdefault(len(sfx), set()).add(sfx)

    def needed(name: str) -> bool:
        return any(not n or name[-n:] in sfxs for n, sfxs in tails.items())

    busy = {j.metadata.labels.get(L.GROUP_LABEL) for j in ctx.obs.jobs
            if ctx.obs.active_pods.get(j.metadata.name or "", 0) > 0}
    present = {(o.kind, o.name): o for o in ctx.obs.dependencies}
    created_now = {(c.kind, c.name) for c in p.creates}
    keep: list[DependencyRef] = []
    for ref in p.refs:
        if ref.scope != DependencyScope.JOB or needed(ref.name) \
                or (ref.kind, ref.name) in created_now or ref.group_name in busy:
            keep.append(ref)
            continue
        obj = present.get((ref.kind, ref.name))
        if obj is None:
            continue  # gone: forget it
        keep.append(ref)
        if obj.owned and not obj.terminating:
            p.deletes.append(delete_object(obj))
    p.refs = keep


def _with_results(ctx: WorkflowCtx, status: WorkflowStatus, p: _Pass) -> WorkflowStatus:
    for kind, new in ((NR.FAILED, p.failed), (NR.UNCERTIFIED, p.uncertified)):
        if not new:
            continue
        name = NR.configmap_name(kind, ctx.uid)
        old = NR.read_records(ctx.obs.config_maps.get(name), kind)
        merged = NR.merge_records(old, new)
        if merged != old:
            p.upserts.append(result_upsert(ctx, kind, NR.encode_records(merged)))
        ref = configmap_ref(kind, ctx.uid)
        status = attrs.evolve(status, failed_nodes_ref=ref) if kind == NR.FAILED \
            else attrs.evolve(status, uncertified_nodes_ref=ref)
    return status


def _records(ctx: WorkflowCtx, kind: str, p: _Pass) -> tuple[D.NodeRecord, ...]:
    old = NR.read_records(ctx.obs.config_maps.get(NR.configmap_name(kind, ctx.uid)), kind)
    return NR.merge_records(old, p.failed if kind == NR.FAILED else p.uncertified)


def _only_failed_nodes_left_out(g: GroupStatus) -> bool:
    return (g.failure_reason == WorkflowReason.TOO_FEW_USABLE_NODES
            and all(e.reason == ExcludedNodeReason.FAILED for e in g.excluded_nodes))


def _outage(ctx: WorkflowCtx, status: WorkflowStatus, p: _Pass) -> WorkflowStatus:
    orch = status.orchestration
    assert orch is not None
    # A group that could not launch because its nodes were already Failed says nothing about
    # the cluster.
    groups = [g for g in p.groups if not _only_failed_nodes_left_out(g)]
    aborted = [g for g in groups if g.phase == GroupPhase.INFRA_ABORTED]
    if not D.suspected_outage(groups=len(groups), aborted=len(aborted),
                              percent=ctx.policy.outage_threshold_percent):
        return status
    scopes = sorted({f"{g.failure_class.scope}/{g.failure_class.reason}"
                     for g in aborted if g.failure_class})
    conditions, event = set_additive(
        status.conditions, type_=ConditionType.SUSPECTED_CLUSTER_OUTAGE, status=True,
        reason=WorkflowReason.SUSPECTED_CLUSTER_OUTAGE,
        message=f"{len(aborted)} of {len(groups)} groups of iteration "
                f"{orch.current_iteration} ended on an infrastructure abort "
                f"({', '.join(scopes)}): look at the cluster, not the nodes",
        now=ctx.now, generation=ctx.generation, warn=True)
    if event is not None:
        p.events.append(event)
    return attrs.evolve(status, conditions=conditions)


def _iteration_done(ctx: WorkflowCtx, status: WorkflowStatus, p: _Pass) -> WorkflowPlan:
    orch = status.orchestration
    assert orch is not None
    status = _outage(ctx, status, p)
    stopped = any(g.phase == GroupPhase.CANCELLED for g in p.groups) or \
        _tripped_by(tuple(p.groups), ctx.policy) is not None
    if orch.current_iteration >= ctx.iterations or stopped:
        return _final(ctx, status, p)
    if status != ctx.wf.status or p.deletes or p.upserts:
        # Record the results first; the iteration rolls over on a later pass.
        return write_status(ctx, status, member=ConditionType.IN_PROGRESS,
                            reason=WorkflowReason.JOB_RUNNING,
                            message=f"Iteration {orch.current_iteration}/{ctx.iterations}: "
                                    "all groups finished", requeue_after=ctx.settings.immediate,
                            **p.plan_args())
    left = [j for j in ctx.obs.jobs if j.metadata.deletion_timestamp is None]
    if left:
        return ctx.plan(deletes=tuple(delete_job(j) for j in left),
                        requeue_after=ctx.settings.requeue)
    if ctx.obs.jobs:
        return ctx.plan(requeue_after=ctx.settings.requeue)  # still terminating
    if not ctx.read_live:
        return ctx.plan(asks=(ctx.live,))
    record = IterationRecord(iteration=orch.current_iteration, groups=tuple(
        IterationGroup(name=g.name, phase=g.phase,
                       job_name=g.job_ref.name if g.job_ref else None, start_time=g.start_time,
                       completion_time=g.completion_time, failure_class=g.failure_class,
                       failure_reason=g.failure_reason) for g in p.groups))
    fresh = tuple(GroupStatus(name=g.name, nodes=g.nodes, domains=g.domains,
                              domain_node_counts=g.domain_node_counts, overflow=g.overflow)
                  for g in p.groups)
    orch = attrs.evolve(orch, iteration_history=(*orch.iteration_history, record),
                        current_iteration=orch.current_iteration + 1,
                        completed_iterations=orch.completed_iterations + 1)
    status = attrs.evolve(status, orchestration=orch, groups=fresh)
    return write_status(ctx, status, member=ConditionType.IN_PROGRESS,
                        reason=WorkflowReason.ITERATION_COMPLETED,
                        message=f"Iteration {record.iteration}/{ctx.iterations} completed",
                        requeue_after=ctx.settings.immediate)


def _diagnose_probe(ctx: WorkflowCtx, group: str) -> bool:
    """Whether ``group`` is a step diagnose planned (not a screening group)."""
    orch = ctx.wf.status.orchestration
    state = orch.diagnose if orch is not None else None
    return state is not None and any(s.name == group and s.stage != DiagnoseStage.SCREENING
                                     for s in state.steps)


def _counts_under_diagnose(state: DiagnoseStatus, group: str) -> bool:
    """Whether a Failed group counts as a genuine failure of a diagnose run: a failure the run
    narrowed down counts only through the step that confirmed a node or found a bad link."""
    step = next((s for s in state.steps if s.name == group), None)
    return step is None or step.outcome != StepOutcome.FAILED or step.resolution in (
        StepResolution.CONFIRMED, StepResolution.CONFIRMED_TOGETHER, StepResolution.LINK_FOUND)


def _diagnose_round(ctx: WorkflowCtx, status: WorkflowStatus, p: _Pass) -> WorkflowPlan:
    """Every group finished: plan the next diagnose round (new groups, launched on the next
    pass), or, when nothing is left to narrow down, record what it found and end."""
    spec = ctx.wf.spec.orchestration.diagnose
    orch = status.orchestration
    assert spec is not None and orch is not None
    state = orch.diagnose or DG.start(p.groups)
    state = DG.record(state, outcomes={g.name: DG.outcome_of(g) for g in p.groups},
                      job_names={g.name: g.job_ref.name for g in p.groups if g.job_ref})
    spent = sum(1 + g.retries + g.infra_retries for g in p.groups if g.job_ref is not None)
    key = spec.topology_key
    members = {n for g in p.groups for n in g.nodes}
    domain_of = {v.name: d for v in ctx.obs.nodes if key and v.name in members
                 and (d := v.label(key)) is not None}
    state = DG.advance(state, jobs_spent=spent, params=DG.Params(
        min_group_size=spec.min_group_size, group_size=orch.nodes_per_job,
        domain_of=domain_of))
    orch = attrs.evolve(orch, diagnose=state)
    known = {g.name for g in p.groups}
    new = [s for s in state.steps if s.name not in known]
    if new:
        p.groups += [GroupStatus(name=s.name, nodes=tuple(sorted({*s.suspects, *s.peers})),
                                 domains=s.domains) for s in new]
        status = attrs.evolve(status, orchestration=orch, groups=tuple(p.groups))
        shown = "; ".join(f"{s.name}: {', '.join(s.suspects)}" for s in new[:5])
        message = (f"Diagnose round {state.round} ({state.stage}): "
                   f"{count(len(new), 'step')} planned, {state.jobs_spent} of "
                   f"{state.job_budget} Jobs spent")
        p.events.append(EventSpec(type=EventSeverity.NORMAL, reason=WorkflowReason.DIAGNOSE_ROUND,
                                  message=f"{message}; suspects {shown}"))
        return write_status(ctx, status, member=ConditionType.IN_PROGRESS,
                            reason=WorkflowReason.DIAGNOSE_ROUND, message=message,
                            requeue_after=ctx.settings.immediate, **p.plan_args())
    failed, uncertified = DG.records(state, scopes={
        g.name: str(g.failure_class.scope) for g in p.groups if g.failure_class is not None})
    p.failed += failed
    p.uncertified += uncertified
    # The node results once, with what the run found (the pass wrote none yet for them).
    names = {NR.configmap_name(kind, ctx.uid) for kind in (NR.FAILED, NR.UNCERTIFIED)}
    p.upserts = [u for u in p.upserts if u.name not in names]
    status = _with_results(ctx, attrs.evolve(status, orchestration=orch), p)
    return _final(ctx, _outage(ctx, status, p), p)


def _final(ctx: WorkflowCtx, status: WorkflowStatus, p: _Pass, *,
           deadline: str = "") -> WorkflowPlan:
    orch = status.orchestration
    assert orch is not None
    all_groups: list[GroupStatus | IterationGroup] = [
        *(g for r in orch.iteration_history for g in r.groups), *p.groups]
    phases = [g.phase for g in all_groups]
    diag = orch.diagnose if ctx.wf.spec.orchestration.diagnose is not None else None
    reasons = [g.failure_reason for g in all_groups if g.phase == GroupPhase.FAILED
               and (diag is None or _counts_under_diagnose(diag, g.name))]
    genuine = len(reasons)
    aborts = phases.count(GroupPhase.INFRA_ABORTED)
    failed_records = _records(ctx, NR.FAILED, p)
    failed = {r.name for r in failed_records}
    broken = [r for r in failed_records if r.hardware]
    uncertified = {r.name for r in _records(ctx, NR.UNCERTIFIED, p)} - failed
    nodes = {n for g in p.groups for n in g.nodes}
    verdict = D.verdict_of(genuine_failures=genuine, infra_aborts=aborts,
                           uncertified=len(uncertified), excluded=len(orch.excluded_nodes),
                           broken=len(broken))
    if deadline:
        # Cancelled by the deadline: never Passed; Incomplete unless a genuine failure.
        verdict = D.FinalVerdict(
            verdict=Verdict.FAILED if genuine or broken else Verdict.INCOMPLETE,
            incomplete_reason=IncompleteReason.DEADLINE_EXCEEDED)
    p.upserts.append(result_upsert(ctx, NR.SUCCEEDED,
                                   NR.encode_names(nodes - failed - uncertified)))
    status = attrs.evolve(
        status, verdict=verdict.verdict,
        succeeded_nodes_ref=configmap_ref(NR.SUCCEEDED, ctx.uid),
        orchestration=attrs.evolve(orch, completed_iterations=orch.completed_iterations + 1,
                                   uncertified_nodes=len(uncertified)))
    incomplete = verdict.verdict == Verdict.INCOMPLETE
    note = {IncompleteReason.INFRA_ABORTED:
            f"{len(uncertified)} node(s) not certified (infrastructure aborts)",
            IncompleteReason.NODES_EXCLUDED:
            f"{len(orch.excluded_nodes)} node(s) excluded by discovery: {orch.exclusion_reason}",
            IncompleteReason.DEADLINE_EXCEEDED:
            f"{len(uncertified)} node(s) not certified: {deadline}",
            IncompleteReason.COMPLETE: "every target node was certified"}[
        verdict.incomplete_reason]
    conditions, event = set_additive(
        status.conditions, type_=ConditionType.INCOMPLETE, status=incomplete,
        reason=verdict.incomplete_reason if incomplete else IncompleteReason.COMPLETE,
        message=note if incomplete else "", now=ctx.now, generation=ctx.generation, warn=True)
    if event is not None:
        p.events.append(event)
    validation = D.VALIDATION in reasons
    missed = ""
    if validation:
        first = next((g for g in p.groups if g.phase == GroupPhase.FAILED
                      and g.failure_reason == D.VALIDATION and g.message), None)
        missed = f"{first.name}: {first.message}" if first is not None else ""
        conditions, _ = set_additive(
            conditions, type_=ConditionType.VALIDATION_FAILED, status=True,
            reason=WorkflowReason.JOB_VALIDATION_FAILED,
            message="One or more Jobs missed a performance threshold"
                    + (f" (first: {missed})" if missed else ""), now=ctx.now,
            generation=ctx.generation)
    status = attrs.evolve(status, conditions=conditions)
    iterations = orch.current_iteration
    if verdict.verdict == Verdict.FAILED:
        reason = D.most_severe([D.workflow_reason(r) for r in reasons]
                               + ([WorkflowReason.JOB_HARDWARE_FAILED] if broken else []))
        assert reason is not None
        message = _failure_message(reason, genuine=genuine, iterations=iterations,
                                   broken=broken, groups=all_groups, missed=missed)
        if deadline:
            left = count(len(uncertified), "node")
            message += f"; ended early: {deadline} ({left} not certified)"
        if diag is not None:
            message = f"{DG.summary(diag)}; {message}"
        return write_status(ctx, status, member=ConditionType.FAILED, reason=reason,
                            message=message, **p.plan_args())
    if deadline:
        return write_status(ctx, status, member=ConditionType.SUCCEEDED,
                            reason=WorkflowReason.DEADLINE_EXCEEDED,
                            message=f"Ended early: {deadline}; verdict Incomplete: {note}",
                            **p.plan_args())
    message = f"{every(iterations, 'iteration')} completed successfully"
    if unjudged_thresholds(ctx):
        message += "; performance thresholds were not judged"
    if incomplete:
        message += f"; verdict Incomplete: {note}"
    if diag is not None:
        message += f"; {DG.summary(diag)}"
    return write_status(ctx, status, member=ConditionType.SUCCEEDED,
                        reason=WorkflowReason.JOB_COMPLETED, message=message, **p.plan_args())


def _failure_message(reason: WorkflowReason, *, genuine: int, iterations: int,
                     broken: list[D.NodeRecord], groups: list[GroupStatus | IterationGroup],
                     missed: str) -> str:
    """The Failed condition's message: the headline cause first, then the count."""
    summary = (f"{count(genuine, 'group')} failed across {count(iterations, 'iteration')}"
               if genuine else
               f"the other groups finished across {count(iterations, 'iteration')}")
    if reason == WorkflowReason.JOB_HARDWARE_FAILED:
        shown = "; ".join(f"{r.name}: {r.message}" for r in broken[:5])
        more = f" (and {len(broken) - 5} more)" if len(broken) > 5 else ""
        return f"Broken node(s) found: {shown}{more}; {summary}"
    if reason == WorkflowReason.JOB_VALIDATION_FAILED and missed:
        return f"{summary}; {missed}"
    if reason in (WorkflowReason.CONFIGURATION_ERROR, WorkflowReason.USER_INTERRUPTED):
        first = next((g for g in groups if isinstance(g, GroupStatus)
                      and g.phase == GroupPhase.FAILED
                      and D.workflow_reason(g.failure_reason) == reason and g.message), None)
        return f"{first.name}: {first.message}; {summary}" if first is not None else summary
    return summary
