"""The Certification lifecycle as a pure function: ``reconcile_certification(cert, obs, now,
catalog=...)``.

A Certification runs catalog categories one after another, in spec order, each as one
Workflow (built by ``cre.core.certification.build``):

* Before anything is created, every category is checked against the catalog and its options
  (unknown category, unsupported option): any problem fails the Certification at once, naming
  the field, with nothing created. A ``nodesPerJob`` above the eligible nodes is no problem:
  it is clamped to them (as the reference does), said in an event and the category's message.
* While the target matches no node, the Certification waits (``WaitingForNodes``) for up to
  5 minutes from its creation, then the category fails.
* A category ends with its Workflow: Succeeded (verdict Passed or Incomplete) or Failed; a
  failed category does not stop the next one. Its status mirrors the Workflow's node-result
  ConfigMap refs.
* When every category is done: Failed if any failed, with the most severe failed category as
  the headline (:func:`headline`: ``JobHardwareFailed`` > ``WorkflowFailed`` >
  ``WorkflowValidationFailed`` > ``ConfigurationError`` > ``UserInterrupted``, that category's
  own cause in the message), else Succeeded (``AllWorkflowsSucceeded``); the verdict
  summarises the categories (Failed beats Incomplete beats Passed), ``Incomplete=True`` when it
  is Incomplete, and ``status.categories`` reads ``<passed>/<total>`` for ``kubectl get``. A
  Workflow's ``SuspectedClusterOutage`` is copied onto the Certification.
* Deletion removes the Workflows it controls (UID preconditions), waits until they are gone
  (confirmed live), then drops the finalizer.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Final

import attrs

from cre.api import labels as L
from cre.api.certification import (
    CategoryStatus,
    Certification,
    CertificationStatus,
    GroupBandwidth,
)
from cre.api.conditions import (
    CategoryState,
    CertificationReason,
    ConditionType,
    IncompleteReason,
    Phase,
    Verdict,
    WorkflowReason,
)
from cre.api.errors import describe
from cre.api.meta import ConditionStatus, NamespacedName
from cre.api.validate import validate
from cre.api.workflow import Workflow
from cre.catalog.model import Catalog
from cre.core.certification.build import (
    BuildError,
    build_workflow,
    clamp_note,
    discover_for,
    entry_name,
    precheck,
)
from cre.core.common.conditions import set_additive, set_trio
from cre.core.common.lifecycle import true_member
from cre.core.common.observed import NodeView
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
from cre.core.common.timeouts import parse_duration
from cre.core.common.wording import every
from cre.core.workflow import deferral as D
from cre.core.workflow.cleanup import with_cleanup, workflow_remains
from cre.core.workflow.discovery import DiscoveryFailure, describe_target, waiting_detail

CertificationPlan = Plan[CertificationStatus]
NODE_WAIT: Final = timedelta(minutes=5)


@attrs.frozen(kw_only=True)
class CertificationSettings:
    """Tunables of the Certification core."""

    requeue: float = 15.0
    immediate: float = 0.05
    node_wait: timedelta = NODE_WAIT


DEFAULT_CERTIFICATION_SETTINGS: Final = CertificationSettings()


@attrs.frozen(kw_only=True)
class CertificationObservation:
    """What the Certification core reads: GPU nodes, its Workflows (listed live when
    ``feedback`` holds the answered :func:`live_read`), create conflicts."""

    nodes: tuple[NodeView, ...] = ()
    workflows: tuple[Workflow, ...] = ()
    feedback: Feedback = attrs.field(factory=Feedback)

    def workflow(self, name: str) -> Workflow | None:
        """The observed Workflow of that name."""
        return next((w for w in self.workflows if w.metadata.name == name), None)


@attrs.frozen(kw_only=True)
class _Ctx:
    cert: Certification
    obs: CertificationObservation
    now: datetime
    catalog: Catalog
    settings: CertificationSettings

    def plan(self, **kwargs: Any) -> CertificationPlan:
        return Plan(resource_version=self.cert.metadata.resource_version or "", **kwargs)

    @property
    def live(self) -> ListLive:
        """The ask: the Certification's Workflows, listed live."""
        return live_read(self.cert.metadata.name or "")

    def owns(self, wf: Workflow) -> bool:
        return any(o.controller and o.uid == self.cert.metadata.uid
                   for o in wf.metadata.owner_references)


