"""Infra-scoped fail-fast and blame: what one finished group Job means for the group, its
nodes and its siblings, and what the whole Workflow's verdict is.

The Job tier classifies every failure by scope (``cre.core.job.classify``). This module sorts each
failed Job into one row of the blame table (docs/design/013-workflow-certification.md):

* **Node evidence** -- the evidence names a node as broken: the ``nodeHealthMonitor`` flagged
  it (``HardwareFailed``), its GPU is unhealthy, or it went NotReady and did not come back Ready
  within ``nodeNotReadyGraceSeconds`` of the failure (while it may still come back, the group
  waits). Those nodes are Failed (scope ``Node``) at once, and the group is re-run on its
  infra budget without them; if too few nodes would be left for the test (none for a
  single-node group, fewer than two for a multi-node one), or the group still cannot pass, it
  is ``Failed`` (``HardwareFailed``) and its other nodes are Uncertified (``PeerBroken``).
  Never trips FailFast: the siblings' nodes are judged on their own runs. The verdict is
  Failed, ``JobHardwareFailed``.
* **Workload failure** (``Workload`` class, a threshold miss): the test's signal. Retried up to
  ``retryFailedGroups`` (a timeout never is), then ``Failed``; the nodes the Job blamed are
  Failed (the whole group when it named none). Trips FailFast.
* **Configuration** (the API refused the workload's create, ``InvalidSpec``, a name
  collision): deterministic, so never retried; ``Failed`` (``ConfigurationError``) with the
  API's message; its nodes are Uncertified (scope ``Configuration``), never Failed.
* **Infrastructure** (every other ``Node``, ``Platform`` or ``ControlPlane`` failure, timeouts
  of those classes included): *deferred*. Never trips FailFast, siblings keep running, the group
  is re-run up to ``infraRetries`` times without spending ``retryFailedGroups``; then
  ``InfraAborted`` with its nodes Uncertified. Nothing is blamed. A ``Preempted`` Job (higher-
  priority work took a node) is ``InfraAborted`` at once, with or without the kill switch: a
  re-run now would only wait for the busy nodes, and nothing was judged.
* **User interrupt** (a person deleted the group's Job or TrainJob): ``Failed``
  (``UserInterrupted``) saying what was deleted, not re-created, nodes Uncertified, no FailFast.

The kill switch (``--infra-scoped-failfast=false`` or the Workflow's ``infraScopedFailFast:
false``) turns deferral off: a Node/Platform/ControlPlane failure counts as genuine, blames the
whole group and trips FailFast, exactly the plain behaviour (configuration and user interrupt
keep their rows).

Verdict: any Failed group or any node Failed on node evidence -> ``Failed``; otherwise any
Uncertified or excluded node -> ``Incomplete`` (the trio says Succeeded, plus
``Incomplete=True``); otherwise ``Passed``. The Failed reason is the most severe row seen:
node evidence > workload failure > threshold miss > configuration > user interrupt.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Final

import attrs

from cre.api.conditions import (
    ConditionType,
    FailedNodeReason,
    FailureScope,
    GroupPhase,
    IncompleteReason,
    JobReason,
    Verdict,
    WorkflowReason,
)
from cre.api.failurepolicy import (
    DEFAULT_INFRA_RETRIES,
    DEFAULT_NODE_NOT_READY_GRACE_SECONDS,
    DEFAULT_OUTAGE_THRESHOLD_PERCENT,
    FailureMode,
    FailurePolicy,
)
from cre.api.job import FailureClass, Job
from cre.api.meta import ConditionStatus
from cre.core.common.lifecycle import true_member
from cre.core.common.observed import NodeView
from cre.core.job.classify import ClassReason
from cre.core.workflow.usable import too_few

INFRA_SCOPES: Final = frozenset({FailureScope.NODE, FailureScope.PLATFORM,
                                 FailureScope.CONTROL_PLANE})
# Node-class reasons that are evidence against the node itself (NotReady only past the grace).
NODE_FAULTS: Final = frozenset({ClassReason.NODE_NOT_READY, ClassReason.GPU_UNHEALTHY})
# Failed-node record reasons that say "this node is broken" (the verdict's JobHardwareFailed).
HARDWARE_RECORD_REASONS: Final = frozenset({
    ClassReason.NODE_NOT_READY, ClassReason.GPU_UNHEALTHY,
    FailedNodeReason.HARDWARE_FAILURE_DETECTED,
})
VALIDATION_REASONS: Final = frozenset({
    JobReason.THRESHOLD_VIOLATED, JobReason.MEASUREMENT_TIMEOUT,
    JobReason.UNKNOWN_THRESHOLD_KEY, JobReason.INVALID_THRESHOLD_EXPRESSION,
})
# Group failure_reason values for the final reason precedence.
HARDWARE: Final = "HardwareFailed"
VALIDATION: Final = "ValidationFailed"
CONFIGURATION: Final = str(WorkflowReason.CONFIGURATION_ERROR)
USER_INTERRUPTED: Final = str(WorkflowReason.USER_INTERRUPTED)
UNCERTIFIED: Final = "Uncertified"
# The Uncertified record of a node whose group ran out of re-runs on a broken group-mate: no
# evidence against it, and no run that judged it.
PEER_BROKEN: Final = "PeerBroken"
# Group failure reasons that do not stop the siblings under FailFast (deferral on).
NO_FAIL_FAST: Final = frozenset({HARDWARE, USER_INTERRUPTED})


@attrs.frozen(kw_only=True)
class EffectivePolicy:
    """The failure policy after the manager default and the Workflow override are combined."""

    mode: FailureMode = FailureMode.CONTINUE
    infra_retries: int = DEFAULT_INFRA_RETRIES
    deferral: bool = True
    retry_failed_groups: int = 0
    node_not_ready_grace: timedelta = timedelta(seconds=DEFAULT_NODE_NOT_READY_GRACE_SECONDS)
    outage_threshold_percent: int = DEFAULT_OUTAGE_THRESHOLD_PERCENT


def effective_policy(
    policy: FailurePolicy | None, *, manager_default: bool, retry_failed_groups: int
) -> EffectivePolicy:
    """The Workflow's policy; its ``infraScopedFailFast`` wins over the manager's switch."""
    policy = policy or FailurePolicy()
    deferral = manager_default if policy.infra_scoped_fail_fast is None \
        else policy.infra_scoped_fail_fast
    return EffectivePolicy(
        mode=policy.mode, infra_retries=policy.infra_retries, deferral=deferral,
        retry_failed_groups=retry_failed_groups,
        node_not_ready_grace=timedelta(seconds=policy.node_not_ready_grace_seconds),
        outage_threshold_percent=policy.outage_threshold_percent)


class Action(enum.StrEnum):
    """What happens to a group whose Job is terminal."""

    SUCCEED = "Succeed"
    RETRY = "Retry"  # spends retryFailedGroups
    INFRA_RETRY = "InfraRetry"  # spends infraRetries only
    FAIL = "Fail"
    INFRA_ABORT = "InfraAbort"
    WAIT = "Wait"  # a NotReady node the failure names may still come back: decide later


class Row(enum.StrEnum):
    """The row of the blame table (docs/design/013) a Job outcome falls in."""

    PASSED = "Passed"
    NODE_EVIDENCE = "NodeEvidence"
    WORKLOAD = "WorkloadFailure"
    THRESHOLD = "ThresholdMiss"
    CONFIGURATION = "Configuration"
    INFRASTRUCTURE = "Infrastructure"
    USER_INTERRUPT = "UserInterrupt"


@attrs.frozen(kw_only=True)
class NodeRecord:
    """A node outcome for the node-result ConfigMaps (keyed by name and reason)."""

    name: str
    reason: str
    message: str = ""
    scope: str = ""

    @property
    def hardware(self) -> bool:
        """Whether this Failed record is node evidence (the node is broken)."""
        return self.scope == FailureScope.NODE and self.reason in HARDWARE_RECORD_REASONS


@attrs.frozen(kw_only=True)
class JobOutcome:
    """What a terminal group Job says, read once from the Job object."""

    succeeded: bool
    reason: str  # the True trio member's reason
    message: str = ""
    failure_class: FailureClass | None = None
    blamed: tuple[NodeRecord, ...] = ()
    hardware: bool = False
    validation: bool = False
    # When the Job ended (its terminal condition's transition): the NotReady grace starts here.
    finished_at: datetime | None = None

    @property
    def failure_reason(self) -> str:
        """``HardwareFailed``, ``ValidationFailed`` or the Failed condition's reason."""
        if self.hardware:
            return HARDWARE
        if self.validation:
            return VALIDATION
        return self.reason


