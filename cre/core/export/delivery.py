"""One ReportExport's next step: snapshot the payload, attempt a delivery, or wait.

:func:`reconcile_reportexport` is the whole life of a delivery, written as rules:

1. **Snapshot first.** Before any attempt the payload is built from the Certification and its
   Workflows, Jobs and measurements (:mod:`cre.core.export.payload`) and stored, gzipped, in a
   ConfigMap the export owns; the status records its digest and the Idempotency-Key (phase
   Delivering); a report over :data:`MAX_SNAPSHOT_BYTES` compressed fails it
   (``PayloadTooLarge``). Every attempt sends those bytes, so what is sent never changes after the
   verdict, even when the Jobs are cleaned up or the manager restarts. A Certification missing
   from the cache is read live first (``ConfirmAbsent``); gone (or replaced: another uid) it
   fails the export, ``SourceGone``.
2. **Attempt when due.** At or after ``nextAttemptAt`` the plan asks the shell to POST the
   snapshot (``DeliverReport``); the answer (:class:`Attempt`) comes back in the Observation.
   A snapshot that is missing (read live first) or whose bytes do not match the digest fails
   the export, ``SnapshotLost``: a different payload would carry a different key.
3. **Judge the answer.** 2xx: Delivered. 408, 425, 429, 5xx or no answer at all (a refused
   connection, a timeout, an unreadable token Secret): retried after
   ``min(backoffBase * 2^(n-1), backoffMax)`` (``n``: the attempts of this cycle), or after the
   receiver's ``Retry-After`` when it asks for longer (the reference honours it past
   ``backoffMax``: a receiver that says when it can take the report knows best), until
   ``maxAttempts`` attempts of the cycle were made (then Failed, ``RetriesExhausted``) or the
   next attempt would fall past ``maxElapsedTime`` after the cycle started (then Failed at
   once, ``RetryDeadlineExceeded``: no wait that can only end in failure). Anything else (a
   3xx: redirects are not followed, a 4xx): Failed, ``Rejected``; sending the same body again
   would get the same answer.

4. **Suspend pauses, cancel stops.** While the export's policy is suspended no attempt is made:
   the phase is Suspended (the snapshot is still taken first; the attempts made, the key and
   ``nextAttemptAt`` are kept) until the policy is resumed, when the delivery goes on where it
   stopped (at once when the wait it was serving is over). The cycle's ``maxElapsedTime`` keeps
   running while suspended. ``spec.cancel`` ends the export Cancelled before anything else is
   done; an attempt already on the wire is not called back.
5. **A new retryNonce starts a new cycle of a Failed export.** ``cycleAttempts``, the backoff
   and the elapsed window restart at the change (``cycleStartedAt`` is then), ``attempts``
   keeps counting, the snapshot and its key are the same (a receiver that took the report
   before deduplicates it). On a Delivered or Cancelled export, a Failed one whose ``cancel``
   is set, or one still under way, the nonce is only recorded (``observedRetryNonce``) and the
   message says so. Each transition (suspended, resumed, cancelled, a new cycle, the end) is
   one Event.

Delivery is at least once: an attempt whose answer is lost (the receiver took the report, the
manager stopped before writing the status) is made again with the same key, which is how the
receiver recognises it. Delivered, Failed and Cancelled are final (a Failed one until a new
retryNonce).
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import attrs

from cre.api import labels as L
from cre.api.durations import MAX_DURATION_SECONDS, duration_seconds
from cre.api.reportexport import (
    EXPORT_LABEL,
    SNAPSHOT_KEY,
    ExportPhase,
    ExportReason,
    ReportExport,
    ReportExportStatus,
    RetryPolicy,
)
from cre.core.certification.report import Snapshot
from cre.core.common.plan import (
    ConfirmAbsent,
    Create,
    DeliverReport,
    EventSeverity,
    EventSpec,
    Feedback,
    Plan,
)
from cre.core.export.payload import (
    build_payload,
    compress,
    decompress,
    digest,
    idempotency_key,
)

FINAL: Final = frozenset({ExportPhase.DELIVERED, ExportPhase.FAILED, ExportPhase.CANCELLED})
#: The largest snapshot (gzip bytes) an export keeps: a ConfigMap holds at most 1 MiB and
#: ``binaryData`` is base64 (4/3), so 512 KiB leaves room; the reference's bound too.
MAX_SNAPSHOT_BYTES: Final = 512 * 1024
#: HTTP statuses worth another attempt (besides no answer at all).
RETRYABLE: Final = frozenset({408, 425, 429})

ReportExportPlan = Plan[ReportExportStatus]


@attrs.frozen(kw_only=True)
class Attempt:
    """The outcome of one POST: the HTTP status (``None``: no answer), when it went wrong a
    sentence that never holds the token (the shell redacts it), and the seconds the receiver
    asked to be left alone (its ``Retry-After``)."""

    http_status: int | None
    error: str | None = None
    retry_after: float | None = None

    @property
    def accepted(self) -> bool:
        return self.http_status is not None and 200 <= self.http_status < 300

    @property
    def retryable(self) -> bool:
        code = self.http_status
        return code is None or code in RETRYABLE or 500 <= code < 600

    def describe(self) -> str:
        if self.http_status is None:
            return self.error or "no answer"
        said = f"HTTP {self.http_status}"
        return f"{said}: {self.error}" if self.error else said


@attrs.frozen(kw_only=True)
class ReportExportObservation:
    """The export's source (its Certification, that uid, and the objects under it; ``None``
    when not cached) and the snapshot ConfigMap's gzip bytes (``None`` when not cached);
    ``attempt``: the answer to this pass's ``DeliverReport``; ``suspended``: the export's
    policy (that uid) is suspended."""

    source: Snapshot | None = None
    snapshot: bytes | None = None
    attempt: Attempt | None = None
    suspended: bool = False
    feedback: Feedback = attrs.field(factory=Feedback)


def _seconds(text: str) -> float:
    try:
        return min(duration_seconds(text), MAX_DURATION_SECONDS)
    except ValueError:
        return MAX_DURATION_SECONDS


def backoff_seconds(retry: RetryPolicy, attempts: int) -> float:
    """The wait after the ``attempts``-th failed attempt: the base doubled per earlier failure,
    never over the cap."""
    base, cap = _seconds(retry.backoff_base), _seconds(retry.backoff_max)
    return min(base * 2.0 ** min(max(attempts - 1, 0), 64), cap)


def snapshot_name(export: ReportExport) -> str:
    """The ConfigMap holding the export's payload."""
    return f"{export.metadata.name}-report"