def reconcile_certification(
    cert: Certification, observation: CertificationObservation, now: datetime, *,
    catalog: Catalog, settings: CertificationSettings = DEFAULT_CERTIFICATION_SETTINGS,
) -> CertificationPlan:
    """The Plan that moves ``cert`` one step on (see the module docstring)."""
    ctx = _Ctx(cert=cert, obs=observation, now=now, catalog=catalog, settings=settings)
    if cert.metadata.deletion_timestamp is not None:
        return _deletion(ctx)
    owned = (w for w in ctx.obs.workflows if ctx.owns(w))
    return with_cleanup(_reconcile(ctx), cert.status, (workflow_remains(w) for w in owned),
                        noun="Workflow", now=now, generation=cert.metadata.generation)


def _reconcile(ctx: _Ctx) -> CertificationPlan:
    cert, catalog = ctx.cert, ctx.catalog
    if L.CERTIFICATION_FINALIZER not in cert.metadata.finalizers:
        body = {"metadata": {"finalizers": [*cert.metadata.finalizers,
                                            L.CERTIFICATION_FINALIZER]}}
        return ctx.plan(patches=(Patch(body=body),))
    current = true_member(cert.status.conditions)
    if current is not None and current.type != ConditionType.IN_PROGRESS:
        return ctx.plan()
    status = cert.status
    if not status.category_statuses:
        problems = tuple(str(e) for e in validate(cert) if e.path.startswith("spec"))
        problems += precheck(cert, catalog)
        if problems:
            unknown = any("unknown category" in p for p in problems)
            return _write(ctx, status, member=ConditionType.FAILED,
                          reason=CertificationReason.CATEGORY_NOT_FOUND if unknown
                          else CertificationReason.INVALID_SPEC,
                          message=f"{describe(cert, 'Certification')}: {'; '.join(problems)}")
        status = attrs.evolve(status, category_statuses=tuple(
            CategoryStatus(domain=c.domain, variant=c.variant) for c in cert.spec.categories))
    return _advance(ctx, status)


def _write(ctx: _Ctx, status: CertificationStatus, *, member: ConditionType, reason: str,
           message: str, events: tuple[EventSpec, ...] = (), **plan: Any) -> CertificationPlan:
    conditions, event = set_trio(status.conditions, member=member, reason=reason,
                                 message=message, now=ctx.now,
                                 generation=ctx.cert.metadata.generation)
    phase = {ConditionType.SUCCEEDED: Phase.SUCCEEDED, ConditionType.FAILED: Phase.FAILED}.get(
        member, Phase.RUNNING if status.category_statuses else Phase.PENDING)
    passed = sum(1 for c in status.category_statuses if c.status == CategoryState.SUCCEEDED)
    status = attrs.evolve(status, conditions=conditions, phase=phase,
                          observed_generation=ctx.cert.metadata.generation,
                          categories=f"{passed}/{len(ctx.cert.spec.categories)}",
                          variants=",".join(c.variant for c in ctx.cert.spec.categories))
    if member == ConditionType.FAILED and status.verdict is None:
        status = attrs.evolve(status, verdict=Verdict.FAILED)
    changed = status != ctx.cert.status
    all_events = (*((event,) if event is not None else ()), *events)
    return ctx.plan(status=status if changed else None,
                    events=all_events if changed else events, **plan)


def _set(current: CertificationStatus, index: int, **changes: Any) -> CertificationStatus:
    cats = list(current.category_statuses)
    cats[index] = attrs.evolve(cats[index], **changes)
    return attrs.evolve(current, category_statuses=tuple(cats))


def deadline_left(cert: Certification, now: datetime) -> timedelta | None:
    """Time left before ``spec.deadline`` (from the Certification's creation); ``None``: no
    limit."""
    created = cert.metadata.creation_timestamp
    if not cert.spec.deadline or created is None:
        return None
    return created + parse_duration(cert.spec.deadline) - now


