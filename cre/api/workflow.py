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
    GangSchedulerSpec,
    Placement,
    RelativeThreshold,
    TargetSpec,
    duration_field,
    threshold_values,
)
from cre.api.conditions import GroupPhase, Phase, Verdict
from cre.api.failurepolicy import FailurePolicy
from cre.api.fields import c
from cre.api.job import FailureClass, JobSpec, NodeHealthMonitor
from cre.api.labels import API_VERSION
from cre.api.meta import Condition, NamespacedName, ObjectMeta, TypedLocalObjectReference


@attrs.frozen(kw_only=True)
class TemplateMetadata:
    """Labels and annotations copied onto every Job made from the template."""

    labels: Mapping[str, str] = attrs.field(factory=dict, metadata=c(doc=(
        "Labels copied onto every Job made from the template.")))
    annotations: Mapping[str, str] = attrs.field(factory=dict, metadata=c(doc=(
        "Annotations copied onto every Job made from the template.")))


@attrs.frozen(kw_only=True)
class JobTemplateSpec:
    """The template of each group's Job."""

    metadata: TemplateMetadata | None = attrs.field(default=None, metadata=c(doc=(
        "Labels and annotations of each Job.")))
    spec: JobSpec = attrs.field(metadata=c(doc=(
        "Spec of each group's Job; CRE fills in the group's nodes.")))


@attrs.frozen(kw_only=True)
class TopologySpec:
    """Pack groups into the fewest topology domains of ``topologyKey``."""

    topology_key: str = attrs.field(metadata=c(min_length=1, doc=(
        "Node label whose value names a topology domain (e.g. a rack).")))
    strict_domain: bool = attrs.field(default=False, metadata=c(doc=(
        "One group per domain, at the domain's size, instead of packing groups across domains.")))


@attrs.frozen(kw_only=True)
class DiagnoseSpec:
    """Adaptive fault isolation: screen, bisect and confirm suspect nodes."""

    min_group_size: int = attrs.field(default=2, metadata=c(minimum=1, int_format="int32", doc=(
        "Bisection stops splitting a failure at this many suspects and confirms each one with "
        "known-good peers; no diagnose group runs with fewer nodes.")))
    topology_key: str | None = attrs.field(default=None, metadata=c(doc=(
        "Node label whose value is a node's topology domain: bisection splits along domains "
        "first, and a failure that only appears across two domains is reported as a bad link. "
        "Unset: halves by name, no domain pairs.")))


@attrs.frozen(kw_only=True)
class ExecutionSpec:
    """Parallelism, per-Job timeout and whole-group retries."""

    max_concurrent: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Jobs that may run at the same time; 0 means no limit.")))
    timeout_per_job: str | None = attrs.field(default=None, metadata=duration_field(doc=(
        "Fail a Job with JobTimedOut this long after its workload started running, a Go duration"
        " such as 90s or 1h30m. Unset: no limit.")))
    retry_failed_groups: int = attrs.field(
        default=0, metadata=c(minimum=0, int_format="int32", doc=(
            "Times a failed group's Job is created anew; timed-out Jobs are not retried.")))


@attrs.frozen(kw_only=True)
class OrchestrationSpec:
    """How nodes are grouped and how often the groups run."""

    target: TargetSpec | None = attrs.field(default=None, metadata=c(doc=(
        "Which nodes to run on; every set filter applies. Unset: all GPU nodes.")))
    topology: TopologySpec | None = attrs.field(default=None, metadata=c(doc=(
        "Pack groups into topology domains. Unset: name-sorted chunks of the group size.")))
    diagnose: DiagnoseSpec | None = attrs.field(default=None, metadata=c(doc=(
        "Adaptive fault isolation: screen, bisect and confirm suspect nodes.")))
    execution: ExecutionSpec | None = attrs.field(default=None, metadata=c(doc=(
        "Parallelism, per-Job timeout and retries.")))
    iterations: int = attrs.field(default=1, metadata=c(minimum=1, int_format="int32", doc=(
        "How many times every group runs.")))
    placement: Placement | None = attrs.field(default=None, metadata=c(doc=(
        "Pinned: each group is bound to named nodes. Unpinned: one group placed by the "
        "scheduler. Unset: Pinned.")))


