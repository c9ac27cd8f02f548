"""The ``Job`` kind: one workload execution on one node group.

The spec is what the Workflow tier (or a user) asks for; the status is what the pure Job core
(``cre.core.job.reconcile``) computes. ``spec.workload.trainJob`` is a Kubeflow ``TrainJobSpec``
kept as opaque JSON: CRE patches it through the renderer, and the Trainer CRD owns its schema.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

import attrs

from cre.api.common import (
    CEL_MAX_LENGTH,
    RelativeThreshold,
    TaintEffect,
    WorkloadMetadata,
    duration_field,
    threshold_values,
)
from cre.api.conditions import FailedNodeReason, FailureScope, OutlierBasis, Phase
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

# The longest imagePullGraceSeconds accepted: one hour (a registry that has not answered in an
# hour will not answer within a certification run).
IMAGE_PULL_GRACE_MAX = 3600


class WorkloadRetention(enum.StrEnum):
    """What happens to a finished Job's workload (TrainJob, and under it JobSet, batch Jobs,
    pods): kept until the Job is deleted, or released once nothing needs its pods
    (``cre.core.job.release``)."""

    RETAIN = "Retain"
    RELEASE = "Release"


@attrs.frozen(kw_only=True)
class WorkloadSpec:
    """The workload union; exactly one member is set (today only ``trainJob``)."""

    train_job: Mapping[str, Any] | None = attrs.field(
        default=None, metadata=c(preserve_unknown=True, doc=(
            "Kubeflow Trainer TrainJobSpec to run, as opaque JSON (the Trainer CRD owns its "
            "schema).")))


@attrs.frozen(kw_only=True)
class CelExpression:
    """A CEL expression."""

    expression: str = attrs.field(metadata=c(min_length=1, max_length=CEL_MAX_LENGTH, doc=(
        "CEL expression text.")))


@attrs.frozen(kw_only=True)
class NodeConditionSignal:
    """A node condition that means broken hardware when it has ``status`` (e.g. a GPU-health
    condition a node problem detector sets: ``type: GpuUnhealthy``, ``status: "True"``)."""

    type: str = attrs.field(metadata=c(min_length=1, max_length=316, doc=(
        "Condition type, e.g. GpuUnhealthy.")))
    status: ConditionStatus = attrs.field(default=ConditionStatus.TRUE, metadata=c(doc=(
        "The condition status that means broken hardware. Default True.")))


@attrs.frozen(kw_only=True)
class NodeTaintSignal:
    """A taint that means broken hardware; an unset value or effect matches any."""

    key: str = attrs.field(metadata=c(min_length=1, max_length=316, doc="Taint key."))
    value: str | None = attrs.field(default=None, metadata=c(doc=(
        "Taint value. Unset: any value.")))
    effect: TaintEffect | None = attrs.field(default=None, metadata=c(doc=(
        "Taint effect. Unset: any effect.")))


@attrs.frozen(kw_only=True)
class NodeHealthMonitor:
    """Which node signals mean broken hardware while a Job runs; any signal that holds on a
    node of the Job flags it. ``cel``: an expression over ``node`` (a corev1 Node), true means
    unhealthy. ``conditions`` / ``taints`` / ``labels``: a node carrying one of them is
    unhealthy. ``gpuAllocatableDrop``: a node whose allocatable ``nvidia.com/gpu`` fell below
    its count when the Workflow launched the group (annotation ``cre.dev/group-gpus``)."""

    cel: CelExpression | None = attrs.field(default=None, metadata=c(doc=(
        "CEL over `node` (the full corev1 Node); true means the node is unhealthy and the Job "
        "fails with a hardware failure, e.g. `node.spec.unschedulable == true`.")))
    conditions: tuple[NodeConditionSignal, ...] = attrs.field(
        default=(), metadata=c(max_items=32, doc=(
            "Node conditions that mean broken hardware (e.g. one a node problem detector sets).")))
    taints: tuple[NodeTaintSignal, ...] = attrs.field(default=(), metadata=c(max_items=32, doc=(
        "Taints that mean broken hardware.")))
    labels: Mapping[str, str] = attrs.field(factory=dict, metadata=c(doc=(
        "Labels (key to value) that mean broken hardware.")))
    gpu_allocatable_drop: bool | None = attrs.field(
        default=None, metadata=c(json_name="gpuAllocatableDrop", doc=(
            "Flag a node whose allocatable nvidia.com/gpu fell below its count when the group was "
            "launched. Unset: false.")))


@attrs.frozen(kw_only=True)
class CheckpointSpec:
    """Restart the workload from its last checkpoint after a failure."""

    pvc_name: str = attrs.field(metadata=c(min_length=1, doc=(
        "PersistentVolumeClaim holding the checkpoints.")))
    max_restarts: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Restarts from the last checkpoint allowed after a failure.")))


@attrs.frozen(kw_only=True)
class GoodputMeasurementRequest:
    """Ask for a GoodputMeasurement of this Job."""

    log_profile_ref: str = attrs.field(metadata=c(min_length=1, doc=(
        "Name of the LogProfile that parses the training log.")))
    sample_interval: str = attrs.field(default="60s", metadata=duration_field(doc=(
        "How often the log is read, a Go duration such as 30s or 5m.")))


@attrs.frozen(kw_only=True)
class BandwidthMeasurementRequest:
    """Ask for a BandwidthMeasurement of this Job (``testType`` labels its metrics)."""

    # The same fields as cre.api.measurement.BandwidthMeasurementSpec less its jobRef (the Job
    # asking is the one measured); for_job() builds that spec, a test keeps the two in step.
    log_profile_ref: str = attrs.field(metadata=c(min_length=1, doc=(
        "Name of the LogProfile that parses the nccl-tests output.")))
    sample_interval: str = attrs.field(default="60s", metadata=duration_field(doc=(
        "How often the log is read, a Go duration such as 30s or 5m.")))
    test_type: str | None = attrs.field(default=None, metadata=c(doc=(
        "Name of the test, put on the bandwidth metrics as the nccl_test label.")))

    def for_job(self, job_ref: TypedLocalObjectReference) -> BandwidthMeasurementSpec:
        """The spec of the BandwidthMeasurement this request asks for, measuring ``job_ref``."""
        return BandwidthMeasurementSpec(job_ref=job_ref, **attrs.asdict(self, recurse=False))


@attrs.frozen(kw_only=True)
class JobSpec:
    """What to run and how to judge it. Workload and the four optional blocks are fixed at
    creation (CEL transition rules in the CRD)."""

    workload: WorkloadSpec = attrs.field(
        metadata=c(min_properties=1, max_properties=1, immutable=True, doc=(
            "What to run; exactly one member (today trainJob). Cannot change after creation.")))
    workload_metadata: WorkloadMetadata | None = attrs.field(
        default=None, metadata=c(immutable=True, presence_immutable=True, doc=(
            "Labels put on the workload object. Fixed at creation.")))
    node_health_monitor: NodeHealthMonitor | None = attrs.field(
        default=None, metadata=c(immutable=True, presence_immutable=True, doc=(
            "Fail the Job when a node of its group turns unhealthy by this CEL rule. Fixed at "
            "creation.")))
    checkpoint: CheckpointSpec | None = attrs.field(default=None, metadata=c(doc=(
        "Restart the workload from its last checkpoint after a failure.")))
    stall_multiplier: int | None = attrs.field(
        default=None, metadata=c(minimum=1, int_format="int32", doc=(
            "Fail with WorkloadStalled when no training step was logged for this many average "
            "step times (needs goodputMeasurement). Unset: no stall detection.")))
    startup_stall_timeout_seconds: int = attrs.field(
        default=1200, metadata=c(minimum=1, int_format="int32", doc=(
            "Seconds from application start to the first training step before the Job is judged "
            "stalled (only with stallMultiplier).")))
    scheduling_stall_grace_seconds: int = attrs.field(
        default=300, metadata=c(minimum=1, int_format="int32", doc=(
            "Seconds the workload's pods may stay unschedulable before the Job reports "
            "WorkloadSchedulingBlocked.")))
    scheduling_stall_timeout: str = attrs.field(default="30m", metadata=duration_field(doc=(
        "Go duration the workload's pods may stay unschedulable (the timeout clock paused all "
        "along) before the Job fails WorkloadUnschedulable (Platform/Unschedulable).")))
    image_pull_grace_seconds: int = attrs.field(
        default=120, metadata=c(minimum=1, maximum=IMAGE_PULL_GRACE_MAX, int_format="int32", doc=(
            "Seconds a container of the workload may wait on a failing image pull (ErrImagePull, "
            "ImagePullBackOff, InvalidImageName, ErrImageNeverPull) before the Job fails "
            "ImagePullFailed, failure class Platform.")))
    goodput_measurement: GoodputMeasurementRequest | None = attrs.field(
        default=None, metadata=c(immutable=True, presence_immutable=True, doc=(
            "Create a GoodputMeasurement of this Job. Fixed at creation.")))
    bandwidth_measurement: BandwidthMeasurementRequest | None = attrs.field(
        default=None, metadata=c(immutable=True, presence_immutable=True, doc=(
            "Create a BandwidthMeasurement of this Job. Fixed at creation.")))
    thresholds: Mapping[str, str] = attrs.field(factory=dict, metadata=threshold_values(doc=(
        "Pass criteria: metric name (busBandwidthGBps, algBandwidthGBps, goodputRatio, "
        "avgTFLOPsPerGPU, avgStepTimeSec) to a CEL expression over `value`, e.g. `value >= 400`.")))
    relative_threshold: RelativeThreshold | None = attrs.field(default=None, metadata=c(doc=(
        "Fleet-relative rule on the per-node busBW of a per-node measurement, judged with the "
        "thresholds; needs a busBandwidthGBps threshold. Unset: no relative rule.")))
    measurement_timeout: str = attrs.field(default="5m", metadata=duration_field(doc=(
        "How long the Job waits for its measurement to complete after the workload succeeded, a "
        "Go duration such as 90s or 1h30m.")))
    # Fail with JobTimedOut this long after the workload was first seen running (copied from
    # the Workflow's orchestration.timeoutPerJob); unset means no limit.
    timeout_per_job: str | None = attrs.field(default=None, metadata=duration_field(doc=(
        "Fail with JobTimedOut this long after the workload was first seen running, a Go "
        "duration such as 90s or 1h30m. Unset: no limit.")))
    workload_retention: WorkloadRetention | None = attrs.field(default=None, metadata=c(doc=(
        "What happens to the workload once the Job is finished. Retain (unset): it stays "
        "until the Job is deleted (a workload that timed out or ran on a node found broken is "
        "deleted at once either way). Release: once its failure log is captured and its "
        "measurements completed (at most measurementTimeout and 30s after the Job ended), the "
        "TrainJob is deleted and its pods are awaited; the WorkloadReleased condition says "
        "when, or what keeps them. A Workflow sets Release on its group Jobs unless its "
        "jobTemplate says otherwise.")))


@attrs.frozen(kw_only=True)
class FailedNode:
    """A node blamed for a failure; the list is keyed by (name, reason)."""

    name: str = attrs.field(metadata=c(min_length=1, doc="Node name."))
    reason: FailedNodeReason = attrs.field(metadata=c(doc=(
        "HardwareFailureDetected, ThresholdViolation or WorkloadFailed.")))
    message: str = attrs.field(default="", metadata=c(doc="Why the node is blamed."))


@attrs.frozen(kw_only=True)
class NodeOutlier:
    """A node the fleet-relative rule flagged: its value and what it was compared with."""

    node_name: str = attrs.field(metadata=c(min_length=1, doc="Node name."))
    bus_bw: str = attrs.field(metadata=c(json_name="busBW", pattern=r"^[0-9]+(\.[0-9]+)?$", doc=(
        "The node's peak busBW, GB/s.")))
    reference: str = attrs.field(metadata=c(pattern=r"^[0-9]+(\.[0-9]+)?$", doc=(
        "The figure it was compared with, GB/s: its peers' median or the fleet's 10th "
        "percentile.")))
    basis: OutlierBasis = attrs.field(metadata=c(doc="PeerMedian, FleetP10 or GroupMedian."))
    peers: int = attrs.field(metadata=c(minimum=1, int_format="int32", doc=(
        "How many peers the reference was computed from.")))
    domain: str | None = attrs.field(default=None, metadata=c(doc=(
        "The topology domain of the peers (PeerMedian only).")))
    group: str | None = attrs.field(default=None, metadata=c(doc=(
        "The Workflow group that was the outlier (GroupMedian only): its busBW is the "
        "group's and its peers are the other groups.")))
    message: str = attrs.field(default="", metadata=c(doc="The comparison in words."))


@attrs.frozen(kw_only=True)
class FailureLog:
    """The log tail of the container that failed first (or why none could be read)."""

    pod_name: str | None = attrs.field(default=None, metadata=c(doc=(
        "Pod whose container failed first.")))
    container_name: str | None = attrs.field(default=None, metadata=c(doc="Container that failed."))
    node_name: str | None = attrs.field(default=None, metadata=c(doc="Node the pod ran on."))
    exit_code: int | None = attrs.field(default=None, metadata=c(int_format="int32", doc=(
        "Exit code of the failed container.")))
    reason: str | None = attrs.field(default=None, metadata=c(doc=(
        "Termination reason of the container (e.g. Error, OOMKilled), or why no log could be "
        "read.")))
    finished_at: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the container terminated (RFC 3339).")))
    tail: str = attrs.field(default="", metadata=c(max_length=32768, doc=(
        "Last lines of the container's log.")))


@attrs.frozen(kw_only=True)
class FailureClass:
    """Whom a failure is attributed to, so the Workflow can retry, cordon or escalate."""

    scope: FailureScope = attrs.field(metadata=c(doc=(
        "Whom the failure is attributed to: Workload, Node, Platform, ControlPlane or "
        "Configuration.")))
    reason: str = attrs.field(metadata=c(min_length=1, doc=(
        "The cause within the scope, one CamelCase word.")))
    message: str = attrs.field(default="", metadata=c(doc="Human-readable details of the cause."))


@attrs.frozen(kw_only=True)
class JobStatus:
    """The observed state of a Job, written only by the Job controller."""

    conditions: tuple[Condition, ...] = attrs.field(
        default=(), metadata=c(list_map_keys=("type",), doc=(
            "Latest observations of the object's state (InProgress, Succeeded, Failed and "
            "kind-specific types), keyed by type. HardwareFailed and ValidationFailed may be "
            "True next to the execution state. WorkloadReleased (workloadRetention Release, "
            "once finished): True/Released when the TrainJob and the Job's pods are confirmed "
            "gone; False with MeasurementPending, Releasing or HeldByFinalizer saying what "
            "keeps them.")))
    phase: Phase | None = attrs.field(default=None, metadata=c(doc=(
        "One-word summary of the True condition: Pending, Running, Succeeded or Failed.")))
    failed_nodes: tuple[FailedNode, ...] = attrs.field(
        default=(), metadata=c(list_map_keys=("name", "reason"), doc=(
            "Nodes blamed for the failure, keyed by (name, reason).")))
    workload_ref: ObjectReference | None = attrs.field(default=None, metadata=c(doc=(
        "The workload object (TrainJob) created for this Job.")))
    workload_start_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the workload was first seen running; timeoutPerJob counts from here.")))
    scheduling_blocked_since: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "Since when the workload's pods have been unschedulable (unset when they are not).")))
    scheduling_resumed_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the pods last became schedulable again after being blocked.")))
    image_pull_failing_since: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "Since when a container of the workload has been waiting on a failing image pull "
        "(unset when none is).")))
    restart_count: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Restarts from a checkpoint so far.")))
    observed_generation: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "The metadata.generation the status was computed from.")))
    failure_log: FailureLog | None = attrs.field(default=None, metadata=c(doc=(
        "Log tail of the container that failed first, or why none could be read.")))
    failure_class: FailureClass | None = attrs.field(default=None, metadata=c(doc=(
        "Whom the failure is attributed to, so the Workflow can retry, exclude the node or stop.")))
    # When the finalizer started waiting for the workload's pods to drain (bounded wait).
    drain_start_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When deletion started waiting for the workload's pods to go (a bounded wait).")))
    outliers: tuple[NodeOutlier, ...] = attrs.field(
        default=(), metadata=c(list_map_keys=("nodeName",), doc=(
            "Nodes the fleet-relative rule (spec.relativeThreshold) flagged as Outliers, with "
            "their busBW and the peer figure they were compared with.")))
    # The final measured bus bandwidth (max over message sizes, GB/s, "%.2f"): what the
    # thresholds were judged on, shown next to the verdict (printer column BusBW).
    bus_bandwidth_gbps: str | None = attrs.field(
        default=None, metadata=c(json_name="busBandwidthGBps", pattern=r"^[0-9]+(\.[0-9]+)?$", doc=(
            "Final measured bus bandwidth, GB/s (max over message sizes), the value the "
            "thresholds were judged on.")))


@attrs.frozen(kw_only=True)
class Job:
    """A CRE Job (``cre.dev/v1alpha1``, namespaced)."""

    KIND: ClassVar[str] = "Job"

    api_version: str = attrs.field(default=API_VERSION, metadata=c(doc="cre.dev/v1alpha1."))
    kind: str = attrs.field(default="Job", metadata=c(doc="Job."))
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta, metadata=c(doc=(
        "Standard object metadata.")))
    spec: JobSpec = attrs.field(metadata=c(doc=(
        "The workload to run on one node group and how to judge it.")))
    status: JobStatus = attrs.field(factory=JobStatus, metadata=c(doc=(
        "Progress and outcome, written by the Job controller.")))