def _advance(ctx: _Ctx, status: CertificationStatus) -> CertificationPlan:
    total = len(status.category_statuses)
    left = deadline_left(ctx.cert, ctx.now)
    for index, cat in enumerate(status.category_statuses):
        if cat.status.terminal:
            continue
        label = f"{cat.domain}/{cat.variant}"
        if cat.status == CategoryState.IN_PROGRESS and cat.workflow_ref is not None:
            return _check_workflow(ctx, status, index, cat.workflow_ref.name, label)
        if left is not None and left.total_seconds() < 1:
            # Not started before the deadline: not certified (the Workflows running at the
            # deadline end themselves, each with the rest of it as its own deadline).
            status = _set(status, index, status=CategoryState.SUCCEEDED,
                          verdict=Verdict.INCOMPLETE,
                          message=f"{IncompleteReason.DEADLINE_EXCEEDED}: the Certification's "
                                  f"deadline ({ctx.cert.spec.deadline}) passed before this "
                                  "category started")
            continue
        return _start_category(ctx, status, index, label, total)
    return _finalize(ctx, status)


def _check_workflow(ctx: _Ctx, status: CertificationStatus, index: int, name: str,
                    label: str) -> CertificationPlan:
    wf = ctx.obs.workflow(name)
    if ctx.obs.feedback.held(name) or (wf is not None and not ctx.owns(wf)):
        status = _set(status, index, status=CategoryState.FAILED, verdict=Verdict.FAILED,
                      message=f"Workflow {name} already exists and is not controlled by "
                              f"this Certification")
        return _write(ctx, status, member=ConditionType.IN_PROGRESS,
                      reason=CertificationReason.WORKFLOW_NAME_COLLISION,
                      message=f"Category {label}: Workflow name {name} is taken",
                      requeue_after=ctx.settings.immediate)
    if wf is None:
        if not ctx.obs.feedback.has(ctx.live):
            return ctx.plan(asks=(ctx.live,))
        status = _set(status, index, status=CategoryState.FAILED, verdict=Verdict.FAILED,
                      message=f"Workflow for category {label} not found")
        return _write(ctx, status, member=ConditionType.IN_PROGRESS,
                      reason=CertificationReason.WORKFLOW_DELETED,
                      message=f"Workflow for category {label} not found, advancing",
                      requeue_after=ctx.settings.immediate)
    refs: dict[str, Any] = {"succeeded_nodes_ref": wf.status.succeeded_nodes_ref,
                            "failed_nodes_ref": wf.status.failed_nodes_ref,
                            "uncertified_nodes_ref": wf.status.uncertified_nodes_ref,
                            "groups": group_bandwidth(wf), "outliers": wf.status.outliers}
    status = _copy_outage(ctx, status, wf, label)
    member = true_member(wf.status.conditions)
    if member is not None and member.type == ConditionType.FAILED:
        status = _set(status, index, status=CategoryState.FAILED, verdict=Verdict.FAILED,
                      message=member.message, **refs)
        missed = next((c for c in wf.status.conditions if c.type
                       == ConditionType.VALIDATION_FAILED
                       and c.status == ConditionStatus.TRUE), None)
        already = any(c.type == ConditionType.VALIDATION_FAILED
                      and c.status == ConditionStatus.TRUE for c in status.conditions)
        if missed is not None and not already:
            # Mirrored from the (first) Workflow that missed: the Certification fails with the
            # validation reason.
            conditions, _ = set_additive(
                status.conditions, type_=ConditionType.VALIDATION_FAILED, status=True,
                reason=CertificationReason.WORKFLOW_VALIDATION_FAILED,
                message=f"Category {label}: {member.message}", now=ctx.now,
                generation=ctx.cert.metadata.generation)
            status = attrs.evolve(status, conditions=conditions)
        return _write(ctx, status, member=ConditionType.IN_PROGRESS,
                      reason=CertificationReason.WORKFLOW_FAILED,
                      message=f"Workflow for category {label} failed, advancing to next "
                              "category", requeue_after=ctx.settings.immediate)
    if member is not None and member.type == ConditionType.SUCCEEDED:
        verdict = wf.status.verdict or Verdict.PASSED
        message = member.message
        incomplete = next((c for c in wf.status.conditions
                           if c.type == ConditionType.INCOMPLETE), None)
        if verdict == Verdict.INCOMPLETE and incomplete is not None:
            message = f"{incomplete.reason}: {incomplete.message}"
        status = _set(status, index, status=CategoryState.SUCCEEDED, verdict=verdict,
                      message=message, **refs)
        return _write(ctx, status, member=ConditionType.IN_PROGRESS,
                      reason=CertificationReason.WORKFLOW_SUCCEEDED,
                      message=f"Workflow for category {label} succeeded",
                      requeue_after=ctx.settings.immediate)
    status = _set(status, index, **refs)
    return _write(ctx, status, member=ConditionType.IN_PROGRESS,
                  reason=CertificationReason.WORKFLOW_RUNNING,
                  message="Certification in progress", requeue_after=ctx.settings.requeue)