@attrs.frozen(kw_only=True)
class OrchestrationOverride:
    """An override's orchestration: every set field replaces the base value."""

    target: TargetSpec | None = attrs.field(default=None, metadata=c(doc=(
        "Replaces the base target.")))
    topology: TopologySpec | None = attrs.field(default=None, metadata=c(doc=(
        "Replaces the base topology.")))
    execution: ExecutionSpec | None = attrs.field(default=None, metadata=c(doc=(
        "Replaces the base execution settings.")))
    iterations: int | None = attrs.field(
        default=None, metadata=c(minimum=1, int_format="int32", doc=(
            "Replaces the base number of iterations.")))
    placement: Placement | None = attrs.field(default=None, metadata=c(doc=(
        "Replaces the base placement.")))


@attrs.frozen(kw_only=True)
class StringMatch:
    """Match a detected string: equal to, one of, or none of."""

    equals: str | None = attrs.field(default=None, metadata=c(doc="The value must equal this."))
    in_: tuple[str, ...] = attrs.field(default=(), metadata=c(json_name="in", doc=(
        "The value must be one of these.")))
    not_in: tuple[str, ...] = attrs.field(default=(), metadata=c(doc=(
        "The value must be none of these.")))


@attrs.frozen(kw_only=True)
class IntMatch:
    """Match a count exactly or by bounds."""

    equals: int | None = attrs.field(default=None, metadata=c(doc="The count must equal this."))
    greater_than: int | None = attrs.field(default=None, metadata=c(doc=(
        "The count must be greater than this.")))
    less_than: int | None = attrs.field(default=None, metadata=c(doc=(
        "The count must be less than this.")))


class TopologyMode(enum.StrEnum):
    """How the groups were partitioned."""

    SIMPLE = "simple"
    TOPOLOGY = "topology"


@attrs.frozen(kw_only=True)
class TopologyMatch:
    """Match the partitioning mode and domain count."""

    mode: TopologyMode | None = attrs.field(default=None, metadata=c(doc=(
        "How the groups were partitioned: simple or topology.")))
    domain_count: IntMatch | None = attrs.field(default=None, metadata=c(doc=(
        "Number of topology domains found.")))


@attrs.frozen(kw_only=True)
class WhenSpec:
    """Conditions of a dependency or override; all set criteria must hold (AND)."""

    platform: StringMatch | None = attrs.field(default=None, metadata=c(doc=(
        "Detected platform (e.g. aws, oci) to match.")))
    gpu_architecture: StringMatch | None = attrs.field(default=None, metadata=c(doc=(
        "Detected GPU architecture (e.g. h100, gb200) to match.")))
    workload_kind: str | None = attrs.field(default=None, metadata=c(doc=(
        "Kind of the workload object the Jobs create; today always TrainJob.")))
    topology: TopologyMatch | None = attrs.field(default=None, metadata=c(doc=(
        "Partitioning mode and domain count to match.")))
    config: Mapping[str, Any] | None = attrs.field(
        default=None, metadata=c(preserve_unknown=True, doc=(
            "Configuration values to match, as opaque JSON (accepted; this version does not "
            "evaluate it).")))
    expression: str | None = attrs.field(default=None, metadata=c(max_length=4096, doc=(
        "CEL expression that must be true.")))


@attrs.frozen(kw_only=True)
class OverrideSpec:
    """A conditional patch of the job template, dependencies or orchestration."""

    when: WhenSpec = attrs.field(metadata=c(doc=(
        "Conditions under which the override applies; all set criteria must hold.")))
    job_template: Mapping[str, Any] | None = attrs.field(
        default=None, metadata=c(preserve_unknown=True, doc=(
            "Strategic merge patch of the job template.")))
    job_template_patch: tuple[Mapping[str, Any], ...] = attrs.field(default=(), metadata=c(doc=(
        "RFC 6902 JSON patch operations applied to the job template.")))
    dependencies: tuple[Mapping[str, Any], ...] = attrs.field(default=(), metadata=c(doc=(
        "Dependency objects that replace the base ones when the override applies.")))
    orchestration: OrchestrationOverride | None = attrs.field(default=None, metadata=c(doc=(
        "Orchestration fields that replace the base ones.")))


