"""The ``CertificationSchedule`` kind: a Certification made again and again, on idle nodes.

Like a CronJob makes Jobs, a CertificationSchedule makes Certifications from its
``certificationTemplate``, at the times of a 5-field cron ``schedule`` (in ``timeZone``) or
every ``interval``. Each run pins the nodes it certifies (``spec.target.nodeNames`` of the
Certification it creates): the template's target nodes that run no GPU pod of anyone else,
stalest NodeCertification first, at most ``maxNodesPerRun`` of them in whole groups
(docs/design/022-certification-schedule.md).

``concurrencyPolicy`` offers Forbid and Replace only. CronJob's Allow would let two runs of
the same schedule hold GPUs at once, each picking "the stalest idle nodes" from a view the
other has not changed yet: they would certify the same nodes twice, or fight over them.
"""

from __future__ import annotations

import enum
import zoneinfo
from datetime import datetime
from typing import ClassVar, Final

import attrs
from croniter import croniter

from cre.api.certification import CertificationSpec
from cre.api.common import duration_field
from cre.api.conditions import Verdict
from cre.api.fields import CelRule, c
from cre.api.labels import API_VERSION
from cre.api.meta import Condition, ObjectMeta, ObjectReference
from cre.api.workflow import TemplateMetadata

#: A 5-field cron expression (minute hour day-of-month month day-of-week); the fields
#: themselves are checked by ``cre.api.validate`` with croniter.
CRON_FIVE_FIELDS: Final = r"^\S+( +\S+){4}$"
#: The shortest interval: a run's name carries the minute it was scheduled for.
MIN_INTERVAL: Final = "1m"
#: Finished runs ``status.history`` keeps (newest first).
HISTORY_MAX: Final = 10
#: Longest schedule name: ``<name>-<unix minutes>`` (8 digits until the year 2160) must fit a
#: label value (63 characters), which is where the Certification's name goes.
NAME_MAX: Final = 52


def cron_error(expr: str) -> str | None:
    """What is wrong with the 5-field cron expression ``expr`` (``None``: nothing)."""
    fields = expr.split()
    if len(fields) != 5:
        return (f"must have 5 fields (minute hour day-of-month month day-of-week), "
                f"found {len(fields)}")
    try:
        croniter(expr)
    except (ValueError, KeyError) as exc:  # croniter's errors are ValueErrors
        return f"invalid cron expression: {exc}"
    return None


def time_zone_error(name: str) -> str | None:
    """What is wrong with the IANA time zone ``name`` (``None``: nothing)."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return "unknown time zone (expected an IANA name such as Europe/Paris)"
    return None


class ConcurrencyPolicy(enum.StrEnum):
    """What a due run does while the previous one still runs."""

    FORBID = "Forbid"  # skip the due run (counted, with a reason)
    REPLACE = "Replace"  # delete the running one, then create the due one


class ScheduleConditionType(enum.StrEnum):
    """Condition types of a CertificationSchedule."""

    # True while the schedule makes runs; False when suspended or unreadable.
    SCHEDULING = "Scheduling"
    # True when the latest due run was not created (and why); False once one was.
    RUN_SKIPPED = "RunSkipped"


class ScheduleReason(enum.StrEnum):
    """Reasons of a CertificationSchedule's conditions and events."""

    SCHEDULING = "Scheduling"
    SUSPENDED = "Suspended"
    INVALID_SCHEDULE = "InvalidSchedule"
    RUN_CREATED = "RunCreated"
    RUN_REPLACED = "RunReplaced"  # Replace: the active run was deleted for the due one
    CONCURRENCY_FORBID = "ConcurrencyForbid"  # Forbid: a run is still active
    NO_ELIGIBLE_NODES = "NoEligibleNodes"  # every target node busy, or fewer than one group
    MISSED_DEADLINE = "MissedDeadline"  # the due time is older than startingDeadlineSeconds
    RUNS_MISSED = "RunsMissed"  # several due times passed at once: only the latest may run
    RUN_CREATE_REFUSED = "RunCreateRefused"  # the API server refused the Certification
    RUNS_PRUNED = "RunsPruned"  # finished runs deleted beyond the history limits


@attrs.frozen(kw_only=True)
class CertificationTemplate:
    """The Certification every run is made from."""

    metadata: TemplateMetadata | None = attrs.field(default=None, metadata=c(doc=(
        "Labels and annotations of every Certification the schedule creates.")))
    spec: CertificationSpec = attrs.field(metadata=c(doc=(
        "The Certification's spec; each run pins spec.target.nodeNames to the nodes it "
        "chose among the target's.")))