def _copy_outage(ctx: _Ctx, status: CertificationStatus, wf: Workflow,
                 label: str) -> CertificationStatus:
    """The Workflow's SuspectedClusterOutage, copied once (the first category that raised it)."""
    outage = next((c for c in wf.status.conditions
                   if c.type == ConditionType.SUSPECTED_CLUSTER_OUTAGE
                   and c.status == ConditionStatus.TRUE), None)
    already = any(c.type == ConditionType.SUSPECTED_CLUSTER_OUTAGE
                  and c.status == ConditionStatus.TRUE for c in status.conditions)
    if outage is None or already:
        return status
    conditions, _ = set_additive(
        status.conditions, type_=ConditionType.SUSPECTED_CLUSTER_OUTAGE, status=True,
        reason=CertificationReason.SUSPECTED_CLUSTER_OUTAGE,
        message=f"Category {label}: {outage.message}", now=ctx.now,
        generation=ctx.cert.metadata.generation)
    return attrs.evolve(status, conditions=conditions)


def group_bandwidth(wf: Workflow) -> tuple[GroupBandwidth, ...]:
    """The groups of ``wf``'s current iteration that measured a bus bandwidth."""
    return tuple(GroupBandwidth(name=g.name, phase=g.phase,
                                bus_bandwidth_gbps=g.bus_bandwidth_gbps)
                 for g in wf.status.groups if g.bus_bandwidth_gbps is not None)[:1024]


def _start_category(ctx: _Ctx, status: CertificationStatus, index: int, label: str,
                    total: int) -> CertificationPlan:
    cert = ctx.cert
    found = discover_for(cert, index, ctx.obs.nodes, ctx.catalog)
    if isinstance(found, DiscoveryFailure):
        created = cert.metadata.creation_timestamp or ctx.now
        left = created + ctx.settings.node_wait - ctx.now
        if found.reason == WorkflowReason.NODE_DISCOVERY_ERROR and left > timedelta(0):
            why = waiting_detail(found, target=cert.spec.target, nodes=ctx.obs.nodes)
            return _write(ctx, status, member=ConditionType.IN_PROGRESS,
                          reason=CertificationReason.WAITING_FOR_NODES,
                          message=f"No eligible node for {describe_target(cert.spec.target)} "
                                  f"yet for category {label} ({why}); waiting "
                                  f"{int(left.total_seconds())}s more",
                          requeue_after=min(ctx.settings.requeue, left.total_seconds()))
        status = _set(status, index, status=CategoryState.FAILED, verdict=Verdict.FAILED,
                      message=found.message)
        return _write(ctx, status, member=ConditionType.IN_PROGRESS,
                      reason=CertificationReason.NODE_DISCOVERY_ERROR,
                      message=f"Category {label}: {found.message}",
                      requeue_after=ctx.settings.immediate)
    try:
        body = build_workflow(cert, index, found=found, catalog=ctx.catalog)
    except BuildError as exc:
        status = _set(status, index, status=CategoryState.FAILED, verdict=Verdict.FAILED,
                      message=str(exc))
        return _write(ctx, status, member=ConditionType.IN_PROGRESS,
                      reason=CertificationReason.BUILD_FAILED,
                      message=f"Category {label}: {exc}", requeue_after=ctx.settings.immediate)
    meta = body["metadata"]
    clamped = clamp_note(cert, index, found=found)
    events = () if clamped is None else (EventSpec(
        type=EventSeverity.WARNING, reason=CertificationReason.NODES_PER_JOB_CLAMPED,
        message=f"Category {label}: {clamped}"),)
    if ctx.obs.feedback.held(meta["name"]):
        # The create found the name held by an object this Certification does not control.
        status = _set(status, index, status=CategoryState.FAILED, verdict=Verdict.FAILED,
                      message=f"Workflow {meta['name']} already exists and is not controlled "
                              "by this Certification")
        return _write(ctx, status, member=ConditionType.IN_PROGRESS,
                      reason=CertificationReason.WORKFLOW_NAME_COLLISION,
                      message=f"Category {label}: Workflow name {meta['name']} is taken",
                      requeue_after=ctx.settings.immediate)
    remaining = deadline_left(cert, ctx.now)
    if remaining is not None:
        body["spec"]["deadline"] = f"{max(int(remaining.total_seconds()), 1)}s"
    create = Create(api_version=L.API_VERSION, kind="Workflow", namespace=meta["namespace"],
                    name=meta["name"], body=body)
    status = _set(status, index, status=CategoryState.IN_PROGRESS, message=clamped,
                  workflow_ref=NamespacedName(name=meta["name"], namespace=meta["namespace"]))
    return _write(ctx, status, member=ConditionType.IN_PROGRESS,
                  reason=CertificationReason.WORKFLOW_CREATED,
                  message=f"Created Workflow for category {entry_name(cert.spec.categories[index])}"
                          f" ({index + 1} of {total})" + (f"; {clamped}" if clamped else ""),
                  creates=(create,), events=events, requeue_after=ctx.settings.requeue)


