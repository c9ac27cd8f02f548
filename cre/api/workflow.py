"""The ``Workflow`` kind: one catalog category (or one WorkloadRun) over a set of nodes.

A Workflow partitions its target nodes into groups and runs one Job per group and iteration
from ``spec.jobTemplate``. Dependencies and override patches embed arbitrary Kubernetes
objects and JSON patches, so they stay opaque JSON here; ``cre.api.validate`` still checks the
few keys CRE relies on (apiVersion, kind, metadata.name, patch op and path).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

import attrs

from cre.api.common import (
    DURATION_FIELD,
    THRESHOLD_VALUES,
    GangSchedulerSpec,
    Placement,
    TargetSpec,
)
from cre.api.conditions import GroupPhase, Phase, Verdict
from cre.api.failurepolicy import FailurePolicy
from cre.api.fields import c
from cre.api.job import FailureClass, JobSpec
from cre.api.labels import API_VERSION
from cre.api.meta import Condition, NamespacedName, ObjectMeta, TypedLocalObjectReference


@attrs.frozen(kw_only=True)
class TemplateMetadata:
    """Labels and annotations copied onto every Job made from the template."""

    labels: Mapping[str, str] = attrs.field(factory=dict)
    annotations: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class JobTemplateSpec:
    """The template of each group's Job."""

    metadata: TemplateMetadata | None = None
    spec: JobSpec


@attrs.frozen(kw_only=True)
class TopologySpec:
    """Pack groups into the fewest topology domains of ``topologyKey``."""

    topology_key: str = attrs.field(metadata=c(min_length=1))
    strict_domain: bool = False


@attrs.frozen(kw_only=True)
class DiagnoseSpec:
    """Adaptive fault isolation: screen, bisect and confirm suspect nodes."""

    min_group_size: int = attrs.field(default=2, metadata=c(minimum=1, int_format="int32"))
    topology_key: str | None = None


@attrs.frozen(kw_only=True)
class ExecutionSpec:
    """Parallelism, per-Job timeout and whole-group retries."""

    max_concurrent: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32"))
    timeout_per_job: str | None = attrs.field(default=None, metadata=DURATION_FIELD)
    retry_failed_groups: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32"))


@attrs.frozen(kw_only=True)
class OrchestrationSpec:
    """How nodes are grouped and how often the groups run."""

    target: TargetSpec | None = None
    topology: TopologySpec | None = None
    diagnose: DiagnoseSpec | None = None
    execution: ExecutionSpec | None = None
    iterations: int = attrs.field(default=1, metadata=c(minimum=1, int_format="int32"))
    placement: Placement | None = None


@attrs.frozen(kw_only=True)
class OrchestrationOverride:
    """An override's orchestration: every set field replaces the base value."""

    target: TargetSpec | None = None
    topology: TopologySpec | None = None
    execution: ExecutionSpec | None = None
    iterations: int | None = attrs.field(default=None, metadata=c(minimum=1, int_format="int32"))
    placement: Placement | None = None


@attrs.frozen(kw_only=True)
class StringMatch:
    """Match a detected string: equal to, one of, or none of."""

    equals: str | None = None
    in_: tuple[str, ...] = attrs.field(default=(), metadata=c(json_name="in"))
    not_in: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class IntMatch:
    """Match a count exactly or by bounds."""

    equals: int | None = None
    greater_than: int | None = None
    less_than: int | None = None


class TopologyMode(enum.StrEnum):
    """How the groups were partitioned."""

    SIMPLE = "simple"
    TOPOLOGY = "topology"


@attrs.frozen(kw_only=True)
class TopologyMatch:
    """Match the partitioning mode and domain count."""

    mode: TopologyMode | None = None
    domain_count: IntMatch | None = None


@attrs.frozen(kw_only=True)
class WhenSpec:
    """Conditions of a dependency or override; all set criteria must hold (AND)."""

    platform: StringMatch | None = None
    gpu_architecture: StringMatch | None = None
    workload_kind: str | None = None
    topology: TopologyMatch | None = None
    config: Mapping[str, Any] | None = attrs.field(default=None, metadata=c(preserve_unknown=True))
    expression: str | None = attrs.field(default=None, metadata=c(max_length=4096))


@attrs.frozen(kw_only=True)
class OverrideSpec:
    """A conditional patch of the job template, dependencies or orchestration."""

    when: WhenSpec
    job_template: Mapping[str, Any] | None = attrs.field(
        default=None, metadata=c(preserve_unknown=True, description="strategic merge patch")
    )
    job_template_patch: tuple[Mapping[str, Any], ...] = attrs.field(
        default=(), metadata=c(description="RFC 6902 JSON patch")
    )
    dependencies: tuple[Mapping[str, Any], ...] = ()
    orchestration: OrchestrationOverride | None = None


@attrs.frozen(kw_only=True)
class ThresholdsSpec:
    """Threshold CEL expressions keyed by metric."""

    thresholds: Mapping[str, str] = attrs.field(factory=dict, metadata=THRESHOLD_VALUES)


@attrs.frozen(kw_only=True)
class PerformanceSpec:
    """Performance validation of the Jobs."""

    enabled: bool = False
    plugin: str | None = None
    config: Mapping[str, Any] | None = attrs.field(default=None, metadata=c(preserve_unknown=True))
    thresholds: ThresholdsSpec | None = None
    measurement_timeout: str | None = attrs.field(default=None, metadata=DURATION_FIELD)


