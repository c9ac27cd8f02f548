"""When a CertificationSchedule's runs are due.

A cron ``schedule`` is read in its ``timeZone`` (UTC when unset) with croniter; an ``interval``
lays a grid from the schedule's creation: due at ``created``, ``created + interval``, ... . A
reconcile looks at the due times after the latest one it handled (``since``) up to ``now``:
only the latest of them may run (a manager that was down for a day makes one run, not a
burst), the others are missed. Counting stops at :data:`MAX_COUNTED`: past it the exact number
is of no use to anyone, and an every-minute schedule left alone for a year must not cost
half a million croniter steps.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Final
from zoneinfo import ZoneInfo

import attrs
from croniter import croniter

from cre.api.durations import duration_seconds
from cre.api.schedule import CertificationScheduleSpec, cron_error, time_zone_error

#: Due times counted between two reconciles at most (the rest are counted as this many).
MAX_COUNTED: Final = 100


class ScheduleError(ValueError):
    """The schedule cannot be read (an object that slipped past validation)."""


@attrs.frozen(kw_only=True)
class Due:
    """The due times in ``(since, now]``: the latest, how many there were (at most
    :data:`MAX_COUNTED`), and the first one after ``now``."""

    latest: datetime | None
    count: int
    next: datetime | None


def _zone(spec: CertificationScheduleSpec) -> tzinfo:
    if spec.time_zone is None:
        return UTC
    problem = time_zone_error(spec.time_zone)
    if problem is not None:
        raise ScheduleError(f"spec.timeZone {spec.time_zone!r}: {problem}")
    return ZoneInfo(spec.time_zone)


def _cron_after(expr: str, start: datetime, zone: tzinfo) -> croniter:
    return croniter(expr, start.astimezone(zone))


def _next_cron(it: croniter) -> datetime | None:
    try:
        found = it.get_next(datetime)
    except ValueError:  # CroniterBadDateError: no such date (Feb 30) within croniter's search
        return None
    assert isinstance(found, datetime)
    return found.astimezone(UTC)


def due_times(spec: CertificationScheduleSpec, *, created: datetime, since: datetime | None,
              now: datetime) -> Due:
    """The due times after ``since`` (``None``: since ``created``; an interval's first run is
    due at ``created`` itself) up to ``now``; ``ScheduleError`` when the spec cannot be read."""
    if spec.schedule is not None:
        problem = cron_error(spec.schedule)
        if problem is not None:
            raise ScheduleError(f"spec.schedule {spec.schedule!r}: {problem}")
        zone = _zone(spec)
        it = _cron_after(spec.schedule, since or created, zone)
        latest, count = None, 0
        while True:
            found = _next_cron(it)
            if found is None:
                raise ScheduleError(f"spec.schedule {spec.schedule!r}: matches no date after "
                                    f"{(latest or since or created).isoformat()}")
            if found > now:
                return Due(latest=latest, count=count, next=found)
            count += 1
            latest = found
            if count >= MAX_COUNTED:
                # Jump: the latest due time at or before now, then the one after it.
                back = croniter(spec.schedule, (now + timedelta(seconds=1)).astimezone(zone))
                prev = back.get_prev(datetime)
                assert isinstance(prev, datetime)
                latest = max(latest, prev.astimezone(UTC))
                return Due(latest=latest, count=count,
                           next=_next_cron(_cron_after(spec.schedule, latest, zone)))
    if spec.interval is None:
        raise ScheduleError("set exactly one of spec.schedule, spec.interval")
    try:
        step = duration_seconds(spec.interval)
    except ValueError as exc:
        raise ScheduleError(f"spec.interval: {exc}") from None
    if step < 60:
        raise ScheduleError(f"spec.interval {spec.interval!r}: must be at least 1m")
    # Grid index k: due at created + k*step, k >= 0. First index after since (k=0 if none).
    first = 0 if since is None else math.floor((since - created).total_seconds() / step) + 1
    first = max(first, 0)
    last = math.floor((now - created).total_seconds() / step)

    def at(k: int) -> datetime:
        return created + timedelta(seconds=k * step)

    if last < first:
        return Due(latest=None, count=0, next=at(first))
    return Due(latest=at(last), count=min(last - first + 1, MAX_COUNTED), next=at(last + 1))


def run_name(schedule: str, due: datetime) -> str:
    """The name of the run due at ``due``: ``<schedule>-<unix minutes>``. Deterministic, so a
    create repeated after a crash finds the name taken instead of making a second run."""
    return f"{schedule}-{int(due.timestamp() // 60)}"