def _finalize(ctx: _Ctx, status: CertificationStatus) -> CertificationPlan:
    verdict = D.summarize(c.verdict for c in status.category_statuses)
    incomplete = verdict == Verdict.INCOMPLETE
    nodes_excluded = incomplete and all(
        (c.message or "").startswith(IncompleteReason.NODES_EXCLUDED)
        for c in status.category_statuses if c.verdict == Verdict.INCOMPLETE)
    late = incomplete and any(
        (c.message or "").startswith(IncompleteReason.DEADLINE_EXCEEDED)
        for c in status.category_statuses if c.verdict == Verdict.INCOMPLETE)
    conditions, event = set_additive(
        status.conditions, type_=ConditionType.INCOMPLETE, status=incomplete,
        reason=(IncompleteReason.DEADLINE_EXCEEDED if late
                else IncompleteReason.NODES_EXCLUDED if nodes_excluded
                else IncompleteReason.INFRA_ABORTED) if incomplete else IncompleteReason.COMPLETE,
        message="One or more categories did not certify every target node" if incomplete
        else "", now=ctx.now, generation=ctx.cert.metadata.generation, warn=True)
    status = attrs.evolve(status, conditions=conditions, verdict=verdict)
    events = (event,) if event is not None else ()
    if any(c.status == CategoryState.FAILED for c in status.category_statuses):
        reason, message = headline(ctx, status)
        return _write(ctx, status, member=ConditionType.FAILED, reason=reason, message=message,
                      events=events)
    return _write(ctx, status, member=ConditionType.SUCCEEDED,
                  reason=CertificationReason.ALL_WORKFLOWS_SUCCEEDED,
                  message=f"{every(len(status.category_statuses), 'category')} succeeded"
                          + ("; verdict Incomplete" if incomplete else ""), events=events)