def snapshot_manifest(export: ReportExport, blob: bytes) -> dict[str, Any]:
    """The snapshot ConfigMap holding ``blob`` (the payload's gzip, base64 in ``binaryData``),
    owned by the export so it goes with it."""
    meta = export.metadata
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": snapshot_name(export), "namespace": meta.namespace,
            "labels": {L.MANAGED_BY: L.MANAGED_BY_VALUE, EXPORT_LABEL: meta.name},
            "ownerReferences": [{"apiVersion": L.API_VERSION, "kind": ReportExport.KIND,
                                 "name": meta.name, "uid": meta.uid, "controller": True}],
        },
        "binaryData": {SNAPSHOT_KEY: base64.b64encode(blob).decode()},
    }


_ENDS: Final = {ExportReason.DELIVERED: ExportPhase.DELIVERED,
                ExportReason.CANCELLED: ExportPhase.CANCELLED}


def _finish(export: ReportExport, status: ReportExportStatus, now: datetime, *,
            reason: ExportReason, message: str,
            delivered_at: datetime | None = None) -> ReportExportPlan:
    phase = _ENDS.get(reason, ExportPhase.FAILED)
    new = attrs.evolve(status, phase=phase, reason=reason, message=message[:1024],
                       finished_at=now, next_attempt_at=None, delivered_at=delivered_at,
                       observed_retry_nonce=export.spec.retry_nonce)
    severity = EventSeverity.WARNING if phase == ExportPhase.FAILED else EventSeverity.NORMAL
    return Plan(resource_version=export.metadata.resource_version or "", status=new,
                events=(EventSpec(type=severity, reason=str(reason), message=message),))


