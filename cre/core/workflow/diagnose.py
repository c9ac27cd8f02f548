"""Diagnose: find the broken node, not only the broken group (docs/design/024).

A failed 8-node ring says one of eight nodes (or a link between them) is bad; a platform team
needs the node. With ``orchestration.diagnose`` set, a Workflow runs its partitioned groups as
the *screening* round and then, round after round, narrows every genuine failure down. This
module is the pure state machine: it reads the steps' outcomes and plans the next round's
steps; :mod:`cre.core.workflow.run` turns each planned step into a group (its Job named from the
step, so re-planning after a restart is a create conflict, never a duplicate) and feeds the
group's outcome back. Its whole state is ``status.orchestration.diagnose``.

The rules:

* Only a genuine failure (the test failed, or a threshold was missed) is narrowed. A step that
  ended on an infrastructure abort (after the Workflow's infra re-runs), a configuration error
  or an interrupt is *not judged*: its suspects are Uncertified, nobody is blamed, no Job is
  spent on it. A step whose Job named broken nodes (node evidence) is left to the blame rules.
* **Bisection**: a failed step with more than ``minGroupSize`` suspects is split in halves (along
  topology domains first when ``topologyKey`` is set, then by name); each half runs with
  known-good peers (nodes of passed steps) so the group keeps the screening size where enough
  peers exist. A half that cannot reach ``minGroupSize`` nodes is not run: the step goes to
  confirmation instead.
* **Confirmation**: a failed step with at most ``minGroupSize`` suspects re-runs each suspect
  with known-good peers. A node is Failed only when its confirmation fails again. With too few
  peers the suspects re-run together: failing again confirms the failure (the run fails) but
  names nobody (the suspects are Uncertified). When every confirmation passes, the failure was
  not reproduced: the suspects are Uncertified.
* **Cross-boundary**: when both halves of a failed step pass (or every suspect passes its own
  confirmation), the failure needs them together. With domains, every pair of a domain of one
  child and a domain of another (at most ``MAX_PAIRS``) runs alone; a pair that fails is a bad
  link (reported, no node blamed). A pair with fewer than ``minGroupSize`` nodes is not run.
  Domains of one node each (no NVLink rack) make a pair of nodes: a bad cable between two
  nodes is found as their link. Without domains, or when every pair passes, the suspects are
  Uncertified (not reproduced).
* **The Job bound**: after screening, the run may spend ``job_budget`` Jobs in all (re-runs
  included); a round that would pass it is not started, and the suspects it would have tested
  are Uncertified (``BudgetExceeded``).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import attrs

from cre.api.conditions import FailedNodeReason, FailureScope, GroupPhase, WorkflowReason
from cre.api.workflow import (
    DiagnoseLink,
    DiagnoseStage,
    DiagnoseStatus,
    DiagnoseStep,
    GroupStatus,
    StepOutcome,
    StepResolution,
)
from cre.core.workflow import deferral as D

#: At most this many domain pairs are tested for one cross-boundary failure.
MAX_PAIRS: Final = 4


class DiagnoseReason(enum.StrEnum):
    """Why diagnose left a suspect Uncertified (the node-result record's reason)."""

    NOT_JUDGED = "DiagnoseNotJudged"
    NOT_REPRODUCED = "DiagnoseNotReproduced"
    BUDGET_EXCEEDED = "DiagnoseBudgetExceeded"
    INSEPARABLE = "DiagnoseInseparable"


_UNCERTIFIED: Final = {StepResolution.NOT_JUDGED: DiagnoseReason.NOT_JUDGED,
                       StepResolution.NOT_REPRODUCED: DiagnoseReason.NOT_REPRODUCED,
                       StepResolution.BUDGET_EXCEEDED: DiagnoseReason.BUDGET_EXCEEDED,
                       StepResolution.CONFIRMED_TOGETHER: DiagnoseReason.INSEPARABLE}
_STAGE_ORDER: Final = (DiagnoseStage.CROSS_BOUNDARY, DiagnoseStage.CONFIRMATION,
                       DiagnoseStage.BISECTION)
_PREFIX: Final = {DiagnoseStage.BISECTION: "bisect", DiagnoseStage.CONFIRMATION: "confirm",
                  DiagnoseStage.CROSS_BOUNDARY: "cross"}


@attrs.frozen(kw_only=True)
class Params:
    """What the planner needs besides the state: the floor, the size to keep, the domains."""

    min_group_size: int
    group_size: int
    domain_of: Mapping[str, str] = attrs.field(factory=dict)


def ceil_log2(n: int) -> int:
    """``ceil(log2(n))`` for ``n >= 1`` (0 for 1)."""
    return max(0, math.ceil(math.log2(n))) if n > 1 else 0


def job_budget(*, screening: int, failed: int, group_size: int, min_group_size: int) -> int:
    """The Jobs a run may spend: the screening groups, plus for each genuinely failed one two
    halves per bisection level (``ceil(log2(size))`` levels) and ``max(minGroupSize,
    MAX_PAIRS)`` confirmations or domain pairs."""
    per_failure = 2 * ceil_log2(group_size) + max(min_group_size, MAX_PAIRS)
    return screening + failed * per_failure


def outcome_of(group: GroupStatus) -> StepOutcome:
    """The step outcome a group's phase and failure reason stand for."""
    if group.phase == GroupPhase.SUCCEEDED:
        return StepOutcome.PASSED
    if group.phase == GroupPhase.FAILED:
        reason = D.workflow_reason(group.failure_reason)
        if reason in (WorkflowReason.ITERATIONS_FAILED, WorkflowReason.JOB_VALIDATION_FAILED):
            return StepOutcome.FAILED
        if reason == WorkflowReason.JOB_HARDWARE_FAILED:
            return StepOutcome.NODE_EVIDENCE
        return StepOutcome.NOT_JUDGED
    if group.phase.terminal:  # InfraAborted, Cancelled
        return StepOutcome.NOT_JUDGED
    return StepOutcome.PENDING


def start(groups: Iterable[GroupStatus]) -> DiagnoseStatus:
    """The state of a run whose screening round is ``groups`` (the nodes each one ran on: a
    node its launch left out is no suspect)."""
    return DiagnoseStatus(stage=DiagnoseStage.SCREENING, steps=tuple(
        DiagnoseStep(name=g.name, stage=DiagnoseStage.SCREENING, domains=g.domains,
                     suspects=tuple(n for n in g.nodes
                                    if n not in {e.name for e in g.excluded_nodes}))
        for g in groups))


def record(state: DiagnoseStatus, *, outcomes: Mapping[str, StepOutcome],
           job_names: Mapping[str, str]) -> DiagnoseStatus:
    """``state`` with the pending steps' outcomes and Job names as the groups report them."""
    steps = tuple(
        attrs.evolve(s, outcome=outcomes.get(s.name, s.outcome),
                     job_name=job_names.get(s.name, s.job_name))
        if s.outcome == StepOutcome.PENDING else s for s in state.steps)
    return attrs.evolve(state, steps=steps)


def advance(state: DiagnoseStatus, *, params: Params, jobs_spent: int) -> DiagnoseStatus:
    """The next round: resolve every finished step, plan the steps that narrow the failures
    down; ``COMPLETE`` when nothing is left to test. Unchanged while a step is pending."""
    state = attrs.evolve(state, jobs_spent=jobs_spent)
    if state.stage == DiagnoseStage.COMPLETE or any(
            s.outcome == StepOutcome.PENDING for s in state.steps):
        return state
    if state.job_budget == 0:
        screening = [s for s in state.steps if s.stage == DiagnoseStage.SCREENING]
        state = attrs.evolve(state, job_budget=job_budget(
            screening=len(screening),
            failed=sum(1 for s in screening if s.outcome == StepOutcome.FAILED),
            group_size=params.group_size, min_group_size=params.min_group_size))
    return _Planner(state, params).plan()


class _Planner:
    """One round's planning over a copy of the steps (mutable while it runs)."""

    def __init__(self, state: DiagnoseStatus, params: Params) -> None:
        self.state = state
        self.params = params
        self.steps = list(state.steps)
        self.index = {s.name: i for i, s in enumerate(self.steps)}
        self.failed = set(state.failed_nodes)
        self.unresolved = set(state.uncertified_nodes)
        self.links = list(state.bad_links)
        self.new: list[DiagnoseStep] = []
        self.planned_by: list[str] = []  # parents that planned steps this round
        self.round = state.round + 1
        self.cursor = 0
        self.pool: list[str] = []

    def children(self, name: str) -> list[DiagnoseStep]:
        return [s for s in self.steps if s.parent == name]

    def resolve(self, step: DiagnoseStep, resolution: StepResolution) -> None:
        self.steps[self.index[step.name]] = attrs.evolve(step, resolution=resolution)

    def plan(self) -> DiagnoseStatus:
        for step in list(self.steps):
            if step.resolution is None:
                self._settle(step)
        self.pool = self._known_good()
        for step in list(self.steps):
            if step.resolution is None and step.outcome == StepOutcome.FAILED:
                self._narrow(step)
        for step in list(self.steps):
            if step.resolution in (StepResolution.BISECTED, StepResolution.CONFIRMING,
                                   StepResolution.CROSSING):
                self._after_children(step)
        if self.new and self.state.jobs_spent + len(self.new) > self.state.job_budget:
            for name in self.planned_by:
                step = self.steps[self.index[name]]
                self.resolve(step, StepResolution.BUDGET_EXCEEDED)
                self.unresolved |= set(step.suspects)
            self.new = []
        stage = next((st for st in _STAGE_ORDER if any(s.stage == st for s in self.new)),
                     DiagnoseStage.COMPLETE)
        return attrs.evolve(
            self.state, stage=stage, round=self.round if self.new else self.state.round,
            steps=(*self.steps, *self.new), failed_nodes=tuple(sorted(self.failed)),
            bad_links=tuple(self.links),
            uncertified_nodes=tuple(sorted(self.unresolved - self.failed)))

    def _settle(self, step: DiagnoseStep) -> None:
        """Resolve a finished step by its own outcome (failures that narrow wait)."""
        if step.outcome == StepOutcome.PASSED:
            self.resolve(step, StepResolution.CLEARED)
        elif step.outcome == StepOutcome.NOT_JUDGED:
            self.resolve(step, StepResolution.NOT_JUDGED)
            self.unresolved |= set(step.suspects)
        elif step.outcome == StepOutcome.NODE_EVIDENCE:
            self.resolve(step, StepResolution.NODE_EVIDENCE)
        elif step.stage == DiagnoseStage.CONFIRMATION and len(step.suspects) > 1:
            self.resolve(step, StepResolution.CONFIRMED_TOGETHER)
            self.unresolved |= set(step.suspects)
        elif step.stage == DiagnoseStage.CONFIRMATION:
            self.resolve(step, StepResolution.CONFIRMED)
            self.failed |= set(step.suspects)
        elif step.stage == DiagnoseStage.CROSS_BOUNDARY:
            self.resolve(step, StepResolution.LINK_FOUND)
            self.links.append(DiagnoseLink(domains=step.domains, step=step.name))

    def _known_good(self) -> list[str]:
        good = {n for s in self.steps if s.outcome == StepOutcome.PASSED
                for n in (*s.suspects, *s.peers)}
        return sorted(good - self.failed - self.unresolved)

    def _peers(self, count: int, *, exclude: Sequence[str]) -> tuple[str, ...]:
        """``count`` known-good nodes, rotating through the pool so that the steps of one
        round use different peers where there are enough (they can run at the same time)."""
        pool = [n for n in self.pool if n not in set(exclude)]
        if not pool or count <= 0:
            return ()
        count = min(count, len(pool))
        start = self.cursor % len(pool)
        self.cursor += count
        return tuple(sorted((pool + pool)[start:start + count]))

    def _add(self, parent: DiagnoseStep, stage: DiagnoseStage, suspects: Sequence[str],
             peers: tuple[str, ...] = (), domains: tuple[str, ...] = ()) -> None:
        k = len(self.new)
        name = f"{_PREFIX[stage]}-{self.round}-{k}"
        if not domains and self.params.domain_of:
            domains = tuple(sorted({self.params.domain_of[n] for n in suspects
                                    if n in self.params.domain_of}))
        self.new.append(DiagnoseStep(name=name, stage=stage, parent=parent.name,
                                     suspects=tuple(suspects), peers=peers, domains=domains))
        if not self.planned_by or self.planned_by[-1] != parent.name:
            self.planned_by.append(parent.name)

    def _size(self) -> int:
        return max(self.params.group_size, self.params.min_group_size)

    def _narrow(self, step: DiagnoseStep) -> None:
        """A genuine failure of a screening or bisection step: split it, or confirm."""
        floor = self.params.min_group_size
        suspects = step.suspects
        if len(suspects) > floor:
            halves = self._halves(suspects)
            peers = [self._peers(self._size() - len(h), exclude=suspects) for h in halves]
            if all(len(h) + len(p) >= floor for h, p in zip(halves, peers, strict=True)):
                for half, mine in zip(halves, peers, strict=True):
                    self._add(step, DiagnoseStage.BISECTION, half, mine)
                self.resolve(step, StepResolution.BISECTED)
                return
        alone = [self._peers(self._size() - 1, exclude=suspects) for _ in suspects]
        if len(suspects) > 1 and all(1 + len(p) >= floor for p in alone):
            for node, mine in zip(suspects, alone, strict=True):
                self._add(step, DiagnoseStage.CONFIRMATION, (node,), mine)
        else:
            # Too few known-good peers to test a suspect on its own: re-run them together.
            self._add(step, DiagnoseStage.CONFIRMATION, suspects,
                      self._peers(self._size() - len(suspects), exclude=suspects))
        self.resolve(step, StepResolution.CONFIRMING)

    def _halves(self, nodes: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Two halves: whole topology domains when the nodes span several, else by name."""
        domain_of = self.params.domain_of
        domains = sorted({domain_of.get(n, "") for n in nodes})
        if domain_of and len(domains) > 1:
            first: list[str] = []
            for d in domains[:-1]:
                first += [n for n in nodes if domain_of.get(n, "") == d]
                if 2 * len(first) >= len(nodes):
                    break
            rest = tuple(n for n in nodes if n not in set(first))
            return tuple(first), rest
        ordered = sorted(nodes)
        cut = (len(ordered) + 1) // 2
        return tuple(ordered[:cut]), tuple(ordered[cut:])

    def _after_children(self, step: DiagnoseStep) -> None:
        """A step whose children all passed: cross-boundary probes or not reproduced."""
        kids = self.children(step.name)
        if not kids or any(k.outcome != StepOutcome.PASSED for k in kids):
            return
        if step.resolution in (StepResolution.BISECTED, StepResolution.CONFIRMING):
            probes = [(pair, nodes) for pair in self._pairs(kids)
                      if len(nodes := [n for n in step.suspects
                                       if self.params.domain_of.get(n) in pair])
                      >= self.params.min_group_size]
            if probes and len(self._pairs(kids)) <= MAX_PAIRS:
                for pair, nodes in probes:
                    self._add(step, DiagnoseStage.CROSS_BOUNDARY, nodes, domains=pair)
                self.resolve(step, StepResolution.CROSSING)
                return
        self.resolve(step, StepResolution.NOT_REPRODUCED)
        self.unresolved |= set(step.suspects)

    def _pairs(self, kids: list[DiagnoseStep]) -> list[tuple[str, str]]:
        """The domain pairs across children (two halves, or suspects confirmed one by one)
        whose domains do not overlap; none when a child has no domain."""
        if len(kids) < 2 or not self.params.domain_of:
            return []
        sides = [set(k.domains) for k in kids]
        every = [d for side in sides for d in side]
        if any(not side for side in sides) or len(every) != len(set(every)):
            return []
        return [(a, b) for i, left in enumerate(sides) for right in sides[i + 1:]
                for a in sorted(left) for b in sorted(right)]


def records(state: DiagnoseStatus, *, scopes: Mapping[str, str] | None = None,
            ) -> tuple[list[D.NodeRecord], list[D.NodeRecord]]:
    """The Failed and Uncertified node records a finished run adds (confirmed nodes; suspects
    it could not judge, each with the reason of the step that left it so and the failure
    scope of that step's Job, ``scopes`` by step name, when it has one)."""
    failed = []
    for node in state.failed_nodes:
        confirmed = next(s for s in reversed(state.steps)
                         if s.resolution == StepResolution.CONFIRMED and node in s.suspects)
        peers = confirmed.peers
        with_peers = f" with known-good peers {', '.join(peers)}" if peers else ""
        failed.append(D.NodeRecord(
            name=node, reason=FailedNodeReason.WORKLOAD_FAILED, scope=FailureScope.WORKLOAD,
            message=f"Confirmed by diagnose: failed again in step {confirmed.name} "
                    f"(Job {confirmed.job_name}){with_peers}"))
    uncertified = []
    for node in state.uncertified_nodes:
        step = next((s for s in reversed(state.steps) if s.resolution in _UNCERTIFIED
                     and node in s.suspects), None)
        if step is None or step.resolution is None:
            continue
        reason = _UNCERTIFIED[step.resolution]
        scope = (scopes or {}).get(step.name, FailureScope.WORKLOAD)
        uncertified.append(D.NodeRecord(name=node, reason=reason, scope=scope,
                                        message=_why(reason, step)))
    return failed, uncertified


def _why(reason: DiagnoseReason, step: DiagnoseStep) -> str:
    return {
        DiagnoseReason.NOT_JUDGED: f"not certified: diagnose step {step.name} ended without "
                                   "a verdict (infrastructure abort); nobody blamed",
        DiagnoseReason.NOT_REPRODUCED: f"not certified: diagnose step {step.name} failed, but "
                                       "every narrower run passed (not reproduced)",
        DiagnoseReason.BUDGET_EXCEEDED: f"not certified: narrowing step {step.name} down "
                                        "would pass the diagnose Job bound",
        DiagnoseReason.INSEPARABLE: f"not certified: diagnose step {step.name} failed again "
                                    f"with {', '.join(step.suspects)} together; too few "
                                    "known-good peers to test each on its own",
    }[reason]


def summary(state: DiagnoseStatus) -> str:
    """One sentence: what the run found and what it spent."""
    parts = []
    if state.failed_nodes:
        parts.append(f"confirmed bad node(s) {', '.join(state.failed_nodes)}")
    if state.bad_links:
        parts.append("bad link(s) " + ", ".join(" <-> ".join(link.domains)
                                                for link in state.bad_links))
    together = [s for s in state.steps if s.resolution == StepResolution.CONFIRMED_TOGETHER]
    if together:
        parts.append("failure confirmed among " + "; ".join(", ".join(s.suspects)
                                                           for s in together)
                     + " (too few known-good peers to tell which)")
    if state.uncertified_nodes:
        parts.append(f"{len(state.uncertified_nodes)} suspect(s) not certified")
    if not parts:
        parts.append("no failure to narrow down" if not any(
            s.outcome == StepOutcome.FAILED for s in state.steps) else "nothing confirmed")
    return (f"Diagnose: {'; '.join(parts)} ({state.jobs_spent} of {state.job_budget} Jobs, "
            f"{state.round} round(s) after screening)")
