"""The fleet-relative rule (cre.core.job.fleet): the statistics, the rule's invariants under
hypothesis, and the Job's verdict with ``relativeThreshold`` (Report changes no verdict, Fail
blames only the outliers, a node without figures is never an outlier)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cre.api.common import RelativeAction, RelativeThreshold
from cre.api.conditions import ConditionType, FailedNodeReason, JobReason, OutlierBasis
from cre.api.converter import from_dict
from cre.api.job import Job
from cre.api.measurement import BandwidthMeasurement
from cre.api.validate import validate
from cre.core.common.observed import NodeView
from cre.core.job.bandwidth import validate_succeeded
from cre.core.job.fleet import find_outliers, median, percentile
from tests.core.test_measurement_core import T0, _job, at
from tests.core.test_pernode_measurement import _final

# Bandwidths as measured (GB/s): positive, finite, away from subnormals and overflow so a
# scaling by a power of two is exact.
VALUE = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
FLEET = st.dictionaries(st.text("abcdefgh", min_size=1, max_size=4), VALUE, min_size=1,
                        max_size=24)
PERCENT = st.integers(min_value=1, max_value=100)
MIN_PEERS = st.integers(min_value=1, max_value=8)


def _outliers(values: dict[str, float], *, percent: int, min_peers: int,
              domains: dict[str, str | None] | None = None) -> set[str]:
    return {o.node for o in find_outliers(values, domains=domains or {}, percent=percent,
                                          min_peers=min_peers)}


def test_percentile_interpolates_between_closest_ranks() -> None:
    """Type 7: position q(n-1) between the sorted values; the median of an even count is the
    mean of the middle two."""
    assert percentile([10.0, 20.0, 30.0, 40.0, 50.0], 0.1) == pytest.approx(14.0)
    assert percentile([50.0, 10.0], 0.1) == pytest.approx(14.0)
    assert percentile([7.0], 0.1) == 7.0
    assert median([1.0, 2.0, 3.0, 10.0]) == 2.5
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert percentile([1.0, 2.0], 1.0) == 2.0 and percentile([1.0, 2.0], 0.0) == 1.0
    with pytest.raises(ValueError):
        percentile([], 0.5)


def test_one_slow_node_among_32_is_the_only_outlier() -> None:
    """31 nodes at about 480 GB/s and one at 60 %: only that one, against the fleet's p10."""
    values = {f"n{i:02}": 480.0 + (i % 5) for i in range(31)} | {"slow": 288.0}
    found = find_outliers(values, domains={}, percent=80, min_peers=4)
    assert [(o.node, o.basis, o.peers) for o in found] == [("slow", OutlierBasis.FLEET_P10, 31)]
    assert found[0].reference == pytest.approx(percentile([v for n, v in values.items()
                                                           if n != "slow"], 0.1))
    assert "below 80% of the p10 of the 31 other measured nodes" in found[0].message


def test_a_domain_with_enough_peers_uses_their_median() -> None:
    """A node is compared with its own domain's median when the domain holds min_peers other
    nodes, with the fleet's p10 otherwise (a slow domain does not hide a slower node in it, a
    fast domain does not make a normal node an outlier)."""
    values = {"a1": 100.0, "a2": 100.0, "a3": 100.0, "a4": 100.0, "a5": 70.0,
              "b1": 60.0, "b2": 60.0}
    domains: dict[str, str | None] = {f"a{i}": "A" for i in range(1, 6)} | {"b1": "B", "b2": "B"}
    found = find_outliers(values, domains=domains, percent=80, min_peers=4)
    assert [(o.node, o.basis, o.domain, o.reference) for o in found] == [
        ("a5", OutlierBasis.PEER_MEDIAN, "A", 100.0)]
    # B has one peer only: b1 and b2 fall back to the fleet's p10 (60 among the others).
    assert "b1" not in {o.node for o in found}


def test_a_node_exactly_at_the_bound_is_not_flagged() -> None:
    """Strictly below: 80 against a p10 of 100 at 80 % is not an outlier, 79.99 is."""
    fleet = {f"n{i}": 100.0 for i in range(4)}
    assert _outliers(fleet | {"x": 80.0}, percent=80, min_peers=4) == set()
    assert _outliers(fleet | {"x": 79.99}, percent=80, min_peers=4) == {"x"}
    assert _outliers(fleet, percent=100, min_peers=1) == set()


def test_too_few_peers_judges_nobody() -> None:
    """With fewer other measured nodes than min_peers nobody is compared."""
    assert _outliers({"a": 100.0, "b": 100.0, "c": 1.0}, percent=80, min_peers=4) == set()
    assert _outliers({"a": 100.0, "b": 100.0, "c": 1.0}, percent=80, min_peers=2) == {"c"}


@given(FLEET, PERCENT, MIN_PEERS)
def test_the_fastest_node_is_never_an_outlier(values: dict[str, float], percent: int,
                                               min_peers: int) -> None:
    """A node at or above every other node is never an outlier."""
    top = max(values.values())
    fastest = {n for n, v in values.items() if v == top}
    assert not fastest & _outliers(values, percent=percent, min_peers=min_peers)