# Workflow reasons that are the user's configuration, not the cluster's nodes or the test.
_CONFIGURATION: Final = frozenset({
    WorkflowReason.CONFIGURATION_ERROR, WorkflowReason.INVALID_SPEC,
    WorkflowReason.NODE_DISCOVERY_ERROR, WorkflowReason.PARTITION_ERROR,
    WorkflowReason.OVERRIDE_ERROR, WorkflowReason.JOB_NAME_COLLISION,
    WorkflowReason.DEPENDENCY_NAME_COLLISION, WorkflowReason.DEPENDENCY_CREATION_ERROR,
    WorkflowReason.HETEROGENEOUS_PLATFORM, WorkflowReason.GANG_SCHEDULING_CONFLICT,
})
# The headline reason of each severity (docs/design/013: most severe first).
_HEADLINE: Final = {
    WorkflowReason.JOB_HARDWARE_FAILED: CertificationReason.JOB_HARDWARE_FAILED,
    WorkflowReason.ITERATIONS_FAILED: CertificationReason.WORKFLOW_FAILED,
    WorkflowReason.JOB_VALIDATION_FAILED: CertificationReason.WORKFLOW_VALIDATION_FAILED,
    WorkflowReason.CONFIGURATION_ERROR: CertificationReason.CONFIGURATION_ERROR,
    WorkflowReason.USER_INTERRUPTED: CertificationReason.USER_INTERRUPTED,
}


def _severity(ctx: _Ctx, cat: CategoryStatus) -> WorkflowReason:
    """The blame row of a failed category, as the Workflow reason that stands for it."""
    wf = ctx.obs.workflow(cat.workflow_ref.name) if cat.workflow_ref is not None else None
    failed = next((c for c in wf.status.conditions if c.type == ConditionType.FAILED
                   and c.status == ConditionStatus.TRUE), None) if wf is not None else None
    if failed is None:
        # No Workflow verdict: it never started (discovery, build, a taken name: the user's
        # configuration) or it was deleted under the category (a person's interrupt).
        if cat.workflow_ref is not None and wf is None and (cat.message or "").endswith(
                "not found"):
            return WorkflowReason.USER_INTERRUPTED
        return WorkflowReason.CONFIGURATION_ERROR
    if failed.reason in _CONFIGURATION:
        return WorkflowReason.CONFIGURATION_ERROR
    if failed.reason in _HEADLINE:
        return WorkflowReason(failed.reason)
    return WorkflowReason.ITERATIONS_FAILED


def headline(ctx: _Ctx, status: CertificationStatus) -> tuple[CertificationReason, str]:
    """The Failed reason and message of a Certification: the most severe genuine failure
    across its categories (node evidence > workload failure > threshold miss > configuration
    > user interrupt), with that category's own cause."""
    failed = [(c, _severity(ctx, c)) for c in status.category_statuses
              if c.status == CategoryState.FAILED]
    worst = D.most_severe(s for _, s in failed)
    assert worst is not None
    cat = next(c for c, s in failed if s == worst)
    label = f"{cat.domain}/{cat.variant}"
    others = len(failed) - 1
    more = f" ({others} more categor{'y' if others == 1 else 'ies'} failed)" if others else ""
    if worst == WorkflowReason.JOB_VALIDATION_FAILED:
        missed = next((c for c in status.conditions if c.type
                       == ConditionType.VALIDATION_FAILED
                       and c.status == ConditionStatus.TRUE), None)
        if missed is not None:
            return (CertificationReason.WORKFLOW_VALIDATION_FAILED,
                    f"A performance threshold was missed: {missed.message}{more}")
    return _HEADLINE[worst], f"Category {label} failed: {cat.message or worst}{more}"


def _deletion(ctx: _Ctx) -> CertificationPlan:
    cert = ctx.cert
    if L.CERTIFICATION_FINALIZER not in cert.metadata.finalizers:
        return ctx.plan()
    ours = [w for w in ctx.obs.workflows if ctx.owns(w)]
    if ours:
        deletes = tuple(Delete(api_version=L.API_VERSION, kind="Workflow",
                               namespace=w.metadata.namespace or "", name=w.metadata.name or "",
                               uid=w.metadata.uid or "")
                        for w in ours if w.metadata.deletion_timestamp is None)
        return ctx.plan(deletes=deletes, requeue_after=ctx.settings.requeue)
    if not ctx.obs.feedback.has(ctx.live):
        return ctx.plan(asks=(ctx.live,))
    finalizers = [f for f in cert.metadata.finalizers if f != L.CERTIFICATION_FINALIZER]
    return ctx.plan(patches=(Patch(body={"metadata": {"finalizers": finalizers}}),))


def live_read(certification: str) -> ListLive:
    """The ask: the Workflows of ``certification``, listed live."""
    return ListLive(kind="Workflow", selector=f"{L.CERTIFICATION}={certification}")
