"""Spec fragments shared by several kinds: node targets, gang scheduling, workload labels.

They mirror the reference's TargetSpec, GangSchedulerSpec and WorkloadMetadata; the field
constraints declared here become both ``cre.api.validate`` checks and CRD schema keywords.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, ClassVar, Final

import attrs

from cre.api.durations import DURATION_MAX_LENGTH, MAX_DURATION
from cre.api.fields import CelRule, Constraints, c

# Go-style durations: "90s", "1h30m", "250ms".
DURATION: Final = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"
# Metadata of a duration field: the pattern, a length bound and a value bound (30 days).
DURATION_FIELD: Final = c(pattern=DURATION, max_length=DURATION_MAX_LENGTH,
                          max_duration=MAX_DURATION)
QUANTITY_SIZE: Final = r"^([0-9]+(\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei)?$"
QUALIFIED_NAME: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
LABEL_VALUE: Final = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
# Threshold metric keys the Job tier can measure (reference section 5.5).
THRESHOLD_KEYS: Final = frozenset(
    {"busBandwidthGBps", "algBandwidthGBps", "goodputRatio", "avgTFLOPsPerGPU", "avgStepTimeSec"}
)
# Every CEL expression a user writes (thresholds, nodeHealthMonitor) is at most this long, as
# the reference bounds nodeHealthMonitor: the CRD rejects longer ones at admission, and the CEL
# library is never handed an unbounded string (one of ~65,600 characters made it panic).
CEL_MAX_LENGTH: Final = 2048
# The values of a ``thresholds`` map are CEL expressions.
THRESHOLD_VALUES: Final = c(values=Constraints(max_length=CEL_MAX_LENGTH))


def duration_field(*, doc: str) -> dict[str, Any]:
    """``DURATION_FIELD`` with the field's description."""
    return c(pattern=DURATION, max_length=DURATION_MAX_LENGTH, max_duration=MAX_DURATION, doc=doc)


def threshold_values(*, doc: str) -> dict[str, Any]:
    """``THRESHOLD_VALUES`` with the field's description."""
    return c(values=Constraints(max_length=CEL_MAX_LENGTH), doc=doc)
# Label keys a user may not set through workloadMetadata.
RESERVED_LABEL_KEYS: Final = frozenset({"app.kubernetes.io/managed-by"})
RESERVED_LABEL_PREFIX: Final = "cre.dev/"


def is_reserved_label_key(key: str) -> bool:
    """Whether ``key`` is a label key CRE keeps for itself, which users may not set."""
    return key in RESERVED_LABEL_KEYS or key.startswith(RESERVED_LABEL_PREFIX)


def unreserved_label_key_cel(var: str) -> str:
    """The CEL test that the label key ``var`` is not reserved (``is_reserved_label_key``)."""
    keys = " && ".join(f"{var} != '{key}'" for key in sorted(RESERVED_LABEL_KEYS))
    return f"{keys} && !{var}.startsWith('{RESERVED_LABEL_PREFIX}')"


class NodeSelectorOperator(enum.StrEnum):
    """Operators of a node selector requirement CRE evaluates itself."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


class TaintEffect(enum.StrEnum):
    """Kubernetes taint effects."""

    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@attrs.frozen(kw_only=True)
class NodeSelectorRequirement:
    """``key operator values``; In/NotIn need values, Exists/DoesNotExist take none."""

    CEL_RULES: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            "(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)",
            "In and NotIn need values; Exists and DoesNotExist take none",
        ),
    )

    key: str = attrs.field(metadata=c(min_length=1, doc="Node label key."))
    operator: NodeSelectorOperator = attrs.field(metadata=c(doc=(
        "In, NotIn, Exists or DoesNotExist.")))
    values: tuple[str, ...] = attrs.field(default=(), metadata=c(doc=(
        "Label values; required for In and NotIn, empty for Exists and DoesNotExist.")))


@attrs.frozen(kw_only=True)
class TaintSelector:
    """A taint a target node must carry; matching tolerations go onto workload pods."""

    key: str = attrs.field(metadata=c(min_length=1, doc="Taint key the node must carry."))
    value: str | None = attrs.field(default=None, metadata=c(doc="Taint value. Unset: any value."))
    effect: TaintEffect | None = attrs.field(default=None, metadata=c(doc=(
        "NoSchedule, PreferNoSchedule or NoExecute. Unset: any effect.")))


@attrs.frozen(kw_only=True)
class TargetSpec:
    """Which nodes are candidates; every set filter applies (AND)."""

    node_selector: Mapping[str, str] = attrs.field(factory=dict, metadata=c(doc=(
        "Node labels that must all match (label key to value).")))
    match_expressions: tuple[NodeSelectorRequirement, ...] = attrs.field(
        default=(), metadata=c(doc=(
            "Node label requirements that must all hold.")))
    node_names: tuple[str, ...] = attrs.field(default=(), metadata=c(doc=(
        "Only these nodes (by name).")))
    taint_selectors: tuple[TaintSelector, ...] = attrs.field(default=(), metadata=c(doc=(
        "Taints a node must all carry; workload pods get matching tolerations. Cordoned nodes "
        "are excluded unless selected here.")))


@attrs.frozen(kw_only=True)
class GangSchedulerSpec:
    """Gang-schedule the workload's pods with KAI or Run:ai."""

    CEL_RULES: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            f"!has(self.queueLabelKey) || ({unreserved_label_key_cel('self.queueLabelKey')})",
            "queueLabelKey is reserved for CRE",
        ),
    )

    scheduler_name: str = attrs.field(metadata=c(min_length=1, doc=(
        "schedulerName given to the workload pods, e.g. kai-scheduler.")))
    queue: str = attrs.field(
        default="default-queue",
        metadata=c(
            max_length=63,
            pattern=r"^$|^[a-zA-Z0-9]([a-zA-Z0-9._-]*[a-zA-Z0-9])?$",
            doc=(
                "Scheduler queue the workload is submitted to."),
        ),
    )
    queue_label_key: str = attrs.field(
        default="kai.scheduler/queue", metadata=c(max_length=317, pattern=QUALIFIED_NAME, doc=(
            "Label key carrying the queue name on the workload (Run:ai: runai/queue).")))