def _snapshot(export: ReportExport, obs: ReportExportObservation,
              now: datetime) -> ReportExportPlan:
    spec, rv = export.spec, export.metadata.resource_version or ""
    if obs.source is None:
        ask = ConfirmAbsent(kind=spec.source.kind, name=spec.source.name)
        if not obs.feedback.has(ask):
            return Plan(resource_version=rv, asks=(ask,))
        return _finish(export, export.status, now, reason=ExportReason.SOURCE_GONE, message=(
            f"{spec.source.kind} {spec.source.name} (uid {spec.source.uid}) is gone; there is "
            "no report to send"))
    payload = build_payload(obs.source, source=spec.source, content=spec.content)
    blob = compress(payload)
    if len(blob) > MAX_SNAPSHOT_BYTES:
        return _finish(export, export.status, now, reason=ExportReason.PAYLOAD_TOO_LARGE,
                       message=(f"the report is {len(payload)} bytes, {len(blob)} compressed; "
                                f"at most {MAX_SNAPSHOT_BYTES} compressed can be kept (turn "
                                "off content.perNode or content.measurements)"))
    cm = snapshot_manifest(export, blob)
    status = attrs.evolve(
        export.status, phase=ExportPhase.DELIVERING, reason=ExportReason.SNAPSHOT_TAKEN,
        message=f"report snapshot taken ({len(payload)} bytes); delivering",
        snapshot_ref=snapshot_name(export), payload_digest=digest(payload),
        payload_bytes=len(payload), idempotency_key=idempotency_key(spec.source.uid, payload),
        next_attempt_at=now)
    return Plan(resource_version=rv, status=status, requeue_after=0.0, creates=(Create(
        api_version="v1", kind="ConfigMap", namespace=export.metadata.namespace or "",
        name=snapshot_name(export), body=cm),))


def _at(when: datetime | None) -> str:
    return when.isoformat() if when is not None else "its first attempt"


def _deadline(retry: RetryPolicy, status: ReportExportStatus) -> datetime:
    """When the current cycle's ``maxElapsedTime`` runs out (the far future before its first
    attempt)."""
    if status.cycle_started_at is None:
        return datetime.max.replace(tzinfo=UTC)
    return status.cycle_started_at + timedelta(seconds=_seconds(retry.max_elapsed_time))


def _nonce(export: ReportExport, now: datetime) -> ReportExportPlan:
    """An export whose ``spec.retryNonce`` is new: a Failed one (not cancelled) starts a new
    delivery cycle; any other (finished or still under way) only records the nonce."""
    st, rv, nonce = export.status, export.metadata.resource_version or "", export.spec.retry_nonce
    if st.phase != ExportPhase.FAILED or export.spec.cancel:
        why = "cancel is set" if export.spec.cancel else f"the export is {st.phase}"
        return Plan(resource_version=rv, status=attrs.evolve(
            st, observed_retry_nonce=nonce, reason=ExportReason.RETRY_NONCE_OBSERVED,
            message=f"retryNonce {nonce!r} observed; nothing to retry: {why}"),
            requeue_after=None if st.phase in FINAL else 0.0)
    message = (f"retryNonce {nonce!r}: a new delivery cycle after {st.attempts} attempt(s) "
               f"({st.reason}); same snapshot and Idempotency-Key")
    status = attrs.evolve(
        st, phase=ExportPhase.DELIVERING if st.payload_digest else ExportPhase.PENDING,
        reason=ExportReason.RETRY_REQUESTED, message=message, observed_retry_nonce=nonce,
        cycle_attempts=0, cycle_started_at=now, next_attempt_at=now, finished_at=None,
        delivered_at=None)
    return Plan(resource_version=rv, status=status, requeue_after=0.0, events=(EventSpec(
        type=EventSeverity.NORMAL, reason=str(ExportReason.RETRY_REQUESTED), message=message),))


def _judge(export: ReportExport, attempt: Attempt, now: datetime) -> ReportExportPlan:
    spec = export.spec
    n, cycle = export.status.attempts + 1, export.status.cycle_attempts + 1
    st = attrs.evolve(export.status, attempts=n, cycle_attempts=cycle, last_attempt_at=now,
                      cycle_started_at=export.status.cycle_started_at or now,
                      last_http_status=attempt.http_status,
                      last_error=None if attempt.accepted else attempt.describe()[:1024])
    if attempt.accepted:
        return _finish(export, st, now, reason=ExportReason.DELIVERED, delivered_at=now,
                       message=f"delivered on attempt {n} (HTTP {attempt.http_status})")
    if not attempt.retryable:
        return _finish(export, st, now, reason=ExportReason.REJECTED, message=(
            f"the receiver refused the report on attempt {n} ({attempt.describe()}); not "
            "retried"))
    if cycle >= spec.retry.max_attempts:
        return _finish(export, st, now, reason=ExportReason.RETRIES_EXHAUSTED, message=(
            f"attempt {cycle} of {spec.retry.max_attempts} failed ({attempt.describe()}); no "
            "attempt left"))
    wait = max(backoff_seconds(spec.retry, cycle), attempt.retry_after or 0.0)
    if wait >= (_deadline(spec.retry, st) - now).total_seconds():  # no overflow on 1e30 s
        return _finish(export, st, now, reason=ExportReason.RETRY_DEADLINE_EXCEEDED, message=(
            f"attempt {cycle} of this cycle failed ({attempt.describe()}); the next, in "
            f"{wait:g}s, would fall past retry.maxElapsedTime ({spec.retry.max_elapsed_time}) "
            f"after the cycle started at {_at(st.cycle_started_at)}"))
    status = attrs.evolve(st, phase=ExportPhase.DELIVERING,
                          reason=ExportReason.RETRY_SCHEDULED, message=(
        f"attempt {cycle} of {spec.retry.max_attempts} failed ({attempt.describe()}); next in "
        f"{wait:g}s"), next_attempt_at=now + timedelta(seconds=wait))
    return Plan(resource_version=export.metadata.resource_version or "", status=status,
                requeue_after=wait)