@attrs.frozen(kw_only=True)
class ThresholdsSpec:
    """Threshold CEL expressions keyed by metric."""

    thresholds: Mapping[str, str] = attrs.field(factory=dict, metadata=threshold_values(doc=(
        "Metric name to a CEL expression over `value` that must hold, e.g. `value >= 400`.")))


@attrs.frozen(kw_only=True)
class PerformanceSpec:
    """Performance validation of the Jobs."""

    enabled: bool = attrs.field(default=False, metadata=c(doc=(
        "Judge the Jobs' measured performance.")))
    plugin: str | None = attrs.field(default=None, metadata=c(doc=(
        "Name of the performance plugin (accepted; this version judges the thresholds only).")))
    config: Mapping[str, Any] | None = attrs.field(
        default=None, metadata=c(preserve_unknown=True, doc=(
            "Configuration of the plugin, as opaque JSON.")))
    thresholds: ThresholdsSpec | None = attrs.field(default=None, metadata=c(doc=(
        "Pass criteria copied into each Job.")))
    relative_threshold: RelativeThreshold | None = attrs.field(default=None, metadata=c(doc=(
        "Fleet-relative rule on per-node busBW copied into each Job; needs a busBandwidthGBps "
        "threshold.")))
    measurement_timeout: str | None = attrs.field(default=None, metadata=duration_field(doc=(
        "How long each Job waits for its measurement after the workload succeeded, a Go duration"
        " such as 90s or 1h30m. Unset: 5m.")))


@attrs.frozen(kw_only=True)
class ValidationSpec:
    """How the Workflow judges its Jobs."""

    performance: PerformanceSpec | None = attrs.field(default=None, metadata=c(doc=(
        "Performance validation of the Jobs.")))


@attrs.frozen(kw_only=True)
class WorkflowSpec:
    """Desired state of a Workflow. Presence and value of ``gangScheduler`` are fixed."""

    namespace: str | None = attrs.field(default=None, metadata=c(doc=(
        "Namespace of the Jobs and dependencies. Unset: the Workflow's namespace.")))
    job_template: JobTemplateSpec = attrs.field(metadata=c(doc="Template of each group's Job."))
    orchestration: OrchestrationSpec = attrs.field(metadata=c(doc=(
        "How nodes are grouped and how often the groups run.")))
    dependencies: tuple[Mapping[str, Any], ...] = attrs.field(default=(), metadata=c(doc=(
        "Kubernetes objects created before the Jobs (written inline, each with an optional "
        "`when`).")))
    overrides: tuple[OverrideSpec, ...] = attrs.field(default=(), metadata=c(doc=(
        "Conditional patches of the job template, dependencies or orchestration, applied in "
        "order.")))
    validation: ValidationSpec | None = attrs.field(default=None, metadata=c(doc=(
        "How the Jobs are judged.")))
    gang_scheduler: GangSchedulerSpec | None = attrs.field(
        default=None, metadata=c(immutable=True, presence_immutable=True, doc=(
            "Gang-schedule the workload pods with this scheduler. Presence and value are fixed "
            "at creation.")))
    failure_policy: FailurePolicy | None = attrs.field(default=None, metadata=c(doc=(
        "What a failed group does to the rest of the Workflow and how infrastructure aborts are "
        "retried.")))
    node_health_monitor: NodeHealthMonitor | None = attrs.field(default=None, metadata=c(doc=(
        "Which node signals mean broken hardware; copied onto every group Job (wins over the "
        "template's). Unset: the Job tier's default (a node cordoned mid-run is broken).")))
    deadline: str | None = attrs.field(default=None, metadata=duration_field(doc=(
        "Go duration after which the run ends: running groups are cancelled, their nodes "
        "Uncertified (DeadlineExceeded). Unset: no limit.")))
    max_nodes: int | None = attrs.field(
        default=None, metadata=c(minimum=1, int_format="int32", doc=(
        "At most this many nodes (the first eligible ones by name); the rest are excluded "
        "(MaxNodes). Unset: every eligible node.")))


