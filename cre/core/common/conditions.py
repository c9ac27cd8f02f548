"""Additive (non-trio) conditions of the Workflow and Certification tiers, and the trio write
with the one event per flip, shared by both pure cores.

``Incomplete`` and ``SuspectedClusterOutage`` sit next to the exclusive trio: a Workflow can be
``Succeeded`` and ``Incomplete`` at once. An additive condition's event is due only when its
status flips to True (the outage warning is emitted once, not on every pass).
"""

from __future__ import annotations

from datetime import datetime

from cre.api.conditions import ConditionType
from cre.api.meta import Condition, ConditionStatus
from cre.core.common.lifecycle import bound_note, set_exclusive
from cre.core.common.plan import EventSeverity, EventSpec

CONDITION_MESSAGE_LIMIT = 32768


def condition(conditions: tuple[Condition, ...], type_: str) -> Condition | None:
    """The condition of this type, or ``None``."""
    return next((c for c in conditions if c.type == type_), None)


def is_true(conditions: tuple[Condition, ...], type_: str) -> bool:
    """Whether the condition of this type is True."""
    found = condition(conditions, type_)
    return found is not None and found.status == ConditionStatus.TRUE


def set_additive(
    conditions: tuple[Condition, ...], *, type_: str, status: bool, reason: str, message: str,
    now: datetime, generation: int | None, warn: bool = False,
) -> tuple[tuple[Condition, ...], EventSpec | None]:
    """``conditions`` with ``type_`` set (transition time kept when the status holds), and the
    event due when it flips to True (Warning when ``warn``)."""
    old = condition(conditions, type_)
    want = ConditionStatus.TRUE if status else ConditionStatus.FALSE
    message = bound_note(message, limit=CONDITION_MESSAGE_LIMIT)
    fresh = Condition(type=type_, status=want, reason=reason, message=message,
                      last_transition_time=now, observed_generation=generation)
    if old is not None and old.status == want:
        if (old.reason, old.message, old.observed_generation) == (reason, message, generation):
            return conditions, None
        fresh = Condition(type=type_, status=want, reason=reason, message=message,
                          last_transition_time=old.last_transition_time,
                          observed_generation=generation)
    out = tuple(fresh if c.type == type_ else c for c in conditions)
    if old is None:
        out = (*conditions, fresh)
    flipped = status and (old is None or old.status != ConditionStatus.TRUE)
    event = EventSpec(type=EventSeverity.WARNING if warn else EventSeverity.NORMAL, reason=reason,
                      message=bound_note(message)) if flipped else None
    return out, event


def set_trio(
    conditions: tuple[Condition, ...], *, member: ConditionType, reason: str, message: str,
    now: datetime, generation: int | None,
) -> tuple[tuple[Condition, ...], EventSpec | None]:
    """The exclusive trio write with a bounded message (see ``cre.core.common.lifecycle``)."""
    return set_exclusive(conditions, member=member, reason=reason,
                         message=bound_note(message, limit=CONDITION_MESSAGE_LIMIT), now=now,
                         generation=generation)
