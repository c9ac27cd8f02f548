"""The ``Certification`` kind: a list of catalog categories run against a node target.

Category options can be given once for all categories (inline in the spec) and per category;
a per-category value replaces the global one. Every option is optional here: defaults are
resolved by the catalog builder, which knows the entry. The whole spec is fixed at creation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from cre.api.common import (
    QUALIFIED_NAME,
    QUANTITY_SIZE,
    GangSchedulerSpec,
    RelativeThreshold,
    TargetSpec,
    TestScale,
    WorkloadMetadata,
    duration_field,
    threshold_values,
)
from cre.api.conditions import CategoryState, GroupPhase, Phase, Verdict
from cre.api.failurepolicy import FAILURE_POLICY_DOC, FailurePolicy
from cre.api.fields import c
from cre.api.job import IMAGE_PULL_GRACE_MAX, NodeHealthMonitor, NodeOutlier
from cre.api.labels import API_VERSION
from cre.api.meta import (
    DNS_LABEL,
    DNS_SUBDOMAIN,
    Condition,
    LocalObjectReference,
    NamespacedName,
    ObjectMeta,
    TypedLocalObjectReference,
)
from cre.api.nodecertification import NodeStatePolicy

RESOURCE_QUANTITY = r"^([+]?[0-9]+(\.[0-9]+)?|\.[0-9]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"


@attrs.frozen(kw_only=True)
class ResourceValues:
    """CPU and memory quantities."""

    cpu: str | None = attrs.field(
        default=None, metadata=c(max_length=32, pattern=RESOURCE_QUANTITY, doc=(
            "CPU quantity, e.g. 64 or 500m.")))
    memory: str | None = attrs.field(
        default=None, metadata=c(max_length=32, pattern=RESOURCE_QUANTITY, doc=(
            "Memory quantity, e.g. 500Gi.")))


@attrs.frozen(kw_only=True)
class CategoryResources:
    """CPU/memory of training containers; requests may not exceed limits."""

    limits: ResourceValues | None = attrs.field(default=None, metadata=c(doc=(
        "Upper bounds of the training containers' CPU and memory.")))
    requests: ResourceValues | None = attrs.field(default=None, metadata=c(doc=(
        "Guaranteed CPU and memory of the training containers; each may not exceed its limit.")))


def _int(minimum: int, *, doc: str) -> dict[str, Any]:
    return c(minimum=minimum, int_format="int32", doc=doc)


@attrs.frozen(kw_only=True)
class CategoryOptions:
    """Options of one category (or global defaults); ``None`` means "global or automatic"."""

    nodes_per_job: int | None = attrs.field(default=None, metadata=_int(1, doc=(
        "Nodes in each group; each group runs as one Job. Unset: all eligible nodes (one for "
        "intra-node tests).")))
    startup_stall_timeout_seconds: int | None = attrs.field(default=None, metadata=_int(1, doc=(
        "Seconds the workload may take from application start to its first training step before "
        "the Job is judged stalled; applies only with a stall multiplier. Copied to each group "
        "Job. Unset: the Job's default.")))
    gpus_per_node: int | None = attrs.field(default=None, metadata=_int(1, doc=(
        "GPUs requested per node. Unset: derived from the detected GPU architecture.")))
    nic_resource_name: str | None = attrs.field(
        default=None, metadata=c(max_length=253, pattern=QUALIFIED_NAME, doc=(
            "Extended resource name of the RDMA NICs (e.g. a device-plugin resource). Unset: "
            "detected from the nodes.")))
    resources: CategoryResources | None = attrs.field(default=None, metadata=c(doc=(
        "CPU and memory requests and limits laid over the main workload container's (its GPU "
        "and NIC counts stay the catalog entry's). Unset: the catalog entry's values.")))
    image: str | None = attrs.field(default=None, metadata=c(min_length=1, max_length=512, doc=(
        "Container image that replaces the catalog entry's image.")))
    image_pull_secrets: tuple[LocalObjectReference, ...] = attrs.field(default=(), metadata=c(doc=(
        "Secrets (in the Workflow namespace) every pod of the workload pulls its images with.")))
    repeat_count: int | None = attrs.field(default=None, metadata=_int(1, doc=(
        "How many times every group runs (the Workflow's iterations). Unset: 1.")))
    test_scale: TestScale | None = attrs.field(default=None, metadata=c(doc=(
        "How a communication test is spread over the nodes: intra-node, intra-rack, full-scale, "
        "or diagnose (screen in groups of ceil(sqrt(N)) unless nodesPerJob is set, then bisect "
        "every failed group down to the bad node or link across nvidia.com/gpu.clique domains)."
        " Unset: full-scale.")))
    min_group_size: int | None = attrs.field(default=None, metadata=_int(1, doc=(
        "testScale diagnose only: bisection stops splitting a failed group at this many "
        "suspects and confirms each one with known-good peers; no diagnose group runs with "
        "fewer nodes (the Workflow's orchestration.diagnose.minGroupSize). Unset: 2.")))
    topology_key: str | None = attrs.field(
        default=None, metadata=c(max_length=317, pattern=QUALIFIED_NAME, doc=(
            "testScale intra-rack and diagnose only: the node label whose value is a node's "
            "topology domain (intra-rack: one group per domain; diagnose: halves along domains, "
            "a failure seen only across two domains reported as a bad link). Nodes without "
            "the label have no domain (diagnose then halves by name). Unset: "
            "nvidia.com/gpu.clique.")))
    max_bytes: str | None = attrs.field(
        default=None, metadata=c(pattern=r"^[0-9]+(K|M|G|T)?$", doc=(
            "Largest message size of an NCCL test, in bytes with an optional K/M/G/T suffix "
            "(nccl-tests -e). Unset: the catalog entry's default.")))
    num_iterations: int | None = attrs.field(default=None, metadata=_int(1, doc=(
        "Iterations per message size of an NCCL test (nccl-tests -n). Unset: the catalog entry's"
        " default.")))
    num_cycles: int | None = attrs.field(default=None, metadata=_int(1, doc=(
        "Cycles of an NCCL test (nccl-tests -N). Unset: the catalog entry's default.")))
    thresholds: Mapping[str, str] | None = attrs.field(default=None, metadata=threshold_values(doc=(
        "Pass criteria: metric name (busBandwidthGBps, algBandwidthGBps, goodputRatio, "
        "avgTFLOPsPerGPU, avgStepTimeSec) to a CEL expression over `value`, e.g. `value >= 400`."
        " A whole map replaces the global one.")))
    relative_threshold: RelativeThreshold | None = attrs.field(default=None, metadata=c(doc=(
        "Fleet-relative rule on per-node busBW (per-node measurements such as nccl-loopback): "
        "flags nodes far below their peers as Outliers. Needs a busBandwidthGBps threshold (the "
        "absolute floor). Unset: no relative rule.")))
    max_concurrent: int | None = attrs.field(default=None, metadata=_int(0, doc=(
        "Jobs that may run at the same time within the category's Workflow; 0 means no limit. "
        "Unset: 0.")))
    timeout_per_job: str | None = attrs.field(default=None, metadata=duration_field(doc=(
        "Go duration (e.g. 90m) after which a running Job fails with JobTimedOut. Unset: the "
        "catalog entry's value.")))
    measurement_timeout: str | None = attrs.field(default=None, metadata=duration_field(doc=(
        "How long a Job waits for its measurement after the workload succeeded, a Go duration "
        "such as 5m. Unset: 5m.")))
    workload_metadata: WorkloadMetadata | None = attrs.field(default=None, metadata=c(doc=(
        "Labels put on the generated TrainJob (not on pods). Global and per-category labels "
        "merge per key.")))
    failure_policy: FailurePolicy | None = attrs.field(default=None, metadata=c(
        doc=FAILURE_POLICY_DOC))
    scheduling_stall_timeout: str | None = attrs.field(default=None, metadata=duration_field(doc=(
        "Go duration the workload's pods may stay unschedulable (the timeout clock paused) "
        "before the group's Job fails Platform/Unschedulable. Copied to each group Job. Unset: "
        "30m.")))
    image_pull_grace_seconds: int | None = attrs.field(
        default=None, metadata=c(minimum=1, maximum=IMAGE_PULL_GRACE_MAX, int_format="int32", doc=(
            "Seconds a container may wait on a failing image pull (ErrImagePull, "
            "ImagePullBackOff, InvalidImageName) before the group's Job fails "
            "Platform/ImagePullFailed. Copied to each group Job. Unset: 120.")))
    node_health_monitor: NodeHealthMonitor | None = attrs.field(default=None, metadata=c(doc=(
        "Which node signals mean broken hardware (a CEL rule, node conditions, taints, labels, "
        "allocatable GPUs falling); copied onto the category's Workflow and its Jobs. Unset: "
        "the Job tier's default (a node cordoned mid-run is broken).")))
    # Training entries (catalog entries with training settings, e.g. training/nemotron5-8b).
    enable_checkpoint: bool | None = attrs.field(default=None, metadata=c(doc=(
        "Training entries only: provision a ReadWriteMany PVC <workflow>-checkpoint, mount it "
        "where the entry saves and loads checkpoints, and restart a failed run from its last "
        "checkpoint (up to maxRestarts). Unset: false.")))
    max_restarts: int | None = attrs.field(default=None, metadata=_int(0, doc=(
        "Restarts from the last checkpoint a training Job may make; applies with "
        "enableCheckpoint. Unset: the catalog entry's value.")))
    storage_size: str | None = attrs.field(
        default=None, metadata=c(pattern=QUANTITY_SIZE, doc=(
            "Size of the checkpoint PVC, e.g. 10Ti. Unset: the catalog entry's value.")))
    storage_class_name: str | None = attrs.field(
        default=None, metadata=c(min_length=1, max_length=253, doc=(
            "StorageClass of the checkpoint PVC. Unset: the cluster default.")))
    max_steps: int | None = attrs.field(default=None, metadata=_int(1, doc=(
        "Training iterations of a training entry (Megatron --train-iters). Unset: the catalog "
        "entry's default.")))
    save_interval: int | None = attrs.field(default=None, metadata=_int(1, doc=(
        "Iterations between checkpoints of a training entry (Megatron --save-interval); "
        "applies with enableCheckpoint. Unset: the catalog entry's default.")))
    exit_duration_mins: int | None = attrs.field(default=None, metadata=_int(1, doc=(
        "Minutes after which a training entry stops cleanly (Megatron "
        "--exit-duration-in-mins). Unset: the catalog entry's default.")))


@attrs.frozen(kw_only=True)
class CertificationCategory:
    """One catalog entry to run, with its own options."""

    domain: str = attrs.field(metadata=c(min_length=1, max_length=63, pattern=DNS_LABEL, doc=(
        "Catalog domain of the entry, e.g. communication or training (`cre catalog` lists them).")))
    variant: str = attrs.field(metadata=c(min_length=1, max_length=63, pattern=DNS_LABEL, doc=(
        "Catalog variant within the domain, e.g. nccl-all-reduce.")))
    options: CategoryOptions | None = attrs.field(default=None, metadata=c(doc=(
        "Options of this category; every set option replaces the global one in the spec.")))


@attrs.frozen(kw_only=True)
class CertificationSpec(CategoryOptions):
    """What to certify. The inherited options are the global defaults of every category."""

    target: TargetSpec = attrs.field(factory=TargetSpec, metadata=c(doc=(
        "Which nodes to certify; every set filter applies. Unset: all GPU nodes.")))
    categories: tuple[CertificationCategory, ...] = attrs.field(
        metadata=c(min_items=1, max_items=64, doc=(
            "Catalog entries to run, one Workflow each, in the order given.")))
    gang_scheduler: GangSchedulerSpec | None = attrs.field(default=None, metadata=c(doc=(
        "Gang-schedule every category's pods with this scheduler (e.g. KAI). Unset: the default "
        "scheduler.")))
    deadline: str | None = attrs.field(default=None, metadata=duration_field(doc=(
        "Go duration after which the whole run ends (each category's Workflow gets what is left "
        "as its own deadline); unfinished groups are cancelled and their nodes Uncertified "
        "(DeadlineExceeded). Unset: no limit.")))
    max_nodes: int | None = attrs.field(
        default=None, metadata=c(minimum=1, int_format="int32", doc=(
        "At most this many nodes per category run (the first eligible ones by name); the rest "
        "are excluded. Unset: every eligible node.")))
    node_state: NodeStatePolicy | None = attrs.field(default=None, metadata=c(doc=(
        "What the results do to node state once the run ends: node labels, a taint on failed "
        "nodes, how long a pass stays valid. Every judged node gets its NodeCertification "
        "either way. Unset: no labels, no taint, passes valid 168h.")))
    priority_class_name: str | None = attrs.field(
        default=None, metadata=c(max_length=253, pattern=DNS_SUBDOMAIN, doc=(
            "PriorityClass of every pod of every category's workloads. Name a low, "
            "preemptible class (deploy/ ships cre-certification-low) so real work preempts "
            "certification pods; a preempted group ends with its nodes Uncertified, not "
            "Failed. Unset: the cluster's default priority.")))


@attrs.frozen(kw_only=True)
class GroupBandwidth:
    """The measured bus bandwidth of one group of a category, next to its outcome."""

    name: str = attrs.field(metadata=c(doc="Group name within the category's Workflow."))
    phase: GroupPhase = attrs.field(metadata=c(doc=(
        "Outcome of the group: Pending, Running, Succeeded or Failed.")))
    bus_bandwidth_gbps: str = attrs.field(
        metadata=c(json_name="busBandwidthGBps", pattern=r"^[0-9]+(\.[0-9]+)?$", doc=(
            "Bus bandwidth the group's Job measured, GB/s (max over message sizes).")))


@attrs.frozen(kw_only=True)
class CategoryStatus:
    """Progress of one category's Workflow."""

    domain: str = attrs.field(metadata=c(doc="Catalog domain of the category."))
    variant: str = attrs.field(metadata=c(doc="Catalog variant of the category."))
    workflow_ref: NamespacedName | None = attrs.field(default=None, metadata=c(doc=(
        "The Workflow running this category.")))
    status: CategoryState = attrs.field(default=CategoryState.PENDING, metadata=c(doc=(
        "Progress of the category: Pending, InProgress, Succeeded or Failed.")))
    verdict: Verdict | None = attrs.field(default=None, metadata=c(doc=(
        "Passed, Failed or Incomplete (some target nodes could not be certified).")))
    message: str | None = attrs.field(default=None, metadata=c(doc=(
        "Why the category is in its state, copied from its Workflow.")))
    succeeded_nodes_ref: TypedLocalObjectReference | None = attrs.field(
        default=None, metadata=c(doc=(
            "ConfigMap listing the nodes that passed this category.")))
    failed_nodes_ref: TypedLocalObjectReference | None = attrs.field(default=None, metadata=c(doc=(
        "ConfigMap listing the nodes that failed this category.")))
    uncertified_nodes_ref: TypedLocalObjectReference | None = attrs.field(
        default=None, metadata=c(doc=(
            "ConfigMap listing the target nodes this category could not certify (infrastructure "
            "aborts, cancellations).")))
    # The groups of the current iteration whose Job measured a bus bandwidth (GB/s).
    groups: tuple[GroupBandwidth, ...] = attrs.field(default=(), metadata=c(max_items=1024, doc=(
        "Groups of the current iteration whose Job measured a bus bandwidth, with their outcome.")))
    outliers: tuple[NodeOutlier, ...] = attrs.field(default=(), metadata=c(max_items=1024, doc=(
        "Nodes the fleet-relative rule flagged in this category (copied from its Workflow): "
        "busBW, the peers' median or fleet p10 it was compared with, the domain.")))


