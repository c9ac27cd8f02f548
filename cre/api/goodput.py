"""``GoodputMeasurement`` (namespaced): how much of a training run's wall time was useful work.

A GoodputMeasurement follows one Job (``spec.jobRef``) and reads its training log through a
LogProfile (step, checkpoint, application-start and warmup lines). Its status reports the
goodput ratio with the reference's formula, ``(t_w - t_ch - t_rm - t_re - t_save) / (t_w -
t_re)`` (wall time, work lost to interruptions, resume time, reschedule time, checkpoint save
time), step times with and without warmup, TFLOPs per GPU when the log prints them, and the
checkpoint the Job's restart rule reads. Durations are ``"%.3f"`` second strings and the ratio a
``"%.4f"`` string, so a status is byte-stable; ``tally`` carries the exact integer-millisecond
bookkeeping the pure core (``cre.core.goodput``) folds new log lines into.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

import attrs

from cre.api.common import DURATION_FIELD
from cre.api.conditions import MeasurementPhase
from cre.api.fields import c
from cre.api.labels import API_VERSION
from cre.api.meta import Condition, ObjectMeta, TypedLocalObjectReference

DECIMAL = r"^[0-9]+(\.[0-9]+)?$"
_SECONDS = c(pattern=DECIMAL)
_INT64 = c(minimum=0, int_format="int64")
_INT32 = c(minimum=0, int_format="int32")


@attrs.frozen(kw_only=True)
class GoodputMeasurementSpec:
    """Which Job to measure and how to parse its training log."""

    job_ref: TypedLocalObjectReference
    log_profile_ref: str = attrs.field(metadata=c(min_length=1))
    sample_interval: str = attrs.field(default="60s", metadata=DURATION_FIELD)


@attrs.frozen(kw_only=True)
class PendingInterruption:
    """An interruption recorded and not yet resolved by the next run's resumption."""

    t_checkpoint: datetime | None = None
    t_interrupt: datetime
    checkpoint_step: int | None = attrs.field(default=None, metadata=_INT64)
    last_step: int | None = attrs.field(default=None, metadata=_INT64)
    # Work lost to this interruption (seconds since the last checkpoint or resumption).
    t_ch: str = attrs.field(default="0.000", metadata=_SECONDS)
    reason: str = ""


@attrs.frozen(kw_only=True)
class GoodputTally:
    """The exact bookkeeping behind the status (integer milliseconds; times as epoch ms).

    ``run`` counts the runs seen (0 before the first line); ``run_pod_uid`` is the pod the
    current run's lines come from; ``checkpoint_run`` is the run in which the last checkpoint
    completed and ``interrupted_run`` the last run an interruption was recorded for (at most
    one per run, so recording is idempotent). The Job restarts from a checkpoint only when one
    completed in the current, uninterrupted run.
    """

    run: int = attrs.field(default=0, metadata=_INT32)
    run_pod_uid: str | None = None
    first_start_ms: int | None = attrs.field(default=None, metadata=_INT64)
    last_line_ms: int | None = attrs.field(default=None, metadata=_INT64)
    run_start_ms: int | None = attrs.field(default=None, metadata=_INT64)
    run_resumed_ms: int | None = attrs.field(default=None, metadata=_INT64)
    run_base_step: int | None = attrs.field(default=None, metadata=_INT64)
    prev_step: int | None = attrs.field(default=None, metadata=_INT64)
    prev_step_ms: int | None = attrs.field(default=None, metadata=_INT64)
    pending_save_ms: int | None = attrs.field(default=None, metadata=_INT64)
    checkpoint_ms: int | None = attrs.field(default=None, metadata=_INT64)
    checkpoint_run: int | None = attrs.field(default=None, metadata=_INT32)
    interrupted_run: int | None = attrs.field(default=None, metadata=_INT32)
    lost_ms: int = attrs.field(default=0, metadata=_INT64)
    reschedule_ms: int = attrs.field(default=0, metadata=_INT64)
    resume_ms: int = attrs.field(default=0, metadata=_INT64)
    save_ms: int = attrs.field(default=0, metadata=_INT64)
    warmup_ms: int = attrs.field(default=0, metadata=_INT64)
    non_warmup_ms: int = attrs.field(default=0, metadata=_INT64)
    non_warmup_steps: int = attrs.field(default=0, metadata=_INT64)
    prior_warmup_ms: int = attrs.field(default=0, metadata=_INT64)
    prior_non_warmup_ms: int = attrs.field(default=0, metadata=_INT64)
    min_step_gap: int | None = attrs.field(default=None, metadata=_INT64)
    tflops_milli_sum: int = attrs.field(default=0, metadata=_INT64)
    tflops_samples: int = attrs.field(default=0, metadata=_INT64)


