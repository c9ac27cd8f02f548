"""The exclusive InProgress / Succeeded / Failed trio and the one event per flip.

Every lifecycle tier keeps exactly one trio member True; the other two are False with reason
``NotApplicable`` and an empty message. A *transition* exists only when the True member changes
type (ADR-080 in the reference): a new reason or message on the same member is a status change
but not an event. Event notes are bounded to the 1024-byte events/v1 limit, cut on a character
boundary (invalid UTF-8 is impossible in a Python ``str``), status messages keep their length.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Final

import attrs

from cre.api.conditions import LIFECYCLE_CONDITIONS, CommonReason, ConditionType
from cre.api.meta import Condition, ConditionStatus
from cre.core.common.plan import EventSeverity, EventSpec

EVENT_NOTE_LIMIT: Final = 1024
TRUNCATED_SUFFIX: Final = "... [truncated]"


def bound_note(message: str, *, limit: int = EVENT_NOTE_LIMIT) -> str:
    """``message`` cut to at most ``limit`` UTF-8 bytes, marked when cut."""
    raw = message.encode("utf-8")
    if len(raw) <= limit:
        return message
    budget = limit - len(TRUNCATED_SUFFIX.encode("utf-8"))
    cut = raw[:budget].decode("utf-8", errors="ignore")
    return cut + TRUNCATED_SUFFIX


def true_member(conditions: Iterable[Condition]) -> Condition | None:
    """The trio condition whose status is True (the first one, should there be several)."""
    for cond in conditions:
        if cond.type in LIFECYCLE_CONDITIONS and cond.status == ConditionStatus.TRUE:
            return cond
    return None


def _get(conditions: Iterable[Condition], type_: str) -> Condition | None:
    for cond in conditions:
        if cond.type == type_:
            return cond
    return None


def _put(existing: Condition | None, fresh: Condition) -> Condition:
    """``fresh``, keeping the old transition time when the status did not change."""
    if existing is not None and existing.status == fresh.status:
        if (existing.reason, existing.message, existing.observed_generation) == (
            fresh.reason, fresh.message, fresh.observed_generation
        ):
            return existing
        return attrs.evolve(fresh, last_transition_time=existing.last_transition_time)
    return fresh


def set_exclusive(
    conditions: tuple[Condition, ...],
    *,
    member: ConditionType,
    reason: str,
    message: str,
    now: datetime,
    generation: int | None,
) -> tuple[tuple[Condition, ...], EventSpec | None]:
    """The conditions with ``member`` True and the rest of the trio False, plus the event due.

    Non-trio conditions are kept as they are, in their order; trio members follow in trio order.
    The event is returned only when the True member changed type.
    """
    before = true_member(conditions)
    others = tuple(c for c in conditions if c.type not in LIFECYCLE_CONDITIONS)
    trio: list[Condition] = []
    for type_ in LIFECYCLE_CONDITIONS:
        is_member = type_ == member
        fresh = Condition(
            type=type_,
            status=ConditionStatus.TRUE if is_member else ConditionStatus.FALSE,
            reason=reason if is_member else CommonReason.NOT_APPLICABLE,
            message=message if is_member else "",
            last_transition_time=now,
            observed_generation=generation,
        )
        trio.append(_put(_get(conditions, type_), fresh))
    event = None
    if before is None or before.type != member:
        kind = EventSeverity.WARNING if member == ConditionType.FAILED else EventSeverity.NORMAL
        event = EventSpec(type=kind, reason=reason, message=bound_note(message))
    return others + tuple(trio), event
