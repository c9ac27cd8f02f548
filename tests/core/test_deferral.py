"""The infra-scoped fail-fast rules as a table, plus properties: a Workload-class failure
never ends Incomplete, an infra abort never trips FailFast or blames a node it did not name,
the kill switch restores plain failures."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cre.api.conditions import FailureScope, GroupPhase, JobReason, Verdict
from cre.api.failurepolicy import FailureMode, FailurePolicy
from cre.api.job import FailureClass
from cre.core import deferral as D
from cre.core import noderesults as NR
from cre.core.classify import ClassReason

NODES = ("n1", "n2", "n3")
ON = D.EffectivePolicy(mode=FailureMode.FAIL_FAST, infra_retries=1, retry_failed_groups=1)
OFF = D.EffectivePolicy(mode=FailureMode.FAIL_FAST, infra_retries=1, deferral=False,
                        retry_failed_groups=1)


def _outcome(scope: FailureScope, reason: str, *, blamed: tuple[str, ...] = (),
             condition: str = JobReason.WORKLOAD_FAILED) -> D.JobOutcome:
    return D.JobOutcome(
        succeeded=False, reason=condition, message="boom",
        failure_class=FailureClass(scope=scope, reason=reason, message="boom"),
        blamed=tuple(D.NodeRecord(name=n, reason="WorkloadFailed", scope=str(scope))
                     for n in blamed))


WORKLOAD = _outcome(FailureScope.WORKLOAD, ClassReason.CONTAINER_FAILED, blamed=NODES)
EVICTED = _outcome(FailureScope.NODE, ClassReason.POD_EVICTED, blamed=("n2",))
NOT_READY = _outcome(FailureScope.NODE, ClassReason.NODE_NOT_READY, blamed=("n2",))
IMAGE = _outcome(FailureScope.PLATFORM, ClassReason.IMAGE_PULL_FAILED)
DELETED = _outcome(FailureScope.CONTROL_PLANE, ClassReason.WORKLOAD_DELETED)
TIMEOUT = _outcome(FailureScope.WORKLOAD, ClassReason.TIMED_OUT, blamed=NODES,
                   condition=JobReason.JOB_TIMED_OUT)


@pytest.mark.parametrize(
    ("outcome", "retries", "infra", "policy", "action", "failed", "uncertified", "trips"),
    [
        (WORKLOAD, 0, 0, ON, D.Action.RETRY, (), (), False),
        (WORKLOAD, 1, 0, ON, D.Action.FAIL, NODES, (), True),
        (TIMEOUT, 0, 0, ON, D.Action.FAIL, NODES, (), True),  # a timeout is never retried
        (EVICTED, 0, 0, ON, D.Action.INFRA_RETRY, (), (), False),
        (EVICTED, 1, 0, ON, D.Action.INFRA_RETRY, (), (), False),  # budgets are separate
        (EVICTED, 0, 1, ON, D.Action.INFRA_ABORT, (), NODES, False),
        (NOT_READY, 0, 1, ON, D.Action.INFRA_ABORT, ("n2",), ("n1", "n3"), False),
        (IMAGE, 0, 1, ON, D.Action.INFRA_ABORT, (), NODES, False),
        (DELETED, 0, 1, ON, D.Action.INFRA_ABORT, (), NODES, False),
        # Kill switch: infra failures count as plain failures, the whole group answers.
        (EVICTED, 1, 0, OFF, D.Action.FAIL, ("n2", "n1", "n3"), (), True),
        (IMAGE, 0, 0, OFF, D.Action.RETRY, (), (), False),
        (IMAGE, 1, 0, OFF, D.Action.FAIL, NODES, (), True),
    ],
)
def test_decision_table(outcome: D.JobOutcome, retries: int, infra: int,
                        policy: D.EffectivePolicy, action: D.Action, failed: tuple[str, ...],
                        uncertified: tuple[str, ...], trips: bool) -> None:
    """Each row: a group's Job outcome and budgets -> the action and the node records."""
    got = D.decide(nodes=NODES, retries=retries, infra_retries=infra, outcome=outcome,
                   policy=policy)
    assert got.action == action
    assert tuple(r.name for r in got.failed) == failed
    assert tuple(r.name for r in got.uncertified) == uncertified
    assert got.trips_fail_fast == trips


def test_kill_switch_resolution() -> None:
    """The Workflow's infraScopedFailFast wins over the manager's flag; unset follows it."""
    assert not D.effective_policy(None, manager_default=False, retry_failed_groups=0).deferral
    assert D.effective_policy(None, manager_default=True, retry_failed_groups=0).deferral
    override = FailurePolicy(infra_scoped_fail_fast=False)
    assert not D.effective_policy(override, manager_default=True,
                                  retry_failed_groups=0).deferral
    assert D.effective_policy(FailurePolicy(infra_scoped_fail_fast=True),
                              manager_default=False, retry_failed_groups=0).deferral


