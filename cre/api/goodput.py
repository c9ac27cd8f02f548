"""``GoodputMeasurement`` (namespaced): how much of a training run's wall time was useful work.

A GoodputMeasurement follows one Job (``spec.jobRef``) and reads its training log through a
LogProfile (step, checkpoint, application-start and warmup lines). Its status reports the
goodput ratio with the reference's formula, ``(t_w - t_ch - t_rm - t_re - t_save) / (t_w -
t_re)`` (wall time, work lost to interruptions, resume time, reschedule time, checkpoint save
time), step times with and without warmup, TFLOPs per GPU when the log prints them, and the
checkpoint the Job's restart rule reads. Durations are ``"%.3f"`` second strings and the ratio a
``"%.4f"`` string, so a status is byte-stable; ``tally`` carries the exact integer-millisecond
bookkeeping the pure core (``cre.core.measure.goodputfold``) folds new log lines into.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

import attrs

from cre.api.common import duration_field
from cre.api.conditions import MeasurementPhase
from cre.api.fields import c
from cre.api.labels import API_VERSION
from cre.api.meta import Condition, ObjectMeta, TypedLocalObjectReference

DECIMAL = r"^[0-9]+(\.[0-9]+)?$"


@attrs.frozen(kw_only=True)
class GoodputMeasurementSpec:
    """Which Job to measure and how to parse its training log."""

    job_ref: TypedLocalObjectReference = attrs.field(metadata=c(doc=(
        "The CRE Job whose training log is measured.")))
    log_profile_ref: str = attrs.field(metadata=c(min_length=1, doc=(
        "Name of the LogProfile that parses the training log.")))
    sample_interval: str = attrs.field(default="60s", metadata=duration_field(doc=(
        "How often the log is read, a Go duration such as 30s or 5m.")))


@attrs.frozen(kw_only=True)
class PendingInterruption:
    """An interruption recorded and not yet resolved by the next run's resumption."""

    t_checkpoint: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "Time of the last checkpoint before the interruption.")))
    t_interrupt: datetime = attrs.field(metadata=c(doc="When the interruption happened."))
    checkpoint_step: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Step of the last checkpoint before the interruption.")))
    last_step: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Last step logged before the interruption.")))
    # Work lost to this interruption (seconds since the last checkpoint or resumption).
    t_ch: str = attrs.field(default="0.000", metadata=c(pattern=DECIMAL, doc=(
        "Work lost to this interruption: seconds since the last checkpoint or resumption, as a "
        "decimal string.")))
    reason: str = attrs.field(default="", metadata=c(doc="Why the run was interrupted."))


@attrs.frozen(kw_only=True)
class GoodputTally:
    """The exact bookkeeping behind the status (integer milliseconds; times as epoch ms).

    ``run`` counts the runs seen (0 before the first line); ``run_pod_uid`` is the pod the
    current run's lines come from; ``checkpoint_run`` is the run in which the last checkpoint
    completed and ``interrupted_run`` the last run an interruption was recorded for (at most
    one per run, so recording is idempotent). The Job restarts from a checkpoint only when one
    completed in the current, uninterrupted run.
    """

    run: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Runs seen so far (0 before the first line).")))
    run_pod_uid: str | None = attrs.field(default=None, metadata=c(doc=(
        "UID of the pod the current run's lines come from.")))
    first_start_ms: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Start of the first run, epoch milliseconds.")))
    last_line_ms: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Time of the last line counted, epoch milliseconds.")))
    run_start_ms: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Start of the current run, epoch milliseconds.")))
    run_resumed_ms: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "When the current run resumed training, epoch milliseconds.")))
    run_base_step: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "First step of the current run.")))
    prev_step: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Last step counted.")))
    prev_step_ms: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Time of the last step counted, epoch milliseconds.")))
    pending_save_ms: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Start of a checkpoint save not yet finished, epoch milliseconds.")))
    checkpoint_ms: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Time of the last completed checkpoint, epoch milliseconds.")))
    checkpoint_run: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int32", doc=(
            "Run in which the last checkpoint completed.")))
    interrupted_run: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int32", doc=(
            "Last run an interruption was recorded for.")))
    lost_ms: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int64", doc=(
        "Work lost to interruptions, milliseconds.")))
    reschedule_ms: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int64", doc=(
        "Time spent rescheduling after interruptions, milliseconds.")))
    resume_ms: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int64", doc=(
        "Time spent resuming from checkpoints, milliseconds.")))
    save_ms: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int64", doc=(
        "Time spent saving checkpoints, milliseconds.")))
    warmup_ms: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int64", doc=(
        "Time spent in warmup steps, milliseconds.")))
    non_warmup_ms: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int64", doc=(
        "Time spent in steps after warmup, milliseconds.")))
    non_warmup_steps: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int64", doc=(
        "Steps after warmup counted.")))
    prior_warmup_ms: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int64", doc=(
        "Warmup time of earlier runs, milliseconds.")))
    prior_non_warmup_ms: int = attrs.field(
        default=0, metadata=c(minimum=0, int_format="int64", doc=(
            "Non-warmup step time of earlier runs, milliseconds.")))
    min_step_gap: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Smallest step difference seen between two logged steps.")))
    tflops_milli_sum: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int64", doc=(
        "Sum of the TFLOPs samples, in thousandths.")))
    tflops_samples: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int64", doc=(
        "TFLOPs samples counted.")))


