"""The ``WorkloadRun`` kind: image + framework + node count, turned into one Workflow.

It is the simple front door for users who bring their own container rather than a catalog
entry. Core Kubernetes types it embeds (env, volumes, resources, init containers) stay opaque
JSON; the Workflow's rendered pods are validated against the Kubernetes schemas downstream.
The whole spec is fixed at creation.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from cre.api.common import (
    QUALIFIED_NAME,
    QUANTITY_SIZE,
    GangSchedulerSpec,
    Placement,
    TargetSpec,
    WorkloadMetadata,
    duration_field,
    threshold_values,
)
from cre.api.conditions import Phase
from cre.api.failurepolicy import FAILURE_POLICY_DOC, FailurePolicy
from cre.api.fields import CelRule, c
from cre.api.job import BandwidthMeasurementRequest, GoodputMeasurementRequest
from cre.api.labels import API_VERSION
from cre.api.meta import (
    DNS_SUBDOMAIN,
    Condition,
    LocalObjectReference,
    NamespacedName,
    ObjectMeta,
    TypedLocalObjectReference,
)
from cre.api.workflow import OverrideSpec


@attrs.frozen(kw_only=True)
class TorchSpec:
    """torchrun a script or a module (exactly one)."""

    CEL_RULES: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            "has(self.script) != has(self.module)",
            "set exactly one of script, module",
        ),
    )

    script: str | None = attrs.field(default=None, metadata=c(doc=(
        "Python script to start with torchrun.")))
    module: str | None = attrs.field(default=None, metadata=c(doc=(
        "Python module to start with torchrun (python -m).")))
    args: tuple[str, ...] = attrs.field(default=(), metadata=c(doc=(
        "Arguments after the script or module.")))


@attrs.frozen(kw_only=True)
class MpiSpec:
    """mpirun a binary from a launcher pod over sshd workers."""

    binary: str = attrs.field(metadata=c(min_length=1, doc="Program mpirun starts on every node."))
    args: tuple[str, ...] = attrs.field(default=(), metadata=c(doc="Arguments of the program."))
    mpi_args: tuple[str, ...] = attrs.field(default=(), metadata=c(doc=(
        "Extra arguments of mpirun itself.")))
    mpi_implementation: str = attrs.field(default="OpenMPI", metadata=c(doc=(
        "MPI implementation of the image.")))
    mpirun_path: str = attrs.field(metadata=c(min_length=1, doc="Path of mpirun inside the image."))


@attrs.frozen(kw_only=True)
class ExecSpec:
    """Run a command on every node."""

    command: tuple[str, ...] = attrs.field(metadata=c(min_items=1, doc=(
        "Command run on every node.")))
    args: tuple[str, ...] = attrs.field(default=(), metadata=c(doc="Arguments of the command."))


@attrs.frozen(kw_only=True)
class FrameworkSpec:
    """How the image is started; exactly one member is set."""

    torch: TorchSpec | None = attrs.field(default=None, metadata=c(doc=(
        "Start the image with torchrun.")))
    mpi: MpiSpec | None = attrs.field(default=None, metadata=c(doc=(
        "Start the image with mpirun from a launcher pod.")))
    exec: ExecSpec | None = attrs.field(default=None, metadata=c(doc=(
        "Run a plain command on every node.")))


@attrs.frozen(kw_only=True)
class ConfigSpec:
    """Files mounted at ``/config``: inline content or a ConfigMap (not both)."""

    CEL_RULES: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            "!(has(self.inline) && has(self.configMapRef))",
            "inline and configMapRef are mutually exclusive",
        ),
    )

    inline: Mapping[str, str] | None = attrs.field(default=None, metadata=c(doc=(
        "File name to content, mounted under /config.")))
    config_map_ref: LocalObjectReference | None = attrs.field(default=None, metadata=c(doc=(
        "ConfigMap whose keys are mounted as files under /config.")))


@attrs.frozen(kw_only=True)
class RunCheckpoint:
    """Provision a PVC and restart from checkpoints."""

    storage_size: str = attrs.field(metadata=c(pattern=QUANTITY_SIZE, doc=(
        "Size of the checkpoint volume, a Kubernetes quantity such as 1Ti.")))
    storage_class_name: str | None = attrs.field(default=None, metadata=c(doc=(
        "StorageClass of the checkpoint volume. Unset: the cluster default.")))
    max_restarts: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Restarts from the last checkpoint allowed after a failure.")))


class RunTestScale(enum.StrEnum):
    """Test scales a WorkloadRun accepts (no diagnose)."""

    INTRA_NODE = "intra-node"
    INTRA_RACK = "intra-rack"
    FULL_SCALE = "full-scale"


@attrs.frozen(kw_only=True)
class RunOrchestration:
    """Scale, repetitions, parallelism and timeout of the generated Workflow."""

    test_scale: RunTestScale | None = attrs.field(default=None, metadata=c(doc=(
        "How the run is spread over the nodes: intra-node, intra-rack or full-scale. Unset: "
        "full-scale.")))
    repeat_count: int = attrs.field(default=1, metadata=c(minimum=1, int_format="int32", doc=(
        "How many times every group runs.")))
    max_concurrent: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Jobs that may run at the same time; 0 means no limit.")))
    timeout_per_job: str = attrs.field(default="24h", metadata=duration_field(doc=(
        "Fail a Job with JobTimedOut this long after its workload started running, a Go duration"
        " such as 90m.")))
    placement: Placement | None = attrs.field(default=None, metadata=c(doc=(
        "Pinned: each group is bound to named nodes. Unpinned: one group placed by the "
        "scheduler. Unset: Pinned.")))


def _opaque_list(description: str) -> Any:
    return attrs.field(default=(), metadata=c(doc=description))


@attrs.frozen(kw_only=True)
class WorkloadRunSpec:
    """A user workload: image, framework and group size."""

    target: TargetSpec | None = attrs.field(default=None, metadata=c(doc=(
        "Which nodes to run on; every set filter applies. Unset: all GPU nodes.")))
    image: str = attrs.field(metadata=c(min_length=1, doc="Container image of the workload."))
    framework: FrameworkSpec = attrs.field(metadata=c(min_properties=1, max_properties=1, doc=(
        "How the image is started; exactly one of torch, mpi or exec.")))
    num_nodes: int = attrs.field(metadata=c(minimum=1, int_format="int32", doc=(
        "Nodes in each group (one Job per group).")))
    config: ConfigSpec | None = attrs.field(default=None, metadata=c(doc=(
        "Files mounted at /config.")))
    gpus_per_node: int | None = attrs.field(
        default=None, metadata=c(minimum=1, int_format="int32", doc=(
            "GPUs requested per node. Unset: derived from the detected GPU architecture.")))
    mlnx_per_node: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int32", doc=(
            "RDMA NICs requested per node; 0 requests none. Unset: derived from the GPU "
            "architecture and platform.")))
    nic_resource_name: str | None = attrs.field(
        default=None, metadata=c(max_length=253, pattern=QUALIFIED_NAME, doc=(
            "Extended resource name of the RDMA NICs. Unset: detected from the nodes.")))
    image_pull_secrets: tuple[LocalObjectReference, ...] = attrs.field(default=(), metadata=c(doc=(
        "Secrets used to pull the image.")))
    env: tuple[Mapping[str, Any], ...] = _opaque_list(
        "Environment variables of the workload containers (corev1 EnvVar list)."
    )
    volumes: tuple[Mapping[str, Any], ...] = _opaque_list("Extra pod volumes (corev1 Volume list).")
    volume_mounts: tuple[Mapping[str, Any], ...] = _opaque_list(
        "Extra volume mounts of the workload containers (corev1 VolumeMount list)."
    )
    enable_mnnvl: bool | None = attrs.field(default=None, metadata=c(json_name="enableMNNVL", doc=(
        "Enable multi-node NVLink (NCCL_MNNVL_ENABLE). Unset: on for architectures that have it.")))
    checkpoint: RunCheckpoint | None = attrs.field(default=None, metadata=c(doc=(
        "Provision a checkpoint volume and restart from checkpoints after a failure.")))
    resources: Mapping[str, Any] | None = attrs.field(
        default=None, metadata=c(preserve_unknown=True, doc=(
            "Resources of the workload containers (corev1 ResourceRequirements); the GPU request"
            " is added when missing.")))
    init_containers: tuple[Mapping[str, Any], ...] = _opaque_list(
        "Init containers of the workload pods (corev1 Container list)."
    )
    orchestration: RunOrchestration | None = attrs.field(default=None, metadata=c(doc=(
        "Scale, repetitions, parallelism and timeout of the generated Workflow.")))
    thresholds: Mapping[str, str] = attrs.field(factory=dict, metadata=threshold_values(doc=(
        "Pass criteria: metric name (busBandwidthGBps, algBandwidthGBps, goodputRatio, "
        "avgTFLOPsPerGPU, avgStepTimeSec) to a CEL expression over `value`, e.g. `value >= 0.9`.")))
    goodput_measurement: GoodputMeasurementRequest | None = attrs.field(
        default=None, metadata=c(doc=(
            "Create a GoodputMeasurement for each Job.")))
    bandwidth_measurement: BandwidthMeasurementRequest | None = attrs.field(
        default=None, metadata=c(doc=(
            "Create a BandwidthMeasurement for each Job.")))
    overrides: tuple[OverrideSpec, ...] = attrs.field(default=(), metadata=c(doc=(
        "Conditional patches of the generated Workflow's job template, dependencies or "
        "orchestration.")))
    gang_scheduler: GangSchedulerSpec | None = attrs.field(default=None, metadata=c(doc=(
        "Gang-schedule the workload pods with this scheduler (e.g. KAI).")))
    workload_metadata: WorkloadMetadata | None = attrs.field(default=None, metadata=c(doc=(
        "Labels put on the workload object (not on pods).")))
    priority_class_name: str | None = attrs.field(
        default=None, metadata=c(max_length=253, pattern=DNS_SUBDOMAIN, doc=(
            "PriorityClass of the workload pods.")))
    failure_policy: FailurePolicy | None = attrs.field(default=None, metadata=c(
        doc=FAILURE_POLICY_DOC))


@attrs.frozen(kw_only=True)
class JobGoodput:
    """The goodput one Job of the run measured (its GoodputMeasurement's ``result``)."""

    job: str = attrs.field(metadata=c(min_length=1, doc="Name of the Job."))
    goodput_ratio: str = attrs.field(metadata=c(pattern=r"^[0-9]+(\.[0-9]+)?$", doc=(
        "Goodput ratio the Job measured, 0..1 as a decimal string.")))


@attrs.frozen(kw_only=True)
class WorkloadRunStatus:
    """Observed state, mirrored from the generated Workflow."""

    conditions: tuple[Condition, ...] = attrs.field(
        default=(), metadata=c(list_map_keys=("type",), doc=(
            "Latest observations of the object's state (InProgress, Succeeded, Failed and "
            "kind-specific types), keyed by type.")))
    phase: Phase | None = attrs.field(default=None, metadata=c(doc=(
        "One-word summary of the True condition: Pending, Running, Succeeded or Failed.")))
    observed_generation: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "The metadata.generation the status was computed from.")))
    workflow_ref: NamespacedName | None = attrs.field(default=None, metadata=c(doc=(
        "The generated Workflow.")))
    detected_platform: str | None = attrs.field(default=None, metadata=c(doc=(
        "Platform detected from the nodes (e.g. aws, oci).")))
    detected_gpu_architecture: str | None = attrs.field(
        default=None, metadata=c(json_name="detectedGPUArchitecture", doc=(
            "GPU architecture detected from the nodes (e.g. h100).")))
    resolved_gpus_per_node: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int32", doc=(
            "GPUs per node the run requested (given or derived).")))
    succeeded_nodes_ref: TypedLocalObjectReference | None = attrs.field(
        default=None, metadata=c(doc=(
            "ConfigMap listing the nodes that passed.")))
    failed_nodes_ref: TypedLocalObjectReference | None = attrs.field(default=None, metadata=c(doc=(
        "ConfigMap listing the nodes that failed.")))
    # CRE addition (the reference's run status has no goodput): the measured goodput ratio of
    # each of the run's Jobs whose GoodputMeasurement completed, in Job-name order.
    goodput: tuple[JobGoodput, ...] = attrs.field(default=(), metadata=c(max_items=1024, doc=(
        "Goodput ratio of each Job whose GoodputMeasurement completed, in Job-name order.")))


@attrs.frozen(kw_only=True)
class WorkloadRun:
    """A CRE WorkloadRun (``cre.dev/v1alpha1``, namespaced). The spec is immutable."""

    KIND: ClassVar[str] = "WorkloadRun"

    api_version: str = attrs.field(default=API_VERSION, metadata=c(doc="cre.dev/v1alpha1."))
    kind: str = attrs.field(default="WorkloadRun", metadata=c(doc="WorkloadRun."))
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta, metadata=c(doc=(
        "Standard object metadata.")))
    spec: WorkloadRunSpec = attrs.field(metadata=c(immutable=True, doc=(
        "The user's workload: image, framework and group size. Cannot change after creation.")))
    status: WorkloadRunStatus = attrs.field(factory=WorkloadRunStatus, metadata=c(doc=(
        "Progress mirrored from the generated Workflow.")))
