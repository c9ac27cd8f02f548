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
    DURATION_FIELD,
    QUALIFIED_NAME,
    QUANTITY_SIZE,
    THRESHOLD_VALUES,
    GangSchedulerSpec,
    Placement,
    TargetSpec,
    WorkloadMetadata,
)
from cre.api.conditions import Phase
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

    script: str | None = None
    module: str | None = None
    args: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class MpiSpec:
    """mpirun a binary from a launcher pod over sshd workers."""

    binary: str = attrs.field(metadata=c(min_length=1))
    args: tuple[str, ...] = ()
    mpi_args: tuple[str, ...] = ()
    mpi_implementation: str = "OpenMPI"
    mpirun_path: str = attrs.field(metadata=c(min_length=1))


@attrs.frozen(kw_only=True)
class ExecSpec:
    """Run a command on every node."""

    command: tuple[str, ...] = attrs.field(metadata=c(min_items=1))
    args: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class FrameworkSpec:
    """How the image is started; exactly one member is set."""

    torch: TorchSpec | None = None
    mpi: MpiSpec | None = None
    exec: ExecSpec | None = None


@attrs.frozen(kw_only=True)
class ConfigSpec:
    """Files mounted at ``/config``: inline content or a ConfigMap (not both)."""

    CEL_RULES: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            "!(has(self.inline) && has(self.configMapRef))",
            "inline and configMapRef are mutually exclusive",
        ),
    )

    inline: Mapping[str, str] | None = None
    config_map_ref: LocalObjectReference | None = None


@attrs.frozen(kw_only=True)
class RunCheckpoint:
    """Provision a PVC and restart from checkpoints."""

    storage_size: str = attrs.field(metadata=c(pattern=QUANTITY_SIZE))
    storage_class_name: str | None = None
    max_restarts: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32"))


class RunTestScale(enum.StrEnum):
    """Test scales a WorkloadRun accepts (no diagnose)."""

    INTRA_NODE = "intra-node"
    INTRA_RACK = "intra-rack"
    FULL_SCALE = "full-scale"


@attrs.frozen(kw_only=True)
class RunOrchestration:
    """Scale, repetitions, parallelism and timeout of the generated Workflow."""

    test_scale: RunTestScale | None = None
    repeat_count: int = attrs.field(default=1, metadata=c(minimum=1, int_format="int32"))
    max_concurrent: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32"))
    timeout_per_job: str = attrs.field(default="24h", metadata=DURATION_FIELD)
    placement: Placement | None = None


def _opaque_list(description: str) -> Any:
    return attrs.field(default=(), metadata=c(description=description))


@attrs.frozen(kw_only=True)
class WorkloadRunSpec:
    """A user workload: image, framework and group size."""

    target: TargetSpec | None = None
    image: str = attrs.field(metadata=c(min_length=1))
    framework: FrameworkSpec = attrs.field(metadata=c(min_properties=1, max_properties=1))
    num_nodes: int = attrs.field(metadata=c(minimum=1, int_format="int32"))
    config: ConfigSpec | None = None
    gpus_per_node: int | None = attrs.field(default=None, metadata=c(minimum=1, int_format="int32"))
    mlnx_per_node: int | None = attrs.field(default=None, metadata=c(minimum=0, int_format="int32"))
    nic_resource_name: str | None = attrs.field(
        default=None, metadata=c(max_length=253, pattern=QUALIFIED_NAME)
    )
    image_pull_secrets: tuple[LocalObjectReference, ...] = ()
    env: tuple[Mapping[str, Any], ...] = _opaque_list("corev1 EnvVar list")
    volumes: tuple[Mapping[str, Any], ...] = _opaque_list("corev1 Volume list")
    volume_mounts: tuple[Mapping[str, Any], ...] = _opaque_list("corev1 VolumeMount list")
    enable_mnnvl: bool | None = attrs.field(default=None, metadata=c(json_name="enableMNNVL"))
    checkpoint: RunCheckpoint | None = None
    resources: Mapping[str, Any] | None = attrs.field(
        default=None, metadata=c(preserve_unknown=True, description="corev1 ResourceRequirements")
    )
    init_containers: tuple[Mapping[str, Any], ...] = _opaque_list("corev1 Container list")
    orchestration: RunOrchestration | None = None
    thresholds: Mapping[str, str] = attrs.field(factory=dict, metadata=THRESHOLD_VALUES)
    goodput_measurement: GoodputMeasurementRequest | None = None
    bandwidth_measurement: BandwidthMeasurementRequest | None = None
    overrides: tuple[OverrideSpec, ...] = ()
    gang_scheduler: GangSchedulerSpec | None = None
    workload_metadata: WorkloadMetadata | None = None
    priority_class_name: str | None = attrs.field(
        default=None, metadata=c(max_length=253, pattern=DNS_SUBDOMAIN)
    )


@attrs.frozen(kw_only=True)
class JobGoodput:
    """The goodput one Job of the run measured (its GoodputMeasurement's ``result``)."""

    job: str = attrs.field(metadata=c(min_length=1))
    goodput_ratio: str = attrs.field(metadata=c(pattern=r"^[0-9]+(\.[0-9]+)?$"))


@attrs.frozen(kw_only=True)
class WorkloadRunStatus:
    """Observed state, mirrored from the generated Workflow."""

    conditions: tuple[Condition, ...] = attrs.field(default=(), metadata=c(list_map_keys=("type",)))
    phase: Phase | None = None
    observed_generation: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64")
    )
    workflow_ref: NamespacedName | None = None
    detected_platform: str | None = None
    detected_gpu_architecture: str | None = attrs.field(
        default=None, metadata=c(json_name="detectedGPUArchitecture")
    )
    resolved_gpus_per_node: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int32")
    )
    succeeded_nodes_ref: TypedLocalObjectReference | None = None
    failed_nodes_ref: TypedLocalObjectReference | None = None
    # CRE addition (the reference's run status has no goodput): the measured goodput ratio of
    # each of the run's Jobs whose GoodputMeasurement completed, in Job-name order.
    goodput: tuple[JobGoodput, ...] = attrs.field(default=(), metadata=c(max_items=1024))


@attrs.frozen(kw_only=True)
class WorkloadRun:
    """A CRE WorkloadRun (``cre.dev/v1alpha1``, namespaced). The spec is immutable."""

    KIND: ClassVar[str] = "WorkloadRun"

    api_version: str = API_VERSION
    kind: str = "WorkloadRun"
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: WorkloadRunSpec = attrs.field(metadata=c(immutable=True))
    status: WorkloadRunStatus = attrs.field(factory=WorkloadRunStatus)