def _true(job: Job, type_: ConditionType) -> bool:
    return any(c.type == type_ and c.status == ConditionStatus.TRUE for c in job.status.conditions)


def job_outcome(job: Job) -> JobOutcome | None:
    """The outcome of a terminal Job (``None`` while it runs)."""
    member = true_member(job.status.conditions)
    if member is None or member.type == ConditionType.IN_PROGRESS:
        return None
    hardware = _true(job, ConditionType.HARDWARE_FAILED)
    validation = _true(job, ConditionType.VALIDATION_FAILED) or member.reason in VALIDATION_REASONS
    scope = job.status.failure_class.scope if job.status.failure_class else ""
    # A per-node threshold miss (a loopback test each node ran on its own) is that node's
    # fault: Node class, and only the nodes the Job listed are blamed.
    blamed = tuple(NodeRecord(name=f.name, reason=str(f.reason), message=f.message,
                              scope=str(FailureScope.NODE if validation and f.reason
                                        == FailedNodeReason.THRESHOLD_VIOLATION
                                        else scope or FailureScope.WORKLOAD))
                   for f in job.status.failed_nodes)
    judged = member.type == ConditionType.SUCCEEDED and validation
    verdict = next((c for c in job.status.conditions
                    if c.type == ConditionType.VALIDATION_FAILED), None) if judged else None
    return JobOutcome(
        succeeded=member.type == ConditionType.SUCCEEDED and not validation,
        reason=member.reason if not judged else (verdict.reason if verdict is not None
                                                 and verdict.reason
                                                 else JobReason.THRESHOLD_VIOLATED),
        message=verdict.message or member.message if verdict is not None else member.message,
        failure_class=job.status.failure_class, blamed=blamed,
        hardware=hardware, validation=validation, finished_at=member.last_transition_time)


