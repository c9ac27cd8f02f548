"""Fold one terminal Certification's per-node results into the nodes' NodeCertifications.

:func:`reconcile_nodecertification` reads a Certification that ended (its lifecycle condition
Succeeded or Failed), the node-result ConfigMaps of its categories' Workflows, the groups'
measured bus bandwidth, the NodeCertifications of the nodes it judged and those nodes, and
returns one :class:`NodeWrite` per node whose record or labels must change:

* per category, each node named in a result ConfigMap gets a
  :class:`cre.api.nodecertification.CategoryResult`: Failed when a failed-nodes record names it,
  else Passed when the succeeded-nodes list does, else Uncertified; ``time`` is when the
  Certification ended, a pass is valid for ``spec.nodeState.validFor`` (default 168h, at most
  720h like every duration);
* the results are folded into the node's record with :func:`cre.core.nodecertification.fold.fold`
  (a join: idempotent, order-free, an older result never overwrites a newer one, Uncertified
  never replaces a judgement);
* the node's labels and taint follow the record (:mod:`cre.core.nodecertification.nodestate`),
  the taint within the blast-radius breaker's cap (``maxTainted``, ``maxTaintedPercent``):
  past it no more nodes are tainted, the plan says which were held back, and the
  Certification's ``NodeTaintsHeldBack`` condition is True with the count and the cap (False
  again once nothing is held back).

While the Certification runs (and opted in to labels), the nodes of its running groups are
labelled ``testing`` and those whose group stopped get their record's label back.
Nothing is written while a referenced ConfigMap is missing from the Observation (the cache
has not seen it yet; its arrival wakes the Certification again). Time passing over the
records (a pass expiring) is :mod:`cre.core.nodecertification.expiry`'s, keyed by no
Certification.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final

import attrs

from cre.api import labels as L
from cre.api.certification import CategoryStatus, Certification
from cre.api.conditions import (
    CertificationReason,
    ConditionType,
    FailedNodeReason,
    GroupPhase,
)
from cre.api.durations import MAX_DURATION_SECONDS, duration_seconds
from cre.api.meta import Condition
from cre.api.nodecertification import (
    DEFAULT_VALID_FOR,
    CategoryResult,
    CertificationRef,
    NodeCertification,
    NodeCertificationStatus,
    NodeResult,
    NodeState,
    NodeStatePolicy,
)
from cre.api.workflow import Workflow
from cre.core.common.conditions import condition, set_additive
from cre.core.common.lifecycle import bound_note, true_member
from cre.core.common.observed import NodeView
from cre.core.common.plan import EventSpec
from cre.core.nodecertification.events import held_back_event, state_events, taint_events
from cre.core.nodecertification.fold import fold
from cre.core.nodecertification.nodestate import TAINT_KEY, JsonPatch, node_patch, testing_patch
from cre.core.workflow import noderesults as NR
from cre.core.workflow.deferral import NodeRecord

#: Longest failure message kept per category (bytes).
MESSAGE_LIMIT: Final = 1024
_NO_POLICY: Final = NodeStatePolicy()


@attrs.frozen(kw_only=True)
class NodeCertificationObservation:
    """What the fold of one Certification reads: its categories' Workflows (by name), the
    ``binaryData`` of the result ConfigMaps in its namespace (by name), the NodeCertifications
    and the GPU nodes (by name), and the nodes of any Certification's running groups
    (``under_test``: their ``testing`` label is that run's, not this fold's)."""

    workflows: Mapping[str, Workflow] = attrs.field(factory=dict)
    results: Mapping[str, Mapping[str, bytes]] = attrs.field(factory=dict)
    records: Mapping[str, NodeCertification] = attrs.field(factory=dict)
    nodes: Mapping[str, NodeView] = attrs.field(factory=dict)
    under_test: frozenset[str] = frozenset()


@attrs.frozen(kw_only=True)
class NodeWrite:
    """What one node needs: its record created (``create``: the manifest), its status written
    over ``resource_version`` (the record's, ``""`` when just created), its Node patched."""

    node: str
    create: Mapping[str, Any] | None = None
    resource_version: str = ""
    status: NodeCertificationStatus | None = None
    node_patch: JsonPatch = ()
    # The events of the status write and of the node patch, emitted once each succeeded
    # (:mod:`cre.core.nodecertification.events`).
    events: tuple[EventSpec, ...] = ()
    patch_events: tuple[EventSpec, ...] = ()


@attrs.frozen(kw_only=True)
class NodeCertificationPlan:
    """The writes of one fold, by node name, and when to look again."""

    writes: tuple[NodeWrite, ...] = ()
    requeue_after: float | None = None
    # Failed nodes the blast-radius breaker kept from being tainted, by name.
    held_back: tuple[str, ...] = ()
    # The Certification's conditions with NodeTaintsHeldBack set, when that changed them.
    conditions: tuple[Condition, ...] | None = None


def valid_for_seconds(policy: NodeStatePolicy) -> float:
    """``validFor`` in seconds: the default when unset or unreadable, capped at 720h."""
    try:
        seconds = duration_seconds(policy.valid_for or DEFAULT_VALID_FOR)
    except ValueError:
        seconds = duration_seconds(DEFAULT_VALID_FOR)
    return min(seconds, MAX_DURATION_SECONDS)


def ended_at(cert: Certification) -> datetime | None:
    """When the Certification ended (its Succeeded or Failed condition), ``None`` if it has not."""
    member = true_member(cert.status.conditions)
    if member is None or member.type == "InProgress":
        return None
    return member.last_transition_time


def _blob(obs: NodeCertificationObservation, name: str | None, kind: str
          ) -> bytes | bool | None:
    """The result blob of ConfigMap ``name`` (``b""`` when it holds none); ``False`` when the
    ConfigMap is referenced but not observed; ``None`` when there is no reference."""
    if name is None:
        return None
    data = obs.results.get(name)
    if data is None:
        return False
    return data.get(NR.data_key(kind), b"")


def _bandwidth(wf: Workflow | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for group in wf.status.groups if wf is not None else ():
        if group.bus_bandwidth_gbps is not None:
            for node in group.nodes:
                out[node] = group.bus_bandwidth_gbps
    return out


def _result(*, cs: CategoryStatus, outcome: NodeResult, record: NodeRecord | None,
            busbw: str | None, at: datetime, ref: CertificationRef, valid_for: float
            ) -> CategoryResult:
    threshold: bool | None = None
    if busbw is not None:
        threshold = not (record is not None
                         and record.reason == FailedNodeReason.THRESHOLD_VIOLATION)
    return CategoryResult(
        domain=cs.domain, variant=cs.variant, result=outcome, time=at, certification=ref,
        valid_until=at + timedelta(seconds=valid_for) if outcome == NodeResult.PASSED else None,
        bus_bandwidth_gbps=busbw, threshold_met=threshold,
        failure_scope=(record.scope or None) if record is not None else None,
        reason=(record.reason or None) if record is not None else None,
        message=bound_note(record.message, limit=MESSAGE_LIMIT) if record is not None
        and record.message else None)


def category_results(cert: Certification, obs: NodeCertificationObservation
                     ) -> dict[str, tuple[CategoryResult, ...]] | None:
    """Every judged node's results in ``cert``, by node name; ``None`` while the Certification
    has not ended or a result ConfigMap it references is not observed yet."""
    at = ended_at(cert)
    if at is None:
        return None
    policy = cert.spec.node_state or _NO_POLICY
    ref = CertificationRef(namespace=cert.metadata.namespace or "",
                           name=cert.metadata.name or "", uid=cert.metadata.uid or "")
    valid_for = valid_for_seconds(policy)
    out: dict[str, list[CategoryResult]] = {}
    for cs in cert.status.category_statuses:
        blobs = {kind: _blob(obs, getattr(ref_, "name", None), kind) for kind, ref_ in (
            (NR.SUCCEEDED, cs.succeeded_nodes_ref), (NR.FAILED, cs.failed_nodes_ref),
            (NR.UNCERTIFIED, cs.uncertified_nodes_ref))}
        if any(b is False for b in blobs.values()):
            return None
        failed = _records(blobs[NR.FAILED], NR.FAILED)
        uncertified = _records(blobs[NR.UNCERTIFIED], NR.UNCERTIFIED)
        passed = NR.decode_names(b) if isinstance(b := blobs[NR.SUCCEEDED], bytes) and b else ()
        wf = obs.workflows.get(cs.workflow_ref.name) if cs.workflow_ref is not None else None
        busbw = _bandwidth(wf)
        verdicts: dict[str, tuple[NodeResult, NodeRecord | None]] = {}
        verdicts.update((n, (NodeResult.UNCERTIFIED, r)) for n, r in uncertified.items())
        verdicts.update((n, (NodeResult.PASSED, None)) for n in passed)
        verdicts.update((n, (NodeResult.FAILED, r)) for n, r in failed.items())
        for name, (outcome, why) in verdicts.items():
            out.setdefault(name, []).append(_result(
                cs=cs, outcome=outcome, record=why, busbw=busbw.get(name), at=at,
                ref=ref, valid_for=valid_for))
    return {name: tuple(results) for name, results in out.items()}


def _records(blob: bytes | bool | None, kind: str) -> dict[str, NodeRecord]:
    """The first record per node name (records are sorted by name, then reason)."""
    if not isinstance(blob, bytes) or not blob:
        return {}
    out: dict[str, NodeRecord] = {}
    for record in NR.read_records({NR.data_key(kind): blob}, kind):
        out.setdefault(record.name, record)
    return out


def record_manifest(node: str) -> dict[str, Any]:
    """A new NodeCertification for ``node`` (its status is written next, through /status)."""
    return {"apiVersion": L.API_VERSION, "kind": "NodeCertification",
            "metadata": {"name": node, "labels": {L.MANAGED_BY: L.MANAGED_BY_VALUE}},
            "spec": {"nodeName": node}}


def taint_cap(policy: NodeStatePolicy, nodes: Mapping[str, NodeView]) -> int | None:
    """The breaker's cap (``None``: none): the lower of ``maxTainted`` and
    ``maxTaintedPercent`` of the GPU nodes, rounded down."""
    caps = [c for c in (policy.max_tainted, None if policy.max_tainted_percent is None
                        else policy.max_tainted_percent * len(nodes) // 100) if c is not None]
    return min(caps) if caps else None


def taint_room(policy: NodeStatePolicy, nodes: Mapping[str, NodeView],
               releasing: Iterable[str]) -> int | None:
    """How many more nodes the breaker lets CRE taint (``None``: no cap): the cap
    (:func:`taint_cap`) less the nodes carrying CRE's taint that this pass does not release."""
    cap = taint_cap(policy, nodes)
    if cap is None:
        return None
    gone = set(releasing)
    held = sum(1 for n in nodes.values() if n.name not in gone
               and any(t.key == TAINT_KEY for t in n.taints))
    return max(cap - held, 0)


def breaker_conditions(cert: Certification, *, held: tuple[str, ...], cap: int | None,
                       now: datetime) -> tuple[Condition, ...] | None:
    """``cert``'s conditions with ``NodeTaintsHeldBack`` True (``held`` nodes past the cap) or
    False (nothing held back, only once the condition exists); ``None`` when unchanged."""
    have = condition(cert.status.conditions, ConditionType.NODE_TAINTS_HELD_BACK)
    if not held and have is None:
        return None
    if held:
        reason = CertificationReason.TAINT_CAP_REACHED
        message = (f"{len(held)} failed node(s) not tainted: the blast-radius breaker allows "
                   f"{cap} tainted node(s) (spec.nodeState.maxTainted/maxTaintedPercent)")
    else:
        reason, message = CertificationReason.NO_TAINTS_HELD_BACK, "no failed node held back"
    conditions, _ = set_additive(
        cert.status.conditions, type_=ConditionType.NODE_TAINTS_HELD_BACK, status=bool(held),
        reason=reason, message=message, now=now, generation=cert.metadata.generation)
    return conditions if conditions != cert.status.conditions else None


def _testing(cert: Certification, obs: NodeCertificationObservation) -> NodeCertificationPlan:
    """An unfinished Certification's label patches: ``testing`` on the nodes of its running
    groups, the record's label back on those whose group stopped running."""
    if cert.metadata.deletion_timestamp is not None:
        return NodeCertificationPlan()
    running = {n for wf in obs.workflows.values() for g in wf.status.groups
               if g.phase == GroupPhase.RUNNING for n in g.nodes}
    grouped = {n for wf in obs.workflows.values() for g in wf.status.groups for n in g.nodes}
    writes = []
    for name in sorted(grouped):
        node = obs.nodes.get(name)
        record = obs.records.get(name)
        patch = testing_patch(node, record.status if record is not None else None,
                              running=name in running) if node is not None else ()
        if patch:
            writes.append(NodeWrite(node=name, node_patch=patch))
    return NodeCertificationPlan(writes=tuple(writes))


def reconcile_nodecertification(cert: Certification, obs: NodeCertificationObservation,
                                now: datetime) -> NodeCertificationPlan:
    """The writes that fold ``cert``'s per-node results into the nodes' records at ``now``.

    Failed nodes are tainted (when opted in) in name order while the breaker has room
    (:func:`taint_room`); the rest are ``held_back``, labelled but not tainted."""
    policy = cert.spec.node_state or _NO_POLICY
    if ended_at(cert) is None and policy.labels:
        return _testing(cert, obs)
    results = category_results(cert, obs)
    if results is None or cert.metadata.deletion_timestamp is not None:
        return NodeCertificationPlan()
    statuses = {name: fold(obs.records[name].status if name in obs.records
                           else NodeCertificationStatus(), results[name], now=now)
                for name in sorted(results)}
    tainted = {n.name for n in obs.nodes.values() if any(t.key == TAINT_KEY for t in n.taints)}
    room = taint_room(policy, obs.nodes, (
        n for n, s in statuses.items() if s.state in (NodeState.PASSED, NodeState.EXPIRED)))
    wanting = [n for n, s in statuses.items() if policy.taint and s.state == NodeState.FAILED
               and n in obs.nodes and n not in tainted]
    held = tuple(wanting[room:]) if room is not None else ()
    cap = taint_cap(policy, obs.nodes)
    writes: list[NodeWrite] = []
    for name, status in statuses.items():
        record = obs.records.get(name)
        node = obs.nodes.get(name)
        # A node another run is testing keeps its testing label until that group stops.
        patch = node_patch(node, status, labels=policy.labels and name not in obs.under_test,
                           taint=policy.taint and name not in held) if node is not None else ()
        changed = record is None or status != record.status
        events: tuple[EventSpec, ...] = ()
        if changed:
            events = state_events(name, record.status if record else None, status)
            if name in held:  # a new failure the breaker keeps untainted
                events += (held_back_event(name, cap=cap),)
        if changed or patch:
            writes.append(NodeWrite(
                node=name, create=record_manifest(name) if record is None else None,
                resource_version=record.metadata.resource_version or "" if record else "",
                status=status if changed else None, node_patch=patch, events=events,
                patch_events=taint_events(name, patch)))
    return NodeCertificationPlan(
        writes=tuple(writes), held_back=held,
        conditions=breaker_conditions(cert, held=held, cap=cap, now=now))
