"""The ``ReportExportPolicy`` and ``ReportExport`` kinds: final Certification reports sent to a
webhook, durably and at least once.

A policy (namespaced, no status) selects the Certifications (or Workflows) of its namespace by
label and says where their report goes (``webhook``), what it holds (``content``), how failed
deliveries are retried (``retry``) and how long finished deliveries are kept (``retention``).
For each source that reaches a final verdict after the policy was created, the policy controller
creates one ``ReportExport``: the delivery record, carrying a frozen copy of those settings and
the source's uid. Its status says where the delivery stands (docs/design/023-report-export.md).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from typing import ClassVar, Final

import attrs

from cre.api.common import duration_field
from cre.api.fields import CelRule, c
from cre.api.labels import API_VERSION
from cre.api.meta import ObjectMeta

#: Label on a ReportExport and its snapshot ConfigMap: the policy that created the export.
POLICY_LABEL: Final = "cre.dev/report-export-policy"
#: Label on a snapshot ConfigMap: the ReportExport it holds the payload of.
EXPORT_LABEL: Final = "cre.dev/report-export"
#: The snapshot ConfigMap's key (gzip of the payload JSON).
SNAPSHOT_KEY: Final = "report.json.gz"
URL_PATTERN: Final = r"^https?://[^\s/?#]+[^\s]*$"


class ExportSourceKind(enum.StrEnum):
    """The kind of object whose report is exported."""

    CERTIFICATION = "Certification"
    WORKFLOW = "Workflow"  # a Workflow a user or a WorkloadRun runs: its one-category report


class ExportPhase(enum.StrEnum):
    """Where one delivery stands."""

    PENDING = "Pending"  # no payload snapshot yet
    DELIVERING = "Delivering"  # snapshot taken; attempts under way or scheduled
    SUSPENDED = "Suspended"  # the policy is suspended: no attempt until it is resumed
    DELIVERED = "Delivered"  # the receiver answered 2xx
    FAILED = "Failed"  # rejected, out of attempts, or the source or snapshot lost
    CANCELLED = "Cancelled"  # spec.cancel was set before the report was delivered


class ExportReason(enum.StrEnum):
    """Why the phase is what it is."""

    WAITING_FOR_SOURCE = "WaitingForSource"
    SOURCE_GONE = "SourceGone"
    SNAPSHOT_TAKEN = "SnapshotTaken"
    RETRY_SCHEDULED = "RetryScheduled"
    DELIVERED = "Delivered"
    REJECTED = "Rejected"
    RETRIES_EXHAUSTED = "RetriesExhausted"
    SNAPSHOT_LOST = "SnapshotLost"
    PAYLOAD_TOO_LARGE = "PayloadTooLarge"
    POLICY_SUSPENDED = "PolicySuspended"
    RESUMED = "Resumed"
    CANCELLED = "Cancelled"
    RETRY_DEADLINE_EXCEEDED = "RetryDeadlineExceeded"
    RETRY_REQUESTED = "RetryRequested"
    RETRY_NONCE_OBSERVED = "RetryNonceObserved"


@attrs.frozen(kw_only=True)
class SecretKeyRef:
    """A key of a Secret in the policy's namespace."""

    name: str = attrs.field(metadata=c(min_length=1, max_length=253, doc=(
        "Name of the Secret (in the policy's namespace).")))
    key: str = attrs.field(metadata=c(min_length=1, max_length=253, doc=(
        "Key of the Secret whose value is the bearer token.")))


@attrs.frozen(kw_only=True)
class WebhookTarget:
    """Where reports are POSTed."""

    url: str = attrs.field(metadata=c(pattern=URL_PATTERN, max_length=2048, doc=(
        "http(s) URL the report is POSTed to (JSON body, Idempotency-Key header, redirects "
        "not followed).")))
    token_secret_ref: SecretKeyRef | None = attrs.field(default=None, metadata=c(doc=(
        "Secret key holding a bearer token sent as 'Authorization: Bearer <token>'. The "
        "manager reads only this Secret, live, once per attempt; grant it with a Role naming "
        "the Secret (docs/guide/report-export.md).")))
    timeout: str = attrs.field(default="10s", metadata=duration_field(doc=(
        "Go duration one POST may take before it counts as a failed attempt.")))