@attrs.frozen(kw_only=True)
class GroupDecision:
    """The group's next step and the node records it produces.

    ``failed`` is written to the Workflow's failed-nodes ConfigMap at once, also when the
    action is an infra re-run (a re-launch skips nodes already recorded Failed). ``reason`` and
    ``message``, when set, replace the Job's on the group (the blame row's own words).
    ``wait`` is how long a ``WAIT`` decision should be looked at again after (seconds).
    """

    action: Action
    phase: GroupPhase
    failed: tuple[NodeRecord, ...] = ()
    uncertified: tuple[NodeRecord, ...] = ()
    trips_fail_fast: bool = False
    row: Row = Row.PASSED
    reason: str | None = None
    message: str | None = None
    wait: float = 0.0


def row_of(outcome: JobOutcome) -> Row:
    """The blame row of a Job outcome, before the NotReady grace is looked at (a NotReady
    outcome is ``NODE_EVIDENCE`` here; :func:`decide` may turn it into ``INFRASTRUCTURE``)."""
    if outcome.succeeded:
        return Row.PASSED
    fc = outcome.failure_class
    if outcome.validation:
        return Row.THRESHOLD
    if fc is None:
        return Row.WORKLOAD
    if fc.reason == ClassReason.WORKLOAD_DELETED:
        return Row.USER_INTERRUPT
    if fc.scope == FailureScope.CONFIGURATION or fc.reason in (
            ClassReason.INVALID_SPEC, ClassReason.NAME_COLLISION) or (
            fc.reason == ClassReason.ADMISSION_REJECTED
            and outcome.reason == JobReason.WORKLOAD_CREATION_ERROR):
        # The API (or CRE's own validation) refused the workload: the same again every time.
        # A kubelet refusing one pod (OutOf<resource>, UnexpectedAdmissionError) stays infra.
        return Row.CONFIGURATION
    if outcome.hardware or (fc.scope == FailureScope.NODE and fc.reason in NODE_FAULTS):
        return Row.NODE_EVIDENCE
    if fc.scope in INFRA_SCOPES:
        return Row.INFRASTRUCTURE
    return Row.WORKLOAD


