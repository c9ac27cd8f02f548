"""``BandwidthMeasurement`` (namespaced) and ``LogProfile`` (cluster-scoped).

A BandwidthMeasurement turns nccl-tests output in a Job's pod logs into per-message-size
bandwidth; a LogProfile holds the named-capture regexes used to parse such logs. Bandwidths
are kept as ``"%.2f"`` strings, as the reference stores them, so statuses stay byte-stable.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
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
class BandwidthMeasurementSpec:
    """Which Job to measure and how to parse its logs."""

    job_ref: TypedLocalObjectReference = attrs.field(metadata=c(doc=(
        "The CRE Job whose logs are measured.")))
    log_profile_ref: str = attrs.field(metadata=c(min_length=1, doc=(
        "Name of the LogProfile that parses the nccl-tests output.")))
    sample_interval: str = attrs.field(default="60s", metadata=duration_field(doc=(
        "How often the log is read, a Go duration such as 30s or 5m.")))
    test_type: str | None = attrs.field(default=None, metadata=c(doc=(
        "Name of the test, put on the bandwidth metrics as the nccl_test label.")))


@attrs.frozen(kw_only=True)
class BandwidthResult:
    """Running average bandwidth at one message size."""

    size_bytes: int = attrs.field(metadata=c(minimum=0, int_format="int64", doc=(
        "Message size, bytes.")))
    alg_bw: str = attrs.field(metadata=c(json_name="algBW", pattern=DECIMAL, doc=(
        "Algorithm bandwidth, GB/s (average over the samples).")))
    bus_bw: str = attrs.field(metadata=c(json_name="busBW", pattern=DECIMAL, doc=(
        "Bus bandwidth, GB/s (average over the samples).")))
    samples: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Table rows averaged at this size.")))


@attrs.frozen(kw_only=True)
class NodeBandwidth:
    """One node's final result when the profile reads every pod (``workerStrategy: Multi``,
    e.g. ``nccl-loopback``): the peak over message sizes of that node's own table."""

    node_name: str = attrs.field(metadata=c(min_length=1, doc="Node name."))
    pod_name: str = attrs.field(metadata=c(min_length=1, doc="Pod whose log was read."))
    alg_bw: str | None = attrs.field(
        default=None, metadata=c(json_name="algBW", pattern=DECIMAL, doc=(
            "Peak algorithm bandwidth of the node, GB/s.")))
    bus_bw: str | None = attrs.field(
        default=None, metadata=c(json_name="busBW", pattern=DECIMAL, doc=(
            "Peak bus bandwidth of the node, GB/s.")))
    rows: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Table rows parsed from the node's log.")))
    # Why the node has no figures (its log could not be read, or held no table).
    message: str | None = attrs.field(default=None, metadata=c(doc=(
        "Why the node has no figures (its log could not be read, or held no table).")))


@attrs.frozen(kw_only=True)
class BandwidthMeasurementStatus:
    """Results sorted by size; frozen once ``Complete`` is True."""

    conditions: tuple[Condition, ...] = attrs.field(
        default=(), metadata=c(list_map_keys=("type",), doc=(
            "Latest observations of the measurement (Measuring, Complete), keyed by type.")))
    phase: MeasurementPhase | None = attrs.field(default=None, metadata=c(doc=(
        "Pending, Measuring or Complete.")))
    observed_generation: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "The metadata.generation the status was computed from.")))
    results: tuple[BandwidthResult, ...] = attrs.field(default=(), metadata=c(doc=(
        "Bandwidth per message size, sorted by size.")))
    # Per node (final read of a Multi profile only): thresholds are judged per node, so only a
    # node that missed is blamed. ``results`` then holds the per-size means over the nodes.
    node_results: tuple[NodeBandwidth, ...] = attrs.field(
        default=(), metadata=c(list_map_keys=("nodeName",), doc=(
            "Per-node results when the profile reads every pod (workerStrategy Multi), keyed by "
            "node name.")))
    # NCCL transports seen ("Using network IB"), sorted.
    transports: tuple[str, ...] = attrs.field(default=(), metadata=c(doc=(
        "NCCL transports seen in the log (e.g. IB), sorted.")))
    start_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When measuring started.")))
    completion_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the measurement completed.")))
    # Provisional sampling anchor: the kubelet timestamp of the last log line counted, and how
    # many lines carrying exactly that timestamp were counted (the next read skips them).
    sampled_through: str | None = attrs.field(default=None, metadata=c(doc=(
        "Kubelet timestamp of the last log line counted; the next read starts there.")))
    sampled_through_lines: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int32", doc=(
            "Lines carrying exactly the sampledThrough timestamp that were already counted (the "
            "next read skips them).")))
    last_sample_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the log was last read.")))


@attrs.frozen(kw_only=True)
class BandwidthMeasurement:
    """A CRE BandwidthMeasurement (``cre.dev/v1alpha1``, namespaced)."""

    KIND: ClassVar[str] = "BandwidthMeasurement"

    api_version: str = attrs.field(default=API_VERSION, metadata=c(doc="cre.dev/v1alpha1."))
    kind: str = attrs.field(default="BandwidthMeasurement", metadata=c(doc="BandwidthMeasurement."))
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta, metadata=c(doc=(
        "Standard object metadata.")))
    spec: BandwidthMeasurementSpec = attrs.field(metadata=c(doc=(
        "Which Job to measure and how to parse its logs.")))
    status: BandwidthMeasurementStatus = attrs.field(
        factory=BandwidthMeasurementStatus, metadata=c(doc=(
            "Bandwidth results, written by the measurement controller.")))


