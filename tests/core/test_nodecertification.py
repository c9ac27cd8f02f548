"""The NodeCertification core: the fold of per-node results is a join (idempotent, order-free,
monotonic in time, never Uncertified over a judgement), an ended Certification's results land
in every judged node's record, and the node patch touches only CRE's labels and taint."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st

from cre.api.conditions import GroupPhase
from cre.api.nodecertification import (
    CategoryResult,
    CertificationRef,
    NodeCertificationStatus,
    NodeResult,
    NodeState,
)
from cre.api.workflow import GroupStatus, WorkflowStatus
from cre.core.common.observed import NodeTaint
from cre.core.common.projections import node_view
from cre.core.nodecertification.fold import fold, fold_results, node_state
from cre.core.nodecertification.nodestate import (
    STATE_LABEL,
    TAINT_KEY,
    UNTIL_LABEL,
    node_patch,
    until_label,
)
from cre.core.nodecertification.reconcile import (
    NodeCertificationObservation,
    reconcile_nodecertification,
)
from cre.testing.apiserver.patching import apply_json_patch
from tests.core.nodecertworld import (
    T0,
    aborted,
    applied,
    broken,
    ended,
    gpu_nodes,
    later,
    results,
)
from tests.core.tierworld import gpu_node, nodes, workflow

results_st = st.builds(
    CategoryResult,
    domain=st.just("communication"),
    variant=st.sampled_from(["nccl-all-reduce", "nccl-loopback", "dcgm"]),
    result=st.sampled_from(list(NodeResult)),
    time=st.integers(0, 5).map(lambda h: T0 + timedelta(hours=h)),
    certification=st.sampled_from(["a", "b", "c"]).map(
        lambda n: CertificationRef(namespace="certs", name=n)),
    valid_until=st.none() | st.integers(1, 12).map(lambda h: T0 + timedelta(hours=h)),
    last_pass_time=st.none() | st.integers(0, 5).map(lambda h: T0 + timedelta(hours=h)),
)
batches = st.lists(results_st, max_size=6)


@given(batches, batches)
def test_folding_again_changes_nothing(current: list[CategoryResult],
                                       incoming: list[CategoryResult]) -> None:
    """Re-running the fold on the same results leaves the record as it was."""
    once = fold_results(current, incoming)
    assert fold_results(once, incoming) == once
    assert fold_results(once, once) == once


@given(st.lists(batches, max_size=4), st.randoms(use_true_random=False))
def test_the_order_of_certifications_does_not_matter(runs: list[list[CategoryResult]],
                                                     rnd: Any) -> None:
    """Folding the same Certifications in any order gives the same record."""
    def folded(order: list[list[CategoryResult]]) -> tuple[CategoryResult, ...]:
        out: tuple[CategoryResult, ...] = ()
        for run in order:
            out = fold_results(out, run)
        return out

    shuffled = list(runs)
    rnd.shuffle(shuffled)
    assert folded(runs) == folded(shuffled)


@given(results_st, st.integers(1, 5))
def test_an_older_result_never_overwrites_a_newer_one(newer: CategoryResult,
                                                      hours: int) -> None:
    """A result of an earlier Certification folded in late leaves the newer one of its kind
    (a judgement, or Uncertified when the newer is Uncertified); only the latest pass time is
    shared."""
    flipped = {NodeResult.PASSED: NodeResult.FAILED, NodeResult.FAILED: NodeResult.PASSED,
               NodeResult.UNCERTIFIED: NodeResult.UNCERTIFIED}
    older = attrs.evolve(newer, time=newer.time - timedelta(hours=hours),
                         result=flipped[newer.result], reason="Older")
    (kept,) = fold_results((newer,), (older,))
    assert attrs.evolve(kept, last_pass_time=None) == attrs.evolve(newer, last_pass_time=None)
    # ... and lastPassTime is the latest pass either knew of.
    passes = [r.time for r in (newer, older) if r.result == NodeResult.PASSED]
    passes += [t for t in (newer.last_pass_time, older.last_pass_time) if t is not None]
    assert kept.last_pass_time == (max(passes) if passes else None)


@given(batches, st.lists(results_st.map(
    lambda r: attrs.evolve(r, result=NodeResult.UNCERTIFIED, valid_until=None)), max_size=4))
def test_uncertified_results_never_change_a_judged_state(current: list[CategoryResult],
                                                         infra: list[CategoryResult]) -> None:
    """Evidence of the infrastructure only never turns a judged node Failed, nor un-fails it."""
    before = fold(NodeCertificationStatus(), current, now=T0)
    after = fold(before, infra, now=T0)
    if before.state != NodeState.UNCERTIFIED:
        assert after.state == before.state
    assert after.state != NodeState.FAILED or before.state == NodeState.FAILED


def test_a_later_failure_keeps_when_the_node_last_passed() -> None:
    """Folding a failure over a pass keeps the pass's time as lastPassTime; an older pass
    folded late does not move it back."""
    ref = CertificationRef(namespace="certs", name="a")
    passed = CategoryResult(domain="d", variant="v", result=NodeResult.PASSED, time=later(60),
                            certification=ref, valid_until=later(600))
    failed = attrs.evolve(passed, result=NodeResult.FAILED, time=later(120), valid_until=None,
                          certification=CertificationRef(namespace="certs", name="b"))
    (kept,) = fold(fold(NodeCertificationStatus(), [passed], now=T0), [failed],
                   now=T0).categories
    assert kept.result == NodeResult.FAILED and kept.last_pass_time == later(60)
    older = attrs.evolve(passed, time=later(30), certification=CertificationRef(
        namespace="certs", name="c"))
    (still,) = fold_results([kept], [older])
    assert still.last_pass_time == later(60)


def test_a_pass_expires_at_its_valid_until() -> None:
    """A record whose pass is past validUntil is Expired; a failure stays Failed."""
    ref = CertificationRef(namespace="certs", name="a")
    passed = CategoryResult(domain="d", variant="v", result=NodeResult.PASSED, time=T0,
                            certification=ref, valid_until=later(60))
    assert node_state((passed,), later(59)) == NodeState.PASSED
    assert node_state((passed,), later(60)) == NodeState.EXPIRED
    failed = attrs.evolve(passed, variant="w", result=NodeResult.FAILED, valid_until=None)
    assert node_state((passed, failed), later(120)) == NodeState.FAILED


def _world() -> NodeCertificationObservation:
    return NodeCertificationObservation(
        results=results(passed=["gpu-00", "gpu-01"], failed=[broken("gpu-02")],
                        uncertified=[aborted("gpu-03")]),
        nodes=gpu_nodes("gpu-00", "gpu-01", "gpu-02", "gpu-03"))


def test_an_ended_certification_writes_every_judged_nodes_record() -> None:
    """Passed, Failed and Uncertified nodes each get their record, with the failure class,
    the Certification and a validUntil 168h after it ended; no label without the opt-in."""
    plan = reconcile_nodecertification(ended(), _world(), later(5))
    by_node = {w.node: w for w in plan.writes}
    assert sorted(by_node) == ["gpu-00", "gpu-01", "gpu-02", "gpu-03"]
    assert all(w.create is not None and w.node_patch == () for w in plan.writes)
    states = {n: w.status.state for n, w in by_node.items() if w.status is not None}
    assert states == {"gpu-00": NodeState.PASSED, "gpu-01": NodeState.PASSED,
                      "gpu-02": NodeState.FAILED, "gpu-03": NodeState.UNCERTIFIED}
    ok = by_node["gpu-00"].status
    assert ok is not None and ok.valid_until == T0 + timedelta(hours=168)
    assert ok.categories_passed == "1/1"
    bad = by_node["gpu-02"].status
    assert bad is not None
    (cat,) = bad.categories
    assert (cat.failure_scope, cat.reason, cat.certification.name) == (
        "Node", "HardwareFailureDetected", "cert")


def test_the_fold_comes_to_rest() -> None:
    """Once the records are written, the same Certification plans no write."""
    obs = _world()
    plan = reconcile_nodecertification(ended(), obs, later(5))
    again = reconcile_nodecertification(ended(), applied(obs, plan), later(6))
    assert again.writes == ()


def test_nothing_is_written_before_the_end_or_the_results() -> None:
    """A Certification still running, or whose result ConfigMaps are not cached yet, writes
    nothing."""
    running = attrs.evolve(ended(), status=attrs.evolve(ended().status, conditions=()))
    assert reconcile_nodecertification(running, _world(), later(5)).writes == ()
    partial = attrs.evolve(_world(), results={
        k: v for k, v in _world().results.items() if not k.startswith("failed")})
    assert reconcile_nodecertification(ended(), partial, later(5)).writes == ()


def test_labels_and_taint_follow_the_record_and_the_opt_in() -> None:
    """With labels and taint opted in the failed node is labelled failed and tainted, the
    passed ones labelled passed with their validUntil, the Uncertified one untouched; a later
    Certification that passes the failed node labels it passed and removes the taint."""
    opt_in = {"labels": True, "taint": True, "validFor": "24h"}
    obs = _world()
    plan = reconcile_nodecertification(ended(node_state=opt_in), obs, later(5))
    nodes = {n: _patched(obs.nodes[n], w.node_patch) for n, w in
             ((w.node, w) for w in plan.writes)}
    assert _labels(nodes["gpu-00"]) == {STATE_LABEL: "passed",
                                        UNTIL_LABEL: until_label(T0 + timedelta(hours=24))}
    assert _labels(nodes["gpu-02"]) == {STATE_LABEL: "failed"}
    assert [t.key for t in nodes["gpu-02"].taints] == [TAINT_KEY]
    assert _labels(nodes["gpu-03"]) == {} and nodes["gpu-03"].taints == ()

    second = ended(name="again", at=later(3600), node_state=opt_in)
    obs2 = attrs.evolve(applied(obs, plan), nodes={n: nodes[n] for n in nodes},
                        results=results(name="again", passed=["gpu-02"]))
    plan2 = reconcile_nodecertification(second, obs2, later(3700))
    (write,) = plan2.writes
    healed = _patched(nodes["gpu-02"], write.node_patch)
    assert _labels(healed)[STATE_LABEL] == "passed" and healed.taints == ()
    assert write.status is not None and write.status.last_certification is not None
    assert write.status.last_certification.name == "again"


def test_an_older_certification_folded_late_changes_nothing() -> None:
    """The first Certification reconciled again after a newer one (a restart) writes nothing."""
    opt_in = {"labels": True, "taint": True}
    obs = _world()
    first = ended(node_state=opt_in)
    plan = reconcile_nodecertification(first, obs, later(5))
    nodes = {w.node: _patched(obs.nodes[w.node], w.node_patch) for w in plan.writes}
    obs2 = attrs.evolve(applied(obs, plan), nodes=nodes,
                        results={**obs.results, **results(name="again", passed=["gpu-02"])})
    newer = ended(name="again", at=later(3600), node_state=opt_in)
    plan2 = reconcile_nodecertification(newer, obs2, later(3700))
    nodes2 = {**nodes, **{w.node: _patched(nodes[w.node], w.node_patch)
                          for w in plan2.writes}}
    obs3 = attrs.evolve(applied(obs2, plan2), nodes=nodes2)
    assert reconcile_nodecertification(first, obs3, later(3800)).writes == ()


@given(st.lists(st.tuples(st.sampled_from(["a", "cre.dev/certification", "x/y"]),
                          st.sampled_from(["1", "passed", "failed"])), max_size=3),
       st.lists(st.sampled_from([TAINT_KEY, "other", "node.kubernetes.io/not-ready"]),
                max_size=3),
       st.sampled_from(list(NodeState)), st.booleans(), st.booleans())
def test_the_node_patch_touches_only_cres_labels_and_taint(
        labels: list[tuple[str, str]], taints: list[str], state: NodeState,
        with_labels: bool, with_taint: bool) -> None:
    """Every operation of the node patch tests the resourceVersion or names one of CRE's two
    labels or CRE's taint; applied, it leaves every other label and taint as it was."""
    node = attrs.evolve(gpu_node("n", labels=labels,
                                 taints=[NodeTaint(key=k, effect="NoSchedule") for k in taints]),
                        resource_version="7")
    status = NodeCertificationStatus(state=state, valid_until=T0)
    ops = node_patch(node, status, labels=with_labels, taint=with_taint)
    if not ops:
        return
    assert ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}
    for op in ops[1:]:
        path = op["path"]
        assert path in ("/metadata/labels/cre.dev~1certification",
                        "/metadata/labels/cre.dev~1certified-until", "/metadata/labels",
                        "/spec/taints", "/spec/taints/-") or path.startswith("/spec/taints/"), op
        if path.startswith("/spec/taints/") and op["op"] == "remove":
            assert node.taints[int(path.rsplit("/", 1)[1])].key == TAINT_KEY
    after = _patched(node, ops)
    ours = {STATE_LABEL, UNTIL_LABEL}
    assert {k: v for k, v in after.labels if k not in ours} == \
        {k: v for k, v in node.labels if k not in ours}
    assert [t for t in after.taints if t.key != TAINT_KEY] == \
        [t for t in node.taints if t.key != TAINT_KEY]


