"""Time passing over the NodeCertifications (cre.core.nodecertification.expiry): a pass past its
validUntil turns the record Expired once, the label follows only where CRE put one, and the
next look is at the next expiry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from cre.api.nodecertification import NodeCertification, NodeState
from cre.core.common.observed import NodeView
from cre.core.common.projections import node_view
from cre.core.nodecertification.events import NodeEventReason
from cre.core.nodecertification.expiry import expiry_due, reconcile_expiry
from cre.core.nodecertification.nodestate import STATE_LABEL, TESTING
from cre.core.nodecertification.reconcile import (
    NodeCertificationObservation,
    reconcile_nodecertification,
)
from cre.testing.apiserver.patching import apply_json_patch
from tests.core.nodecertworld import aborted, applied, broken, ended, gpu_nodes, later, results

DAY = 24 * 3600


def _patched(node: NodeView, ops: Any) -> NodeView:
    raw = {"metadata": {"name": node.name, "resourceVersion": node.resource_version,
                        "labels": dict(node.labels)},
           "spec": {"taints": [attrs.asdict(t) for t in node.taints]} if node.taints else {}}
    return node_view(apply_json_patch(raw, list(ops))) if ops else node


def _folded(policy: Mapping[str, Any]) -> tuple[dict[str, NodeCertification],
                                                dict[str, NodeView]]:
    """Records and nodes once a Certification that ended at T0 (validFor 24h) passed gpu-00
    and gpu-01, failed gpu-02 and left gpu-03 Uncertified."""
    obs = NodeCertificationObservation(
        results=results(passed=["gpu-00", "gpu-01"], failed=[broken("gpu-02")],
                        uncertified=[aborted("gpu-03")]),
        nodes=gpu_nodes("gpu-00", "gpu-01", "gpu-02", "gpu-03"))
    cert = ended(node_state={"validFor": "24h", **policy})
    plan = reconcile_nodecertification(cert, obs, later(5))
    patches = {w.node: w.node_patch for w in plan.writes}
    nodes = {n: _patched(v, patches.get(n, ())) for n, v in obs.nodes.items()}
    return dict(applied(obs, plan).records), nodes


def test_a_pass_turns_expired_at_its_valid_until_and_only_once() -> None:
    """Before validUntil nothing is written and the next look is exactly at it; at validUntil
    the passed records turn Expired (each write carries one Expired event), the failed and
    Uncertified ones are left alone, and once written nothing more is planned and no look is
    asked."""
    records, nodes = _folded({})
    before = reconcile_expiry(records, nodes, later(DAY - 10))
    assert before.writes == () and before.requeue_after == 10
    plan = reconcile_expiry(records, nodes, later(DAY))
    assert {w.node: w.status.state for w in plan.writes if w.status} == {
        "gpu-00": NodeState.EXPIRED, "gpu-01": NodeState.EXPIRED}
    assert all([e.reason for e in w.events] == [NodeEventReason.EXPIRED] for w in plan.writes)
    assert all(w.status is not None and w.status.categories_passed == "0/1"
               for w in plan.writes)
    assert plan.requeue_after is None
    done = applied(NodeCertificationObservation(records=records), plan).records
    again = reconcile_expiry(done, nodes, later(DAY + 60))
    assert again.writes == () and again.requeue_after is None


def test_the_expired_label_goes_only_where_cre_put_a_label() -> None:
    """With labels opted in, the passed label turns expired (certified-until kept); without
    the opt-in no label is added; a node under test keeps testing."""
    records, nodes = _folded({"labels": True})
    nodes["gpu-01"] = attrs.evolve(nodes["gpu-01"], labels=tuple(
        (k, TESTING if k == STATE_LABEL else v) for k, v in nodes["gpu-01"].labels))
    plan = reconcile_expiry(records, nodes, later(DAY))
    by_node = {w.node: _patched(nodes[w.node], w.node_patch) for w in plan.writes}
    assert by_node["gpu-00"].label(STATE_LABEL) == "expired"
    assert by_node["gpu-00"].label("cre.dev/certified-until") is not None
    assert by_node["gpu-01"].label(STATE_LABEL) == TESTING
    bare_records, bare_nodes = _folded({})
    bare = reconcile_expiry(bare_records, bare_nodes, later(DAY))
    assert all(w.node_patch == () for w in bare.writes)


def test_the_certification_path_flags_a_record_it_finds_expired() -> None:
    """A Certification folded in only after its passes expired writes Expired records, with
    one Expired event; folding it again writes nothing."""
    obs = NodeCertificationObservation(results=results(passed=["gpu-00"]),
                                       nodes=gpu_nodes("gpu-00"))
    cert = ended(node_state={"validFor": "1h"})
    plan = reconcile_nodecertification(cert, obs, later(7200))
    (write,) = plan.writes
    assert write.status is not None and write.status.state == NodeState.EXPIRED
    assert [e.reason for e in write.events] == [NodeEventReason.EXPIRED]
    assert reconcile_nodecertification(cert, applied(obs, plan), later(7300)).writes == ()


def test_expiry_due_is_the_next_time_alone_changes_a_record() -> None:
    """A record is due at its earliest pass's validUntil, at once when a pass already expired
    but the record does not say so, and never when it holds no pass."""
    records, _ = _folded({})
    assert expiry_due(records["gpu-00"], later(5)) == later(DAY)
    assert expiry_due(records["gpu-00"], later(DAY + 1)) == later(DAY + 1)
    assert expiry_due(records["gpu-02"], later(5)) is None
    fresh = reconcile_expiry(records, {}, later(DAY))
    done = applied(NodeCertificationObservation(records=records), fresh).records
    assert expiry_due(done["gpu-00"], later(DAY + 1)) is None