@given(FLEET, PERCENT, MIN_PEERS)
def test_a_node_at_or_above_the_fleet_median_is_never_an_outlier(
        values: dict[str, float], percent: int, min_peers: int) -> None:
    """Without domains, a node at or above the median of the other nodes is not flagged."""
    found = _outliers(values, percent=percent, min_peers=min_peers)
    for node, value in values.items():
        others = [v for n, v in values.items() if n != node]
        if others and value >= median(others):
            assert node not in found


@given(FLEET, PERCENT, MIN_PEERS, st.sampled_from([0.25, 0.5, 2.0, 4.0, 1024.0]),
       st.dictionaries(st.text("abcdefgh", min_size=1, max_size=4),
                       st.sampled_from(["r1", "r2", None])))
def test_scaling_every_value_changes_nothing(values: dict[str, float], percent: int,
                                             min_peers: int, k: float,
                                             domains: dict[str, str | None]) -> None:
    """The rule is relative: the same outliers when every value is multiplied by k."""
    scaled = {n: v * k for n, v in values.items()}
    assert (_outliers(values, percent=percent, min_peers=min_peers, domains=domains)
            == _outliers(scaled, percent=percent, min_peers=min_peers, domains=domains))


@given(FLEET, PERCENT, MIN_PEERS, st.floats(min_value=0.0, max_value=10.0))
def test_adding_a_fast_node_never_clears_an_outlier(values: dict[str, float], percent: int,
                                                    min_peers: int, extra: float) -> None:
    """Without domains, a new node at least as fast as every other never removes an outlier
    (the p10 of the others can only rise, and a node judged stays judged)."""
    before = _outliers(values, percent=percent, min_peers=min_peers)
    grown = values | {"new-node": max(values.values()) + extra}
    assert before <= _outliers(grown, percent=percent, min_peers=min_peers)


def _naive(values: dict[str, float], domains: dict[str, str | None], percent: int,
           min_peers: int) -> list[tuple[str, float, str]]:
    """The rule as the design record words it, peers listed and sorted for every node."""
    out = []
    for node, value in sorted(values.items()):
        others = [n for n in values if n != node]
        domain = domains.get(node)
        same = [values[n] for n in others if domain is not None and domains.get(n) == domain]
        if domain is not None and len(same) >= min_peers:
            reference, basis = median(same), "PeerMedian"
        elif len(others) >= min_peers:
            reference, basis = percentile([values[n] for n in others], 0.1), "FleetP10"
        else:
            continue
        if value < percent / 100 * reference:
            out.append((node, reference, basis))
    return out


@given(FLEET, PERCENT, MIN_PEERS,
       st.dictionaries(st.text("abcdefgh", min_size=1, max_size=4),
                       st.sampled_from(["r1", "r2", None])))
def test_the_sorted_once_rule_equals_the_worded_rule(values: dict[str, float], percent: int,
                                                     min_peers: int,
                                                     domains: dict[str, str | None]) -> None:
    """find_outliers (each group sorted once) flags the same nodes, against the same
    references and bases, as the rule computed naively from every node's peer list."""
    found = find_outliers(values, domains=domains, percent=percent, min_peers=min_peers)
    assert [(o.node, o.reference, str(o.basis)) for o in found] == _naive(
        values, domains, percent, min_peers)


@given(st.integers(min_value=1, max_value=30), VALUE, PERCENT, MIN_PEERS)
def test_a_uniform_fleet_has_no_outlier(n: int, value: float, percent: int,
                                        min_peers: int) -> None:
    """Identical nodes are never outliers of each other."""
    assert _outliers({f"n{i}": value for i in range(n)}, percent=percent,
                     min_peers=min_peers) == set()


# --- the Job's verdict ---------------------------------------------------------------------

NINE = {i: 480.0 for i in range(8)} | {8: 288.0}  # node-8 at 60 %


def _judged(bus: dict[int, float], rule: RelativeThreshold | None, *,
            floor: str = "value >= 250", nodes: tuple[NodeView, ...] = ()) -> Job:
    bm, plan = _final(bus)
    assert plan.status is not None
    bm = attrs.evolve(bm, status=plan.status)
    job = _job(ConditionType.SUCCEEDED, when=10, reason=JobReason.WORKLOAD_COMPLETED)
    job = attrs.evolve(job, spec=attrs.evolve(job.spec, thresholds={"busBandwidthGBps": floor},
                                              relative_threshold=rule))
    return attrs.evolve(job, status=validate_succeeded(job, bm, at(30), timeout=T0 - T0,
                                                       cap=15.0, nodes=nodes).status)


def _verdict(job: Job) -> tuple[str, str]:
    cond = next(c for c in job.status.conditions if c.type == ConditionType.VALIDATION_FAILED)
    return str(cond.status), cond.reason or ""


