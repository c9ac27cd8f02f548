"""Fold category results into a node's record, and the node state the record adds up to.

The record keeps, per category (domain, variant), one result: the *greatest* of every result
ever folded in, in this order:

1. a judgement (Passed or Failed) beats Uncertified, whatever their times: evidence of the
   infrastructure only (an aborted group, a cancellation) never replaces what a test found,
   so an Uncertified result never turns a node Failed, nor un-fails one;
2. then the later ``time`` (when the judging Certification ended) wins: an older Certification
   folded in late never overwrites a newer result;
3. then the Certification's ``namespace/name`` (two runs that ended in the same second);
4. then Failed over Passed, then the rest of the result, so the order is total and the fold
   never depends on which of two equal-ranked results came first.

Taking a maximum makes the fold a join: folding the same results again changes nothing
(idempotent), and the order in which Certifications are folded in does not matter. The kept
result's ``lastPassTime`` is the latest pass among everything folded (a maximum too), so a
later failure does not lose when the node last passed.

The node's state over its categories (at ``now``): Failed when some category failed; else
Expired when some pass is past its ``validUntil``; else Passed when some category was judged;
else Uncertified.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import attrs

from cre.api.nodecertification import (
    CategoryResult,
    NodeCertificationStatus,
    NodeResult,
    NodeState,
)

Key = tuple[str, str]


def category_key(result: CategoryResult) -> Key:
    """``(domain, variant)``: which category a result is about."""
    return (result.domain, result.variant)


def rank(result: CategoryResult) -> tuple[bool, datetime, str, str, bool, str]:
    """The order of the join: judgement, time, the Certification's name, failure, the rest."""
    ref = result.certification
    return (result.result != NodeResult.UNCERTIFIED, result.time, ref.namespace, ref.name,
            result.result == NodeResult.FAILED, repr(result))


def _passed_at(result: CategoryResult) -> datetime | None:
    """The latest pass a result knows of: its own time when it is one, or what it kept."""
    own = result.time if result.result == NodeResult.PASSED else None
    known = [t for t in (own, result.last_pass_time) if t is not None]
    return max(known) if known else None


def fold_results(current: Iterable[CategoryResult], incoming: Iterable[CategoryResult]
                 ) -> tuple[CategoryResult, ...]:
    """The greatest result per category of ``current`` and ``incoming`` (with the latest pass
    of all of them as its ``lastPassTime``), sorted by category."""
    best: dict[Key, CategoryResult] = {}
    passed: dict[Key, datetime] = {}
    for result in (*current, *incoming):
        key = category_key(result)
        held = best.get(key)
        if held is None or rank(result) >= rank(held):
            best[key] = result
        at = _passed_at(result)
        if at is not None and (key not in passed or at > passed[key]):
            passed[key] = at
    return tuple(attrs.evolve(best[k], last_pass_time=passed.get(k)) for k in sorted(best))


def _valid_pass(result: CategoryResult, now: datetime) -> bool:
    return result.result == NodeResult.PASSED and (
        result.valid_until is None or result.valid_until > now)


def node_state(categories: Iterable[CategoryResult], now: datetime) -> NodeState:
    """The state the node's latest results add up to at ``now``."""
    results = tuple(categories)
    if any(r.result == NodeResult.FAILED for r in results):
        return NodeState.FAILED
    judged = [r for r in results if r.result == NodeResult.PASSED]
    if not judged:
        return NodeState.UNCERTIFIED
    if not all(_valid_pass(r, now) for r in judged):
        return NodeState.EXPIRED
    return NodeState.PASSED


def summarize(categories: tuple[CategoryResult, ...], now: datetime) -> NodeCertificationStatus:
    """The complete status of a node whose latest results are ``categories``."""
    passes = [r for r in categories if r.result == NodeResult.PASSED]
    until = [r.valid_until for r in passes if r.valid_until is not None]
    latest = max(categories, key=lambda r: (r.time, r.certification.namespace,
                                            r.certification.name), default=None)
    return NodeCertificationStatus(
        state=node_state(categories, now),
        categories=categories,
        categories_passed=f"{sum(_valid_pass(r, now) for r in categories)}/{len(categories)}",
        valid_until=min(until) if until else None,
        last_certification=latest.certification if latest is not None else None)


def fold(status: NodeCertificationStatus, incoming: Iterable[CategoryResult], *,
         now: datetime) -> NodeCertificationStatus:
    """``status`` with ``incoming`` folded in, summarized at ``now``."""
    return summarize(fold_results(status.categories, incoming), now)