@attrs.frozen(kw_only=True)
class WorkloadMetadata:
    """Labels put on the workload object (TrainJob), never on pods."""

    CEL_RULES: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            f"!has(self.labels) || self.labels.all(k, {unreserved_label_key_cel('k')})",
            "labels may not use keys reserved for CRE (app.kubernetes.io/managed-by, cre.dev/*)",
        ),
    )

    labels: Mapping[str, str] = attrs.field(factory=dict, metadata=c(max_properties=32, doc=(
        "Labels to put on the workload object; keys app.kubernetes.io/managed-by and cre.dev/* "
        "are reserved.")))


class Placement(enum.StrEnum):
    """Whether groups are pinned to named nodes (ADR-089)."""

    PINNED = "Pinned"
    UNPINNED = "Unpinned"


class TestScale(enum.StrEnum):
    """How a communication entry is spread over the target nodes."""

    __test__ = False  # not a pytest test class

    INTRA_NODE = "intra-node"
    INTRA_RACK = "intra-rack"
    DIAGNOSE = "diagnose"
    FULL_SCALE = "full-scale"


class RelativeAction(enum.StrEnum):
    """What a fleet-relative outlier does to its node."""

    REPORT = "Report"
    FAIL = "Fail"


class RelativeScope(enum.StrEnum):
    """What a fleet-relative rule compares: nodes within a per-node measurement, or the
    groups of a Workflow (one busBW each) with each other."""

    NODE = "Node"
    GROUP = "Group"


@attrs.frozen(kw_only=True)
class RelativeThreshold:
    """Fleet-relative rule on per-node busBW: a node far below its peers is an Outlier."""

    percent: int = attrs.field(default=80, metadata=c(minimum=1, maximum=100, int_format="int32",
                                                      doc=(
        "A node whose peak busBW is below this percentage of its reference (the median of its "
        "topology-domain peers, else the 10th percentile of every other measured node) is an "
        "Outlier.")))
    min_peers: int = attrs.field(default=4, metadata=c(minimum=1, int_format="int32", doc=(
        "Fewest peers a comparison needs: a domain with fewer falls back to the fleet's 10th "
        "percentile, and a measurement with fewer other measured nodes judges nobody.")))
    topology_key: str | None = attrs.field(
        default=None, metadata=c(max_length=317, pattern=QUALIFIED_NAME, doc=(
            "Node label whose value is a node's topology domain (e.g. "
            "nvidia.com/gpu.clique). Unset: every node is compared with the whole fleet.")))
    action: RelativeAction = attrs.field(default=RelativeAction.REPORT, metadata=c(doc=(
        "Report lists outliers in status.outliers and the report and changes no verdict; Fail "
        "also fails each outlier node (ThresholdViolation).")))
    scope: RelativeScope = attrs.field(default=RelativeScope.NODE, metadata=c(doc=(
        "Node compares each node of a per-node measurement with its peers (above). Group "
        "compares each group of the Workflow (its Job's busBW) with the median of the other "
        "groups, once every group of the iteration has finished (at least minPeers of them "
        "measured; topologyKey is not used): an outlier group's nodes are listed in "
        "status.outliers, and Fail fails the group (ThresholdViolation). Not on a Job.")))
