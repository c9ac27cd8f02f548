"""Infra-scoped fail-fast: what one finished group Job means for the group, its nodes and its
siblings, and what the whole Workflow's verdict is.

The Job tier classifies every failure by scope (``cre.core.classify``). This module decides:

* A genuine failure (``Workload`` class, a threshold miss, a timeout) is the test's signal. It
  is retried up to ``retryFailedGroups`` (a timeout never is), then the group is ``Failed`` and
  the nodes the Job blamed are Failed. Under ``FailFast`` it stops new launches and cancels the
  running siblings (``Cancelled``: their nodes are Uncertified, never Failed).
* An infrastructure abort (``Node``, ``Platform`` or ``ControlPlane`` class) is *deferred*: it
  never trips FailFast, siblings keep running, and the group is re-run up to ``infraRetries``
  times without spending ``retryFailedGroups``. If it still aborts, the group ends
  ``InfraAborted``: its nodes are Uncertified with the cause, except the nodes a Node-class
  failure names as broken (NotReady, GPU unhealthy), which are Failed with scope ``Node``. A pod
  disrupted or evicted from under the test is the cluster taking the node away, not the node
  failing the test: that node is Uncertified too.
* The kill switch (``--infra-scoped-failfast=false`` or the Workflow's ``infraScopedFailFast:
  false``) turns deferral off: every failure counts as genuine, blames the whole group and
  trips FailFast, exactly the plain behaviour.

Verdict: any genuine failure -> ``Failed``; otherwise any Uncertified or excluded node ->
``Incomplete`` (the trio says Succeeded, plus ``Incomplete=True``); otherwise ``Passed``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
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
)
from cre.api.failurepolicy import DEFAULT_INFRA_RETRIES, FailureMode, FailurePolicy
from cre.api.job import FailureClass, Job
from cre.api.meta import ConditionStatus
from cre.core.classify import ClassReason
from cre.core.trio import true_member

INFRA_SCOPES: Final = frozenset({FailureScope.NODE, FailureScope.PLATFORM,
                                 FailureScope.CONTROL_PLANE})
# Node-class reasons that are evidence against the node itself (it is blamed).
NODE_FAULTS: Final = frozenset({ClassReason.NODE_NOT_READY, ClassReason.GPU_UNHEALTHY})
VALIDATION_REASONS: Final = frozenset({
    JobReason.THRESHOLD_VIOLATED, JobReason.MEASUREMENT_TIMEOUT,
    JobReason.UNKNOWN_THRESHOLD_KEY, JobReason.INVALID_THRESHOLD_EXPRESSION,
})
# Group failure_reason values for the final reason precedence.
HARDWARE: Final = "HardwareFailed"
VALIDATION: Final = "ValidationFailed"
UNCERTIFIED: Final = "Uncertified"


@attrs.frozen(kw_only=True)
class EffectivePolicy:
    """The failure policy after the manager default and the Workflow override are combined."""

    mode: FailureMode = FailureMode.CONTINUE
    infra_retries: int = DEFAULT_INFRA_RETRIES
    deferral: bool = True
    retry_failed_groups: int = 0


def effective_policy(
    policy: FailurePolicy | None, *, manager_default: bool, retry_failed_groups: int
) -> EffectivePolicy:
    """The Workflow's policy; its ``infraScopedFailFast`` wins over the manager's switch."""
    policy = policy or FailurePolicy()
    deferral = manager_default if policy.infra_scoped_fail_fast is None \
        else policy.infra_scoped_fail_fast
    return EffectivePolicy(mode=policy.mode, infra_retries=policy.infra_retries,
                           deferral=deferral, retry_failed_groups=retry_failed_groups)


class Action(enum.StrEnum):
    """What happens to a group whose Job is terminal."""

    SUCCEED = "Succeed"
    RETRY = "Retry"  # spends retryFailedGroups
    INFRA_RETRY = "InfraRetry"  # spends infraRetries only
    FAIL = "Fail"
    INFRA_ABORT = "InfraAbort"


@attrs.frozen(kw_only=True)
class NodeRecord:
    """A node outcome for the node-result ConfigMaps (keyed by name and reason)."""

    name: str
    reason: str
    message: str = ""
    scope: str = ""


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
        hardware=hardware, validation=validation)


@attrs.frozen(kw_only=True)
class GroupDecision:
    """The group's next step and the node records it produces."""

    action: Action
    phase: GroupPhase
    failed: tuple[NodeRecord, ...] = ()
    uncertified: tuple[NodeRecord, ...] = ()
    trips_fail_fast: bool = False