def is_infra(outcome: JobOutcome) -> bool:
    """Whether the Job ended on an infrastructure-class failure (not the test's signal), node
    evidence included (that row is deferred too, with its broken nodes recorded Failed)."""
    return row_of(outcome) in (Row.INFRASTRUCTURE, Row.NODE_EVIDENCE)


def _broken(outcome: JobOutcome, *, nodes: Mapping[str, NodeView], now: datetime,
            grace: timedelta) -> tuple[tuple[str, ...], float]:
    """The nodes ``outcome`` proves broken, and (when > 0) how many seconds until a NotReady
    node it names must be looked at again."""
    fc = outcome.failure_class
    assert fc is not None
    if outcome.hardware:
        flagged = sorted({r.name for r in outcome.blamed
                          if r.reason == FailedNodeReason.HARDWARE_FAILURE_DETECTED})
        if flagged:
            return tuple(flagged), 0.0
    if fc.reason != ClassReason.NODE_NOT_READY:
        return tuple(sorted({r.name for r in outcome.blamed})), 0.0
    if outcome.finished_at is None:
        return (), 0.0  # the grace cannot be timed: never blame on a guess
    deadline = outcome.finished_at + grace
    broken: list[str] = []
    wait = 0.0
    for name in sorted({r.name for r in outcome.blamed}):
        view = nodes.get(name)
        if view is None or view.ready == "True":
            continue  # came back (or left the cluster): no evidence it is broken
        if now >= deadline:
            broken.append(name)
        else:
            wait = max(wait, (deadline - now).total_seconds())
    return tuple(broken), wait


def decide(
    *, nodes: Sequence[str], retries: int, infra_retries: int, outcome: JobOutcome,
    policy: EffectivePolicy, now: datetime, observed: Mapping[str, NodeView],
) -> GroupDecision:
    """What a group (``nodes``, retries spent so far) does after its Job ended with ``outcome``;
    ``observed`` are the nodes as seen ``now`` (the NotReady grace reads them)."""
    row = row_of(outcome)
    if row == Row.PASSED:
        return GroupDecision(action=Action.SUCCEED, phase=GroupPhase.SUCCEEDED)
    if row == Row.CONFIGURATION:
        return _configuration(nodes, outcome, policy)
    if row == Row.USER_INTERRUPT:
        return _interrupted(nodes, outcome)
    if outcome.failure_class is not None and outcome.failure_class.reason == \
            ClassReason.PREEMPTED:
        # Higher-priority work took the nodes: a re-run now would wait for them or preempt in
        # turn. Nothing was judged (even with the kill switch): the group is Uncertified.
        return _infra_abort(nodes, outcome)
    if policy.deferral and row in (Row.NODE_EVIDENCE, Row.INFRASTRUCTURE):
        broken: tuple[str, ...] = ()
        if row == Row.NODE_EVIDENCE:
            broken, wait = _broken(outcome, nodes=observed, now=now,
                                   grace=policy.node_not_ready_grace)
            if wait > 0:
                return GroupDecision(action=Action.WAIT, phase=GroupPhase.RUNNING,
                                     row=row, wait=wait)
        if broken:
            # The re-run leaves the broken nodes out (cre.core.workflow.usable); when too few would
            # be left to run the test, the group fails on the evidence now instead of ending
            # InfraAborted for want of nodes.
            rest = sum(1 for n in nodes if n not in broken)
            rerun = infra_retries < policy.infra_retries and not too_few(
                planned=len(nodes), left=rest)
            return _node_evidence(nodes, broken, outcome, policy, retry=rerun)
        if infra_retries < policy.infra_retries:
            return GroupDecision(action=Action.INFRA_RETRY, phase=GroupPhase.PENDING,
                                 row=Row.INFRASTRUCTURE)
        return _infra_abort(nodes, outcome)
    timed_out = outcome.reason == JobReason.JOB_TIMED_OUT
    if not timed_out and retries < policy.retry_failed_groups:
        return GroupDecision(action=Action.RETRY, phase=GroupPhase.PENDING, row=row)
    return GroupDecision(action=Action.FAIL, phase=GroupPhase.FAILED,
                         failed=_genuine_blame(nodes, outcome, policy),
                         trips_fail_fast=policy.mode == FailureMode.FAIL_FAST, row=row)