@attrs.frozen(kw_only=True)
class ExportContent:
    """Which parts of the report are sent."""

    verdict: bool = attrs.field(default=True, metadata=c(doc=(
        "The Certification's phase, verdict, reason and summary (result, categories passed, "
        "failed nodes).")))
    per_node: bool = attrs.field(default=True, metadata=c(doc=(
        "Per category, the groups and every node's verdict and reason.")))
    measurements: bool = attrs.field(default=True, metadata=c(doc=(
        "Measured bandwidth: per group the busBW per message size and peak, per node its "
        "busBW, per category its threshold.")))


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """How failed deliveries are retried: exponential backoff from backoffBase, doubling per
    failed attempt, capped at backoffMax (a receiver's Retry-After may ask for longer), within
    maxAttempts and maxElapsedTime per delivery cycle."""

    CEL_RULES: ClassVar[tuple[CelRule, ...]] = (
        CelRule("duration(self.backoffMax) >= duration(self.backoffBase)",
                "backoffMax must not be shorter than backoffBase"),
    )

    max_attempts: int = attrs.field(default=10, metadata=c(minimum=1, maximum=1000, doc=(
        "Attempts before the delivery is Failed (RetriesExhausted).")))
    backoff_base: str = attrs.field(default="10s", metadata=duration_field(doc=(
        "Go duration to wait after the first failed attempt.")))
    backoff_max: str = attrs.field(default="15m", metadata=duration_field(doc=(
        "Go duration the backoff between attempts never exceeds (a receiver's Retry-After "
        "asking for longer is honoured, within maxElapsedTime).")))
    max_elapsed_time: str = attrs.field(default="24h", metadata=duration_field(doc=(
        "Go duration a delivery cycle may last, from its first attempt (or from the "
        "retryNonce change that started it); an attempt that would fall later is not made "
        "and the export is Failed (RetryDeadlineExceeded). Suspended time counts.")))


@attrs.frozen(kw_only=True)
class RetentionPolicy:
    """How long a finished ReportExport is kept once its Certification is gone (while the
    Certification exists its export stays: deleting it would send the report again)."""

    delivered: str = attrs.field(default="168h", metadata=duration_field(doc=(
        "Go duration a Delivered export is kept after delivery.")))
    failed: str = attrs.field(default="720h", metadata=duration_field(doc=(
        "Go duration a Failed export is kept after it failed.")))


@attrs.frozen(kw_only=True)
class ReportExportPolicySpec:
    """Which Certifications are exported, where to, what, with which retries and retention."""

    kind: ExportSourceKind = attrs.field(default=ExportSourceKind.CERTIFICATION, metadata=c(
        doc="Whether Certifications or Workflows of the policy's namespace are exported."))
    selector: Mapping[str, str] = attrs.field(factory=dict, metadata=c(max_properties=32, doc=(
        "Labels an object of that kind in the policy's namespace must carry to be exported "
        "(all of them); empty selects every one.")))
    webhook: WebhookTarget = attrs.field(metadata=c(doc="The receiver."))
    content: ExportContent = attrs.field(factory=ExportContent, metadata=c(doc=(
        "Which parts of the report are sent.")))
    retry: RetryPolicy = attrs.field(factory=RetryPolicy, metadata=c(doc=(
        "How failed deliveries are retried.")))
    retention: RetentionPolicy = attrs.field(factory=RetentionPolicy, metadata=c(doc=(
        "How long finished exports are kept once their Certification is gone.")))
    suspend: bool = attrs.field(default=False, metadata=c(doc=(
        "While true, create no new exports and make no attempt of the exports under way "
        "(phase Suspended; their snapshots are still taken). Set back to false, they resume "
        "where they stopped, under the same key.")))


@attrs.frozen(kw_only=True)
class ReportExportPolicy:
    """A CRE ReportExportPolicy (``cre.dev/v1alpha1``, namespaced)."""

    KIND: ClassVar[str] = "ReportExportPolicy"

    api_version: str = attrs.field(default=API_VERSION, metadata=c(doc="cre.dev/v1alpha1."))
    kind: str = attrs.field(default="ReportExportPolicy", metadata=c(doc="ReportExportPolicy."))
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta, metadata=c(doc=(
        "Standard object metadata.")))
    spec: ReportExportPolicySpec = attrs.field(metadata=c(doc=(
        "What to export, where to and how.")))


@attrs.frozen(kw_only=True)
class ExportSourceRef:
    """The Certification or Workflow a ReportExport reports on."""

    kind: ExportSourceKind = attrs.field(default=ExportSourceKind.CERTIFICATION, metadata=c(
        doc="Certification or Workflow."))
    name: str = attrs.field(metadata=c(min_length=1, max_length=253, doc=(
        "Name of the source (in the export's namespace).")))
    uid: str = attrs.field(metadata=c(min_length=1, doc=(
        "UID of the source: a same-named replacement is another source.")))


@attrs.frozen(kw_only=True)
class PolicyRef:
    """The policy that created a ReportExport."""

    name: str = attrs.field(metadata=c(min_length=1, max_length=253, doc="Policy name."))
    uid: str = attrs.field(default="", metadata=c(doc="Policy UID."))


