"""The Job's timeout clock: ``spec.timeoutPerJob`` as a bounded duration, and its anchor.

``timeoutPerJob`` counts the time a workload runs, not the time it waits: the clock starts at
``status.workloadStartTime`` and stops while the workload is suspended (a Kueue preemption) or
its pods cannot be scheduled (``status.schedulingBlockedSince``, see ``cre.core.job.stall``). When
it runs again, the anchor moves forward by the time spent waiting and
``status.schedulingResumedTime`` records when. Durations are parsed in floats and clamped to the
longest one a spec accepts (30 days, ``cre.api.durations``), so a value an older CRD let
through never overflows ``now + timeout``. Pure: ``now`` is a parameter.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs

from cre.api.durations import MAX_DURATION_SECONDS, duration_seconds
from cre.api.job import Job, JobStatus


def parse_duration(text: str) -> timedelta:
    """A Go-style duration (``"1h30m"``, ``"90s"``) as a timedelta, clamped to the longest
    duration a spec accepts (30 days), so a value an older CRD let through never overflows."""
    return timedelta(seconds=min(duration_seconds(text), MAX_DURATION_SECONDS))


def timeout_of(job: Job) -> timedelta | None:
    """``spec.timeoutPerJob`` as a timedelta (``None``: no limit, or not a duration at all,
    which validation reports before any workload exists)."""
    raw = job.spec.timeout_per_job
    try:
        return parse_duration(raw) if raw else None
    except ValueError:
        return None


def resume_clock(status: JobStatus, now: datetime) -> tuple[datetime, JobStatus]:
    """The timeout anchor of a running workload and ``status`` with the wait closed: a first
    run starts the clock at ``now``; one that was suspended or blocked has its anchor moved
    forward by the wait (``schedulingBlockedSince`` cleared, ``schedulingResumedTime`` set)."""
    start = status.workload_start_time or now
    if status.scheduling_blocked_since is not None:
        start = start + max(now - status.scheduling_blocked_since, timedelta(0))
        status = attrs.evolve(status, scheduling_blocked_since=None,
                              scheduling_resumed_time=now)
    return start, status


def seconds_left(job: Job, *, start: datetime, now: datetime) -> float | None:
    """Seconds until the Job's timeout from the anchor ``start`` (zero or less: timed out;
    ``None``: no timeout)."""
    timeout = timeout_of(job)
    return None if timeout is None else (start + timeout - now).total_seconds()