@pytest.mark.parametrize(
    ("genuine", "aborts", "uncertified", "excluded", "verdict"),
    [
        (0, 0, 0, 0, Verdict.PASSED),
        (0, 1, 3, 0, Verdict.INCOMPLETE),
        (0, 0, 0, 2, Verdict.INCOMPLETE),
        (1, 0, 0, 0, Verdict.FAILED),
        (1, 2, 5, 1, Verdict.FAILED),
    ],
)
def test_verdict_table(genuine: int, aborts: int, uncertified: int, excluded: int,
                       verdict: Verdict) -> None:
    """Failed beats Incomplete beats Passed."""
    assert D.verdict_of(genuine_failures=genuine, infra_aborts=aborts, uncertified=uncertified,
                        excluded=excluded).verdict == verdict


scopes = st.sampled_from(list(FailureScope))
reasons = st.sampled_from(list(ClassReason))
policies = st.builds(D.EffectivePolicy, mode=st.sampled_from(list(FailureMode)),
                     infra_retries=st.integers(0, 3), deferral=st.booleans(),
                     retry_failed_groups=st.integers(0, 3))


@st.composite
def outcomes(draw: st.DrawFn) -> D.JobOutcome:
    scope = draw(scopes)
    blamed = tuple(sorted(draw(st.sets(st.sampled_from(NODES)))))
    return D.JobOutcome(
        succeeded=draw(st.booleans()),
        reason=draw(st.sampled_from([JobReason.WORKLOAD_FAILED, JobReason.JOB_TIMED_OUT])),
        failure_class=FailureClass(scope=scope, reason=draw(reasons)),
        blamed=tuple(D.NodeRecord(name=n, reason="WorkloadFailed") for n in blamed),
        validation=draw(st.booleans()))


@given(outcomes(), st.integers(0, 4), st.integers(0, 4), policies)
def test_infra_abort_never_trips_fail_fast_nor_blames_unnamed(
        outcome: D.JobOutcome, retries: int, infra: int, policy: D.EffectivePolicy) -> None:
    """With deferral on, an infra-class outcome never trips FailFast, never spends
    retryFailedGroups and only ever blames nodes its failure named."""
    got = D.decide(nodes=NODES, retries=retries, infra_retries=infra, outcome=outcome,
                   policy=policy)
    if policy.deferral and D.is_infra(outcome):
        assert not got.trips_fail_fast
        assert got.action in (D.Action.INFRA_RETRY, D.Action.INFRA_ABORT)
        named = {r.name for r in outcome.blamed}
        assert {r.name for r in got.failed} <= named
        assert got.phase in (GroupPhase.PENDING, GroupPhase.INFRA_ABORTED)


@given(outcomes(), st.integers(0, 4), st.integers(0, 4), policies)
def test_workload_class_failure_is_never_incomplete(
        outcome: D.JobOutcome, retries: int, infra: int, policy: D.EffectivePolicy) -> None:
    """A Workload-class failure that ends a group makes the verdict Failed, never
    Incomplete, whatever else happened."""
    outcome = D.JobOutcome(succeeded=False, reason=outcome.reason,
                           failure_class=FailureClass(scope=FailureScope.WORKLOAD,
                                                      reason=ClassReason.CONTAINER_FAILED),
                           blamed=outcome.blamed)
    got = D.decide(nodes=NODES, retries=retries, infra_retries=infra, outcome=outcome,
                   policy=policy)
    assert got.action in (D.Action.RETRY, D.Action.FAIL)
    if got.action == D.Action.FAIL:
        assert got.failed, "a genuine failure always blames someone"
        verdict = D.verdict_of(genuine_failures=1, infra_aborts=infra, uncertified=3,
                               excluded=1)
        assert verdict.verdict == Verdict.FAILED


def test_node_results_round_trip_and_are_byte_stable() -> None:
    """The failed-nodes blob decodes to what was encoded (deduped by name and reason,
    sorted) and the same records always give the same bytes."""
    records = [D.NodeRecord(name="b", reason="WorkloadFailed", message="m", scope="Workload"),
               D.NodeRecord(name="a", reason="NodeNotReady", scope="Node"),
               D.NodeRecord(name="b", reason="WorkloadFailed", message="other")]
    blob = NR.encode_records(records)
    assert blob == NR.encode_records(list(reversed(records))[::-1])
    assert [(r.name, r.reason, r.message) for r in NR.decode_records(blob)] == [
        ("a", "NodeNotReady", ""), ("b", "WorkloadFailed", "m")]
    assert NR.decode_names(NR.encode_names(["c", "a", "c"])) == ("a", "c")
