"""The ``NodeCertification`` kind: what CRE last learned about one node, per category.

One object per node, cluster-scoped, named after the node and owned by nothing (a Certification
that is deleted takes its results with it, the node's record stays). The NodeCertification
controller folds every terminal Certification's per-node results into it; the opt-in node
labels and taint are derived from it (docs/design/020-node-certification.md).
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import ClassVar

import attrs

from cre.api.common import duration_field
from cre.api.fields import c
from cre.api.labels import API_VERSION
from cre.api.meta import ObjectMeta

#: How long a pass stays valid when the Certification does not say (7 days).
DEFAULT_VALID_FOR = "168h"


class NodeResult(enum.StrEnum):
    """One category's result on one node."""

    PASSED = "Passed"
    FAILED = "Failed"
    # Not judged: the cluster took the node away (an infrastructure abort, a cancellation).
    UNCERTIFIED = "Uncertified"


class NodeState(enum.StrEnum):
    """The node's state over every category it has evidence for."""

    PASSED = "Passed"  # every category with evidence passed, and every pass is still valid
    FAILED = "Failed"  # some category's latest evidence is a failure
    EXPIRED = "Expired"  # no failure, but some pass is past its validUntil
    UNCERTIFIED = "Uncertified"  # no evidence yet, only Uncertified results


@attrs.frozen(kw_only=True)
class NodeStatePolicy:
    """What a Certification's results do to node state (``spec.nodeState``)."""

    labels: bool = attrs.field(default=False, metadata=c(doc=(
        "Label every judged node cre.dev/certification=passed|failed|expired and "
        "cre.dev/certified-until=<validUntil, UTC, as YYYY-MM-DDTHH.MM.SSZ>. Uncertified results "
        "change no label.")))
    taint: bool = attrs.field(default=False, metadata=c(doc=(
        "Taint nodes whose state is Failed with cre.dev/certification-failed:NoSchedule. The "
        "taint is removed once the node is no longer Failed, whichever Certification judges "
        "it.")))
    max_tainted: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int32", doc=(
            "Blast-radius breaker: at most this many nodes carry CRE's taint at once; past it "
            "no more are tainted (a Warning event on the Certification names them). Unset: no "
            "absolute cap.")))
    max_tainted_percent: int | None = attrs.field(
        default=None, metadata=c(minimum=0, maximum=100, int_format="int32", doc=(
            "Blast-radius breaker: at most this percentage of the GPU nodes (rounded down) "
            "carry CRE's taint at once. Unset: no percentage cap.")))
    valid_for: str | None = attrs.field(default=None, metadata=duration_field(doc=(
        "Go duration a pass stays valid (at most 720h); the NodeCertification's validUntil. "
        "Unset: 168h (7 days).")))


@attrs.frozen(kw_only=True)
class CertificationRef:
    """The Certification a result comes from."""

    namespace: str = attrs.field(metadata=c(doc="Namespace of the Certification."))
    name: str = attrs.field(metadata=c(doc="Name of the Certification."))
    uid: str = attrs.field(default="", metadata=c(doc="UID of the Certification."))


@attrs.frozen(kw_only=True)
class CategoryResult:
    """The latest result of one catalog category on the node."""

    domain: str = attrs.field(metadata=c(doc="Catalog domain of the category."))
    variant: str = attrs.field(metadata=c(doc="Catalog variant of the category."))
    result: NodeResult = attrs.field(metadata=c(doc="Passed, Failed or Uncertified."))
    time: datetime = attrs.field(metadata=c(doc=(
        "When the Certification that judged the node ended.")))
    certification: CertificationRef = attrs.field(metadata=c(doc=(
        "The Certification the result comes from.")))
    valid_until: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "Until when a pass counts (time + the Certification's nodeState.validFor); unset "
        "unless Passed.")))
    bus_bandwidth_gbps: str | None = attrs.field(
        default=None, metadata=c(json_name="busBandwidthGBps", pattern=r"^[0-9]+(\.[0-9]+)?$",
                                 doc="Bus bandwidth the node's group measured, GB/s."))
    threshold_met: bool | None = attrs.field(default=None, metadata=c(doc=(
        "Whether the measured bandwidth met the category's thresholds (unset: not "
        "measured).")))
    failure_scope: str | None = attrs.field(default=None, metadata=c(doc=(
        "Failure class scope of a Failed or Uncertified result (Node, Job, Platform, ...).")))
    reason: str | None = attrs.field(default=None, metadata=c(doc=(
        "Failure class reason of a Failed or Uncertified result.")))
    message: str | None = attrs.field(default=None, metadata=c(max_length=1024, doc=(
        "What the failure record says.")))
    last_pass_time: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When a Certification that passed the node in this category last ended, kept when a "
        "later run failed it (unset: never passed).")))


@attrs.frozen(kw_only=True)
class NodeCertificationSpec:
    """Which node the record is about."""

    node_name: str = attrs.field(metadata=c(min_length=1, max_length=253, doc=(
        "Name of the node (the object's own name).")))


@attrs.frozen(kw_only=True)
class NodeCertificationStatus:
    """The node's results, per category, and the state they add up to."""

    state: NodeState = attrs.field(default=NodeState.UNCERTIFIED, metadata=c(doc=(
        "Passed, Failed, Expired or Uncertified, over every category with evidence.")))
    categories: tuple[CategoryResult, ...] = attrs.field(default=(), metadata=c(
        max_items=64, doc="Latest result of each category, sorted by domain and variant."))
    categories_passed: str | None = attrs.field(default=None, metadata=c(doc=(
        "Categories whose latest result is a valid pass, out of those with a result, as "
        "passed/total (shown by kubectl get).")))
    valid_until: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "The earliest validUntil of the passed categories.")))
    last_certification: CertificationRef | None = attrs.field(default=None, metadata=c(doc=(
        "The Certification whose results were folded in last.")))


@attrs.frozen(kw_only=True)
class NodeCertification:
    """A CRE NodeCertification (``cre.dev/v1alpha1``, cluster-scoped, one per node)."""

    KIND: ClassVar[str] = "NodeCertification"

    api_version: str = attrs.field(default=API_VERSION, metadata=c(doc="cre.dev/v1alpha1."))
    kind: str = attrs.field(default="NodeCertification", metadata=c(doc="NodeCertification."))
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta, metadata=c(doc=(
        "Standard object metadata (cluster-scoped; the name is the node's).")))
    spec: NodeCertificationSpec = attrs.field(metadata=c(doc="The node this record is about."))
    status: NodeCertificationStatus = attrs.field(
        factory=NodeCertificationStatus, metadata=c(doc=(
            "The node's latest results, written by the NodeCertification controller.")))
