"""The infra-scoped fail-fast rules as a table, plus properties: a Workload-class failure
never ends Incomplete, an infra abort never trips FailFast or blames a node it did not name,
the kill switch restores plain failures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cre.api.conditions import FailedNodeReason, FailureScope, GroupPhase, JobReason, Verdict
from cre.api.failurepolicy import FailureMode, FailurePolicy
from cre.api.job import FailureClass
from cre.core.common.observed import NodeView
from cre.core.job.classify import ClassReason
from cre.core.workflow import deferral as D
from cre.core.workflow import noderesults as NR

NODES = ("n1", "n2", "n3")
ON = D.EffectivePolicy(mode=FailureMode.FAIL_FAST, infra_retries=1, retry_failed_groups=1)
OFF = D.EffectivePolicy(mode=FailureMode.FAIL_FAST, infra_retries=1, deferral=False,
                        retry_failed_groups=1)


T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
GRACE = 300.0


def _outcome(scope: FailureScope, reason: str, *, blamed: tuple[str, ...] = (),
             condition: str = JobReason.WORKLOAD_FAILED, hardware: bool = False,
             node_reason: str = "WorkloadFailed") -> D.JobOutcome:
    return D.JobOutcome(
        succeeded=False, reason=condition, message="boom",
        failure_class=FailureClass(scope=scope, reason=reason, message="boom"),
        blamed=tuple(D.NodeRecord(name=n, reason=node_reason, scope=str(scope))
                     for n in blamed), hardware=hardware, finished_at=T0)


def _views(not_ready: tuple[str, ...] = ()) -> dict[str, NodeView]:
    return {n: NodeView(name=n, ready="False" if n in not_ready else "True") for n in NODES}


WORKLOAD = _outcome(FailureScope.WORKLOAD, ClassReason.CONTAINER_FAILED, blamed=NODES)
EVICTED = _outcome(FailureScope.NODE, ClassReason.POD_EVICTED, blamed=("n2",))
NOT_READY = _outcome(FailureScope.NODE, ClassReason.NODE_NOT_READY, blamed=("n2",))
HARDWARE = _outcome(FailureScope.NODE, ClassReason.GPU_UNHEALTHY, blamed=("n2",),
                    condition=JobReason.HARDWARE_FAILURE_DETECTED, hardware=True,
                    node_reason=FailedNodeReason.HARDWARE_FAILURE_DETECTED)
IMAGE = _outcome(FailureScope.PLATFORM, ClassReason.IMAGE_PULL_FAILED)
DELETED = _outcome(FailureScope.CONTROL_PLANE, ClassReason.WORKLOAD_DELETED)
REJECTED = _outcome(FailureScope.PLATFORM, ClassReason.ADMISSION_REJECTED,
                    condition=JobReason.WORKLOAD_CREATION_ERROR)
POD_ADMISSION = _outcome(FailureScope.PLATFORM, ClassReason.ADMISSION_REJECTED)
INVALID = _outcome(FailureScope.PLATFORM, ClassReason.INVALID_SPEC,
                   condition=JobReason.INVALID_SPEC)
COLLISION = _outcome(FailureScope.CONTROL_PLANE, ClassReason.NAME_COLLISION,
                     condition=JobReason.WORKLOAD_NAME_COLLISION)
MEASUREMENT_CONFIG = _outcome(FailureScope.CONFIGURATION, "LogProfileNotFound")
TIMEOUT = _outcome(FailureScope.WORKLOAD, ClassReason.TIMED_OUT, blamed=NODES,
                   condition=JobReason.JOB_TIMED_OUT)
PLATFORM_TIMEOUT = _outcome(FailureScope.PLATFORM, ClassReason.UNSCHEDULABLE,
                            condition=JobReason.JOB_TIMED_OUT)
PREEMPTED = _outcome(FailureScope.PLATFORM, ClassReason.PREEMPTED,
                     condition=JobReason.WORKLOAD_PREEMPTED)
PAST = GRACE + 1  # seconds after the failure
A = ()  # every node Ready
B = ("n2",)  # n2 still NotReady


@pytest.mark.parametrize(
    ("outcome", "retries", "infra", "policy", "down", "later", "action", "failed",
     "uncertified", "trips"),
    [
        (WORKLOAD, 0, 0, ON, A, 0, D.Action.RETRY, (), (), False),
        (WORKLOAD, 1, 0, ON, A, 0, D.Action.FAIL, NODES, (), True),
        (TIMEOUT, 0, 0, ON, A, 0, D.Action.FAIL, NODES, (), True),  # never retried
        # A timeout of the Platform class is infrastructure: deferred, nothing blamed.
        (PLATFORM_TIMEOUT, 0, 0, ON, A, 0, D.Action.INFRA_RETRY, (), (), False),
        (PLATFORM_TIMEOUT, 0, 1, ON, A, 0, D.Action.INFRA_ABORT, (), NODES, False),
        (EVICTED, 0, 0, ON, A, 0, D.Action.INFRA_RETRY, (), (), False),
        (EVICTED, 1, 0, ON, A, 0, D.Action.INFRA_RETRY, (), (), False),  # separate budgets
        (EVICTED, 0, 1, ON, A, 0, D.Action.INFRA_ABORT, (), NODES, False),
        # NotReady: wait within the grace; back Ready -> not blamed; still down -> broken.
        (NOT_READY, 0, 0, ON, B, 10, D.Action.WAIT, (), (), False),
        (NOT_READY, 0, 1, ON, A, 10, D.Action.INFRA_ABORT, (), NODES, False),
        (NOT_READY, 0, 0, ON, B, PAST, D.Action.INFRA_RETRY, ("n2",), (), False),
        (NOT_READY, 0, 1, ON, B, PAST, D.Action.FAIL, ("n2",), ("n1", "n3"), False),
        # The health monitor's finding is broken hardware at once, recorded on the re-run too.
        (HARDWARE, 0, 0, ON, A, 0, D.Action.INFRA_RETRY, ("n2",), (), False),
        (HARDWARE, 0, 1, ON, A, 0, D.Action.FAIL, ("n2",), ("n1", "n3"), False),
        (IMAGE, 0, 1, ON, A, 0, D.Action.INFRA_ABORT, (), NODES, False),
        # Configuration: failed at once (never retried), nodes Uncertified, FailFast trips.
        (REJECTED, 0, 0, ON, A, 0, D.Action.FAIL, (), NODES, True),
        (INVALID, 0, 0, ON, A, 0, D.Action.FAIL, (), NODES, True),
        (COLLISION, 0, 0, ON, A, 0, D.Action.FAIL, (), NODES, True),
        # Any failure the Job tier scopes Configuration (a LogProfile missing, a bad CEL).
        (MEASUREMENT_CONFIG, 0, 0, ON, A, 0, D.Action.FAIL, (), NODES, True),
        # A kubelet refusing one pod is not the user's configuration: infrastructure.
        (POD_ADMISSION, 0, 0, ON, A, 0, D.Action.INFRA_RETRY, (), (), False),
        # A person deleted the workload: user interrupt, nodes Uncertified, no FailFast.
        (DELETED, 0, 0, ON, A, 0, D.Action.FAIL, (), NODES, False),
        # Kill switch: infra failures count as plain failures, the whole group answers.
        (EVICTED, 1, 0, OFF, A, 0, D.Action.FAIL, ("n2", "n1", "n3"), (), True),
        (IMAGE, 0, 0, OFF, A, 0, D.Action.RETRY, (), (), False),
        (IMAGE, 1, 0, OFF, A, 0, D.Action.FAIL, NODES, (), True),
        # ... but configuration and user interrupt keep their rows.
        (DELETED, 1, 0, OFF, A, 0, D.Action.FAIL, (), NODES, False),
        (REJECTED, 0, 0, OFF, A, 0, D.Action.FAIL, (), NODES, True),
        # Preempted by higher-priority work: Uncertified at once, never retried nor blamed,
        # with or without the kill switch.
        (PREEMPTED, 0, 0, ON, A, 0, D.Action.INFRA_ABORT, (), NODES, False),
        (PREEMPTED, 0, 0, OFF, A, 0, D.Action.INFRA_ABORT, (), NODES, False),
    ],
)
def test_decision_table(outcome: D.JobOutcome, retries: int, infra: int,
                        policy: D.EffectivePolicy, down: tuple[str, ...], later: float,
                        action: D.Action, failed: tuple[str, ...],
                        uncertified: tuple[str, ...], trips: bool) -> None:
    """Each row: a group's Job outcome, budgets and the nodes seen ``later`` seconds after the
    failure -> the action and the node records."""
    got = D.decide(nodes=NODES, retries=retries, infra_retries=infra, outcome=outcome,
                   policy=policy, now=T0 + timedelta(seconds=later), observed=_views(down))
    assert got.action == action
    assert tuple(r.name for r in got.failed) == failed
    assert tuple(r.name for r in got.uncertified) == uncertified
    assert got.trips_fail_fast == trips


def test_blame_rows_name_their_reason_and_message() -> None:
    """A broken node is Failed with scope Node and its evidence; a configuration error keeps
    the API's message on Uncertified records of scope Configuration; a user interrupt says what
    was deleted."""
    now = T0 + timedelta(seconds=PAST)
    broken = D.decide(nodes=NODES, retries=0, infra_retries=1, outcome=NOT_READY, policy=ON,
                      now=now, observed=_views(B))
    assert broken.reason == D.HARDWARE and broken.failed[0].scope == FailureScope.NODE
    assert broken.failed[0].hardware and broken.message is not None
    assert broken.message.startswith("n2: NotReady and not back within the grace")
    config = D.decide(nodes=NODES, retries=0, infra_retries=0, outcome=REJECTED, policy=ON,
                      now=now, observed=_views())
    assert config.reason == "ConfigurationError" and config.message == "boom"
    assert {r.scope for r in config.uncertified} == {FailureScope.CONFIGURATION}
    user = D.decide(nodes=NODES, retries=0, infra_retries=0, outcome=DELETED, policy=ON,
                    now=now, observed=_views())
    assert user.reason == "UserInterrupted" and user.message is not None
    assert "boom" in user.message and "not re-created" in user.message


def test_not_ready_wait_ends_at_the_grace() -> None:
    """Within the grace the group waits, and is told to look again exactly at its end."""
    got = D.decide(nodes=NODES, retries=0, infra_retries=0, outcome=NOT_READY, policy=ON,
                   now=T0 + timedelta(seconds=100), observed=_views(B))
    assert got.action == D.Action.WAIT and got.wait == pytest.approx(GRACE - 100)
    gone = D.decide(nodes=NODES, retries=0, infra_retries=1, outcome=NOT_READY, policy=ON,
                    now=T0 + timedelta(seconds=PAST), observed={"n1": NodeView(name="n1")})
    assert gone.action == D.Action.INFRA_ABORT and not gone.failed  # a vanished node: no proof


@pytest.mark.parametrize(("groups", "aborted", "percent", "raised"), [
    (1, 1, 50, False),  # one group, one NotReady node: never an outage
    (2, 1, 50, False),
    (2, 2, 50, True),
    (4, 2, 50, True),
    (5, 2, 50, False),
    (4, 2, 75, False),
    (10, 8, 75, True),
])
def test_suspected_outage_needs_two_groups_and_the_fraction(
        groups: int, aborted: int, percent: int, raised: bool) -> None:
    """SuspectedClusterOutage needs >= 2 infra-aborted groups and >= percent of the groups."""
    assert D.suspected_outage(groups=groups, aborted=aborted, percent=percent) == raised


def test_severity_order() -> None:
    """Hardware beats a workload failure beats a threshold miss beats configuration beats a
    user interrupt."""
    order = [D.workflow_reason(r) for r in (D.USER_INTERRUPTED, D.CONFIGURATION, D.VALIDATION,
                                            "WorkloadFailed", D.HARDWARE)]
    for i in range(len(order)):
        assert D.most_severe(order[:i + 1]) == order[i]
    assert D.most_severe([]) is None


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
        validation=draw(st.booleans()), hardware=draw(st.booleans()), finished_at=T0)


@given(outcomes(), st.integers(0, 4), st.integers(0, 4), policies,
       st.sets(st.sampled_from(NODES)).map(lambda s: tuple(sorted(s))),
       st.sampled_from([0.0, 10.0, PAST]))
def test_infra_abort_never_trips_fail_fast_nor_blames_unnamed(
        outcome: D.JobOutcome, retries: int, infra: int, policy: D.EffectivePolicy,
        down: tuple[str, ...], later: float) -> None:
    """With deferral on, an infra-class outcome never trips FailFast, never spends
    retryFailedGroups and only ever blames nodes its failure named."""
    got = D.decide(nodes=NODES, retries=retries, infra_retries=infra, outcome=outcome,
                   policy=policy, now=T0 + timedelta(seconds=later), observed=_views(down))
    if policy.deferral and D.is_infra(outcome):
        assert not got.trips_fail_fast
        assert got.action in (D.Action.INFRA_RETRY, D.Action.INFRA_ABORT, D.Action.WAIT,
                              D.Action.FAIL)
        named = {r.name for r in outcome.blamed}
        assert {r.name for r in got.failed} <= named
        assert got.phase in (GroupPhase.PENDING, GroupPhase.INFRA_ABORTED, GroupPhase.RUNNING,
                             GroupPhase.FAILED)
        if got.action == D.Action.FAIL:
            assert got.row == D.Row.NODE_EVIDENCE and got.failed


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
                   policy=policy, now=T0, observed=_views())
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