def _patched(node: Any, ops: Any) -> Any:
    raw = {"metadata": {"name": node.name, "resourceVersion": node.resource_version,
                        "labels": dict(node.labels)},
           "spec": {"taints": [attrs.asdict(t) for t in node.taints]} if node.taints else {}}
    return node_view(apply_json_patch(raw, list(ops))) if ops else node


def _labels(node: Any) -> dict[str, str]:
    return {k: v for k, v in node.labels if k.startswith("cre.dev/")}


def test_the_breaker_stops_tainting_at_its_cap() -> None:
    """With maxTainted 1 and one node already carrying CRE's taint, two newly failed nodes are
    labelled failed but not tainted, and the plan names them as held back; a percentage cap
    counts against the GPU nodes (25% of 4: one node)."""
    tainted = gpu_nodes("gpu-00", "gpu-01", "gpu-02", "gpu-03")
    tainted["gpu-03"] = attrs.evolve(tainted["gpu-03"], taints=(
        NodeTaint(key=TAINT_KEY, value="true", effect="NoSchedule"),))
    obs = NodeCertificationObservation(
        results=results(passed=["gpu-00"], failed=[broken("gpu-01"), broken("gpu-02")]),
        nodes=tainted)
    for policy in ({"maxTainted": 1}, {"maxTaintedPercent": 25}):
        cert = ended(node_state={"labels": True, "taint": True, **policy})
        plan = reconcile_nodecertification(cert, obs, later(5))
        assert plan.held_back == ("gpu-01", "gpu-02"), policy
        patched = {w.node: _patched(obs.nodes[w.node], w.node_patch) for w in plan.writes}
        assert all(p.taints == () for n, p in patched.items() if n != "gpu-03")
        assert _labels(patched["gpu-01"])[STATE_LABEL] == "failed"
    roomy = ended(node_state={"labels": True, "taint": True, "maxTainted": 2})
    plan = reconcile_nodecertification(roomy, obs, later(5))
    assert plan.held_back == ("gpu-02",)
    assert TAINT_KEY in str(next(w.node_patch for w in plan.writes if w.node == "gpu-01"))