@attrs.frozen(kw_only=True)
class CertificationStatus:
    """Observed state of a Certification."""

    conditions: tuple[Condition, ...] = attrs.field(
        default=(), metadata=c(list_map_keys=("type",), doc=(
            "Latest observations of the object's state (InProgress, Succeeded, Failed and "
            "kind-specific types), keyed by type. CleanedUp (once terminal): True/"
            "WorkloadsReleased when every TrainJob of the run and its pods are gone; False/"
            "WorkloadsRemaining naming the Workflows that still hold workloads and why.")))
    phase: Phase | None = attrs.field(default=None, metadata=c(doc=(
        "One-word summary of the True condition: Pending, Running, Succeeded or Failed.")))
    observed_generation: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "The metadata.generation the status was computed from.")))
    category_statuses: tuple[CategoryStatus, ...] = attrs.field(default=(), metadata=c(doc=(
        "Progress and outcome of each category, in spec order.")))
    verdict: Verdict | None = attrs.field(default=None, metadata=c(doc=(
        "Passed when every category passed, Failed when one failed, Incomplete when nodes could "
        "not be certified.")))
    # "<passed>/<total>" categories, for `kubectl get certifications`.
    categories: str | None = attrs.field(default=None, metadata=c(doc=(
        "Categories passed out of the total, as passed/total (shown by kubectl get).")))
    # One printer-column cell for every category: a column's JSONPath over a list
    # (.spec.categories[*].variant) shows only its first value.
    variants: str | None = attrs.field(default=None, metadata=c(doc=(
        "Every category's variant, comma-separated in spec order (the Variants column of "
        "kubectl get -o wide).")))


@attrs.frozen(kw_only=True)
class Certification:
    """A CRE Certification (``cre.dev/v1alpha1``, namespaced). The spec is immutable."""

    KIND: ClassVar[str] = "Certification"

    api_version: str = attrs.field(default=API_VERSION, metadata=c(doc="cre.dev/v1alpha1."))
    kind: str = attrs.field(default="Certification", metadata=c(doc="Certification."))
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta, metadata=c(doc=(
        "Standard object metadata.")))
    spec: CertificationSpec = attrs.field(metadata=c(immutable=True, doc=(
        "What to certify: target nodes, catalog categories and their options. Cannot change "
        "after creation.")))
    status: CertificationStatus = attrs.field(factory=CertificationStatus, metadata=c(doc=(
        "Progress and verdict, written by the Certification controller.")))
