"""The ``Certification`` kind: a list of catalog categories run against a node target.

Category options can be given once for all categories (inline in the spec) and per category;
a per-category value replaces the global one. Every option is optional here: defaults are
resolved by the catalog builder, which knows the entry. The whole spec is fixed at creation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import attrs

from cre.api.common import (
    DURATION_FIELD,
    QUALIFIED_NAME,
    THRESHOLD_VALUES,
    GangSchedulerSpec,
    TargetSpec,
    TestScale,
    WorkloadMetadata,
)
from cre.api.conditions import CategoryState, GroupPhase, Phase, Verdict
from cre.api.failurepolicy import FailurePolicy
from cre.api.fields import Constraints, c
from cre.api.labels import API_VERSION
from cre.api.meta import (
    DNS_LABEL,
    Condition,
    LocalObjectReference,
    NamespacedName,
    ObjectMeta,
    TypedLocalObjectReference,
)

RESOURCE_QUANTITY = r"^([+]?[0-9]+(\.[0-9]+)?|\.[0-9]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"


@attrs.frozen(kw_only=True)
class ResourceValues:
    """CPU and memory quantities."""

    cpu: str | None = attrs.field(
        default=None, metadata=c(max_length=32, pattern=RESOURCE_QUANTITY)
    )
    memory: str | None = attrs.field(
        default=None, metadata=c(max_length=32, pattern=RESOURCE_QUANTITY)
    )


@attrs.frozen(kw_only=True)
class CategoryResources:
    """CPU/memory of training containers; requests may not exceed limits."""

    limits: ResourceValues | None = None
    requests: ResourceValues | None = None


def _int(minimum: int) -> dict[str, Constraints]:
    return c(minimum=minimum, int_format="int32")


@attrs.frozen(kw_only=True)
class CategoryOptions:
    """Options of one category (or global defaults); ``None`` means "global or automatic"."""

    nodes_per_job: int | None = attrs.field(default=None, metadata=_int(1))
    # Seconds a started workload may go without its first progress line before it counts as
    # stalled (the Job's startupStallTimeoutSeconds; unset: the Job's default).
    startup_stall_timeout_seconds: int | None = attrs.field(default=None, metadata=_int(1))
    gpus_per_node: int | None = attrs.field(default=None, metadata=_int(1))
    nic_resource_name: str | None = attrs.field(
        default=None, metadata=c(max_length=253, pattern=QUALIFIED_NAME)
    )
    # CPU / memory of the workload's main container (merged over the catalog's GPU counts).
    resources: CategoryResources | None = None
    image: str | None = attrs.field(default=None, metadata=c(min_length=1, max_length=512))
    # Secrets the workload's pods pull their images with (every pod: workers and launcher).
    image_pull_secrets: tuple[LocalObjectReference, ...] = ()
    repeat_count: int | None = attrs.field(default=None, metadata=_int(1))
    test_scale: TestScale | None = None
    max_bytes: str | None = attrs.field(default=None, metadata=c(pattern=r"^[0-9]+(K|M|G|T)?$"))
    num_iterations: int | None = attrs.field(default=None, metadata=_int(1))
    num_cycles: int | None = attrs.field(default=None, metadata=_int(1))
    thresholds: Mapping[str, str] | None = attrs.field(default=None, metadata=THRESHOLD_VALUES)
    max_concurrent: int | None = attrs.field(default=None, metadata=_int(0))
    timeout_per_job: str | None = attrs.field(default=None, metadata=DURATION_FIELD)
    measurement_timeout: str | None = attrs.field(default=None, metadata=DURATION_FIELD)
    workload_metadata: WorkloadMetadata | None = None
    failure_policy: FailurePolicy | None = None


@attrs.frozen(kw_only=True)
class CertificationCategory:
    """One catalog entry to run, with its own options."""

    domain: str = attrs.field(metadata=c(min_length=1, max_length=63, pattern=DNS_LABEL))
    variant: str = attrs.field(metadata=c(min_length=1, max_length=63, pattern=DNS_LABEL))
    options: CategoryOptions | None = None


@attrs.frozen(kw_only=True)
class CertificationSpec(CategoryOptions):
    """What to certify. The inherited options are the global defaults of every category."""

    target: TargetSpec = attrs.field(factory=TargetSpec)
    categories: tuple[CertificationCategory, ...] = attrs.field(
        metadata=c(min_items=1, max_items=64)
    )
    gang_scheduler: GangSchedulerSpec | None = None


@attrs.frozen(kw_only=True)
class GroupBandwidth:
    """The measured bus bandwidth of one group of a category, next to its outcome."""

    name: str
    phase: GroupPhase
    bus_bandwidth_gbps: str = attrs.field(metadata=c(json_name="busBandwidthGBps",
                                                     pattern=r"^[0-9]+(\.[0-9]+)?$"))


@attrs.frozen(kw_only=True)
class CategoryStatus:
    """Progress of one category's Workflow."""

    domain: str
    variant: str
    workflow_ref: NamespacedName | None = None
    status: CategoryState = CategoryState.PENDING
    verdict: Verdict | None = None
    message: str | None = None
    succeeded_nodes_ref: TypedLocalObjectReference | None = None
    failed_nodes_ref: TypedLocalObjectReference | None = None
    uncertified_nodes_ref: TypedLocalObjectReference | None = None
    # The groups of the current iteration whose Job measured a bus bandwidth (GB/s).
    groups: tuple[GroupBandwidth, ...] = attrs.field(default=(), metadata=c(max_items=1024))


@attrs.frozen(kw_only=True)
class CertificationStatus:
    """Observed state of a Certification."""

    conditions: tuple[Condition, ...] = attrs.field(default=(), metadata=c(list_map_keys=("type",)))
    phase: Phase | None = None
    observed_generation: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64")
    )
    category_statuses: tuple[CategoryStatus, ...] = ()
    verdict: Verdict | None = None
    # "<passed>/<total>" categories, for `kubectl get certifications`.
    categories: str | None = None


@attrs.frozen(kw_only=True)
class Certification:
    """A CRE Certification (``cre.dev/v1alpha1``, namespaced). The spec is immutable."""

    KIND: ClassVar[str] = "Certification"

    api_version: str = API_VERSION
    kind: str = "Certification"
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: CertificationSpec = attrs.field(metadata=c(immutable=True))
    status: CertificationStatus = attrs.field(factory=CertificationStatus)