def test_the_breaker_condition_says_how_many_and_the_cap_and_clears() -> None:
    """Past the cap the Certification's NodeTaintsHeldBack is True with the count and the cap;
    an unchanged pass plans no condition write; once a node passes and frees room, the
    condition turns False; a Certification that never held any back gets no condition."""
    nodes = gpu_nodes("gpu-00", "gpu-01", "gpu-02", "gpu-03")
    nodes["gpu-03"] = attrs.evolve(nodes["gpu-03"], taints=(
        NodeTaint(key=TAINT_KEY, value="true", effect="NoSchedule"),))
    obs = NodeCertificationObservation(
        results=results(failed=[broken("gpu-01"), broken("gpu-02")]), nodes=nodes)
    cert = ended(node_state={"taint": True, "maxTainted": 2})
    plan = reconcile_nodecertification(cert, obs, later(5))
    assert plan.held_back == ("gpu-02",) and plan.conditions is not None
    (held,) = [c for c in plan.conditions if c.type == "NodeTaintsHeldBack"]
    assert (held.status, held.reason) == ("True", "TaintCapReached")
    assert "1 failed node(s)" in held.message and "allows 2" in held.message
    written = attrs.evolve(cert, status=attrs.evolve(cert.status, conditions=plan.conditions))
    assert reconcile_nodecertification(written, obs, later(6)).conditions is None
    freed = dict(nodes, **{"gpu-03": attrs.evolve(nodes["gpu-03"], taints=())})
    cleared = reconcile_nodecertification(written, attrs.evolve(obs, nodes=freed), later(7))
    assert cleared.held_back == () and cleared.conditions is not None
    (off,) = [c for c in cleared.conditions if c.type == "NodeTaintsHeldBack"]
    assert (off.status, off.reason) == ("False", "NoTaintsHeldBack")
    never = ended(node_state={"taint": True})
    assert reconcile_nodecertification(never, obs, later(5)).conditions is None