def is_infra(outcome: JobOutcome) -> bool:
    """Whether the Job ended on an infrastructure-class failure (not the test's signal)."""
    fc = outcome.failure_class
    return (not outcome.succeeded and fc is not None and fc.scope in INFRA_SCOPES
            and not outcome.validation and outcome.reason != JobReason.JOB_TIMED_OUT)


def decide(
    *, nodes: Sequence[str], retries: int, infra_retries: int, outcome: JobOutcome,
    policy: EffectivePolicy,
) -> GroupDecision:
    """What a group (``nodes``, retries spent so far) does after its Job ended with ``outcome``."""
    if outcome.succeeded:
        return GroupDecision(action=Action.SUCCEED, phase=GroupPhase.SUCCEEDED)
    if policy.deferral and is_infra(outcome):
        if infra_retries < policy.infra_retries:
            return GroupDecision(action=Action.INFRA_RETRY, phase=GroupPhase.PENDING)
        return _infra_abort(nodes, outcome)
    timed_out = outcome.reason == JobReason.JOB_TIMED_OUT
    if not timed_out and retries < policy.retry_failed_groups:
        return GroupDecision(action=Action.RETRY, phase=GroupPhase.PENDING)
    return GroupDecision(action=Action.FAIL, phase=GroupPhase.FAILED,
                         failed=_genuine_blame(nodes, outcome, policy),
                         trips_fail_fast=policy.mode == FailureMode.FAIL_FAST)


def _genuine_blame(nodes: Sequence[str], outcome: JobOutcome,
                   policy: EffectivePolicy) -> tuple[NodeRecord, ...]:
    scope = str(outcome.failure_class.scope) if outcome.failure_class else FailureScope.WORKLOAD
    records = list(outcome.blamed)
    per_node = outcome.validation and any(
        r.reason == FailedNodeReason.THRESHOLD_VIOLATION for r in records)
    if (not policy.deferral and not per_node) or not records:
        # Plain behaviour: the whole group answers for the failure.
        named = {r.name for r in records}
        why = (FailedNodeReason.THRESHOLD_VIOLATION if outcome.validation
               else FailedNodeReason.WORKLOAD_FAILED)
        records += [NodeRecord(name=n, reason=why,
                               message=outcome.message, scope=scope)
                    for n in nodes if n not in named]
    return tuple(records)


def _infra_abort(nodes: Sequence[str], outcome: JobOutcome) -> GroupDecision:
    fc = outcome.failure_class
    assert fc is not None
    broken = {r.name for r in outcome.blamed} if fc.scope == FailureScope.NODE \
        and fc.reason in NODE_FAULTS else set()
    failed = tuple(NodeRecord(name=n, reason=str(fc.reason), message=fc.message or
                              outcome.message, scope=str(fc.scope)) for n in sorted(broken))
    uncertified = tuple(NodeRecord(name=n, reason=str(fc.reason), message=fc.message or
                                   outcome.message, scope=str(fc.scope))
                        for n in nodes if n not in broken)
    return GroupDecision(action=Action.INFRA_ABORT, phase=GroupPhase.INFRA_ABORTED,
                         failed=failed, uncertified=uncertified)


def cancelled_records(nodes: Iterable[str], *, by_group: str) -> tuple[NodeRecord, ...]:
    """Uncertified records of a group FailFast cancelled because ``by_group`` failed."""
    return tuple(NodeRecord(name=n, reason="Cancelled", scope="",
                            message=f"cancelled by FailFast after group {by_group} failed")
                 for n in nodes)


@attrs.frozen(kw_only=True)
class FinalVerdict:
    """The verdict of a finished Workflow and the Incomplete condition's reason."""

    verdict: Verdict
    incomplete_reason: IncompleteReason


def verdict_of(*, genuine_failures: int, infra_aborts: int, uncertified: int,
               excluded: int) -> FinalVerdict:
    """The verdict table (docs/design/013): Failed beats Incomplete beats Passed."""
    if genuine_failures:
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


def summarize(verdicts: Iterable[Verdict | None]) -> Verdict:
    """A Certification's verdict from its categories' (a missing one counts as Failed)."""
    seen = list(verdicts)
    if any(v is None or v == Verdict.FAILED for v in seen):
        return Verdict.FAILED
    if any(v == Verdict.INCOMPLETE for v in seen):
        return Verdict.INCOMPLETE
    return Verdict.PASSED
