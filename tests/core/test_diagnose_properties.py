"""Properties of the pure diagnose planner (cre.core.workflow.diagnose), driven by a fault
model: a step fails when its nodes hold a bad node or both ends of a bad link, and ends without
a verdict when the model aborts it."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Mapping

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cre.api.workflow import (
    DiagnoseStage,
    DiagnoseStatus,
    DiagnoseStep,
    GroupStatus,
    StepOutcome,
    StepResolution,
)
from cre.core.workflow import diagnose as DG

COMMON = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _nodes(n: int) -> list[str]:
    return [f"n{i:03d}" for i in range(n)]


def _groups(nodes: list[str], size: int) -> list[GroupStatus]:
    return [GroupStatus(name=f"group-{i}", nodes=tuple(nodes[k:k + size]))
            for i, k in enumerate(range(0, len(nodes), size))]


def drive(groups: list[GroupStatus], *, bad: Collection[str] = (),
          links: Collection[frozenset[str]] = (), domain_of: Mapping[str, str] | None = None,
          min_group_size: int = 2, aborts: Callable[[DiagnoseStep], bool] = lambda s: False,
          planner_domains: bool = True) -> tuple[DiagnoseStatus, int]:
    """Run the planner to completion against the fault model; the final state and the Jobs
    spent (one per step)."""
    domain_of = dict(domain_of or {})

    def judge(step: DiagnoseStep) -> StepOutcome:
        if aborts(step):
            return StepOutcome.NOT_JUDGED
        nodes = {*step.suspects, *step.peers}
        domains = {domain_of.get(n) for n in nodes}
        if nodes & set(bad) or any(link <= domains for link in links):
            return StepOutcome.FAILED
        return StepOutcome.PASSED

    state = DG.start(groups)
    params = DG.Params(min_group_size=min_group_size, group_size=len(groups[0].nodes),
                       domain_of=domain_of if planner_domains else {})
    jobs = 0
    for _ in range(64):
        pending = [s for s in state.steps if s.outcome == StepOutcome.PENDING]
        jobs += len(pending)
        state = DG.record(state, outcomes={s.name: judge(s) for s in pending},
                          job_names={s.name: f"job-{s.name}" for s in pending})
        state = DG.advance(state, params=params, jobs_spent=jobs)
        if state.stage == DiagnoseStage.COMPLETE:
            return state, jobs
    raise AssertionError("the diagnose run never completed")


@given(n_groups=st.integers(2, 8), size=st.sampled_from([2, 3, 4, 5, 8, 16]),
       pick=st.integers(0, 10_000), floor=st.sampled_from([1, 2]))
@COMMON
def test_single_bad_node_found_within_log_rounds(n_groups: int, size: int, pick: int,
                                                  floor: int) -> None:
    """One bad node among n is named Failed, alone, within ceil(log2 size) bisection rounds
    plus one confirmation round, inside the Job bound."""
    nodes = _nodes(n_groups * size)
    bad = nodes[pick % len(nodes)]
    state, jobs = drive(_groups(nodes, size), bad={bad}, min_group_size=floor)
    assert state.failed_nodes == (bad,)
    assert state.uncertified_nodes == ()
    assert state.round <= DG.ceil_log2(size) + 1 <= DG.ceil_log2(len(nodes)) + 1
    assert jobs <= state.job_budget


@given(size=st.sampled_from([2, 4, 8]), pick=st.integers(0, 1000))
@COMMON
def test_single_group_without_known_good_peers(size: int, pick: int) -> None:
    """With one screening group (no known-good peers at first) the bad node is still the only
    one named, since a half that passes lends its nodes as peers."""
    nodes = _nodes(size)
    bad = nodes[pick % size]
    state, jobs = drive(_groups(nodes, size), bad={bad}, min_group_size=1)
    assert state.failed_nodes == (bad,)
    assert jobs <= state.job_budget


@given(n_groups=st.integers(1, 6), size=st.sampled_from([2, 4, 8]),
       bad=st.sets(st.integers(0, 47), max_size=4), seed=st.binary(min_size=1, max_size=4),
       rate=st.integers(0, 100), floor=st.sampled_from([1, 2, 3]))
@COMMON
def test_infra_aborts_never_blame_and_jobs_stay_bounded(
        n_groups: int, size: int, bad: set[int], seed: bytes, rate: int, floor: int) -> None:
    """Whatever fails and whichever steps abort on infrastructure, only bad nodes are ever
    named Failed, a suspect of an aborted step is never blamed unless it is bad, and the Jobs
    spent never pass the bound."""
    nodes = _nodes(n_groups * size)
    bad_nodes = {nodes[i] for i in bad if i < len(nodes)}

    def aborts(step: DiagnoseStep) -> bool:
        digest = hashlib.sha256(seed + step.name.encode()).digest()
        return digest[0] * 100 < rate * 256

    state, jobs = drive(_groups(nodes, size), bad=bad_nodes, min_group_size=floor,
                        aborts=aborts)
    assert set(state.failed_nodes) <= bad_nodes
    assert not set(state.failed_nodes) & set(state.uncertified_nodes)
    screening = sum(1 for s in state.steps if s.stage == DiagnoseStage.SCREENING)
    assert jobs <= max(state.job_budget, screening)
    assert len(state.steps) == jobs


@given(pick=st.integers(0, 1000))
@COMMON
def test_all_screening_aborted_blames_nobody(pick: int) -> None:
    """A run whose every step aborts on infrastructure names nobody Failed, narrows nothing
    and leaves every node Uncertified."""
    nodes = _nodes(16)
    state, jobs = drive(_groups(nodes, 8), bad={nodes[pick % 16]}, aborts=lambda s: True)
    assert state.failed_nodes == ()
    assert set(state.uncertified_nodes) == set(nodes)
    assert jobs == 2


def test_bad_link_between_two_domains_is_named_without_blame() -> None:
    """Two racks that fail together and pass apart are reported as a bad link; no node is
    blamed."""
    nodes = _nodes(16)
    domain_of = {n: f"rack-{'abcd'[i // 4]}" for i, n in enumerate(nodes)}
    state, jobs = drive(_groups(nodes, 8), links={frozenset({"rack-a", "rack-b"})},
                        domain_of=domain_of)
    assert [link.domains for link in state.bad_links] == [("rack-a", "rack-b")]
    assert state.failed_nodes == ()
    assert state.uncertified_nodes == ()
    assert jobs == 5  # 2 screening, 2 halves (one rack each, with peers), 1 rack pair


def test_cross_boundary_without_domains_is_not_reproduced() -> None:
    """Without a topology key, a failure that both halves pass alone is not reproduced: its
    nodes are Uncertified, none Failed, no link named."""
    nodes = _nodes(16)
    domain_of = {n: f"rack-{'abcd'[i // 4]}" for i, n in enumerate(nodes)}
    state, _ = drive(_groups(nodes, 8), links={frozenset({"rack-a", "rack-b"})},
                     domain_of=domain_of, planner_domains=False)
    assert state.failed_nodes == ()
    assert state.bad_links == ()
    assert state.uncertified_nodes == tuple(nodes[:8])


def test_budget_exceeded_ends_uncertified() -> None:
    """When every group fails on many bad nodes the run stops at its Job bound and leaves the
    suspects it could not narrow Uncertified, with the BudgetExceeded resolution."""
    nodes = _nodes(32)
    state, jobs = drive(_groups(nodes, 8), bad=set(nodes[::2]), min_group_size=1)
    assert jobs <= state.job_budget
    assert any(s.resolution == StepResolution.BUDGET_EXCEEDED for s in state.steps)
    assert set(state.failed_nodes) <= set(nodes[::2])
    assert state.uncertified_nodes


def test_advance_waits_while_a_step_is_pending() -> None:
    """Planning is idempotent: with a step still pending the state is returned unchanged
    (bar the Jobs spent), so a repeated pass plans nothing twice."""
    nodes = _nodes(16)
    state = DG.start(_groups(nodes, 8))
    state = DG.record(state, outcomes={"group-0": StepOutcome.FAILED}, job_names={})
    params = DG.Params(min_group_size=2, group_size=8)
    assert DG.advance(state, params=params, jobs_spent=1) == \
        DG.advance(DG.advance(state, params=params, jobs_spent=1), params=params, jobs_spent=1)
    assert DG.advance(state, params=params, jobs_spent=1).steps == state.steps


def test_suspects_without_known_good_peers_are_confirmed_together_not_named() -> None:
    """A failed pair with no known-good peer anywhere cannot be told apart: its failure is
    confirmed by a re-run of both, neither is named Failed, both are Uncertified."""
    state, jobs = drive(_groups(_nodes(2), 2), bad={"n000"}, min_group_size=2)
    assert state.failed_nodes == ()
    assert state.uncertified_nodes == ("n000", "n001")
    assert [s.resolution for s in state.steps] == [StepResolution.CONFIRMING,
                                                   StepResolution.CONFIRMED_TOGETHER]
    assert jobs == 2


LABELS = st.sampled_from(["one-per-node", "absent", "half-labelled"])


def _domains(nodes: list[str], labels: str) -> dict[str, str]:
    """Topology domains without NVLink racks: every node its own domain, no label at all, or
    the label on every other node only."""
    if labels == "one-per-node":
        return {n: f"d-{n}" for n in nodes}
    if labels == "half-labelled":
        return {n: f"rack-{i // 4}" for i, n in enumerate(nodes) if i % 2 == 0}
    return {}


@given(n_groups=st.integers(1, 6), size=st.sampled_from([2, 3, 4, 8]),
       pick=st.integers(0, 10_000), floor=st.sampled_from([1, 2, 3]), labels=LABELS)
@COMMON
def test_no_nvlink_domains_still_find_the_bad_node(n_groups: int, size: int, pick: int,
                                                   floor: int, labels: str) -> None:
    """With topology domains of one node, or the domain label absent (on every node or on
    some), one bad node is never wrongly blamed, is named alone whenever a known-good peer
    exists, within the rounds and the Job bound, and no narrowing step runs with fewer than
    minGroupSize nodes (or all of them, when there are fewer)."""
    nodes = _nodes(n_groups * size)
    bad = nodes[pick % len(nodes)]
    state, jobs = drive(_groups(nodes, size), bad={bad}, domain_of=_domains(nodes, labels),
                        min_group_size=floor)
    assert set(state.failed_nodes) <= {bad}
    if n_groups > 1 or floor == 1:
        assert state.failed_nodes == (bad,)
        assert state.uncertified_nodes == ()
    assert state.bad_links == ()
    assert state.round <= DG.ceil_log2(size) + 1
    assert jobs <= state.job_budget
    assert all(len({*s.suspects, *s.peers}) >= min(floor, len(nodes)) for s in state.steps
               if s.stage != DiagnoseStage.SCREENING)


def test_a_bad_link_between_two_one_node_domains_is_named_without_blame() -> None:
    """One node per domain (no NVLink rack): nodes 4 and 5 fail only together. Screening fails
    their group, bisection leaves them as a failed pair, each passes its confirmation with
    known-good peers, and the pair run alone fails: a bad link between their domains, nobody
    blamed."""
    nodes = _nodes(16)
    domain_of = _domains(nodes, "one-per-node")
    link = frozenset({domain_of["n004"], domain_of["n005"]})
    state, jobs = drive(_groups(nodes, 4), links={link}, domain_of=domain_of)
    assert [link.domains for link in state.bad_links] == [("d-n004", "d-n005")]
    assert state.failed_nodes == () and state.uncertified_nodes == ()
    cross = next(s for s in state.steps if s.stage == DiagnoseStage.CROSS_BOUNDARY)
    assert cross.suspects == ("n004", "n005") and cross.peers == ()
    assert jobs == 4 + 2 + 2 + 1 <= state.job_budget


def test_a_domain_pair_below_min_group_size_is_not_probed() -> None:
    """With minGroupSize 3 a pair of one-node domains would run on 2 nodes: it is not run;
    the failure is not reproduced and the suspects are Uncertified, never Failed."""
    nodes = _nodes(16)
    domain_of = _domains(nodes, "one-per-node")
    link = frozenset({domain_of["n004"], domain_of["n005"]})
    state, _ = drive(_groups(nodes, 4), links={link}, domain_of=domain_of, min_group_size=3)
    assert state.bad_links == () and state.failed_nodes == ()
    assert {"n004", "n005"} <= set(state.uncertified_nodes)
    assert not [s for s in state.steps if s.stage == DiagnoseStage.CROSS_BOUNDARY]
