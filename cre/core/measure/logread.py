"""What the log-reading measurement cores share (BandwidthMeasurement, GoodputMeasurement).

Both measurements follow one CRE Job and read one of its pods' logs through a LogProfile, so
:mod:`cre.core.measure.bandwidth` and :mod:`cre.core.measure.goodput` take the same steps around
different parsers, and the Job creates both the same way (:mod:`cre.core.job.bandwidth`,
:mod:`cre.core.job.goodput`):

* **The Job's side**: a Job owns at most one measurement of a kind, ``<job><suffix>``,
  controlled by the Job and annotated with its uid (:data:`JOB_UID_ANNOTATION`), created in the
  Plan that creates the workload; a leftover of an earlier Job of the same name (another uid)
  is deleted first, with a uid precondition (:func:`child_writes`).
* **Which Job**: a Job missing from the cache is read live first; gone before the measurement
  ever started, it is waited for; gone or replaced (uid differs) later, the measurement ends
  (:func:`job_gap`).
* **The read**: bounds (:data:`SAMPLE_LIMIT_BYTES`, :data:`FINAL_LIMIT_BYTES`), the container
  to read and whether it waits (:func:`container_state`), and the anchor: a read resumes at the
  kubelet timestamp of the last line counted, asked of the server at second resolution and
  never further back than :data:`MAX_LOOKBACK` (:func:`since_time`); the window filter
  (:mod:`cre.core.measure.logwindow`) drops what was counted already.
* **The values**: the fields every read result and observation carry (:class:`LogReadResult`,
  :class:`LogObservation`); the read itself is a :class:`cre.core.common.plan.StreamLog` ask, the
  outcome a :class:`cre.core.common.plan.Plan` of the measurement's status.
* **The status**: conditions keep their transition time while their status holds
  (:func:`set_condition`); ``Complete=True`` freezes a measurement (:func:`is_complete`).

Pure: no I/O, the clock is a parameter.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Final, Protocol

import attrs

from cre.api.conditions import ConditionType
from cre.api.job import Job
from cre.api.labels import API_VERSION, JOB, MANAGED_BY, MANAGED_BY_VALUE
from cre.api.meta import Condition, ConditionStatus, ObjectMeta
from cre.core.common.observed import PodView
from cre.core.common.plan import SAMPLE_LIMIT_BYTES as SAMPLE_LIMIT_BYTES
from cre.core.common.plan import ConfirmAbsent, Create, Delete, Feedback
from cre.core.common.timeouts import parse_duration
from cre.core.measure.logwindow import parse_stamp

#: Annotation on a Job's measurement: the uid of the Job it measures.
JOB_UID_ANNOTATION: Final = "cre.dev/job-uid"
#: Bytes the final read may stream (memory stays flat: lines are parsed as they arrive).
FINAL_LIMIT_BYTES: Final = 512 * 1024 * 1024
#: A provisional read never starts further back than this.
MAX_LOOKBACK: Final = timedelta(minutes=30)
#: Re-check interval while waiting for a pod, a profile or the Job.
POLL: Final = 15.0


class Owned(Protocol):
    """A Job's measurement, as far as the Job's side reads it."""

    @property
    def metadata(self) -> ObjectMeta: ...


class _Conditions(Protocol):
    @property
    def conditions(self) -> tuple[Condition, ...]: ...


class Measured(Protocol):
    """A measurement, as far as the shared steps read it."""

    @property
    def metadata(self) -> ObjectMeta: ...

    @property
    def status(self) -> _Conditions: ...


# --- the Job's side ---------------------------------------------------------------------------


def job_name_of(measurement_name: str, suffix: str) -> str | None:
    """The Job a measurement named ``<job><suffix>`` belongs to (``None``: not one)."""
    return measurement_name[: -len(suffix)] if measurement_name.endswith(suffix) else None


def child_manifest(job: Job, *, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The measurement ``name`` of kind ``kind`` that ``job`` owns, with ``spec``."""
    job_name = job.metadata.name or ""
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": job.metadata.namespace,
            "labels": {MANAGED_BY: MANAGED_BY_VALUE, JOB: job_name},
            "annotations": {JOB_UID_ANNOTATION: job.metadata.uid or ""},
            "ownerReferences": [{"apiVersion": API_VERSION, "kind": "Job", "name": job_name,
                                 "uid": job.metadata.uid, "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": spec,
    }


def belongs_to(child: Owned, job: Job) -> bool:
    """Whether ``child`` measures this very Job (same uid), not an earlier one of the name."""
    uid = job.metadata.uid
    return bool(uid) and (child.metadata.annotations or {}).get(JOB_UID_ANNOTATION) == uid


def child_writes(job: Job, child: Owned | None, *, kind: str,
                 manifest: Callable[[Job], dict[str, Any]] | None
                 ) -> tuple[tuple[Create, ...], tuple[Delete, ...]]:
    """The create (``manifest`` of the Job, when it asks for one: not ``None``), or the delete
    of a previous Job's leftover, the Job's measurement ``child`` of ``kind`` needs."""
    if manifest is None:
        return (), ()
    ns = job.metadata.namespace or ""
    if child is None:
        body = manifest(job)
        return (Create(api_version=API_VERSION, kind=kind, namespace=ns,
                       name=body["metadata"]["name"], body=body),), ()
    if not belongs_to(child, job) and child.metadata.deletion_timestamp is None:
        return (), (Delete(api_version=API_VERSION, kind=kind, namespace=ns,
                           name=child.metadata.name or "", uid=child.metadata.uid or ""),)
    return (), ()


# --- the measurement's side -------------------------------------------------------------------


class JobGapKind(enum.Enum):
    """Why a measurement does not follow its Job on this pass."""

    CONFIRM = "Confirm"  # not in the cache: ask for a live read
    WAIT = "Wait"  # gone, and the measurement never started: keep waiting
    LOST = "Lost"  # gone or replaced: the measurement ends


@attrs.frozen(kw_only=True)
class JobGap:
    kind: JobGapKind
    why: str = ""


def job_absence(job_name: str) -> ConfirmAbsent:
    """The ask: is the measured Job ``job_name`` really gone?"""
    return ConfirmAbsent(kind="Job", name=job_name)


def job_gap(m: Owned, job: Job | None, *, job_name: str, feedback: Feedback, started: bool
            ) -> JobGap | None:
    """Why ``m`` cannot follow ``job`` (the cached or live copy of ``job_name``), ``None`` when
    it can."""
    uid = (m.metadata.annotations or {}).get(JOB_UID_ANNOTATION)
    if job is not None and not (uid and job.metadata.uid != uid):
        return None
    if job is None and not feedback.has(job_absence(job_name)):
        return JobGap(kind=JobGapKind.CONFIRM)
    if not started and job is None:
        return JobGap(kind=JobGapKind.WAIT)
    return JobGap(kind=JobGapKind.LOST, why="Referenced Job no longer exists" if job is None
                  else "Referenced Job was replaced (its uid differs)")


def is_complete(m: Measured) -> bool:
    """Whether ``m`` carries ``Complete=True`` (written once: frozen)."""
    return any(c.type == ConditionType.COMPLETE and c.status == ConditionStatus.TRUE
               for c in m.status.conditions)


def set_condition(conds: tuple[Condition, ...], *, type_: ConditionType,
                  status: ConditionStatus, reason: str, message: str, now: datetime
                  ) -> tuple[Condition, ...]:
    """``conds`` with ``type_`` set (the transition time kept while the status holds)."""
    old = next((c for c in conds if c.type == type_), None)
    if old is not None and (old.status, old.reason, old.message) == (status, reason, message):
        return conds
    when = old.last_transition_time if old is not None and old.status == status else now
    new = Condition(type=type_, status=status, reason=reason, message=message,
                    last_transition_time=when)
    return (*(c for c in conds if c.type != type_), new)


def container_state(pod: PodView, name: str | None) -> tuple[str | None, bool, int]:
    """(container name, waiting?, restarts) of the profile's container (or the only one)."""
    statuses = [c for c in pod.container_statuses if not c.init]
    status = next((c for c in statuses if c.name == name), None) if name else (
        statuses[0] if len(statuses) == 1 else None)
    if status is None:
        return name, False, 0
    waiting = status.state is not None and status.state.kind == "waiting"
    return status.name, waiting, status.restart_count


def seconds(text: str, default: float) -> float:
    """The duration ``text`` in seconds (``default`` when it does not parse)."""
    try:
        return parse_duration(text).total_seconds()
    except ValueError:
        return default


def sample_wait(last: datetime | None, now: datetime, interval: float) -> float | None:
    """Seconds until the next sample is due, ``None`` when it is (or none was taken)."""
    if last is not None and (now - last).total_seconds() < interval:
        return interval - (now - last).total_seconds()
    return None


def since_time(anchor: str | None, now: datetime) -> datetime | None:
    """Where a read resuming at ``anchor`` starts on the server (whole seconds, at most
    :data:`MAX_LOOKBACK` back); ``None``: from the log's start."""
    if anchor is None:
        return None
    return max(parse_stamp(anchor).replace(microsecond=0), now - MAX_LOOKBACK)


@attrs.frozen(kw_only=True)
class LogReadResult:
    """Where the shell's streamed read ended: lines admitted, the last timestamp and how many
    lines carried it (the next anchor), a byte limit reached, the error that ended it."""

    lines: int = 0
    last_stamp: str | None = None
    lines_at_last: int = 0
    truncated: bool = False
    error: str | None = None


@attrs.frozen(kw_only=True)
class LogObservation:
    """What a measurement core reads besides its profile and reads: the Job (read live when
    ``feedback`` holds the answered :class:`cre.core.common.plan.ConfirmAbsent` of it), the
    profile's error and the Job's pods."""

    job: Job | None = None
    profile_error: str | None = None  # not found, or invalid (names profile and key)
    pods: tuple[PodView, ...] = ()
    feedback: Feedback = attrs.field(factory=Feedback)
