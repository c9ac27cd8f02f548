"""Per-node certification results, derived without I/O from a Certification's Workflows.

A Certification's verdict is per category; an operator asks per node: which nodes failed which
category, when did each last pass, what bus bandwidth did it measure. The answer is already on
the cluster, spread over the category Workflows' groups (nodes, phase, completion time,
measured busBW) and their failed/uncertified node-result ConfigMaps (the exact blame). This
module joins them into one :class:`NodeResult` per (node, category):

* a node named in the failed-nodes records is ``FAILED``; in the uncertified records (and not
  failed) ``UNCERTIFIED``;
* otherwise a node of a ``Running`` group is ``TESTING``; of a ``Succeeded`` group ``PASSED``
  (``last_pass`` is the group's completion time); of any other finished group
  ``UNCERTIFIED`` (a failed group's nodes are never called Failed without a record naming
  them); of a ``Pending`` group: no result yet;
* a node in several groups (an overflow group borrows nodes) keeps the worst state, the latest
  pass and the lowest measured busBW.

:func:`fleet_view` merges the results of many sources (Certifications today, NodeCertification
objects later) into one per (node, category): the most recent observation wins.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from datetime import datetime

import attrs

from cre.api.certification import Certification
from cre.api.conditions import GroupPhase
from cre.api.workflow import Workflow


class NodeState(enum.IntEnum):
    """A node's result in one category; the value is the metric's encoding."""

    UNCERTIFIED = 0
    PASSED = 1
    FAILED = 2
    TESTING = 3


# Within one Workflow, which state a node in two groups keeps.
_SEVERITY = {NodeState.PASSED: 0, NodeState.UNCERTIFIED: 1, NodeState.TESTING: 2,
             NodeState.FAILED: 3}


@attrs.frozen(kw_only=True)
class NodeResult:
    """One node's result in one category: ``at`` is when it was observed (the group's
    completion, or start while it runs), ``last_pass`` when it last passed."""

    node: str
    category: str
    state: NodeState
    at: datetime | None = None
    last_pass: datetime | None = None
    bus_bandwidth_gbps: float | None = None


@attrs.frozen(kw_only=True)
class CategoryEvidence:
    """A category's Workflow and the node names its result ConfigMaps record."""

    category: str
    workflow: Workflow
    failed: frozenset[str] = frozenset()
    uncertified: frozenset[str] = frozenset()


def category_evidence(cert: Certification, workflows: Mapping[str, Workflow], *,
                      records: Mapping[str, tuple[frozenset[str], frozenset[str]]]
                      ) -> tuple[CategoryEvidence, ...]:
    """The evidence of every category of ``cert`` whose Workflow is in ``workflows`` (by
    name); ``records`` gives a Workflow's (failed, uncertified) node names by its name."""
    out = []
    for cat in cert.status.category_statuses:
        ref = cat.workflow_ref
        wf = workflows.get(ref.name) if ref is not None else None
        if wf is None or ref is None:
            continue
        failed, uncertified = records.get(ref.name, (frozenset(), frozenset()))
        out.append(CategoryEvidence(category=f"{cat.domain}/{cat.variant}", workflow=wf,
                                    failed=failed, uncertified=uncertified))
    return tuple(out)


def _group_state(phase: GroupPhase) -> NodeState | None:
    if phase == GroupPhase.PENDING:
        return None
    if phase == GroupPhase.RUNNING:
        return NodeState.TESTING
    return NodeState.PASSED if phase == GroupPhase.SUCCEEDED else NodeState.UNCERTIFIED


def _bandwidth(value: str | None) -> float | None:
    return float(value) if value is not None else None


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else max(a, b)


def _lower(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _combine(a: NodeResult, b: NodeResult) -> NodeResult:
    worst = a if _SEVERITY[a.state] >= _SEVERITY[b.state] else b
    return attrs.evolve(worst, at=_later(a.at, b.at), last_pass=_later(a.last_pass, b.last_pass),
                        bus_bandwidth_gbps=_lower(a.bus_bandwidth_gbps, b.bus_bandwidth_gbps))


def category_results(evidence: CategoryEvidence) -> tuple[NodeResult, ...]:
    """One result per node of the category's Workflow (sorted by node), by the rules above."""
    by_node: dict[str, NodeResult] = {}
    for g in evidence.workflow.status.groups:
        state = _group_state(g.phase)
        if state is None:
            continue
        at = g.completion_time or g.start_time
        for node in g.nodes:
            if node in evidence.failed:
                node_state = NodeState.FAILED
            elif node in evidence.uncertified:
                node_state = NodeState.UNCERTIFIED
            else:
                node_state = state
            result = NodeResult(
                node=node, category=evidence.category, state=node_state, at=at,
                last_pass=g.completion_time if node_state == NodeState.PASSED else None,
                bus_bandwidth_gbps=_bandwidth(g.bus_bandwidth_gbps) if g.phase.terminal
                else None)
            held = by_node.get(node)
            by_node[node] = result if held is None else _combine(held, result)
    return tuple(by_node[n] for n in sorted(by_node))


def certification_results(evidence: Iterable[CategoryEvidence]) -> tuple[NodeResult, ...]:
    """The results of every category of one Certification."""
    return tuple(r for e in evidence for r in category_results(e))


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
