"""Time passing over the NodeCertifications: a pass past its ``validUntil`` turns the record
Expired, whether or not the Certification that passed it still exists.

:func:`reconcile_expiry` reads every record and the GPU nodes at ``now`` and returns the writes
of the records whose summary changed with time alone (a pass that expired: state Expired,
``categoriesPassed`` one less), and ``requeue_after``: the seconds until the next pass among all
records expires, so the controller looks again exactly then and never polls.

The label follows where CRE put one: a node labelled ``passed`` (some Certification opted in to
labels) is relabelled ``expired``; a node with no CRE label gets none, and a node labelled
``testing`` keeps it (its group's end puts the record's label back). Each write that turns a
record Expired carries its one event (``NodeWrite.events``, after the write succeeded).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from cre.api.nodecertification import NodeCertification, NodeResult
from cre.core.common.observed import NodeView
from cre.core.nodecertification.events import state_events, taint_events
from cre.core.nodecertification.fold import summarize
from cre.core.nodecertification.nodestate import STATE_LABEL, TESTING, node_patch
from cre.core.nodecertification.reconcile import NodeCertificationPlan, NodeWrite


def expiry_due(record: NodeCertification, now: datetime) -> datetime | None:
    """When time alone next changes ``record``'s summary: ``now`` when it already has (a pass
    expired and the record does not say so yet), else its earliest pass still valid;
    ``None``: never."""
    if summarize(record.status.categories, now) != record.status:
        return now
    return min((r.valid_until for r in record.status.categories
                if r.result == NodeResult.PASSED and r.valid_until is not None
                and r.valid_until > now), default=None)


def next_expiry(records: Mapping[str, NodeCertification], now: datetime) -> float | None:
    """Seconds from ``now`` until the next pass among ``records`` expires (``None``: none
    left to expire)."""
    ahead = [(r.valid_until - now).total_seconds() for record in records.values()
             for r in record.status.categories
             if r.result == NodeResult.PASSED and r.valid_until is not None
             and r.valid_until > now]
    return min(ahead) if ahead else None


def reconcile_expiry(records: Mapping[str, NodeCertification], nodes: Mapping[str, NodeView],
                     now: datetime) -> NodeCertificationPlan:
    """The writes that bring every record's summary to ``now``, and when to look again."""
    writes = []
    for name in sorted(records):
        record = records[name]
        fresh = summarize(record.status.categories, now)
        if fresh == record.status:
            continue
        node = nodes.get(name)
        label = node.label(STATE_LABEL) if node is not None else None
        patch = node_patch(node, fresh, labels=label not in (None, TESTING), taint=False) \
            if node is not None else ()
        writes.append(NodeWrite(
            node=name, resource_version=record.metadata.resource_version or "", status=fresh,
            node_patch=patch, events=state_events(name, record.status, fresh),
            patch_events=taint_events(name, patch)))
    return NodeCertificationPlan(writes=tuple(writes), requeue_after=next_expiry(records, now))
