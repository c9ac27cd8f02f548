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

from cre.api.common import DURATION_FIELD
from cre.api.conditions import MeasurementPhase
from cre.api.fields import c
from cre.api.labels import API_VERSION
from cre.api.meta import Condition, ObjectMeta, TypedLocalObjectReference

DECIMAL = r"^[0-9]+(\.[0-9]+)?$"


@attrs.frozen(kw_only=True)
class BandwidthMeasurementSpec:
    """Which Job to measure and how to parse its logs."""

    job_ref: TypedLocalObjectReference
    log_profile_ref: str = attrs.field(metadata=c(min_length=1))
    sample_interval: str = attrs.field(default="60s", metadata=DURATION_FIELD)
    test_type: str | None = None


@attrs.frozen(kw_only=True)
class BandwidthResult:
    """Running average bandwidth at one message size."""

    size_bytes: int = attrs.field(metadata=c(minimum=0, int_format="int64"))
    alg_bw: str = attrs.field(metadata=c(json_name="algBW", pattern=DECIMAL))
    bus_bw: str = attrs.field(metadata=c(json_name="busBW", pattern=DECIMAL))
    samples: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32"))


@attrs.frozen(kw_only=True)
class NodeBandwidth:
    """One node's final result when the profile reads every pod (``workerStrategy: Multi``,
    e.g. ``nccl-loopback``): the peak over message sizes of that node's own table."""

    node_name: str = attrs.field(metadata=c(min_length=1))
    pod_name: str = attrs.field(metadata=c(min_length=1))
    alg_bw: str | None = attrs.field(default=None, metadata=c(json_name="algBW", pattern=DECIMAL))
    bus_bw: str | None = attrs.field(default=None, metadata=c(json_name="busBW", pattern=DECIMAL))
    rows: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32"))
    # Why the node has no figures (its log could not be read, or held no table).
    message: str | None = None


@attrs.frozen(kw_only=True)
class BandwidthMeasurementStatus:
    """Results sorted by size; frozen once ``Complete`` is True."""

    conditions: tuple[Condition, ...] = attrs.field(default=(), metadata=c(list_map_keys=("type",)))
    phase: MeasurementPhase | None = None
    observed_generation: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64")
    )
    results: tuple[BandwidthResult, ...] = ()
    # Per node (final read of a Multi profile only): thresholds are judged per node, so only a
    # node that missed is blamed. ``results`` then holds the per-size means over the nodes.
    node_results: tuple[NodeBandwidth, ...] = attrs.field(
        default=(), metadata=c(list_map_keys=("nodeName",)))
    # NCCL transports seen ("Using network IB"), sorted.
    transports: tuple[str, ...] = ()
    start_time: datetime | None = None
    completion_time: datetime | None = None
    # Provisional sampling anchor: the kubelet timestamp of the last log line counted, and how
    # many lines carrying exactly that timestamp were counted (the next read skips them).
    sampled_through: str | None = None
    sampled_through_lines: int | None = attrs.field(default=None, metadata=c(
        minimum=0, int_format="int32"))
    last_sample_time: datetime | None = None


@attrs.frozen(kw_only=True)
class BandwidthMeasurement:
    """A CRE BandwidthMeasurement (``cre.dev/v1alpha1``, namespaced)."""

    KIND: ClassVar[str] = "BandwidthMeasurement"

    api_version: str = API_VERSION
    kind: str = "BandwidthMeasurement"
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: BandwidthMeasurementSpec
    status: BandwidthMeasurementStatus = attrs.field(factory=BandwidthMeasurementStatus)


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

    layout: str = attrs.field(metadata=c(min_length=1))


@attrs.frozen(kw_only=True)
class WorkerStrategy:
    """Which pod(s) of the workload to read."""

    type: WorkerStrategyType = WorkerStrategyType.SINGLE
    replicated_job_name: str = attrs.field(default="node", metadata=c(min_length=1))
    lifecycle_pod: PodPick | None = None
    training_step_pod: PodPick | None = None


@attrs.frozen(kw_only=True)
class LogPattern:
    """A regex with named captures, an example line it must match, and capture units."""

    regex: str = attrs.field(metadata=c(min_length=1, max_length=4096))
    example: str | None = None
    units: Mapping[str, TimeUnit] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class LogPatterns:
    """The pattern slots a parser knows."""

    training_step: LogPattern | None = None
    checkpoint_save: LogPattern | None = None
    checkpoint_done: LogPattern | None = None
    checkpoint_restore: LogPattern | None = None
    checkpoint_loaded: LogPattern | None = None
    application_start: LogPattern | None = None
    warmup_step: LogPattern | None = None
    bandwidth_result: LogPattern | None = None


@attrs.frozen(kw_only=True)
class LogProfileSpec:
    """Parse rules for one log format."""

    timestamp: TimestampSpec | None = None
    worker_strategy: WorkerStrategy = attrs.field(factory=WorkerStrategy)
    container_name: str | None = None
    warmup_steps: int | None = attrs.field(default=None, metadata=c(minimum=0, int_format="int32"))
    log_interval: int | None = attrs.field(default=None, metadata=c(minimum=1, int_format="int32"))
    patterns: LogPatterns = attrs.field(metadata=c(min_properties=1))


@attrs.frozen(kw_only=True)
class LogProfile:
    """A CRE LogProfile (``cre.dev/v1alpha1``, cluster-scoped, no status)."""

    KIND: ClassVar[str] = "LogProfile"

    api_version: str = API_VERSION
    kind: str = "LogProfile"
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: LogProfileSpec