class WorkerStrategyType(enum.StrEnum):
    """Read one pod or several."""

    SINGLE = "Single"
    MULTI = "Multi"


class PodPick(enum.StrEnum):
    """Which pod of a replicated job to read."""

    FIRST = "first"
    LAST = "last"


class TimeUnit(enum.StrEnum):
    """Unit of a duration capture."""

    SECONDS = "s"
    MILLISECONDS = "ms"
    MICROSECONDS = "us"


@attrs.frozen(kw_only=True)
class TimestampSpec:
    """How ``(?P<timestamp>...)`` captures are parsed (a Go time layout)."""

    layout: str = attrs.field(metadata=c(min_length=1, doc=(
        "Go time layout of the timestamp capture, e.g. 2006-01-02T15:04:05Z07:00.")))


@attrs.frozen(kw_only=True)
class WorkerStrategy:
    """Which pod(s) of the workload to read."""

    type: WorkerStrategyType = attrs.field(default=WorkerStrategyType.SINGLE, metadata=c(doc=(
        "Single: read one pod. Multi: read every pod and report per node.")))
    replicated_job_name: str = attrs.field(default="node", metadata=c(min_length=1, doc=(
        "Replicated job (of the JobSet) whose pods are read, e.g. node or launcher.")))
    lifecycle_pod: PodPick | None = attrs.field(default=None, metadata=c(doc=(
        "Pod (first or last) whose log gives start, checkpoint and restore lines.")))
    training_step_pod: PodPick | None = attrs.field(default=None, metadata=c(doc=(
        "Pod (first or last) whose log gives the training steps.")))


@attrs.frozen(kw_only=True)
class LogPattern:
    """A regex with named captures, an example line it must match, and capture units."""

    regex: str = attrs.field(metadata=c(min_length=1, max_length=4096, doc=(
        "Regular expression with named captures (e.g. globalStep, stepTiming, busBW, timestamp).")))
    example: str | None = attrs.field(default=None, metadata=c(doc=(
        "A log line the regex must match (checked at admission).")))
    units: Mapping[str, TimeUnit] = attrs.field(factory=dict, metadata=c(doc=(
        "Time unit (s, ms or us) of each duration capture, by capture name.")))


@attrs.frozen(kw_only=True)
class LogPatterns:
    """The pattern slots a parser knows."""

    training_step: LogPattern | None = attrs.field(default=None, metadata=c(doc=(
        "A line logged for each training step.")))
    checkpoint_save: LogPattern | None = attrs.field(default=None, metadata=c(doc=(
        "A checkpoint save starting.")))
    checkpoint_done: LogPattern | None = attrs.field(default=None, metadata=c(doc=(
        "A checkpoint save finished.")))
    checkpoint_restore: LogPattern | None = attrs.field(default=None, metadata=c(doc=(
        "A checkpoint restore starting.")))
    checkpoint_loaded: LogPattern | None = attrs.field(default=None, metadata=c(doc=(
        "A checkpoint restore finished.")))
    application_start: LogPattern | None = attrs.field(default=None, metadata=c(doc=(
        "The application starting.")))
    warmup_step: LogPattern | None = attrs.field(default=None, metadata=c(doc=(
        "A warmup step (not counted in step times).")))
    bandwidth_result: LogPattern | None = attrs.field(default=None, metadata=c(doc=(
        "A row of the nccl-tests results table.")))


@attrs.frozen(kw_only=True)
class LogProfileSpec:
    """Parse rules for one log format."""

    timestamp: TimestampSpec | None = attrs.field(default=None, metadata=c(doc=(
        "How timestamp captures are parsed. Unset: the kubelet timestamp of each line is used.")))
    worker_strategy: WorkerStrategy = attrs.field(factory=WorkerStrategy, metadata=c(doc=(
        "Which pods of the workload are read.")))
    container_name: str | None = attrs.field(default=None, metadata=c(doc=(
        "Container whose log is read. Unset: detected.")))
    warmup_steps: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int32", doc=(
            "Steps at the start of each run counted as warmup.")))
    log_interval: int | None = attrs.field(
        default=None, metadata=c(minimum=1, int_format="int32", doc=(
            "Steps between two logged steps; steps not on the interval are ignored.")))
    patterns: LogPatterns = attrs.field(metadata=c(min_properties=1, doc=(
        "The regexes of each kind of line; at least one.")))


@attrs.frozen(kw_only=True)
class LogProfile:
    """A CRE LogProfile (``cre.dev/v1alpha1``, cluster-scoped, no status)."""

    KIND: ClassVar[str] = "LogProfile"

    api_version: str = attrs.field(default=API_VERSION, metadata=c(doc="cre.dev/v1alpha1."))
    kind: str = attrs.field(default="LogProfile", metadata=c(doc="LogProfile."))
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta, metadata=c(doc=(
        "Standard object metadata (cluster-scoped).")))
    spec: LogProfileSpec = attrs.field(metadata=c(doc="Parse rules for one log format."))