def reconcile_reportexport(export: ReportExport, obs: ReportExportObservation,
                           now: datetime) -> ReportExportPlan:
    """The next step of the delivery ``export`` at ``now`` (the rules in the module doc)."""
    st, rv = export.status, export.metadata.resource_version or ""
    new_nonce = (export.spec.retry_nonce or None) != (st.observed_retry_nonce or None)
    if st.phase in FINAL:
        return _nonce(export, now) if new_nonce else Plan(resource_version=rv)
    if export.spec.cancel:
        return _finish(export, st, now, reason=ExportReason.CANCELLED, message=(
            f"cancelled (spec.cancel) after {st.attempts} attempt(s); the report is not sent"))
    if new_nonce:  # recorded, so that it does not restart the export if it fails later
        return _nonce(export, now)
    key = st.idempotency_key
    if st.payload_digest is None or key is None:
        return _snapshot(export, obs, now)
    if obs.attempt is not None:
        return _judge(export, obs.attempt, now)
    payload = decompress(obs.snapshot) if obs.snapshot is not None else None
    if payload is None or digest(payload) != st.payload_digest:
        ask = ConfirmAbsent(kind="ConfigMap", name=st.snapshot_ref or snapshot_name(export))
        if obs.snapshot is None and not obs.feedback.has(ask):
            return Plan(resource_version=rv, asks=(ask,))
        return _finish(export, st, now, reason=ExportReason.SNAPSHOT_LOST, message=(
            f"the report snapshot {ask.name} is {'gone' if payload is None else 'altered'}; "
            "a rebuilt report would carry another key"))
    retry = export.spec.retry
    if st.cycle_attempts >= retry.max_attempts:
        return _finish(export, st, now, reason=ExportReason.RETRIES_EXHAUSTED,
                       message=f"{st.cycle_attempts} attempts made; no attempt left")
    if obs.suspended:  # the policy's change wakes the export: no requeue
        if st.phase == ExportPhase.SUSPENDED:
            return Plan(resource_version=rv)
        message = (f"policy {export.spec.policy_ref.name} is suspended: no attempt until it "
                   f"is resumed ({st.attempts} made so far)")
        return Plan(resource_version=rv, status=attrs.evolve(
            st, phase=ExportPhase.SUSPENDED, reason=ExportReason.POLICY_SUSPENDED,
            message=message), events=(EventSpec(
                type=EventSeverity.NORMAL, reason=str(ExportReason.POLICY_SUSPENDED),
                message=message),))
    due = st.next_attempt_at or now
    if now >= _deadline(retry, st):
        return _finish(export, st, now, reason=ExportReason.RETRY_DEADLINE_EXCEEDED, message=(
            f"retry.maxElapsedTime ({retry.max_elapsed_time}) ran out after "
            f"{st.cycle_attempts} attempt(s) of the cycle started at "
            f"{_at(st.cycle_started_at)}"))
    if st.phase == ExportPhase.SUSPENDED:  # the resume is written (and told) before the POST
        message = (f"policy {export.spec.policy_ref.name} resumed; next attempt "
                   f"{'now' if now >= due else 'at ' + due.isoformat()}")
        st = attrs.evolve(st, phase=ExportPhase.DELIVERING, reason=ExportReason.RESUMED,
                          message=message)
        return Plan(resource_version=rv, status=st, requeue_after=max(
            (due - now).total_seconds(), 0.0), events=(EventSpec(
                type=EventSeverity.NORMAL, reason=str(ExportReason.RESUMED), message=message),))
    if now < due:
        return Plan(resource_version=rv, requeue_after=(due - now).total_seconds())
    hook = export.spec.webhook
    ref = hook.token_secret_ref
    return Plan(resource_version=rv, asks=(DeliverReport(
        url=hook.url, key=key, body=payload,
        timeout_seconds=_seconds(hook.timeout),
        token_secret=None if ref is None else (ref.name, ref.key)),))