def test_report_lists_the_outlier_and_changes_no_verdict() -> None:
    """Report: status.outliers names the slow node, its value and the reference; the verdict,
    failedNodes and busBW are those without the rule."""
    plain = _judged(NINE, None)
    report = _judged(NINE, RelativeThreshold(percent=80, min_peers=4))
    assert _verdict(report) == _verdict(plain) == ("False", JobReason.THRESHOLDS_MET)
    assert report.status.failed_nodes == plain.status.failed_nodes == ()
    assert [(o.node_name, o.bus_bw, o.reference, o.basis, o.peers)
            for o in report.status.outliers] == [
        ("node-8", "288.00", "480.00", OutlierBasis.FLEET_P10, 8)]
    assert plain.status.outliers == ()


def test_fail_blames_only_the_outlier() -> None:
    """Fail: the outlier is listed in failedNodes (ThresholdViolation, the comparison as
    message) and the verdict is ThresholdViolated; the other nodes are not named."""
    job = _judged(NINE, RelativeThreshold(percent=80, min_peers=4, action=RelativeAction.FAIL))
    assert _verdict(job) == ("True", JobReason.THRESHOLD_VIOLATED)
    assert [(f.name, f.reason) for f in job.status.failed_nodes] == [
        ("node-8", FailedNodeReason.THRESHOLD_VIOLATION)]
    assert job.status.failed_nodes[0].message.startswith("Outlier: node node-8 busBW 288.00")
    assert "1 of 9 node(s) missed" in next(
        c.message for c in job.status.conditions if c.type == ConditionType.VALIDATION_FAILED)


def test_a_node_failing_the_floor_is_blamed_once() -> None:
    """A node below both the static floor and its peers is blamed once, by the floor."""
    job = _judged(NINE, RelativeThreshold(action=RelativeAction.FAIL), floor="value >= 300")
    assert [(f.name, f.message.split(":")[0]) for f in job.status.failed_nodes] == [
        ("node-8", 'Threshold "busBandwidthGBps" violated on node node-8')]


def test_the_topology_key_compares_within_the_domain() -> None:
    """With topologyKey, the node is compared with the median of its domain's nodes."""
    key = "nvidia.com/gpu.clique"
    nodes = tuple(NodeView(name=f"node-{i}", labels=((key, "c1"),)) for i in range(9))
    job = _judged(NINE, RelativeThreshold(topology_key=key), nodes=nodes)
    assert [(o.node_name, o.basis, o.domain, o.peers) for o in job.status.outliers] == [
        ("node-8", OutlierBasis.PEER_MEDIAN, "c1", 8)]


def test_a_node_without_figures_is_never_an_outlier() -> None:
    """A node whose log held no table is failed by the static rule (no data), never listed as
    an outlier, and is nobody's peer."""
    bm, plan = _final({0: 480.0, 1: 480.0, 2: 480.0, 3: 480.0, 4: 480.0})
    assert plan.status is not None
    results = tuple(attrs.evolve(n, bus_bw=None, alg_bw=None, message="no rows")
                    if n.node_name == "node-4" else n for n in plan.status.node_results)
    bm = attrs.evolve(bm, status=attrs.evolve(plan.status, node_results=results))
    assert isinstance(bm, BandwidthMeasurement)
    job = _job(ConditionType.SUCCEEDED, when=10, reason=JobReason.WORKLOAD_COMPLETED)
    job = attrs.evolve(job, spec=attrs.evolve(job.spec, thresholds={
        "busBandwidthGBps": "value > 0"}, relative_threshold=RelativeThreshold(
            min_peers=1, action=RelativeAction.FAIL)))
    status = validate_succeeded(job, bm, at(30), timeout=T0 - T0, cap=15.0).status
    assert status.outliers == ()
    assert [f.name for f in status.failed_nodes] == ["node-4"]
    assert "No measured value on node node-4" in status.failed_nodes[0].message


def test_a_relative_rule_needs_the_busbw_floor() -> None:
    """Admission refuses relativeThreshold without a busBandwidthGBps threshold, on the Job and
    on a Certification category that inherits the rule."""
    job = {"apiVersion": "cre.dev/v1alpha1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"workload": {"trainJob": {}}, "relativeThreshold": {"percent": 80}}}
    errors = validate(from_dict(job))
    assert [e.path for e in errors] == ["spec.relativeThreshold"]
    job["spec"]["thresholds"] = {"busBandwidthGBps": "value > 0"}
    assert validate(from_dict(job)) == []
    cert = {"apiVersion": "cre.dev/v1alpha1", "kind": "Certification", "metadata": {"name": "c"},
            "spec": {"relativeThreshold": {}, "thresholds": {"busBandwidthGBps": "value > 0"},
                     "categories": [{"domain": "communication", "variant": "nccl-loopback"},
                                    {"domain": "communication", "variant": "nccl-loopback",
                                     "options": {"thresholds": {
                                         "algBandwidthGBps": "value > 0"}}}]}}
    assert [e.path for e in validate(from_dict(cert))] == ["spec.relativeThreshold"]