def _genuine_blame(nodes: Sequence[str], outcome: JobOutcome,
                   policy: EffectivePolicy) -> tuple[NodeRecord, ...]:
    fc = outcome.failure_class
    scope = str(fc.scope) if fc else FailureScope.WORKLOAD
    records = list(outcome.blamed)
    per_node = outcome.validation and any(
        r.reason == FailedNodeReason.THRESHOLD_VIOLATION for r in records)
    # A Job that named no node blames the whole group only when the failure is the test's own
    # (Workload class or a threshold miss); the kill switch restores the plain behaviour.
    genuine = fc is None or fc.scope == FailureScope.WORKLOAD or outcome.validation
    if (not policy.deferral and not per_node) or (not records and genuine):
        named = {r.name for r in records}
        why = (FailedNodeReason.THRESHOLD_VIOLATION if outcome.validation
               else FailedNodeReason.WORKLOAD_FAILED)
        records += [NodeRecord(name=n, reason=why,
                               message=outcome.message, scope=scope)
                    for n in nodes if n not in named]
    return tuple(records)


def _evidence(outcome: JobOutcome, name: str) -> str:
    fc = outcome.failure_class
    assert fc is not None
    own = next((r.message for r in outcome.blamed if r.name == name and r.message), "")
    if fc.reason == ClassReason.NODE_NOT_READY and not outcome.hardware:
        return f"NotReady and not back within the grace ({fc.message or outcome.message})"
    return own or fc.message or outcome.message


def _node_evidence(nodes: Sequence[str], broken: tuple[str, ...], outcome: JobOutcome,
                   policy: EffectivePolicy, *, retry: bool) -> GroupDecision:
    fc = outcome.failure_class
    assert fc is not None
    reason = str(ClassReason.GPU_UNHEALTHY if outcome.hardware else fc.reason)
    failed = tuple(NodeRecord(name=n, reason=reason, message=_evidence(outcome, n),
                              scope=str(FailureScope.NODE)) for n in broken)
    message = "; ".join(f"{r.name}: {r.message}" for r in failed)
    if retry:
        # Re-run the rest of the group on the infra budget; the broken nodes are Failed now.
        return GroupDecision(action=Action.INFRA_RETRY, phase=GroupPhase.PENDING, failed=failed,
                             row=Row.NODE_EVIDENCE, reason=HARDWARE, message=message)
    uncertified = tuple(NodeRecord(name=n, reason=PEER_BROKEN, scope="",
                                   message=f"not judged: the group's run failed on broken "
                                           f"node(s) {', '.join(broken)}")
                        for n in nodes if n not in broken)
    return GroupDecision(action=Action.FAIL, phase=GroupPhase.FAILED, failed=failed,
                         uncertified=uncertified, row=Row.NODE_EVIDENCE, reason=HARDWARE,
                         message=message)


def _configuration(nodes: Sequence[str], outcome: JobOutcome,
                   policy: EffectivePolicy) -> GroupDecision:
    message = outcome.message or (outcome.failure_class.message if outcome.failure_class
                                  else "")
    uncertified = tuple(NodeRecord(name=n, reason=CONFIGURATION, message=message,
                                   scope=str(FailureScope.CONFIGURATION)) for n in nodes)
    return GroupDecision(action=Action.FAIL, phase=GroupPhase.FAILED, uncertified=uncertified,
                         trips_fail_fast=policy.mode == FailureMode.FAIL_FAST,
                         row=Row.CONFIGURATION, reason=CONFIGURATION, message=message)


def _interrupted(nodes: Sequence[str], outcome: JobOutcome) -> GroupDecision:
    message = f"Interrupted by a user: {outcome.message}; not re-created"
    uncertified = tuple(NodeRecord(name=n, reason=USER_INTERRUPTED, message=message,
                                   scope=str(FailureScope.CONTROL_PLANE)) for n in nodes)
    return GroupDecision(action=Action.FAIL, phase=GroupPhase.FAILED, uncertified=uncertified,
                         row=Row.USER_INTERRUPT, reason=USER_INTERRUPTED, message=message)


def _infra_abort(nodes: Sequence[str], outcome: JobOutcome) -> GroupDecision:
    fc = outcome.failure_class
    assert fc is not None
    uncertified = tuple(NodeRecord(name=n, reason=str(fc.reason), message=fc.message or
                                   outcome.message, scope=str(fc.scope)) for n in nodes)
    return GroupDecision(action=Action.INFRA_ABORT, phase=GroupPhase.INFRA_ABORTED,
                         uncertified=uncertified, row=Row.INFRASTRUCTURE)