class DependencyScope(enum.StrEnum):
    """Whether a dependency lives once per Workflow or once per Job."""

    WORKFLOW = "workflow"
    JOB = "job"


@attrs.frozen(kw_only=True)
class DependencyRef:
    """A created dependency object."""

    api_version: str = attrs.field(metadata=c(doc="apiVersion of the created object."))
    kind: str = attrs.field(metadata=c(doc="Kind of the created object."))
    name: str = attrs.field(metadata=c(doc="Name of the created object."))
    namespace: str | None = attrs.field(default=None, metadata=c(doc=(
        "Namespace of the created object.")))
    scope: DependencyScope = attrs.field(default=DependencyScope.WORKFLOW, metadata=c(doc=(
        "workflow: one object for the Workflow; job: one per Job.")))
    group_name: str | None = attrs.field(default=None, metadata=c(doc=(
        "Group the object belongs to (job scope).")))
    iteration: int | None = attrs.field(default=None, metadata=c(int_format="int32", doc=(
        "Iteration the object belongs to (job scope).")))


class ExcludedNodeReason(enum.StrEnum):
    """Why a group's (re-)launch left one of its nodes out."""

    FAILED = "Failed"  # recorded Failed earlier in this Workflow
    NOT_READY = "NotReady"
    CORDONED = "Cordoned"
    TAINTED = "Tainted"  # a NoSchedule/NoExecute taint the workload does not tolerate


@attrs.frozen(kw_only=True)
class ExcludedNode:
    """A node of the group its last launch did not use, and why."""

    name: str = attrs.field(metadata=c(doc="Node name."))
    reason: ExcludedNodeReason = attrs.field(metadata=c(doc=(
        "Failed, NotReady, Cordoned or Tainted.")))
    message: str = attrs.field(default="", metadata=c(doc="Details, e.g. the taint."))


@attrs.frozen(kw_only=True)
class GroupStatus:
    """One node group and its current Job."""

    name: str = attrs.field(metadata=c(doc="Group name."))
    nodes: tuple[str, ...] = attrs.field(default=(), metadata=c(doc="Nodes of the group."))
    domains: tuple[str, ...] = attrs.field(default=(), metadata=c(doc=(
        "Topology domains the group spans.")))
    domain_node_counts: Mapping[str, int] = attrs.field(factory=dict, metadata=c(doc=(
        "Nodes of the group per topology domain.")))
    overflow: bool = attrs.field(default=False, metadata=c(doc=(
        "The group is the short remainder, topped up with nodes borrowed from full groups.")))
    phase: GroupPhase = attrs.field(default=GroupPhase.PENDING, metadata=c(doc=(
        "Outcome of the group: Pending, Running, Succeeded or Failed.")))
    retries: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Times the group's Job was created anew after a failure.")))
    # Re-runs after an infrastructure abort (they do not spend retryFailedGroups).
    infra_retries: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Re-runs after an infrastructure abort (they do not spend retryFailedGroups).")))
    job_ref: NamespacedName | None = attrs.field(default=None, metadata=c(doc=(
        "The group's current Job.")))
    start_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the group's Job started.")))
    completion_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the group's Job finished.")))
    # Whom the last failure of this group's Job was attributed to (scope, reason, message).
    failure_class: FailureClass | None = attrs.field(default=None, metadata=c(doc=(
        "Whom the last failure of the group's Job was attributed to.")))
    # The Job's failure reason (its Failed condition), e.g. JobTimedOut, ValidationFailed.
    failure_reason: str | None = attrs.field(default=None, metadata=c(doc=(
        "Reason of the Job's Failed condition, e.g. JobTimedOut.")))
    message: str | None = attrs.field(default=None, metadata=c(doc=(
        "Human-readable details of the group's state.")))
    # The bus bandwidth the group's Job measured (GB/s, ``"%.2f"``), next to its outcome.
    bus_bandwidth_gbps: str | None = attrs.field(
        default=None, metadata=c(json_name="busBandwidthGBps", pattern=r"^[0-9]+(\.[0-9]+)?$", doc=(
            "Bus bandwidth the group's Job measured, GB/s.")))
    excluded_nodes: tuple[ExcludedNode, ...] = attrs.field(
        default=(), metadata=c(list_map_keys=("name",), doc=(
            "Nodes the group's last launch left out (Failed, NotReady, Cordoned, Tainted); the "
            "Job ran on the others.")))