@attrs.frozen(kw_only=True)
class ReportExportSpec:
    """One delivery: the source and the policy's settings, frozen when it was created, and the
    two things a user may change, ``cancel`` (one way: it cannot be unset) and
    ``retryNonce``."""

    CEL_RULES: ClassVar[tuple[CelRule, ...]] = (
        CelRule("!has(oldSelf.cancel) || !oldSelf.cancel || (has(self.cancel) && self.cancel)",
                "cancel cannot be unset once set: a cancelled delivery stays cancelled"),
    )

    source: ExportSourceRef = attrs.field(metadata=c(immutable=True, doc=(
        "The Certification or Workflow reported on. Cannot change after creation.")))
    policy_ref: PolicyRef = attrs.field(metadata=c(immutable=True, doc=(
        "The policy that created the export. Cannot change after creation.")))
    webhook: WebhookTarget = attrs.field(metadata=c(immutable=True, doc=(
        "The receiver. Cannot change after creation.")))
    content: ExportContent = attrs.field(factory=ExportContent, metadata=c(
        immutable=True, presence_immutable=True, doc=(
            "Which parts of the report are sent. Cannot change after creation.")))
    retry: RetryPolicy = attrs.field(factory=RetryPolicy, metadata=c(
        immutable=True, presence_immutable=True, doc=(
            "How failed deliveries are retried. Cannot change after creation.")))
    retention: RetentionPolicy = attrs.field(factory=RetentionPolicy, metadata=c(
        immutable=True, presence_immutable=True, doc=(
            "How long the export is kept once finished and its Certification is gone. Cannot "
            "change after creation.")))
    cancel: bool = attrs.field(default=False, metadata=c(doc=(
        "Set to true to stop the delivery: no further attempt is made and the export ends "
        "Cancelled (kept as the record that this report is not to be sent; deleting the "
        "export instead would make the policy send the report again). No effect once the "
        "export is Delivered or Failed, except that a Failed export is then not retried on a "
        "retryNonce change. Cannot be set back to false.")))
    retry_nonce: str | None = attrs.field(default=None, metadata=c(max_length=128, doc=(
        "Any new value starts a new delivery cycle of a Failed export: cycleAttempts, the "
        "backoff and the maxElapsedTime window restart, attempts keeps counting, the same "
        "snapshot is sent under the same Idempotency-Key. On an export that is not Failed "
        "(or is cancelled) the value is only recorded in status.observedRetryNonce.")))


@attrs.frozen(kw_only=True)
class ReportExportStatus:
    """Where the delivery stands."""

    phase: ExportPhase = attrs.field(default=ExportPhase.PENDING, metadata=c(doc=(
        "Pending, Delivering, Suspended, Delivered, Failed or Cancelled.")))
    reason: ExportReason | None = attrs.field(default=None, metadata=c(doc=(
        "Why the phase is what it is.")))
    message: str | None = attrs.field(default=None, metadata=c(max_length=1024, doc=(
        "A sentence about the last step.")))
    snapshot_ref: str | None = attrs.field(default=None, metadata=c(doc=(
        "The ConfigMap holding the payload (key report.json.gz), owned by the export.")))
    payload_digest: str | None = attrs.field(default=None, metadata=c(doc=(
        "sha256:<hex> of the payload bytes.")))
    payload_bytes: int | None = attrs.field(default=None, metadata=c(minimum=0, doc=(
        "Size of the payload JSON, bytes.")))
    idempotency_key: str | None = attrs.field(default=None, metadata=c(doc=(
        "The Idempotency-Key header of every attempt: a digest of the source uid and the "
        "payload, the same across retries and manager restarts.")))
    attempts: int = attrs.field(default=0, metadata=c(minimum=0, doc=(
        "Attempts made so far, over every delivery cycle.")))
    cycle_attempts: int = attrs.field(default=0, metadata=c(minimum=0, doc=(
        "Attempts made in the current delivery cycle (bounded by retry.maxAttempts).")))
    cycle_started_at: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the current delivery cycle started (its first attempt, or the retryNonce "
        "change); retry.maxElapsedTime counts from here.")))
    observed_retry_nonce: str | None = attrs.field(default=None, metadata=c(doc=(
        "The spec.retryNonce the controller last acted on.")))
    last_attempt_at: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the last attempt ended.")))
    next_attempt_at: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the next attempt is due.")))
    last_http_status: int | None = attrs.field(default=None, metadata=c(doc=(
        "HTTP status of the last attempt (unset: no answer).")))
    last_error: str | None = attrs.field(default=None, metadata=c(max_length=1024, doc=(
        "What went wrong in the last attempt (never the token).")))
    delivered_at: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the receiver accepted the report.")))
    finished_at: datetime | None = attrs.field(default=None, metadata=c(doc=(
        "When the export became Delivered, Failed or Cancelled (retention counts from "
        "here).")))


@attrs.frozen(kw_only=True)
class ReportExport:
    """A CRE ReportExport (``cre.dev/v1alpha1``, namespaced): one delivery of one report."""

    KIND: ClassVar[str] = "ReportExport"

    api_version: str = attrs.field(default=API_VERSION, metadata=c(doc="cre.dev/v1alpha1."))
    kind: str = attrs.field(default="ReportExport", metadata=c(doc="ReportExport."))
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta, metadata=c(doc=(
        "Standard object metadata (owned by the policy).")))
    spec: ReportExportSpec = attrs.field(metadata=c(doc=(
        "The source and the frozen settings (immutable), cancel and retryNonce.")))
    status: ReportExportStatus = attrs.field(factory=ReportExportStatus, metadata=c(doc=(
        "Where the delivery stands, written by the ReportExport controller.")))
