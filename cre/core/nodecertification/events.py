"""The Events a NodeCertification's changes deserve: one per change, none on a resync.

A platform team watches nodes, not Certifications: when a node fails, passes again, cannot be
certified, expires, is tainted or released, or the breaker keeps it from being tainted, the
node's record says so in an Event. Every event here is derived from a *write* (the record's
status before and after it, or the Node patch), so a pass that writes nothing emits nothing and
a repeated pass (a resync, a requeue, a second Certification folding the same verdict) does
not repeat an event; the shell emits them after the write they describe succeeded.

* the record's ``state`` changed (a record created counts as coming from nothing):
  to Failed, Warning ``NodeCertificationFailed`` naming the failed categories, the
  Certification and the reason; back to Passed after a failure or an expiry, Normal
  ``NodeCertificationPassed`` (a first pass says nothing: the first run over a fleet would
  otherwise write an event per node); to Uncertified (a new record: only infrastructure
  evidence so far, the fold never turns a judged node Uncertified), Normal
  ``NodeCertificationUncertified`` with the categories' reasons; to Expired, Warning
  ``NodeCertificationExpired``;
* the Node patch adds CRE's taint: Warning ``NodeTainted``; removes it: Normal
  ``NodeTaintReleased``;
* a node newly Failed that the blast-radius breaker kept untainted: Warning
  ``NodeTaintHeldBack`` (the Certification's own ``NodeTaintsHeldBack`` event lists them all).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from cre.api.nodecertification import (
    CategoryResult,
    NodeCertificationStatus,
    NodeResult,
    NodeState,
)
from cre.core.common.plan import EventSeverity, EventSpec
from cre.core.nodecertification.nodestate import TAINT_KEY, JsonPatch

#: Longest list of categories named in one event's message.
_NAMED = 5


class NodeEventReason(enum.StrEnum):
    """``reason`` of the Events about a NodeCertification."""

    FAILED = "NodeCertificationFailed"
    PASSED = "NodeCertificationPassed"
    UNCERTIFIED = "NodeCertificationUncertified"
    EXPIRED = "NodeCertificationExpired"
    TAINTED = "NodeTainted"
    TAINT_RELEASED = "NodeTaintReleased"
    TAINT_HELD_BACK = "NodeTaintHeldBack"


def _names(results: Iterable[CategoryResult]) -> str:
    listed = [f"{r.domain}/{r.variant}" for r in results]
    more = f" and {len(listed) - _NAMED} more" if len(listed) > _NAMED else ""
    return ", ".join(listed[:_NAMED]) + more


def _why(result: CategoryResult) -> str:
    ref = result.certification
    cause = " ".join(p for p in (f"{result.failure_scope}/{result.reason}"
                                 if result.failure_scope and result.reason else result.reason,
                                 f"({result.message})" if result.message else None) if p)
    return (f"{result.domain}/{result.variant} in {ref.namespace}/{ref.name}"
            + (f": {cause}" if cause else ""))


def state_events(node: str, before: NodeCertificationStatus | None,
                 after: NodeCertificationStatus) -> tuple[EventSpec, ...]:
    """The one event of the record of ``node`` going from ``before`` (``None``: no record) to
    ``after``; none when its state did not change."""
    was = before.state if before is not None else None
    if after.state == was:
        return ()
    results = after.categories
    match after.state:
        case NodeState.FAILED:
            failed = [r for r in results if r.result == NodeResult.FAILED]
            return (EventSpec(type=EventSeverity.WARNING, reason=NodeEventReason.FAILED,
                              message=f"node {node} failed "
                                      + "; ".join(_why(r) for r in failed[:_NAMED])),)
        case NodeState.PASSED:
            if was not in (NodeState.FAILED, NodeState.EXPIRED):
                return ()  # a first pass is the run's news, not the node's (5,000 at once)
            passed = [r for r in results if r.result == NodeResult.PASSED]
            return (EventSpec(type=EventSeverity.NORMAL, reason=NodeEventReason.PASSED,
                              message=f"node {node} passed again: {_names(passed)} "
                                      f"(valid until {_until(after)})"),)
        case NodeState.EXPIRED:
            passes = [r for r in results if r.valid_until is not None]
            return (EventSpec(type=EventSeverity.WARNING, reason=NodeEventReason.EXPIRED,
                              message=f"node {node}: the pass of {_names(passes)} is past its "
                                      "validUntil; certify the node again"),)
        case _:
            return (EventSpec(type=EventSeverity.NORMAL, reason=NodeEventReason.UNCERTIFIED,
                              message=f"node {node} not certified (no evidence against it): "
                                      + "; ".join(_why(r) for r in results[:_NAMED])),)


def _until(status: NodeCertificationStatus) -> str:
    return status.valid_until.isoformat() if status.valid_until is not None else "unset"


def taint_events(node: str, patch: JsonPatch) -> tuple[EventSpec, ...]:
    """The event of a Node patch that adds or removes CRE's taint (the patch touches no other
    taint: :func:`cre.core.nodecertification.nodestate.node_patch`)."""
    ops = {str(op["op"]) for op in patch if str(op["path"]).startswith("/spec/taints")}
    if "add" in ops:
        return (EventSpec(type=EventSeverity.WARNING, reason=NodeEventReason.TAINTED,
                          message=f"node {node} tainted {TAINT_KEY}:NoSchedule: its "
                                  "certification failed"),)
    if "remove" in ops:
        return (EventSpec(type=EventSeverity.NORMAL, reason=NodeEventReason.TAINT_RELEASED,
                          message=f"node {node} released: taint {TAINT_KEY} removed, its "
                                  "certification passed"),)
    return ()


def held_back_event(node: str, *, cap: int | None) -> EventSpec:
    """The event of a newly Failed ``node`` the breaker kept untainted (``cap``: its cap)."""
    return EventSpec(type=EventSeverity.WARNING, reason=NodeEventReason.TAINT_HELD_BACK,
                     message=f"node {node} failed but is not tainted: the blast-radius breaker "
                             f"allows {cap} tainted node(s) "
                             "(spec.nodeState.maxTainted/maxTaintedPercent)")