@attrs.frozen(kw_only=True)
class CertificationScheduleSpec:
    """When to certify, which nodes, and how many at a time."""

    CEL_RULES: ClassVar[tuple[CelRule, ...]] = (
        CelRule("has(self.schedule) != has(self.interval)",
                "set exactly one of schedule, interval"),
        CelRule("!has(self.timeZone) || has(self.schedule)",
                "timeZone applies to schedule only"),
    )

    certification_template: CertificationTemplate = attrs.field(metadata=c(doc=(
        "The Certification each run creates.")))
    schedule: str | None = attrs.field(
        default=None, metadata=c(max_length=256, pattern=CRON_FIVE_FIELDS, doc=(
            "Cron expression of the run times, 5 fields (minute hour day-of-month month "
            "day-of-week), e.g. '0 2 * * 6'. Exactly one of schedule and interval.")))
    interval: str | None = attrs.field(default=None, metadata=duration_field(doc=(
        "Go duration between runs, at least 1m (e.g. 12h); the first run is due when the "
        "schedule is created. Exactly one of schedule and interval.")))
    time_zone: str | None = attrs.field(
        default=None, metadata=c(min_length=1, max_length=64, doc=(
            "IANA time zone the schedule is read in, e.g. Europe/Paris. Unset: UTC.")))
    suspend: bool = attrs.field(default=False, metadata=c(doc=(
        "Make no new run while true (a running one continues); due times that pass while "
        "suspended are not made up.")))
    starting_deadline_seconds: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Seconds after its due time a run may still start; a later one is counted missed. "
            "Unset: no deadline.")))
    concurrency_policy: ConcurrencyPolicy = attrs.field(
        default=ConcurrencyPolicy.FORBID, metadata=c(doc=(
            "Forbid: a due run is skipped while the previous one runs. Replace: the previous "
            "one is deleted and the due one created. (No Allow: two runs would pick the same "
            "stalest nodes.)")))
    max_nodes_per_run: int | None = attrs.field(
        default=None, metadata=c(minimum=1, int_format="int32", doc=(
            "Nodes one run certifies at most, rounded down to whole groups of the template's "
            "nodesPerJob. Unset: every idle target node.")))
    successful_runs_history_limit: int = attrs.field(
        default=3, metadata=c(minimum=0, int_format="int32", doc=(
            "Succeeded Certifications kept; older ones are deleted.")))
    failed_runs_history_limit: int = attrs.field(
        default=1, metadata=c(minimum=0, int_format="int32", doc=(
            "Failed Certifications kept; older ones are deleted.")))


@attrs.frozen(kw_only=True)
class ScheduleRun:
    """One finished run."""

    name: str = attrs.field(metadata=c(doc="Name of the Certification."))
    scheduled_time: datetime = attrs.field(metadata=c(doc="The due time the run was made for."))
    start_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the Certification was created.")))
    completion_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the Certification ended (its Succeeded or Failed condition).")))
    verdict: Verdict | None = attrs.field(default=None, metadata=c(doc=(
        "The Certification's verdict: Passed, Failed or Incomplete.")))
    nodes: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Nodes the run was pinned to.")))


@attrs.frozen(kw_only=True)
class CertificationScheduleStatus:
    """What the schedule did and will do."""

    conditions: tuple[Condition, ...] = attrs.field(
        default=(), metadata=c(list_map_keys=("type",), doc=(
            "Scheduling (True while runs are made; False: Suspended or InvalidSchedule) and "
            "RunSkipped (True with the reason the latest due run was not created).")))
    observed_generation: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "The metadata.generation the status was computed from.")))
    last_schedule_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "The latest due time handled (a run made, skipped or missed).")))
    last_successful_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the latest Succeeded run ended.")))
    next_schedule_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "The next due time (unset while suspended).")))
    active: tuple[ObjectReference, ...] = attrs.field(default=(), metadata=c(doc=(
        "The runs not ended yet.")))
    history: tuple[ScheduleRun, ...] = attrs.field(
        default=(), metadata=c(max_items=HISTORY_MAX, doc=(
            "The latest finished runs, newest first.")))
    runs: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int64", doc=(
        "Runs created.")))
    skipped_runs: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int64", doc=(
        "Due runs not created: a run still active (Forbid) or no eligible node.")))
    missed_runs: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int64", doc=(
        "Due times that passed without a run: later than startingDeadlineSeconds, or "
        "several due at once (only the latest runs).")))


@attrs.frozen(kw_only=True)
class CertificationSchedule:
    """A CRE CertificationSchedule (``cre.dev/v1alpha1``, namespaced)."""

    KIND: ClassVar[str] = "CertificationSchedule"

    api_version: str = attrs.field(default=API_VERSION, metadata=c(doc="cre.dev/v1alpha1."))
    kind: str = attrs.field(default="CertificationSchedule", metadata=c(doc=(
        "CertificationSchedule.")))
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta, metadata=c(doc=(
        "Standard object metadata. The name is at most 52 characters: a run is named "
        "<name>-<unix minutes of its due time>.")))
    spec: CertificationScheduleSpec = attrs.field(metadata=c(doc=(
        "When to certify, from which template, how many nodes at a time.")))
    status: CertificationScheduleStatus = attrs.field(
        factory=CertificationScheduleStatus, metadata=c(doc=(
            "Runs made, skipped and missed, written by the schedule controller.")))
