"""The ``Job`` kind: one workload execution on one node group.

The spec is what the Workflow tier (or a user) asks for; the status is what the pure Job core
(``cre.core.job``) computes. ``spec.workload.trainJob`` is a Kubeflow ``TrainJobSpec`` kept as
opaque JSON: CRE patches it through the renderer, and the Trainer CRD owns its schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

import attrs

from cre.api.common import (
    CEL_MAX_LENGTH,
    DURATION_FIELD,
    THRESHOLD_VALUES,
    TaintEffect,
    WorkloadMetadata,
)
from cre.api.conditions import FailedNodeReason, FailureScope, Phase
from cre.api.fields import c
from cre.api.labels import API_VERSION
from cre.api.measurement import BandwidthMeasurementSpec
from cre.api.meta import (
    Condition,
    ConditionStatus,
    ObjectMeta,
    ObjectReference,
    TypedLocalObjectReference,
)


@attrs.frozen(kw_only=True)
class WorkloadSpec:
    """The workload union; exactly one member is set (today only ``trainJob``)."""

    train_job: Mapping[str, Any] | None = attrs.field(
        default=None, metadata=c(preserve_unknown=True, description="Kubeflow TrainJobSpec")
    )


@attrs.frozen(kw_only=True)
class CelExpression:
    """A CEL expression."""

    expression: str = attrs.field(metadata=c(min_length=1, max_length=CEL_MAX_LENGTH))


@attrs.frozen(kw_only=True)
class NodeConditionSignal:
    """A node condition that means broken hardware when it has ``status`` (e.g. a GPU-health
    condition a node problem detector sets: ``type: GpuUnhealthy``, ``status: "True"``)."""

    type: str = attrs.field(metadata=c(min_length=1, max_length=316))
    status: ConditionStatus = ConditionStatus.TRUE


@attrs.frozen(kw_only=True)
class NodeTaintSignal:
    """A taint that means broken hardware; an unset value or effect matches any."""

    key: str = attrs.field(metadata=c(min_length=1, max_length=316))
    value: str | None = None
    effect: TaintEffect | None = None


@attrs.frozen(kw_only=True)
class NodeHealthMonitor:
    """Which node signals mean broken hardware while a Job runs; any signal that holds on a
    node of the Job flags it. ``cel``: an expression over ``node`` (a corev1 Node), true means
    unhealthy. ``conditions`` / ``taints`` / ``labels``: a node carrying one of them is
    unhealthy. ``gpuAllocatableDrop``: a node whose allocatable ``nvidia.com/gpu`` fell below
    its count when the Workflow launched the group (annotation ``cre.dev/group-gpus``)."""

    cel: CelExpression | None = None
    conditions: tuple[NodeConditionSignal, ...] = attrs.field(
        default=(), metadata=c(max_items=32))
    taints: tuple[NodeTaintSignal, ...] = attrs.field(default=(), metadata=c(max_items=32))
    labels: Mapping[str, str] = attrs.field(factory=dict)
    gpu_allocatable_drop: bool | None = attrs.field(
        default=None, metadata=c(json_name="gpuAllocatableDrop"))


@attrs.frozen(kw_only=True)
class CheckpointSpec:
    """Restart the workload from its last checkpoint after a failure."""

    pvc_name: str = attrs.field(metadata=c(min_length=1))
    max_restarts: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32"))


@attrs.frozen(kw_only=True)
class GoodputMeasurementRequest:
    """Ask for a GoodputMeasurement of this Job."""

    log_profile_ref: str = attrs.field(metadata=c(min_length=1))
    sample_interval: str = attrs.field(default="60s", metadata=DURATION_FIELD)


@attrs.frozen(kw_only=True)
class BandwidthMeasurementRequest:
    """Ask for a BandwidthMeasurement of this Job (``testType`` labels its metrics)."""

    # The same fields as cre.api.measurement.BandwidthMeasurementSpec less its jobRef (the Job
    # asking is the one measured); for_job() builds that spec, a test keeps the two in step.
    log_profile_ref: str = attrs.field(metadata=c(min_length=1))
    sample_interval: str = attrs.field(default="60s", metadata=DURATION_FIELD)
    test_type: str | None = None

    def for_job(self, job_ref: TypedLocalObjectReference) -> BandwidthMeasurementSpec:
        """The spec of the BandwidthMeasurement this request asks for, measuring ``job_ref``."""
        return BandwidthMeasurementSpec(job_ref=job_ref, **attrs.asdict(self, recurse=False))


@attrs.frozen(kw_only=True)
class JobSpec:
    """What to run and how to judge it. Workload and the four optional blocks are fixed at
    creation (CEL transition rules in the CRD)."""

    workload: WorkloadSpec = attrs.field(
        metadata=c(min_properties=1, max_properties=1, immutable=True)
    )
    workload_metadata: WorkloadMetadata | None = attrs.field(
        default=None, metadata=c(immutable=True, presence_immutable=True)
    )
    node_health_monitor: NodeHealthMonitor | None = attrs.field(
        default=None, metadata=c(immutable=True, presence_immutable=True)
    )
    checkpoint: CheckpointSpec | None = None
    stall_multiplier: int | None = attrs.field(
        default=None, metadata=c(minimum=1, int_format="int32")
    )
    startup_stall_timeout_seconds: int = attrs.field(
        default=1200, metadata=c(minimum=1, int_format="int32")
    )
    scheduling_stall_grace_seconds: int = attrs.field(
        default=300, metadata=c(minimum=1, int_format="int32")
    )
    goodput_measurement: GoodputMeasurementRequest | None = attrs.field(
        default=None, metadata=c(immutable=True, presence_immutable=True)
    )
    bandwidth_measurement: BandwidthMeasurementRequest | None = attrs.field(
        default=None, metadata=c(immutable=True, presence_immutable=True)
    )
    thresholds: Mapping[str, str] = attrs.field(factory=dict, metadata=THRESHOLD_VALUES)
    measurement_timeout: str = attrs.field(default="5m", metadata=DURATION_FIELD)
    # Fail with JobTimedOut this long after the workload was first seen running (copied from
    # the Workflow's orchestration.timeoutPerJob); unset means no limit.
    timeout_per_job: str | None = attrs.field(default=None, metadata=DURATION_FIELD)


@attrs.frozen(kw_only=True)
class FailedNode:
    """A node blamed for a failure; the list is keyed by (name, reason)."""

    name: str = attrs.field(metadata=c(min_length=1))
    reason: FailedNodeReason
    message: str = ""


@attrs.frozen(kw_only=True)
class FailureLog:
    """The log tail of the container that failed first (or why none could be read)."""

    pod_name: str | None = None
    container_name: str | None = None
    node_name: str | None = None
    exit_code: int | None = attrs.field(default=None, metadata=c(int_format="int32"))
    reason: str | None = None
    finished_at: datetime | None = None
    tail: str = attrs.field(default="", metadata=c(max_length=32768))


@attrs.frozen(kw_only=True)
class FailureClass:
    """Whom a failure is attributed to, so the Workflow can retry, cordon or escalate."""

    scope: FailureScope
    reason: str = attrs.field(metadata=c(min_length=1))
    message: str = ""


@attrs.frozen(kw_only=True)
class JobStatus:
    """The observed state of a Job, written only by the Job controller."""

    conditions: tuple[Condition, ...] = attrs.field(default=(), metadata=c(list_map_keys=("type",)))
    phase: Phase | None = None
    failed_nodes: tuple[FailedNode, ...] = attrs.field(
        default=(), metadata=c(list_map_keys=("name", "reason"))
    )
    workload_ref: ObjectReference | None = None
    workload_start_time: datetime | None = None
    scheduling_blocked_since: datetime | None = None
    scheduling_resumed_time: datetime | None = None
    restart_count: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32"))
    observed_generation: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64")
    )
    failure_log: FailureLog | None = None
    failure_class: FailureClass | None = None
    # When the finalizer started waiting for the workload's pods to drain (bounded wait).
    drain_start_time: datetime | None = None
    # The final measured bus bandwidth (max over message sizes, GB/s, "%.2f"): what the
    # thresholds were judged on, shown next to the verdict (printer column BusBW).
    bus_bandwidth_gbps: str | None = attrs.field(
        default=None, metadata=c(json_name="busBandwidthGBps", pattern=r"^[0-9]+(\.[0-9]+)?$"))


@attrs.frozen(kw_only=True)
class Job:
    """A CRE Job (``cre.dev/v1alpha1``, namespaced)."""

    KIND: ClassVar[str] = "Job"

    api_version: str = API_VERSION
    kind: str = "Job"
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: JobSpec
    status: JobStatus = attrs.field(factory=JobStatus)