@attrs.frozen(kw_only=True)
class IterationGroup:
    """A group's outcome in one iteration."""

    name: str = attrs.field(metadata=c(doc="Group name."))
    phase: GroupPhase = attrs.field(metadata=c(doc="Outcome of the group in the iteration."))
    job_name: str | None = attrs.field(default=None, metadata=c(doc="Job that ran the group."))
    start_time: datetime | None = attrs.field(default=None, metadata=c(doc="When the Job started."))
    completion_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the Job finished.")))
    failure_class: FailureClass | None = attrs.field(default=None, metadata=c(doc=(
        "Whom the Job's failure was attributed to.")))
    failure_reason: str | None = attrs.field(default=None, metadata=c(doc=(
        "Reason of the Job's Failed condition.")))


@attrs.frozen(kw_only=True)
class IterationRecord:
    """The groups of one finished iteration."""

    iteration: int = attrs.field(metadata=c(minimum=1, int_format="int32", doc=(
        "Iteration number, from 1.")))
    groups: tuple[IterationGroup, ...] = attrs.field(default=(), metadata=c(doc=(
        "Outcome of each group in the iteration.")))


@attrs.frozen(kw_only=True)
class AppliedOverride:
    """An override that matched, summarised for humans."""

    index: int = attrs.field(metadata=c(minimum=0, int_format="int32", doc=(
        "Position of the override in spec.overrides.")))
    when: str = attrs.field(default="", metadata=c(doc="The conditions that matched, summarised."))
    patches: str = attrs.field(default="", metadata=c(doc="What the override changed, summarised."))
    no_op: bool = attrs.field(default=False, metadata=c(doc=(
        "The override matched but changed nothing.")))


class DiagnoseStage(enum.StrEnum):
    """Where a diagnose run is."""

    SCREENING = "Screening"  # the partitioned groups run
    BISECTION = "Bisection"  # failed groups split in halves, each with known-good peers
    CONFIRMATION = "Confirmation"  # each suspect re-run with known-good peers
    CROSS_BOUNDARY = "CrossBoundary"  # halves pass alone: topology domain pairs tested
    COMPLETE = "Complete"


class StepOutcome(enum.StrEnum):
    """What one diagnose step's Job said about its suspects."""

    PENDING = "Pending"
    PASSED = "Passed"
    FAILED = "Failed"  # a genuine failure: the test or a threshold
    NODE_EVIDENCE = "NodeEvidence"  # the Job named broken nodes (blamed by the Job tier)
    NOT_JUDGED = "NotJudged"  # infrastructure abort, configuration, interrupt: no evidence


class StepResolution(enum.StrEnum):
    """What the diagnose run concluded from a finished step (and its children)."""

    CLEARED = "Cleared"  # passed: its suspects are known-good
    BISECTED = "Bisected"  # failed: split in halves (children)
    CONFIRMING = "Confirming"  # failed, too small to split: suspects confirmed one by one
    CONFIRMED = "Confirmed"  # a confirmation failed again: its suspects are Failed
    # A confirmation of several suspects together failed again (too few known-good peers to
    # test each alone): the failure is confirmed, the suspects Uncertified, none named.
    CONFIRMED_TOGETHER = "ConfirmedTogether"
    CROSSING = "Crossing"  # every child passed alone: domain pairs (children) tested
    LINK_FOUND = "LinkFound"  # a domain pair failed together: a bad link, no node blamed
    NOT_REPRODUCED = "NotReproduced"  # every child passed: suspects Uncertified
    NOT_JUDGED = "NotJudged"  # no evidence either way: suspects Uncertified
    NODE_EVIDENCE = "NodeEvidence"  # the Job tier named the broken nodes
    BUDGET_EXCEEDED = "BudgetExceeded"  # the next steps would pass the Job bound