@attrs.frozen(kw_only=True)
class GoodputMeasurementStatus:
    """The measured goodput; frozen once ``Complete`` is True (written once, byte-stable)."""

    conditions: tuple[Condition, ...] = attrs.field(default=(), metadata=c(list_map_keys=("type",)))
    phase: MeasurementPhase | None = None
    result: str | None = attrs.field(default=None, metadata=_SECONDS)
    current_step: int | None = attrs.field(default=None, metadata=_INT64)
    highest_step: int | None = attrs.field(default=None, metadata=_INT64)
    training_time_sec: str | None = attrs.field(default=None, metadata=_SECONDS)
    lost_work_time_sec: str | None = attrs.field(default=None, metadata=_SECONDS)
    reschedule_time_sec: str | None = attrs.field(default=None, metadata=_SECONDS)
    resume_time_sec: str | None = attrs.field(default=None, metadata=_SECONDS)
    checkpoint_save_time_sec: str | None = attrs.field(default=None, metadata=_SECONDS)
    interruption_count: int = attrs.field(default=0, metadata=_INT32)
    last_checkpoint_step: int | None = attrs.field(default=None, metadata=_INT64)
    last_checkpoint_time: datetime | None = None
    start_time: datetime | None = None
    completion_time: datetime | None = None
    last_step_timestamp: datetime | None = None
    avg_step_time_sec: str | None = attrs.field(default=None, metadata=_SECONDS)
    log_interval: int | None = attrs.field(default=None, metadata=_INT64)
    warmup_base_step: int | None = attrs.field(default=None, metadata=_INT64)
    warmup_time_sec: str | None = attrs.field(default=None, metadata=_SECONDS)
    non_warmup_time_sec: str | None = attrs.field(default=None, metadata=_SECONDS)
    last_non_warmup_step: int | None = attrs.field(default=None, metadata=_INT64)
    prior_warmup_time_sec: str | None = attrs.field(default=None, metadata=_SECONDS)
    prior_non_warmup_time_sec: str | None = attrs.field(default=None, metadata=_SECONDS)
    avg_tflops_per_gpu: str | None = attrs.field(default=None, metadata=c(
        json_name="avgTFLOPSPerGPU", pattern=DECIMAL))
    application_start_time: datetime | None = None
    application_stop_time: datetime | None = None
    pending_interruption: PendingInterruption | None = None
    # Provisional sampling anchor (as for bandwidth): the kubelet timestamp of the last line
    # counted and how many lines with exactly that timestamp were counted.
    sampled_through: str | None = None
    sampled_through_lines: int | None = attrs.field(default=None, metadata=_INT32)
    # The pod the anchor belongs to (a new pod is read from its start).
    sampled_pod_uid: str | None = None
    last_sample_time: datetime | None = None
    tally: GoodputTally = attrs.field(factory=GoodputTally)


@attrs.frozen(kw_only=True)
class GoodputMeasurement:
    """A CRE GoodputMeasurement (``cre.dev/v1alpha1``, namespaced)."""

    KIND: ClassVar[str] = "GoodputMeasurement"

    api_version: str = API_VERSION
    kind: str = "GoodputMeasurement"
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: GoodputMeasurementSpec
    status: GoodputMeasurementStatus = attrs.field(factory=GoodputMeasurementStatus)
