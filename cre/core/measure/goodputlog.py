"""Training-log lines as events: a LogProfile's goodput patterns, checked and applied.

A goodput LogProfile names up to seven patterns (``spec.patterns``): ``applicationStart``,
``checkpointSave``, ``checkpointDone``, ``checkpointRestore``, ``checkpointLoaded``,
``warmupStep`` and ``trainingStep``. A line is matched against them in that order and the
first match makes one :class:`LogEvent`. Captures the parser understands (the reference's
well-known names): ``globalStep`` / ``iteration`` / ``step`` (the step number, first present
wins), ``stepTiming`` (time per iteration), ``saveDuration``, ``elapsedTime``, ``tflops``
(per GPU) and ``timestamp``. Durations are seconds unless the pattern's ``units`` say ``ms``
or ``us``. A line's time is its ``timestamp`` capture when the profile has one (ISO 8601 /
RFC 3339, or ``YYYY-MM-DD HH:MM:SS[.fff]``, taken as UTC), else the kubelet's RFC 3339 prefix
(logs are always read with timestamps); a line with neither is skipped.

Times leave here as integer epoch milliseconds and durations as integer milliseconds, so the
fold (:mod:`cre.core.measure.goodputfold`) is exact and does not depend on how the log was windowed.

:func:`compile_goodput_profile` checks a profile once per resourceVersion: a regex that does
not compile, a step pattern without a step capture, or a pattern that does not match its own
``example`` is a :class:`cre.core.measure.logprofile.ProfileError` naming the profile and the key
(``spec.patterns.trainingStep.regex``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Final

import attrs

from cre.api.measurement import LogPattern, LogProfile, TimeUnit
from cre.core.measure.logprofile import ProfileError
from cre.core.measure.ncclparse import split_timestamp


class EventKind(enum.StrEnum):
    """What a matched training-log line says."""

    APPLICATION_START = "applicationStart"
    CHECKPOINT_SAVE = "checkpointSave"
    CHECKPOINT_DONE = "checkpointDone"
    CHECKPOINT_RESTORE = "checkpointRestore"
    CHECKPOINT_LOADED = "checkpointLoaded"
    WARMUP_STEP = "warmupStep"
    TRAINING_STEP = "trainingStep"


#: The slots in matching order, with the LogPatterns attribute holding each.
SLOTS: Final = (
    (EventKind.APPLICATION_START, "application_start"),
    (EventKind.CHECKPOINT_SAVE, "checkpoint_save"),
    (EventKind.CHECKPOINT_DONE, "checkpoint_done"),
    (EventKind.CHECKPOINT_RESTORE, "checkpoint_restore"),
    (EventKind.CHECKPOINT_LOADED, "checkpoint_loaded"),
    (EventKind.WARMUP_STEP, "warmup_step"),
    (EventKind.TRAINING_STEP, "training_step"),
)
STEP_CAPTURES: Final = ("globalStep", "iteration", "step")
_STEP_KINDS: Final = (EventKind.TRAINING_STEP, EventKind.WARMUP_STEP)
_UNIT_MS: Final = {TimeUnit.SECONDS: 1000.0, TimeUnit.MILLISECONDS: 1.0,
                   TimeUnit.MICROSECONDS: 0.001}


@attrs.frozen(kw_only=True)
class LogEvent:
    """One matched line: when (epoch ms), what, and the captures the fold uses."""

    kind: EventKind
    at_ms: int
    step: int | None = None
    step_ms: int | None = None  # time per iteration, when the line prints it
    save_ms: int | None = None  # checkpoint save duration, when printed
    tflops_milli: int | None = None  # TFLOPs per GPU x 1000


@attrs.frozen(kw_only=True)
class _Slot:
    kind: EventKind
    pattern: re.Pattern[str]
    units: Mapping[str, TimeUnit]


@attrs.frozen(kw_only=True)
class GoodputParser:
    """A checked goodput profile: patterns in matching order, and where to read."""

    name: str
    resource_version: str
    slots: tuple[_Slot, ...]
    replicated_job: str
    container: str | None
    warmup_steps: int
    log_interval: int | None

    def parse(self, line: str) -> LogEvent | None:
        """The event ``line`` (read with timestamps) says, or ``None``."""
        stamp, text = split_timestamp(line.rstrip("\r\n"))
        for slot in self.slots:
            found = slot.pattern.search(text)
            if found is None:
                continue
            groups = {k: v for k, v in found.groupdict().items() if v is not None}
            at = _time_ms(groups.get("timestamp")) if "timestamp" in groups else None
            if at is None:
                at = _time_ms(stamp) if stamp is not None else None
            if at is None:
                return None
            return _event(slot, groups, at)
        return None


def _event(slot: _Slot, groups: Mapping[str, str], at: int) -> LogEvent | None:
    step = next((_int(groups[k]) for k in STEP_CAPTURES if k in groups), None)
    if slot.kind in _STEP_KINDS and step is None:
        return None
    timing = groups.get("stepTiming")
    save = groups.get("saveDuration") or groups.get("elapsedTime")
    tflops = _float(groups.get("tflops"))
    return LogEvent(kind=slot.kind, at_ms=at, step=step,
                    step_ms=_duration_ms(timing, slot.units.get("stepTiming")),
                    save_ms=_duration_ms(save, slot.units.get(
                        "saveDuration" if "saveDuration" in groups else "elapsedTime")),
                    tflops_milli=round(tflops * 1000) if tflops is not None else None)


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value >= 0 and value == value and value != float("inf") else None


def _duration_ms(text: str | None, unit: TimeUnit | None) -> int | None:
    value = _float(text)
    if value is None:
        return None
    return round(value * _UNIT_MS[unit or TimeUnit.SECONDS])


_FRACTION: Final = re.compile(r"\.(\d+)")


def _time_ms(text: str | None) -> int | None:
    """Epoch milliseconds of an RFC 3339 / ISO 8601 time (UTC when no zone is given)."""
    if not text:
        return None
    raw = text.strip().replace(" ", "T", 1)
    if raw.endswith(("Z", "z")):
        raw = raw[:-1] + "+00:00"
    # Python takes at most 6 fraction digits; the kubelet writes 9.
    raw = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), raw, count=1)
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return to_ms(when)


def to_ms(when: datetime) -> int:
    """An aware datetime as epoch milliseconds (truncated)."""
    delta = when - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86400 + delta.seconds) * 1000 + delta.microseconds // 1000


def from_ms(ms: int) -> datetime:
    """Epoch milliseconds as an aware UTC datetime."""
    return datetime.fromtimestamp(ms // 1000, tz=UTC).replace(microsecond=(ms % 1000) * 1000)


def _key(attr: str) -> str:
    head, *rest = attr.split("_")
    return "spec.patterns." + head + "".join(p.title() for p in rest)


def _compile(name: str, attr: str, spec: LogPattern) -> re.Pattern[str]:
    key = _key(attr)
    try:
        pattern = re.compile(spec.regex)
    except re.error as exc:
        raise ProfileError(f"LogProfile {name}: {key}.regex does not compile: {exc}") from None
    if attr in ("training_step", "warmup_step") and not set(STEP_CAPTURES) & set(
            pattern.groupindex):
        raise ProfileError(f"LogProfile {name}: {key}.regex needs a named group for the step "
                           f"(one of {', '.join(STEP_CAPTURES)})")
    if spec.example and pattern.search(spec.example) is None:
        raise ProfileError(f"LogProfile {name}: {key}.regex does not match its own example "
                           f"{spec.example!r}")
    return pattern


def compile_goodput_profile(profile: LogProfile) -> GoodputParser:
    """``profile`` checked for goodput parsing; :class:`ProfileError` if it cannot be used."""
    name = profile.metadata.name or ""
    patterns = profile.spec.patterns
    slots = []
    for kind, attr in SLOTS:
        spec: LogPattern | None = getattr(patterns, attr)
        if spec is not None:
            slots.append(_Slot(kind=kind, pattern=_compile(name, attr, spec), units=spec.units))
    if patterns.training_step is None:
        raise ProfileError(f"LogProfile {name}: spec.patterns.trainingStep is not set (a "
                           "goodput measurement needs it)")
    return GoodputParser(name=name, resource_version=profile.metadata.resource_version or "",
                         slots=tuple(slots),
                         replicated_job=profile.spec.worker_strategy.replicated_job_name,
                         container=profile.spec.container_name or None,
                         warmup_steps=profile.spec.warmup_steps or 0,
                         log_interval=profile.spec.log_interval)
