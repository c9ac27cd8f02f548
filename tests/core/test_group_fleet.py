"""The group-level relative rule: the statistic's invariants under hypothesis
(cre.core.job.fleet.find_group_outliers), the Workflow's judgement of an iteration's groups
(Report lists the group's nodes and changes nothing, Fail fails the group and records its
nodes, nothing is judged before the last group finishes), and admission refusing it on a
Job."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cre.api.common import RelativeAction, RelativeScope, RelativeThreshold
from cre.api.conditions import FailedNodeReason, GroupPhase, OutlierBasis
from cre.api.converter import from_dict
from cre.api.validate import validate
from cre.api.workflow import GroupStatus
from cre.core.job.fleet import find_group_outliers, median
from cre.core.workflow.groupfleet import judge_groups

VALUE = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
GROUPS = st.dictionaries(st.text("abcdefgh", min_size=1, max_size=4), VALUE, min_size=1,
                         max_size=24)
PERCENT = st.integers(min_value=1, max_value=100)
MIN_PEERS = st.integers(min_value=1, max_value=8)


def _flagged(values: dict[str, float], percent: int, min_peers: int) -> set[str]:
    return {o.group for o in find_group_outliers(values, percent=percent,
                                                 min_peers=min_peers)}


def test_one_slow_group_among_eight_is_the_only_outlier() -> None:
    """Seven groups near 480 GB/s and one at 240: only that one, against the median of the
    seven others, with the numbers in its message."""
    values = {f"g{i}": 478.0 + i for i in range(7)} | {"slow": 240.0}
    (found,) = find_group_outliers(values, percent=80, min_peers=4)
    assert (found.group, found.peers, found.reference) == ("slow", 7, 481.0)
    assert found.message == ("Outlier: group slow busBW 240.00 GB/s is below 80% of the "
                             "median of the 7 other groups (481.00 GB/s)")


def test_too_few_peer_groups_judges_nobody_and_the_bound_is_strict() -> None:
    """Four groups with minPeers 4 (three peers each): nobody; at exactly percent % of the
    median a group is not flagged."""
    assert _flagged({"a": 1.0, "b": 100.0, "c": 100.0, "d": 100.0}, 80, 4) == set()
    assert _flagged({"a": 80.0, "b": 100.0, "c": 100.0, "d": 100.0, "e": 100.0}, 80, 4) == set()
    assert _flagged({"a": 79.0, "b": 100.0, "c": 100.0, "d": 100.0, "e": 100.0}, 80, 4) == {"a"}


@given(GROUPS, PERCENT, MIN_PEERS)
def test_the_worded_rule_holds(values: dict[str, float], percent: int, min_peers: int) -> None:
    """Flagged exactly when below percent % of the median of the other groups, with at
    least minPeers of them (the rule as the docstring words it, recomputed naively)."""
    want = {g for g, v in values.items() if len(values) - 1 >= min_peers
            and v < percent / 100 * median([w for h, w in values.items() if h != g])}
    assert _flagged(values, percent, min_peers) == want


@given(GROUPS, PERCENT, MIN_PEERS)
def test_the_fastest_group_is_never_an_outlier(values: dict[str, float], percent: int,
                                               min_peers: int) -> None:
    """A group at or above every other group is never flagged."""
    top = max(values.values())
    assert not {g for g in _flagged(values, percent, min_peers) if values[g] == top}


@given(GROUPS, PERCENT, MIN_PEERS, st.sampled_from([0.25, 0.5, 2.0, 1024.0]))
def test_scaling_every_group_changes_nothing(values: dict[str, float], percent: int,
                                             min_peers: int, factor: float) -> None:
    """The rule is relative: the same power-of-two scaling of every value flags the same."""
    scaled = {g: v * factor for g, v in values.items()}
    assert _flagged(scaled, percent, min_peers) == _flagged(values, percent, min_peers)


@given(GROUPS, PERCENT, MIN_PEERS, st.floats(min_value=0.0, max_value=10.0))
def test_adding_a_fast_group_never_clears_an_outlier(values: dict[str, float], percent: int,
                                                     min_peers: int, extra: float) -> None:
    """A new group at least as fast as every other raises or keeps every median."""
    before = _flagged(values, percent, min_peers)
    after = _flagged({**values, "zzzzz": max(values.values()) + extra}, percent, min_peers)
    assert before <= after


@given(st.integers(min_value=1, max_value=30), VALUE, PERCENT, MIN_PEERS)
def test_equal_groups_have_no_outlier(n: int, value: float, percent: int,
                                      min_peers: int) -> None:
    """Groups that all measured the same are never outliers."""
    assert _flagged({f"g{i}": value for i in range(n)}, percent, min_peers) == set()


def _groups(*bus: float | None, running: int = -1) -> list[GroupStatus]:
    return [GroupStatus(name=f"g{i}", nodes=(f"n{i}a", f"n{i}b"),
                        phase=GroupPhase.RUNNING if i == running else GroupPhase.SUCCEEDED,
                        bus_bandwidth_gbps=None if b is None else f"{b:.2f}")
            for i, b in enumerate(bus)]


RULE = RelativeThreshold(percent=80, min_peers=3, scope=RelativeScope.GROUP)
BUS = (480.0, 482.0, 200.0, 479.0, 481.0)


def test_report_lists_the_groups_nodes_and_changes_no_verdict() -> None:
    """Report: both nodes of the slow group are in the outliers (GroupMedian, the group
    named), every group keeps its phase, no node is recorded Failed."""
    judged = judge_groups(_groups(*BUS), RULE)
    assert [g.phase for g in judged.groups] == [GroupPhase.SUCCEEDED] * 5
    assert judged.failed == ()
    assert [(o.node_name, o.group, o.basis, o.bus_bw, o.reference, o.peers)
            for o in judged.outliers] == [
        (n, "g2", OutlierBasis.GROUP_MEDIAN, "200.00", "480.50", 4) for n in ("n2a", "n2b")]


def test_fail_fails_the_group_and_records_its_nodes() -> None:
    """Fail: the slow group is Failed with ThresholdViolation and the outlier message, its two
    nodes are recorded Failed for it; the other groups are untouched."""
    judged = judge_groups(_groups(*BUS), RelativeThreshold(
        percent=80, min_peers=3, scope=RelativeScope.GROUP, action=RelativeAction.FAIL))
    slow = judged.groups[2]
    assert (slow.phase, slow.failure_reason) == (GroupPhase.FAILED,
                                                 FailedNodeReason.THRESHOLD_VIOLATION)
    assert slow.message is not None and "group g2 busBW 200.00" in slow.message
    assert [(r.name, r.reason) for r in judged.failed] == [
        ("n2a", FailedNodeReason.THRESHOLD_VIOLATION),
        ("n2b", FailedNodeReason.THRESHOLD_VIOLATION)]
    assert [g.phase for i, g in enumerate(judged.groups) if i != 2] == [GroupPhase.SUCCEEDED] * 4


@pytest.mark.parametrize("rule", [
    None,
    RelativeThreshold(percent=80, min_peers=3),  # scope Node: the Job's rule, not this one
])
def test_no_group_rule_judges_nothing(rule: RelativeThreshold | None) -> None:
    """Without a Group-scoped rule the groups come back as they were, with no outliers."""
    groups = _groups(*BUS)
    judged = judge_groups(groups, rule)
    assert judged.groups == tuple(groups) and judged.outliers == ()


def test_nothing_is_judged_before_the_last_group_finishes() -> None:
    """A group still running: no comparison yet (a finished group is never judged against
    peers that have not finished); unmeasured and failed groups are nobody's peers."""
    assert judge_groups(_groups(*BUS, running=4), RULE).outliers == ()
    groups = _groups(480.0, None, 200.0, 479.0, 481.0)
    groups[0] = GroupStatus(name="g0", nodes=("x",), phase=GroupPhase.FAILED,
                            bus_bandwidth_gbps="10.00")
    judged = judge_groups(groups, RelativeThreshold(percent=80, min_peers=2,
                                                    scope=RelativeScope.GROUP))
    assert {(o.group, o.peers, o.reference) for o in judged.outliers} == {("g2", 2, "480.00")}
    assert judge_groups(groups, RULE).outliers == ()  # two peers are fewer than minPeers 3


def test_admission_refuses_a_group_rule_on_a_job() -> None:
    """A Job is one group: relativeThreshold.scope Group on it is refused, naming the field."""
    job = {"apiVersion": "cre.dev/v1alpha1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"workload": {"trainJob": {}}, "relativeThreshold": {"scope": "Group"},
                    "thresholds": {"busBandwidthGBps": "value > 0"}}}
    errors = validate(from_dict(job))
    assert [e.path for e in errors] == ["spec.relativeThreshold.scope"]
    assert "a Job is one group" in errors[0].message
    job["spec"]["relativeThreshold"] = {"scope": "Node"}  # type: ignore[index]
    assert validate(from_dict(job)) == []