def test_a_node_released_by_this_pass_frees_room_for_another() -> None:
    """A tainted node that passes again no longer counts against the cap."""
    nodes = gpu_nodes("gpu-00", "gpu-01")
    nodes["gpu-00"] = attrs.evolve(nodes["gpu-00"], taints=(
        NodeTaint(key=TAINT_KEY, value="true", effect="NoSchedule"),))
    obs = NodeCertificationObservation(
        results=results(passed=["gpu-00"], failed=[broken("gpu-01")]), nodes=nodes)
    cert = ended(node_state={"taint": True, "maxTainted": 1})
    plan = reconcile_nodecertification(cert, obs, later(5))
    assert plan.held_back == ()
    patched = {w.node: _patched(obs.nodes[w.node], w.node_patch) for w in plan.writes}
    assert patched["gpu-00"].taints == ()
    assert [t.key for t in patched["gpu-01"].taints] == [TAINT_KEY]


def test_nodes_of_running_groups_are_labelled_testing_and_get_their_label_back() -> None:
    """While a Certification with labels runs, its running group's nodes are labelled testing;
    a node whose group stopped gets its record's label back (or none without a record); once
    it ended, an Uncertified node loses testing and a judged one gets its verdict's label."""
    running = attrs.evolve(ended(node_state={"labels": True}),
                           status=attrs.evolve(ended().status, conditions=()))
    wf = attrs.evolve(workflow(nodes(4)), status=WorkflowStatus(groups=(
        GroupStatus(name="g0", nodes=("gpu-00", "gpu-01"), phase=GroupPhase.RUNNING),
        GroupStatus(name="g1", nodes=("gpu-02", "gpu-03"), phase=GroupPhase.SUCCEEDED))))
    views = gpu_nodes("gpu-00", "gpu-01", "gpu-02", "gpu-03")
    views["gpu-02"] = attrs.evolve(views["gpu-02"], labels=(
        *views["gpu-02"].labels, (STATE_LABEL, "testing")))
    obs = NodeCertificationObservation(workflows={"cert-wf": wf}, nodes=views)
    plan = reconcile_nodecertification(running, obs, later(5))
    patched = {w.node: _patched(views[w.node], w.node_patch) for w in plan.writes}
    assert sorted(patched) == ["gpu-00", "gpu-01", "gpu-02"]
    assert _labels(patched["gpu-00"]) == {STATE_LABEL: "testing"}
    assert _labels(patched["gpu-02"]) == {}
    assert all(w.status is None and w.create is None for w in plan.writes)

    done = ended(node_state={"labels": True})
    obs2 = NodeCertificationObservation(
        results=results(passed=["gpu-00"], uncertified=[aborted("gpu-01")]),
        nodes={**views, **patched})
    plan2 = reconcile_nodecertification(done, obs2, later(10))
    after = {w.node: _patched(obs2.nodes[w.node], w.node_patch) for w in plan2.writes}
    assert _labels(after["gpu-00"])[STATE_LABEL] == "passed"
    assert _labels(after["gpu-01"]) == {}


def test_an_ended_run_leaves_the_testing_label_of_another_runs_node() -> None:
    """A node an ended Certification passed, now under test by another run, keeps testing when
    the ended one is folded again (a node event wakes it); once no run tests it, the fold puts
    passed back."""
    opt_in = {"labels": True}
    views = gpu_nodes("gpu-00")
    views["gpu-00"] = attrs.evolve(views["gpu-00"], labels=(
        *views["gpu-00"].labels, (STATE_LABEL, "testing")))
    obs = NodeCertificationObservation(results=results(passed=["gpu-00"]), nodes=views,
                                       under_test=frozenset({"gpu-00"}))
    plan = reconcile_nodecertification(ended(node_state=opt_in), obs, later(5))
    (write,) = plan.writes
    assert _labels(_patched(views["gpu-00"], write.node_patch)) == {STATE_LABEL: "testing"}
    free = reconcile_nodecertification(ended(node_state=opt_in),
                                       attrs.evolve(obs, under_test=frozenset()), later(5))
    (write,) = free.writes
    assert _labels(_patched(views["gpu-00"], write.node_patch))[STATE_LABEL] == "passed"