@attrs.frozen(kw_only=True)
class ValidationSpec:
    """How the Workflow judges its Jobs."""

    performance: PerformanceSpec | None = None


@attrs.frozen(kw_only=True)
class WorkflowSpec:
    """Desired state of a Workflow. Presence and value of ``gangScheduler`` are fixed."""

    namespace: str | None = None
    job_template: JobTemplateSpec
    orchestration: OrchestrationSpec
    dependencies: tuple[Mapping[str, Any], ...] = attrs.field(
        default=(), metadata=c(description="Kubernetes objects written inline, plus `when`")
    )
    overrides: tuple[OverrideSpec, ...] = ()
    validation: ValidationSpec | None = None
    gang_scheduler: GangSchedulerSpec | None = attrs.field(
        default=None, metadata=c(immutable=True, presence_immutable=True)
    )
    failure_policy: FailurePolicy | None = None


class DependencyScope(enum.StrEnum):
    """Whether a dependency lives once per Workflow or once per Job."""

    WORKFLOW = "workflow"
    JOB = "job"


@attrs.frozen(kw_only=True)
class DependencyRef:
    """A created dependency object."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None
    scope: DependencyScope = DependencyScope.WORKFLOW
    group_name: str | None = None
    iteration: int | None = attrs.field(default=None, metadata=c(int_format="int32"))


@attrs.frozen(kw_only=True)
class GroupStatus:
    """One node group and its current Job."""

    name: str
    nodes: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    domain_node_counts: Mapping[str, int] = attrs.field(factory=dict)
    overflow: bool = False
    phase: GroupPhase = GroupPhase.PENDING
    retries: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32"))
    # Re-runs after an infrastructure abort (they do not spend retryFailedGroups).
    infra_retries: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32"))
    job_ref: NamespacedName | None = None
    start_time: datetime | None = None
    completion_time: datetime | None = None
    # Whom the last failure of this group's Job was attributed to (scope, reason, message).
    failure_class: FailureClass | None = None
    # The Job's failure reason (its Failed condition), e.g. JobTimedOut, ValidationFailed.
    failure_reason: str | None = None
    message: str | None = None
    # The bus bandwidth the group's Job measured (GB/s, ``"%.2f"``), next to its outcome.
    bus_bandwidth_gbps: str | None = attrs.field(
        default=None, metadata=c(json_name="busBandwidthGBps", pattern=r"^[0-9]+(\.[0-9]+)?$"))


@attrs.frozen(kw_only=True)
class IterationGroup:
    """A group's outcome in one iteration."""

    name: str
    phase: GroupPhase
    job_name: str | None = None
    start_time: datetime | None = None
    completion_time: datetime | None = None
    failure_class: FailureClass | None = None
    failure_reason: str | None = None


@attrs.frozen(kw_only=True)
class IterationRecord:
    """The groups of one finished iteration."""

    iteration: int = attrs.field(metadata=c(minimum=1, int_format="int32"))
    groups: tuple[IterationGroup, ...] = ()


@attrs.frozen(kw_only=True)
class AppliedOverride:
    """An override that matched, summarised for humans."""

    index: int = attrs.field(metadata=c(minimum=0, int_format="int32"))
    when: str = ""
    patches: str = ""
    no_op: bool = False


@attrs.frozen(kw_only=True)
class OrchestrationStatus:
    """What discovery and partitioning found."""

    total_nodes: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32"))
    nodes_per_job: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32"))
    total_groups: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32"))
    current_iteration: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32"))
    completed_iterations: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32"))
    iteration_history: tuple[IterationRecord, ...] = ()
    detected_platform: str | None = None
    detected_gpu_architecture: str | None = attrs.field(
        default=None, metadata=c(json_name="detectedGPUArchitecture")
    )
    excluded_nodes: tuple[str, ...] = ()
    exclusion_reason: str | None = None
    # Nodes that matched the target but were not certified (infra aborts, cancellations).
    uncertified_nodes: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32"))
    applied_overrides: tuple[AppliedOverride, ...] = ()
    placement: Placement | None = None
    diagnose: Mapping[str, Any] | None = attrs.field(
        default=None, metadata=c(preserve_unknown=True, description="diagnose-mode state")
    )


@attrs.frozen(kw_only=True)
class WorkflowStatus:
    """Observed state of a Workflow."""

    conditions: tuple[Condition, ...] = attrs.field(default=(), metadata=c(list_map_keys=("type",)))
    phase: Phase | None = None
    observed_generation: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64")
    )
    namespace: str | None = None
    succeeded_nodes_ref: TypedLocalObjectReference | None = None
    failed_nodes_ref: TypedLocalObjectReference | None = None
    uncertified_nodes_ref: TypedLocalObjectReference | None = None
    verdict: Verdict | None = None
    dependency_refs: tuple[DependencyRef, ...] = ()
    orchestration: OrchestrationStatus | None = None
    groups: tuple[GroupStatus, ...] = attrs.field(default=(), metadata=c(list_map_keys=("name",)))


@attrs.frozen(kw_only=True)
class Workflow:
    """A CRE Workflow (``cre.dev/v1alpha1``, namespaced)."""

    KIND: ClassVar[str] = "Workflow"

    api_version: str = API_VERSION
    kind: str = "Workflow"
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: WorkflowSpec
    status: WorkflowStatus = attrs.field(factory=WorkflowStatus)