@attrs.frozen(kw_only=True)
class GoodputMeasurementStatus:
    """The measured goodput; frozen once ``Complete`` is True (written once, byte-stable)."""

    conditions: tuple[Condition, ...] = attrs.field(
        default=(), metadata=c(list_map_keys=("type",), doc=(
            "Latest observations of the measurement (Measuring, Complete), keyed by type.")))
    phase: MeasurementPhase | None = attrs.field(default=None, metadata=c(doc=(
        "Pending, Measuring or Complete.")))
    result: str | None = attrs.field(default=None, metadata=c(pattern=DECIMAL, doc=(
        "Goodput ratio, useful share of the wall time (0..1) as a decimal string.")))
    current_step: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Last training step logged.")))
    highest_step: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Highest training step logged.")))
    training_time_sec: str | None = attrs.field(default=None, metadata=c(pattern=DECIMAL, doc=(
        "Wall time of the training, Seconds, as a decimal string.")))
    lost_work_time_sec: str | None = attrs.field(default=None, metadata=c(pattern=DECIMAL, doc=(
        "Work lost to interruptions, Seconds, as a decimal string.")))
    reschedule_time_sec: str | None = attrs.field(default=None, metadata=c(pattern=DECIMAL, doc=(
        "Time spent rescheduling after interruptions, Seconds, as a decimal string.")))
    resume_time_sec: str | None = attrs.field(default=None, metadata=c(pattern=DECIMAL, doc=(
        "Time spent resuming from checkpoints, Seconds, as a decimal string.")))
    checkpoint_save_time_sec: str | None = attrs.field(
        default=None, metadata=c(pattern=DECIMAL, doc=(
            "Time spent saving checkpoints, Seconds, as a decimal string.")))
    interruption_count: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Interruptions seen.")))
    last_checkpoint_step: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Step of the last completed checkpoint.")))
    last_checkpoint_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the last checkpoint completed.")))
    start_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When measuring started.")))
    completion_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the measurement completed.")))
    last_step_timestamp: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "Time of the last training step logged.")))
    avg_step_time_sec: str | None = attrs.field(default=None, metadata=c(pattern=DECIMAL, doc=(
        "Average step time after warmup, Seconds, as a decimal string.")))
    log_interval: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Steps between two logged steps.")))
    warmup_base_step: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Step the warmup counted from.")))
    warmup_time_sec: str | None = attrs.field(default=None, metadata=c(pattern=DECIMAL, doc=(
        "Time spent in warmup steps, Seconds, as a decimal string.")))
    non_warmup_time_sec: str | None = attrs.field(default=None, metadata=c(pattern=DECIMAL, doc=(
        "Time spent in steps after warmup, Seconds, as a decimal string.")))
    last_non_warmup_step: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "Last step counted after warmup.")))
    prior_warmup_time_sec: str | None = attrs.field(default=None, metadata=c(pattern=DECIMAL, doc=(
        "Warmup time of earlier runs, Seconds, as a decimal string.")))
    prior_non_warmup_time_sec: str | None = attrs.field(
        default=None, metadata=c(pattern=DECIMAL, doc=(
            "Step time after warmup of earlier runs, Seconds, as a decimal string.")))
    avg_tflops_per_gpu: str | None = attrs.field(
        default=None, metadata=c(json_name="avgTFLOPSPerGPU", pattern=DECIMAL, doc=(
            "Average TFLOPs per GPU, when the log prints them, as a decimal string.")))
    application_start_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the application started (its start line).")))
    application_stop_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the application stopped.")))
    pending_interruption: PendingInterruption | None = attrs.field(default=None, metadata=c(doc=(
        "An interruption recorded and not yet resolved by the next run.")))
    # Provisional sampling anchor (as for bandwidth): the kubelet timestamp of the last line
    # counted and how many lines with exactly that timestamp were counted.
    sampled_through: str | None = attrs.field(default=None, metadata=c(doc=(
        "Kubelet timestamp of the last log line counted; the next read starts there.")))
    sampled_through_lines: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int32", doc=(
            "Lines carrying exactly the sampledThrough timestamp that were already counted (the "
            "next read skips them).")))
    # The pod the anchor belongs to (a new pod is read from its start).
    sampled_pod_uid: str | None = attrs.field(default=None, metadata=c(doc=(
        "UID of the pod sampledThrough belongs to (a new pod is read from its start).")))
    last_sample_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the log was last read.")))
    tally: GoodputTally = attrs.field(factory=GoodputTally, metadata=c(doc=(
        "Exact integer bookkeeping the status is computed from.")))


@attrs.frozen(kw_only=True)
class GoodputMeasurement:
    """A CRE GoodputMeasurement (``cre.dev/v1alpha1``, namespaced)."""

    KIND: ClassVar[str] = "GoodputMeasurement"

    api_version: str = attrs.field(default=API_VERSION, metadata=c(doc="cre.dev/v1alpha1."))
    kind: str = attrs.field(default="GoodputMeasurement", metadata=c(doc="GoodputMeasurement."))
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta, metadata=c(doc=(
        "Standard object metadata.")))
    spec: GoodputMeasurementSpec = attrs.field(metadata=c(doc=(
        "Which Job to measure and how to parse its training log.")))
    status: GoodputMeasurementStatus = attrs.field(
        factory=GoodputMeasurementStatus, metadata=c(doc=(
            "Goodput results, written by the measurement controller.")))
