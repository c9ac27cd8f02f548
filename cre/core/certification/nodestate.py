"""Per-node gauge values, derived without I/O from the NodeCertification records.

The records are the one source of node state: ``kubectl get nodecertifications`` prints them and
the gauges are computed from them, so the two cannot disagree. :func:`record_results` turns one
record into one :class:`NodeResult` per category:

* the category's latest result: ``FAILED``, ``UNCERTIFIED``, ``PASSED`` while its pass is
  valid at ``now``, ``EXPIRED`` once it is past its ``validUntil``;
* ``at`` is when the judging Certification ended, ``last_pass`` the record's
  ``lastPassTime`` (kept across a later failure), and the bus bandwidth the node's group
  measured.

The one state no record holds is ``TESTING``, a node whose group runs right now:
:func:`under_test_results` derives it from an unfinished Certification's running groups (``at`` is
the group's start, later than any result folded before it).

:func:`fleet_view` merges the results of many sources (one per record, one per running
Certification) into one per (node, category): the most recent observation wins.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from datetime import datetime

import attrs

from cre.api import nodecertification as api
from cre.api.certification import Certification
from cre.api.conditions import GroupPhase
from cre.api.workflow import Workflow


class NodeState(enum.IntEnum):
    """A node's result in one category; the value is the metric's encoding."""

    UNCERTIFIED = 0
    PASSED = 1
    FAILED = 2
    TESTING = 3
    EXPIRED = 4


@attrs.frozen(kw_only=True)
class NodeResult:
    """One node's result in one category: ``at`` is when it was observed (the judging
    Certification's end, or the group's start while it runs), ``last_pass`` when it passed."""

    node: str
    category: str
    state: NodeState
    at: datetime | None = None
    last_pass: datetime | None = None
    bus_bandwidth_gbps: float | None = None


def category_name(domain: str, variant: str) -> str:
    """The ``category`` label: ``<domain>/<variant>``."""
    return f"{domain}/{variant}"


def _state(result: api.CategoryResult, now: datetime) -> NodeState:
    if result.result == api.NodeResult.FAILED:
        return NodeState.FAILED
    if result.result == api.NodeResult.UNCERTIFIED:
        return NodeState.UNCERTIFIED
    expired = result.valid_until is not None and result.valid_until <= now
    return NodeState.EXPIRED if expired else NodeState.PASSED


def record_results(record: api.NodeCertification, now: datetime) -> tuple[NodeResult, ...]:
    """One result per category of ``record`` at ``now``, by the rules above."""
    node = record.spec.node_name
    return tuple(NodeResult(
        node=node, category=category_name(r.domain, r.variant), state=_state(r, now), at=r.time,
        last_pass=r.last_pass_time or (r.time if r.result == api.NodeResult.PASSED else None),
        bus_bandwidth_gbps=float(r.bus_bandwidth_gbps) if r.bus_bandwidth_gbps else None)
        for r in record.status.categories)


def under_test_results(cert: Certification, workflows: Mapping[str, Workflow]
                    ) -> tuple[NodeResult, ...]:
    """``TESTING`` for every node of a running group of ``cert``'s category Workflows
    (``workflows`` by name), sorted by node and category."""
    out: dict[tuple[str, str], NodeResult] = {}
    for cs in cert.status.category_statuses:
        wf = workflows.get(cs.workflow_ref.name) if cs.workflow_ref is not None else None
        for g in wf.status.groups if wf is not None else ():
            if g.phase != GroupPhase.RUNNING:
                continue
            category = category_name(cs.domain, cs.variant)
            for node in g.nodes:
                out[(node, category)] = NodeResult(node=node, category=category,
                                                   state=NodeState.TESTING, at=g.start_time)
    return tuple(out[k] for k in sorted(out))


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else max(a, b)


def fleet_view(sources: Mapping[str, Iterable[NodeResult]]) -> dict[tuple[str, str], NodeResult]:
    """One result per (node, category) over every source: the latest ``at`` wins (a result
    without a time loses; equal times: the greater source key), ``last_pass`` is the latest
    of all sources."""
    out: dict[tuple[str, str], NodeResult] = {}
    for source in sorted(sources):
        for r in sources[source]:
            key = (r.node, r.category)
            held = out.get(key)
            if held is None:
                out[key] = r
                continue
            newer = r.at is not None and (held.at is None or r.at >= held.at)
            winner = r if newer else held
            out[key] = attrs.evolve(winner, last_pass=_later(held.last_pass, r.last_pass))
    return out