def trips_fail_fast(*, phase: GroupPhase, failure_reason: str | None,
                    policy: EffectivePolicy) -> bool:
    """Whether a group in this state stops its siblings under FailFast: a genuine failure does;
    broken hardware and a user interrupt do not (unless the kill switch is on)."""
    if policy.mode != FailureMode.FAIL_FAST or phase != GroupPhase.FAILED:
        return False
    return not policy.deferral or failure_reason not in NO_FAIL_FAST


def cancelled_records(nodes: Iterable[str], *, by_group: str) -> tuple[NodeRecord, ...]:
    """Uncertified records of a group FailFast cancelled because ``by_group`` failed."""
    return tuple(NodeRecord(name=n, reason="Cancelled", scope="",
                            message=f"cancelled by FailFast after group {by_group} failed")
                 for n in nodes)


# The Failed reason of a Workflow, most severe first (docs/design/013).
SEVERITY: Final = (
    WorkflowReason.JOB_HARDWARE_FAILED, WorkflowReason.ITERATIONS_FAILED,
    WorkflowReason.JOB_VALIDATION_FAILED, WorkflowReason.CONFIGURATION_ERROR,
    WorkflowReason.USER_INTERRUPTED,
)


def workflow_reason(failure_reason: str | None) -> WorkflowReason:
    """The Workflow reason a failed group's ``failureReason`` stands for."""
    return {HARDWARE: WorkflowReason.JOB_HARDWARE_FAILED,
            VALIDATION: WorkflowReason.JOB_VALIDATION_FAILED,
            CONFIGURATION: WorkflowReason.CONFIGURATION_ERROR,
            USER_INTERRUPTED: WorkflowReason.USER_INTERRUPTED}.get(
        failure_reason or "", WorkflowReason.ITERATIONS_FAILED)


def most_severe(reasons: Iterable[str]) -> WorkflowReason | None:
    """The most severe of these Workflow reasons (``None`` when there is none)."""
    seen = set(reasons)
    return next((r for r in SEVERITY if r in seen), None)


@attrs.frozen(kw_only=True)
class FinalVerdict:
    """The verdict of a finished Workflow and the Incomplete condition's reason."""

    verdict: Verdict
    incomplete_reason: IncompleteReason


def verdict_of(*, genuine_failures: int, infra_aborts: int, uncertified: int,
               excluded: int, broken: int = 0) -> FinalVerdict:
    """The verdict table (docs/design/013): Failed beats Incomplete beats Passed; a node
    Failed on node evidence (``broken``) fails the run even when its group re-ran to success."""
    if genuine_failures or broken:
        reason = (IncompleteReason.INFRA_ABORTED if infra_aborts or uncertified
                  else IncompleteReason.NODES_EXCLUDED if excluded else IncompleteReason.COMPLETE)
        return FinalVerdict(verdict=Verdict.FAILED, incomplete_reason=reason)
    if infra_aborts or uncertified:
        return FinalVerdict(verdict=Verdict.INCOMPLETE,
                            incomplete_reason=IncompleteReason.INFRA_ABORTED)
    if excluded:
        return FinalVerdict(verdict=Verdict.INCOMPLETE,
                            incomplete_reason=IncompleteReason.NODES_EXCLUDED)
    return FinalVerdict(verdict=Verdict.PASSED, incomplete_reason=IncompleteReason.COMPLETE)


def suspected_outage(*, groups: int, aborted: int, percent: int) -> bool:
    """Evidence of a cluster-wide cause: at least 2 groups of the iteration aborted on
    infrastructure, and at least ``percent`` % of its groups (one NotReady node in a single
    group never raises it)."""
    return aborted >= 2 and aborted * 100 >= percent * groups


def summarize(verdicts: Iterable[Verdict | None]) -> Verdict:
    """A Certification's verdict from its categories' (a missing one counts as Failed)."""
    seen = list(verdicts)
    if any(v is None or v == Verdict.FAILED for v in seen):
        return Verdict.FAILED
    if any(v == Verdict.INCOMPLETE for v in seen):
        return Verdict.INCOMPLETE
    return Verdict.PASSED
