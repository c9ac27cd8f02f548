"""One pass of a CertificationSchedule, purely: which run to make, skip, replace or prune.

``reconcile_schedule(schedule, observation, now)`` returns a ``Plan`` of the schedule's status;
the shell applies it (``cre.controller.schedule``). In order:

1. A schedule being deleted is left alone (its runs go with it, by owner reference).
2. Its runs (the Certifications it controls) are split into active and ended. Every ended run
   not yet in ``status.history`` is added (newest first, at most ``HISTORY_MAX``), and ended
   runs beyond ``successfulRunsHistoryLimit`` / ``failedRunsHistoryLimit`` (oldest first) are
   deleted (``RunsPruned``).
3. The due times after ``status.lastScheduleTime`` (the creation time at first) up to ``now``
   (:mod:`cre.core.schedule.times`); a schedule that cannot be read is ``Scheduling`` False
   ``InvalidSchedule``, a suspended one ``Suspended`` (its due times pass without runs and are
   not made up).
4. Only the latest due time may run; the earlier ones are missed (``missedRuns``). It is
   handled once, and ``lastScheduleTime`` moves to it, in one of these ways:

   - a run of its name exists already (created on a pass whose status write was lost): kept;
   - later than ``startingDeadlineSeconds``: missed (``MissedDeadline``);
   - a run still active: Forbid skips it (``ConcurrencyForbid``, ``skippedRuns``); Replace
     deletes the active run (``RunReplaced``) and creates the due one once the old one is gone
     (``lastScheduleTime`` waits until then);
   - its name held by an object the schedule does not control, or the create refused for
     good: skipped (``RunCreateRefused``);
   - no eligible node (:mod:`cre.core.schedule.nodes`): skipped (``NoEligibleNodes``), never an
     empty Certification;
   - otherwise the Certification ``<schedule>-<unix minutes of the due time>`` is created from
     the template, pinned to the chosen nodes (``spec.target.nodeNames``), labelled
     ``cre.dev/schedule`` and controlled by the schedule (``RunCreated``).

   Each due time handled gives one event, whose reason is the run's ``result`` in
   ``cre_schedule_runs_total``.
5. ``nextScheduleTime`` is the first due time after ``now``, and ``requeue_after`` the time
   until it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

import attrs

from cre.api import labels as L
from cre.api.certification import Certification
from cre.api.conditions import ConditionType
from cre.api.converter import unstructure
from cre.api.meta import ObjectReference, format_time, parse_time
from cre.api.nodecertification import NodeCertification
from cre.api.schedule import (
    HISTORY_MAX,
    CertificationSchedule,
    CertificationScheduleStatus,
    ConcurrencyPolicy,
    ScheduleConditionType,
    ScheduleReason,
    ScheduleRun,
)
from cre.core.common.conditions import condition, set_additive
from cre.core.common.lifecycle import true_member
from cre.core.common.observed import NodeView
from cre.core.common.plan import Create, Delete, EventSeverity, EventSpec, Feedback, Plan
from cre.core.schedule.nodes import choose_nodes
from cre.core.schedule.times import Due, ScheduleError, due_times, run_name

SchedulePlan = Plan[CertificationScheduleStatus]
#: Names shown in an event or message at most.
SHOWN: Final = 5


@attrs.frozen(kw_only=True)
class ScheduleSettings:
    """Tunables of the schedule core."""

    # Look again this soon while a replaced run is being deleted.
    replace_poll: float = 5.0


DEFAULT_SCHEDULE_SETTINGS: Final = ScheduleSettings()


@attrs.frozen(kw_only=True)
class ScheduleObservation:
    """What the core reads: the Certifications the schedule controls, the GPU nodes, their
    NodeCertifications (by node name) and the nodes whose GPUs a pod of someone else holds
    (:func:`cre.core.schedule.nodes.busy_nodes` of the pods' views; the shell reads them off
    its pod cache's node index)."""

    certifications: tuple[Certification, ...] = ()
    nodes: tuple[NodeView, ...] = ()
    records: Mapping[str, NodeCertification] = attrs.field(factory=dict)
    busy: frozenset[str] = frozenset()
    feedback: Feedback = attrs.field(factory=Feedback)


def _shown(names: Iterable[str]) -> str:
    names = list(names)
    more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more


def ended(cert: Certification) -> tuple[ConditionType, datetime] | None:
    """How and when a run ended (its Succeeded or Failed condition); ``None`` while active."""
    member = true_member(cert.status.conditions)
    if member is None or member.type == ConditionType.IN_PROGRESS:
        return None
    return ConditionType(member.type), member.last_transition_time


def controlled_by(cert: Certification, schedule: CertificationSchedule) -> bool:
    """Whether the schedule controls ``cert`` (its controller reference names the schedule)."""
    return any(ref.controller and ref.kind == "CertificationSchedule"
               and ref.uid == schedule.metadata.uid for ref in cert.metadata.owner_references)


def _scheduled_time(cert: Certification) -> datetime | None:
    raw = cert.metadata.annotations.get(L.SCHEDULED_TIME)
    try:
        return parse_time(raw) if raw else cert.metadata.creation_timestamp
    except ValueError:
        return cert.metadata.creation_timestamp


def _run_record(cert: Certification, end: datetime) -> ScheduleRun:
    return ScheduleRun(
        name=cert.metadata.name or "",
        scheduled_time=_scheduled_time(cert) or end,
        start_time=cert.metadata.creation_timestamp,
        completion_time=end, verdict=cert.status.verdict,
        nodes=len(cert.spec.target.node_names))


def _history(known: tuple[ScheduleRun, ...], done: list[Certification]) -> tuple[ScheduleRun, ...]:
    names = {run.name for run in known}
    runs = [*known, *(_run_record(c, end[1]) for c in done
                      if (c.metadata.name or "") not in names and (end := ended(c)))]
    runs.sort(key=lambda r: (r.completion_time or r.scheduled_time, r.name), reverse=True)
    return tuple(runs[:HISTORY_MAX])


def _prune(schedule: CertificationSchedule, done: list[Certification]) -> list[Certification]:
    """Ended runs beyond the history limits, oldest first dropped: the ones to delete."""
    out: list[Certification] = []
    for outcome, limit in ((ConditionType.SUCCEEDED, schedule.spec.successful_runs_history_limit),
                           (ConditionType.FAILED, schedule.spec.failed_runs_history_limit)):
        same = sorted(((end[1], c) for c in done if (end := ended(c)) and end[0] == outcome),
                      key=lambda pair: (pair[0], pair[1].metadata.name or ""), reverse=True)
        out.extend(c for _, c in same[limit:] if c.metadata.deletion_timestamp is None)
    return sorted(out, key=lambda c: c.metadata.name or "")


def _delete(cert: Certification) -> Delete:
    return Delete(api_version=L.API_VERSION, kind="Certification",
                  namespace=cert.metadata.namespace or "", name=cert.metadata.name or "",
                  uid=cert.metadata.uid or "")


def _ref(name: str, namespace: str, uid: str | None = None) -> ObjectReference:
    return ObjectReference(api_version=L.API_VERSION, kind="Certification", name=name,
                           namespace=namespace, uid=uid)


def run_manifest(schedule: CertificationSchedule, *, name: str, due: datetime,
                 nodes: tuple[str, ...]) -> dict[str, Any]:
    """The Certification of the run due at ``due``, pinned to ``nodes``."""
    template = schedule.spec.certification_template
    spec = template.spec
    pinned = attrs.evolve(spec, target=attrs.evolve(spec.target, node_names=nodes))
    meta = template.metadata
    return {
        "apiVersion": L.API_VERSION,
        "kind": "Certification",
        "metadata": {
            "name": name,
            "namespace": schedule.metadata.namespace or "",
            "labels": {**(meta.labels if meta else {}), L.MANAGED_BY: L.MANAGED_BY_VALUE,
                       L.SCHEDULE: schedule.metadata.name or ""},
            "annotations": {**(meta.annotations if meta else {}),
                            L.SCHEDULED_TIME: format_time(due)},
            "ownerReferences": [{
                "apiVersion": L.API_VERSION, "kind": "CertificationSchedule",
                "name": schedule.metadata.name or "", "uid": schedule.metadata.uid or "",
                "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": unstructure(pinned),
    }


@attrs.frozen(kw_only=True)
class _Decision:
    """What one due time came to: the status counters, the condition and the event."""

    handled: bool = True  # lastScheduleTime moves to the due time
    reason: ScheduleReason | None = None
    message: str = ""
    skipped: bool = False  # RunSkipped True (else False, once a run was created)
    missed: int = 0
    created: Create | None = None
    deletes: tuple[Delete, ...] = ()
    runs: int = 0
    # What the event says before the message (the condition's message names no run, so it
    # changes only when the outcome does).
    event: str = ""


def _tried(runs: Iterable[Certification], now: datetime) -> dict[str, datetime]:
    """Per node, when the latest run that pinned it ended (``now`` for one still running)."""
    out: dict[str, datetime] = {}
    for cert in runs:
        end = ended(cert)
        at = end[1] if end is not None else now
        for node in cert.spec.target.node_names:
            if node not in out or at > out[node]:
                out[node] = at
    return out


def _decide(schedule: CertificationSchedule, obs: ScheduleObservation, due: Due, *,
            active: list[Certification], runs: list[Certification], now: datetime
            ) -> _Decision:
    """What to do about the latest due time (module docstring, step 4)."""
    assert due.latest is not None
    spec = schedule.spec
    at = due.latest
    missed = due.count - 1
    name = run_name(schedule.metadata.name or "", at)
    when = format_time(at)
    if any(c.metadata.name == name for c in runs):
        return _Decision(reason=ScheduleReason.RUN_CREATED, missed=missed, runs=1,
                         message=f"created {name} for {when}")
    deadline = spec.starting_deadline_seconds
    if deadline is not None and (now - at).total_seconds() > deadline:
        return _Decision(reason=ScheduleReason.MISSED_DEADLINE, skipped=True, missed=missed + 1,
                         message=f"the run due at {when} could not start within "
                                 f"startingDeadlineSeconds ({deadline}s)")
    if active:
        names = _shown(c.metadata.name or "" for c in active)
        if spec.concurrency_policy == ConcurrencyPolicy.FORBID:
            return _Decision(reason=ScheduleReason.CONCURRENCY_FORBID, skipped=True,
                             missed=missed, message=f"skipped the run due at {when}: {names} "
                                                    "still running (concurrencyPolicy Forbid)")
        going = tuple(_delete(c) for c in active if c.metadata.deletion_timestamp is None)
        return _Decision(handled=False, reason=ScheduleReason.RUN_REPLACED if going else None,
                         deletes=going, message=f"deleting {names} for the run due at {when} "
                                                "(concurrencyPolicy Replace)")
    held = obs.feedback.conflict("Certification", name)
    refused = next((r for r in obs.feedback.create_rejections if r.name == name), None)
    if held is not None or refused is not None:
        why = refused.describe() if refused is not None else \
            f"the name {name} is held by an object this schedule does not control"
        return _Decision(reason=ScheduleReason.RUN_CREATE_REFUSED, skipped=True, missed=missed,
                         message=f"skipped the run due at {when}: {why}")
    choice = choose_nodes(spec.certification_template.spec, nodes=obs.nodes,
                          records=obs.records, busy=obs.busy,
                          max_nodes=spec.max_nodes_per_run, now=now, tried=_tried(runs, now))
    if not choice.chosen:
        busy = f"; busy with GPU pods of others: {_shown(choice.busy)}" if choice.busy else ""
        return _Decision(reason=ScheduleReason.NO_ELIGIBLE_NODES, skipped=True, missed=missed,
                         message=f"skipped the run due at {when}: {choice.eligible} idle "
                                 f"target node(s), {choice.unavailable} not Ready or cordoned"
                                 f"{busy}")
    manifest = run_manifest(schedule, name=name, due=at, nodes=choice.chosen)
    busy = f"; {len(choice.busy)} busy node(s) left out: {_shown(choice.busy)}" \
        if choice.busy else ""
    return _Decision(
        reason=ScheduleReason.RUN_CREATED, missed=missed, runs=1,
        created=Create(api_version=L.API_VERSION, kind="Certification",
                       namespace=schedule.metadata.namespace or "", name=name, body=manifest),
        message=f"the latest run pinned {len(choice.chosen)} node(s): "
                f"{_shown(choice.chosen)}{busy}", event=f"created {name} for {when}: ")


def reconcile_schedule(schedule: CertificationSchedule, obs: ScheduleObservation,
                       now: datetime, *, settings: ScheduleSettings = DEFAULT_SCHEDULE_SETTINGS
                       ) -> SchedulePlan:
    """The plan for ``schedule`` seen through ``obs`` at ``now`` (module docstring)."""
    rv = schedule.metadata.resource_version or ""
    if schedule.metadata.deletion_timestamp is not None:
        return SchedulePlan(resource_version=rv)
    old = schedule.status
    gen = schedule.metadata.generation
    ns = schedule.metadata.namespace or ""
    runs = sorted((c for c in obs.certifications if controlled_by(c, schedule)),
                  key=lambda c: c.metadata.name or "")
    active = [c for c in runs if ended(c) is None]
    done = [c for c in runs if ended(c) is not None]
    succeeded = [end[1] for c in done if (end := ended(c)) and end[0] == ConditionType.SUCCEEDED]
    last_ok = max([t for t in (old.last_successful_time, *succeeded) if t is not None],
                  default=None)
    pruned = _prune(schedule, done)
    events: list[EventSpec] = []
    if pruned:
        events.append(EventSpec(type=EventSeverity.NORMAL, reason=ScheduleReason.RUNS_PRUNED,
                                message=f"deleted {len(pruned)} ended run(s) beyond the history "
                                        f"limits: {_shown(c.metadata.name or '' for c in pruned)}"))
    status = attrs.evolve(old, observed_generation=gen, history=_history(old.history, done),
                          last_successful_time=last_ok,
                          active=tuple(_ref(c.metadata.name or "", ns, c.metadata.uid)
                                       for c in active))
    conds = old.conditions
    created = schedule.metadata.creation_timestamp or now
    deletes = [_delete(c) for c in pruned]
    creates: list[Create] = []
    requeue: float | None = None
    try:
        due = due_times(schedule.spec, created=created, since=old.last_schedule_time, now=now)
    except ScheduleError as exc:
        was = condition(conds, ScheduleConditionType.SCHEDULING)
        conds, _ = set_additive(conds, type_=ScheduleConditionType.SCHEDULING, status=False,
                                reason=ScheduleReason.INVALID_SCHEDULE, message=str(exc),
                                now=now, generation=gen)
        if was is None or was.reason != ScheduleReason.INVALID_SCHEDULE:
            events.append(EventSpec(type=EventSeverity.WARNING,
                                    reason=ScheduleReason.INVALID_SCHEDULE, message=str(exc)))
        status = attrs.evolve(status, next_schedule_time=None)
        due = None
    if due is not None and schedule.spec.suspend:
        conds, _ = set_additive(conds, type_=ScheduleConditionType.SCHEDULING, status=False,
                                reason=ScheduleReason.SUSPENDED,
                                message="spec.suspend is true: no new run is made",
                                now=now, generation=gen)
        status = attrs.evolve(status, next_schedule_time=None,
                              last_schedule_time=due.latest or old.last_schedule_time)
        requeue = _until(due.next, now)
    elif due is not None:
        conds, _ = set_additive(conds, type_=ScheduleConditionType.SCHEDULING, status=True,
                                reason=ScheduleReason.SCHEDULING,
                                message="runs are made at the due times", now=now,
                                generation=gen)
        status = attrs.evolve(status, next_schedule_time=due.next)
        requeue = _until(due.next, now)
        if due.latest is not None:
            decision = _decide(schedule, obs, due, active=active, runs=runs, now=now)
            deletes.extend(decision.deletes)
            if decision.created is not None:
                creates.append(decision.created)
                status = attrs.evolve(status, active=(*status.active, _ref(
                    decision.created.name, ns)))
            if decision.handled:
                conds, _ = set_additive(
                    conds, type_=ScheduleConditionType.RUN_SKIPPED, status=decision.skipped,
                    reason=decision.reason or ScheduleReason.RUN_CREATED,
                    message=decision.message, now=now, generation=gen)
                late = decision.reason == ScheduleReason.MISSED_DEADLINE
                status = attrs.evolve(
                    status, last_schedule_time=due.latest, runs=status.runs + decision.runs,
                    skipped_runs=status.skipped_runs + int(decision.skipped and not late),
                    missed_runs=status.missed_runs + decision.missed)
                if decision.missed > int(late):
                    events.append(EventSpec(
                        type=EventSeverity.WARNING, reason=ScheduleReason.RUNS_MISSED,
                        message=f"{decision.missed - int(late)} due time(s) before "
                                f"{format_time(due.latest)} passed without a run (only the "
                                "latest one may run)"))
            else:
                requeue = settings.replace_poll
            if decision.reason is not None and (decision.handled or decision.deletes):
                events.append(EventSpec(
                    type=EventSeverity.NORMAL if decision.reason in _NORMAL
                    else EventSeverity.WARNING, reason=decision.reason,
                    message=decision.event + decision.message))
    status = attrs.evolve(status, conditions=conds)
    return SchedulePlan(resource_version=rv, creates=tuple(creates), deletes=tuple(deletes),
                        status=status if status != old else None, events=tuple(events),
                        requeue_after=requeue)


_NORMAL: Final = frozenset({ScheduleReason.RUN_CREATED, ScheduleReason.RUN_REPLACED,
                            ScheduleReason.CONCURRENCY_FORBID})


def _until(when: datetime | None, now: datetime) -> float | None:
    return None if when is None else max((when - now).total_seconds(), 0.0)