@attrs.frozen(kw_only=True)
class DiagnoseStep:
    """One node of the bisection tree: a group run by one Job."""

    name: str = attrs.field(metadata=c(doc=(
        "Step name, also its group's name in status.groups (its Job's name derives from it).")))
    stage: DiagnoseStage = attrs.field(metadata=c(doc=(
        "Screening, Bisection, Confirmation or CrossBoundary.")))
    parent: str | None = attrs.field(default=None, metadata=c(doc=(
        "The step whose failure this step narrows.")))
    suspects: tuple[str, ...] = attrs.field(default=(), metadata=c(doc=(
        "Nodes under test.")))
    peers: tuple[str, ...] = attrs.field(default=(), metadata=c(doc=(
        "Known-good nodes added to keep the group size.")))
    domains: tuple[str, ...] = attrs.field(default=(), metadata=c(doc=(
        "Topology domains of the suspects (diagnose.topologyKey).")))
    job_name: str | None = attrs.field(default=None, metadata=c(doc="The step's Job."))
    outcome: StepOutcome = attrs.field(default=StepOutcome.PENDING, metadata=c(doc=(
        "Pending, Passed, Failed, NodeEvidence or NotJudged.")))
    resolution: StepResolution | None = attrs.field(default=None, metadata=c(doc=(
        "What the run concluded from the step and its children.")))


@attrs.frozen(kw_only=True)
class DiagnoseLink:
    """A bad link: two topology domains that fail together and pass apart."""

    domains: tuple[str, ...] = attrs.field(metadata=c(doc="The two domains."))
    step: str = attrs.field(metadata=c(doc="The step that failed on the pair."))


@attrs.frozen(kw_only=True)
class DiagnoseStatus:
    """A diagnose run: its stage, the bisection tree, the Jobs spent and what it found."""

    stage: DiagnoseStage = attrs.field(default=DiagnoseStage.SCREENING, metadata=c(doc=(
        "Stage of the last round planned.")))
    round: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Rounds planned after screening.")))
    jobs_spent: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Jobs created so far, re-runs included.")))
    job_budget: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "At most this many Jobs; steps past it are not run, their suspects Uncertified.")))
    steps: tuple[DiagnoseStep, ...] = attrs.field(
        default=(), metadata=c(list_map_keys=("name",), doc=(
            "The bisection tree, in the order the steps were planned.")))
    failed_nodes: tuple[str, ...] = attrs.field(default=(), metadata=c(doc=(
        "Nodes confirmed Failed.")))
    bad_links: tuple[DiagnoseLink, ...] = attrs.field(default=(), metadata=c(doc=(
        "Domain pairs that fail together and pass apart.")))
    uncertified_nodes: tuple[str, ...] = attrs.field(default=(), metadata=c(doc=(
        "Suspects the run could not judge (no evidence, not reproduced, budget).")))


