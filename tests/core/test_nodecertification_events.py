"""The events of NodeCertification changes: one per change (failed, passed again, uncertified,
tainted, released, held back by the breaker), none when a pass writes nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from cre.core.common.observed import NodeView
from cre.core.common.plan import EventSeverity
from cre.core.common.projections import node_view
from cre.core.nodecertification.events import NodeEventReason
from cre.core.nodecertification.reconcile import (
    NodeCertificationObservation,
    NodeCertificationPlan,
    reconcile_nodecertification,
)
from cre.testing.apiserver.patching import apply_json_patch
from tests.core.nodecertworld import aborted, applied, broken, ended, gpu_nodes, later, results

R = NodeEventReason


def _patched(node: NodeView, ops: Any) -> NodeView:
    raw = {"metadata": {"name": node.name, "resourceVersion": node.resource_version,
                        "labels": dict(node.labels)},
           "spec": {"taints": [attrs.asdict(t) for t in node.taints]} if node.taints else {}}
    return node_view(apply_json_patch(raw, list(ops))) if ops else node


def _apply(obs: NodeCertificationObservation, plan: NodeCertificationPlan
           ) -> NodeCertificationObservation:
    """``obs`` once ``plan``'s records were written and its node patches applied."""
    patches = {w.node: w.node_patch for w in plan.writes}
    nodes = {n: _patched(v, patches.get(n, ())) for n, v in obs.nodes.items()}
    return attrs.evolve(applied(obs, plan), nodes=nodes)


def _events(plan: NodeCertificationPlan) -> dict[str, list[tuple[str, str]]]:
    """Per node, (type, reason) of its status events then its patch events."""
    return {w.node: [(str(e.type), str(e.reason)) for e in (*w.events, *w.patch_events)]
            for w in plan.writes if w.events or w.patch_events}


def _fold(obs: NodeCertificationObservation, *, name: str, at: float,
          policy: Mapping[str, Any], passed: list[str] | None = None,
          failed: list[str] | None = None) -> tuple[NodeCertificationPlan,
                                                    NodeCertificationObservation]:
    cert = ended(name=name, at=later(at), node_state={"validFor": "24h", **policy})
    obs = attrs.evolve(obs, results=results(name=name, passed=passed or [],
                                            failed=[broken(n) for n in failed or []]))
    plan = reconcile_nodecertification(cert, obs, later(at + 5))
    return plan, _apply(obs, plan)


TAINT = {"labels": True, "taint": True}


def test_failing_then_passing_again_emits_one_event_per_change() -> None:
    """A node that fails gets one Warning NodeCertificationFailed naming the category, the
    Certification and the reason, and one Warning NodeTainted; passing again gives one Normal
    NodeCertificationPassed (again) and one Normal NodeTaintReleased; a first pass says
    nothing."""
    obs = NodeCertificationObservation(nodes=gpu_nodes("gpu-00", "gpu-01"))
    plan, obs = _fold(obs, name="c1", at=0, policy=TAINT, passed=["gpu-01"], failed=["gpu-00"])
    assert _events(plan) == {"gpu-00": [("Warning", R.FAILED), ("Warning", R.TAINTED)]}
    (failed,) = plan.writes[0].events
    assert "communication/nccl-all-reduce in certs/c1" in failed.message
    assert "HardwareFailureDetected" in failed.message
    plan, obs = _fold(obs, name="c2", at=600, policy=TAINT, passed=["gpu-00", "gpu-01"])
    assert _events(plan) == {"gpu-00": [("Normal", R.PASSED), ("Normal", R.TAINT_RELEASED)]}
    (again,) = plan.writes[0].events
    assert "passed again" in again.message and again.type == EventSeverity.NORMAL


def test_a_repeated_pass_emits_nothing() -> None:
    """Folding the same Certification again (a resync, a requeue, a record event) plans no
    write, so no event: at most one event per change."""
    obs = NodeCertificationObservation(nodes=gpu_nodes("gpu-00", "gpu-01"))
    plan, obs = _fold(obs, name="c1", at=0, policy=TAINT, passed=["gpu-01"], failed=["gpu-00"])
    assert _events(plan)
    for _ in range(3):
        again, obs = _fold(obs, name="c1", at=0, policy=TAINT, passed=["gpu-01"],
                           failed=["gpu-00"])
        assert again.writes == ()
    later_pass, obs = _fold(obs, name="c2", at=600, policy=TAINT, passed=["gpu-01"])
    assert _events(later_pass) == {}  # Passed -> Passed: a new time, no state change


def test_a_new_uncertified_record_says_why_and_never_replaces_a_judgement() -> None:
    """A node first seen Uncertified gets one Normal NodeCertificationUncertified with the
    reason; an Uncertified result on a judged node changes no state and emits nothing."""
    cert = ended(name="c1", at=later(0), node_state={"labels": True})
    obs = NodeCertificationObservation(
        nodes=gpu_nodes("gpu-00", "gpu-01"),
        results=results(name="c1", passed=["gpu-01"], uncertified=[aborted("gpu-00")]))
    plan = reconcile_nodecertification(cert, obs, later(5))
    assert _events(plan) == {"gpu-00": [("Normal", R.UNCERTIFIED)]}
    (why,) = next(w for w in plan.writes if w.node == "gpu-00").events
    assert "Platform/PeerBroken" in why.message
    obs = _apply(obs, plan)
    cert2 = ended(name="c2", at=later(600), node_state={"labels": True})
    obs = attrs.evolve(obs, results=results(name="c2", uncertified=[aborted("gpu-01")]))
    assert _events(reconcile_nodecertification(cert2, obs, later(605))) == {}


def test_the_breaker_holds_back_with_one_event_per_node_and_taints_once_room_frees() -> None:
    """With maxTainted 1 and two failing nodes, the first is tainted (NodeTainted) and the
    second held back (NodeTaintHeldBack, once); when the first passes again it is released
    and the held node gets the taint, each with one event."""
    policy = {**TAINT, "maxTainted": 1}
    obs = NodeCertificationObservation(nodes=gpu_nodes("gpu-00", "gpu-01"))
    plan, obs = _fold(obs, name="c1", at=0, policy=policy, failed=["gpu-00", "gpu-01"])
    assert _events(plan) == {
        "gpu-00": [("Warning", R.FAILED), ("Warning", R.TAINTED)],
        "gpu-01": [("Warning", R.FAILED), ("Warning", R.TAINT_HELD_BACK)]}
    again, obs = _fold(obs, name="c1", at=0, policy=policy, failed=["gpu-00", "gpu-01"])
    assert _events(again) == {}
    freed, obs = _fold(obs, name="c2", at=600, policy=policy, passed=["gpu-00"])
    assert _events(freed) == {"gpu-00": [("Normal", R.PASSED), ("Normal", R.TAINT_RELEASED)]}
    # The held node's record did not change: the taint comes with c1's next pass (a node event
    # wakes the Certification folded last into its record).
    retry = reconcile_nodecertification(
        ended(name="c1", at=later(0), node_state={"validFor": "24h", **policy}),
        attrs.evolve(obs, results=results(name="c1", failed=[broken("gpu-00"),
                                                             broken("gpu-01")])), later(700))
    assert _events(retry) == {"gpu-01": [("Warning", R.TAINTED)]}