@attrs.frozen(kw_only=True)
class OrchestrationStatus:
    """What discovery and partitioning found."""

    total_nodes: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Nodes that matched the target.")))
    nodes_per_job: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Nodes in each group.")))
    total_groups: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Number of groups.")))
    current_iteration: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Iteration now running, from 1.")))
    completed_iterations: int = attrs.field(
        default=0, metadata=c(minimum=0, int_format="int32", doc=(
            "Iterations finished.")))
    iteration_history: tuple[IterationRecord, ...] = attrs.field(default=(), metadata=c(doc=(
        "Outcome of every finished iteration.")))
    detected_platform: str | None = attrs.field(default=None, metadata=c(doc=(
        "Platform detected from the nodes (e.g. aws, oci).")))
    detected_gpu_architecture: str | None = attrs.field(
        default=None, metadata=c(json_name="detectedGPUArchitecture", doc=(
            "GPU architecture detected from the nodes (e.g. h100).")))
    excluded_nodes: tuple[str, ...] = attrs.field(default=(), metadata=c(doc=(
        "Target nodes left out of the groups.")))
    exclusion_reason: str | None = attrs.field(default=None, metadata=c(doc=(
        "Why nodes were left out.")))
    # Nodes that matched the target but were not certified (infra aborts, cancellations).
    uncertified_nodes: int = attrs.field(default=0, metadata=c(minimum=0, int_format="int32", doc=(
        "Target nodes that were not certified (infrastructure aborts, cancellations).")))
    applied_overrides: tuple[AppliedOverride, ...] = attrs.field(default=(), metadata=c(doc=(
        "Overrides that matched.")))
    placement: Placement | None = attrs.field(default=None, metadata=c(doc=(
        "Placement in effect: Pinned or Unpinned.")))
    diagnose: DiagnoseStatus | None = attrs.field(default=None, metadata=c(doc=(
        "The diagnose run (orchestration.diagnose): its stage, the bisection tree, the Jobs "
        "spent and what it found.")))


@attrs.frozen(kw_only=True)
class WorkflowStatus:
    """Observed state of a Workflow."""

    conditions: tuple[Condition, ...] = attrs.field(
        default=(), metadata=c(list_map_keys=("type",), doc=(
            "Latest observations of the object's state (InProgress, Succeeded, Failed and "
            "kind-specific types), keyed by type. CleanedUp (once terminal): True/"
            "WorkloadsReleased when every TrainJob of the run and its pods are gone; False/"
            "WorkloadsRemaining naming the Jobs that still hold workloads and why.")))
    phase: Phase | None = attrs.field(default=None, metadata=c(doc=(
        "One-word summary of the True condition: Pending, Running, Succeeded or Failed.")))
    observed_generation: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "The metadata.generation the status was computed from.")))
    namespace: str | None = attrs.field(default=None, metadata=c(doc=(
        "Namespace the Jobs and dependencies are created in.")))
    succeeded_nodes_ref: TypedLocalObjectReference | None = attrs.field(
        default=None, metadata=c(doc=(
            "ConfigMap listing the nodes that passed.")))
    failed_nodes_ref: TypedLocalObjectReference | None = attrs.field(default=None, metadata=c(doc=(
        "ConfigMap listing the nodes that failed.")))
    uncertified_nodes_ref: TypedLocalObjectReference | None = attrs.field(
        default=None, metadata=c(doc=(
            "ConfigMap listing the target nodes that could not be certified.")))
    verdict: Verdict | None = attrs.field(default=None, metadata=c(doc=(
        "Passed, Failed or Incomplete (some target nodes could not be certified).")))
    dependency_refs: tuple[DependencyRef, ...] = attrs.field(default=(), metadata=c(doc=(
        "Dependency objects created.")))
    orchestration: OrchestrationStatus | None = attrs.field(default=None, metadata=c(doc=(
        "What discovery and partitioning found, and iteration progress.")))
    groups: tuple[GroupStatus, ...] = attrs.field(
        default=(), metadata=c(list_map_keys=("name",), doc=(
            "Node groups and their current Jobs, keyed by name.")))


@attrs.frozen(kw_only=True)
class Workflow:
    """A CRE Workflow (``cre.dev/v1alpha1``, namespaced)."""

    KIND: ClassVar[str] = "Workflow"

    api_version: str = attrs.field(default=API_VERSION, metadata=c(doc="cre.dev/v1alpha1."))
    kind: str = attrs.field(default="Workflow", metadata=c(doc="Workflow."))
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta, metadata=c(doc=(
        "Standard object metadata.")))
    spec: WorkflowSpec = attrs.field(metadata=c(doc=(
        "What to run on which nodes, in groups and iterations.")))
    status: WorkflowStatus = attrs.field(factory=WorkflowStatus, metadata=c(doc=(
        "Progress, groups and verdict, written by the Workflow controller.")))
