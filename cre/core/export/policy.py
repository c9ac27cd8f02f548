"""Which ReportExports a ReportExportPolicy has: one per selected Certification that ended, and
none kept past retention once its Certification is gone.

:func:`reconcile_reportexportpolicy` reads the policy, the Certifications of its namespace and the
exports it owns, and plans:

* a create of one ReportExport for every Certification the selector matches that ended (its
  Succeeded or Failed condition) no earlier than the policy was created, unless the policy is
  suspended. The export's name comes from the policy's name and the Certification's uid, so a
  verdict gets at most one export however often this runs, in however many processes; a
  Certification that ended before the policy existed is history and is not sent;
* a delete of every finished export (Delivered or Failed) whose retention has passed and whose
  Certification (that uid) is gone. While the Certification exists its export stays: it is the
  record that the report was sent, and deleting it would send it again;
* a requeue when the next retention runs out.

The exports are owned by the policy (deleting the policy deletes them) and carry a frozen copy
of its settings: editing a policy changes the exports created after the edit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

import attrs

from cre.api import labels as L
from cre.api.certification import Certification
from cre.api.conditions import ConditionType
from cre.api.converter import to_dict
from cre.api.durations import MAX_DURATION_SECONDS, duration_seconds
from cre.api.reportexport import (
    POLICY_LABEL,
    ExportPhase,
    ExportSourceRef,
    PolicyRef,
    ReportExport,
    ReportExportPolicy,
    ReportExportSpec,
    RetentionPolicy,
)
from cre.core.common.lifecycle import true_member
from cre.core.common.plan import Create, Delete, Feedback, Plan

#: Characters of the policy's name kept in an export's name (the rest is 10 hex digits).
NAME_PREFIX: Final = 45
FINISHED: Final = frozenset({ExportPhase.DELIVERED, ExportPhase.FAILED})

ReportExportPolicyPlan = Plan[None]


@attrs.frozen(kw_only=True)
class ReportExportPolicyObservation:
    """The Certifications of the policy's namespace and the exports the policy owns."""

    certifications: tuple[Certification, ...] = ()
    exports: tuple[ReportExport, ...] = ()
    feedback: Feedback = attrs.field(factory=Feedback)


def export_name(policy: str, source_uid: str) -> str:
    """The export of ``source_uid`` under the policy named ``policy`` (at most 56 characters,
    a valid label value too)."""
    digest = hashlib.sha256(f"{policy}/{source_uid}".encode()).hexdigest()[:10]
    return f"{policy[:NAME_PREFIX].rstrip('-.')}-{digest}"


def ended_at(cert: Certification) -> datetime | None:
    """When the Certification reached its verdict (Succeeded or Failed became True)."""
    member = true_member(cert.status.conditions)
    if member is None or member.type not in (ConditionType.SUCCEEDED, ConditionType.FAILED):
        return None
    return member.last_transition_time


def selects(policy: ReportExportPolicy, cert: Certification) -> bool:
    """Whether the policy's selector matches the Certification (same namespace, every label)."""
    labels = cert.metadata.labels
    return (cert.metadata.namespace == policy.metadata.namespace
            and all(labels.get(k) == v for k, v in policy.spec.selector.items()))


def retention_seconds(retention: RetentionPolicy, phase: ExportPhase) -> float:
    """How long a finished export in ``phase`` is kept (the bound when the value is bad)."""
    text = retention.delivered if phase == ExportPhase.DELIVERED else retention.failed
    try:
        return min(duration_seconds(text), MAX_DURATION_SECONDS)
    except ValueError:
        return MAX_DURATION_SECONDS


def export_manifest(policy: ReportExportPolicy, cert: Certification) -> dict[str, Any]:
    """The ReportExport of ``cert`` under ``policy``, owned by the policy."""
    meta = policy.metadata
    uid = cert.metadata.uid or ""
    spec = ReportExportSpec(
        source=ExportSourceRef(name=cert.metadata.name or "", uid=uid),
        policy_ref=PolicyRef(name=meta.name or "", uid=meta.uid or ""),
        webhook=policy.spec.webhook, content=policy.spec.content, retry=policy.spec.retry,
        retention=policy.spec.retention)
    return {
        "apiVersion": L.API_VERSION, "kind": ReportExport.KIND,
        "metadata": {
            "name": export_name(meta.name or "", uid), "namespace": meta.namespace,
            "labels": {L.MANAGED_BY: L.MANAGED_BY_VALUE, POLICY_LABEL: meta.name,
                       L.CERTIFICATION: cert.metadata.name},
            "ownerReferences": [{"apiVersion": L.API_VERSION, "kind": ReportExportPolicy.KIND,
                                 "name": meta.name, "uid": meta.uid, "controller": True}],
        },
        "spec": to_dict(spec),
    }


def _wanted(policy: ReportExportPolicy, certs: tuple[Certification, ...]
            ) -> Mapping[str, Certification]:
    since = policy.metadata.creation_timestamp
    out = {}
    for cert in certs:
        at = ended_at(cert)
        if at is None or not cert.metadata.uid or not selects(policy, cert):
            continue
        if since is not None and at < since:
            continue
        out[export_name(policy.metadata.name or "", cert.metadata.uid)] = cert
    return out


def reconcile_reportexportpolicy(policy: ReportExportPolicy,
                                 obs: ReportExportPolicyObservation,
                                 now: datetime) -> ReportExportPolicyPlan:
    """The exports to create and to prune for ``policy`` at ``now``."""
    meta = policy.metadata
    have = {x.metadata.name for x in obs.exports}
    creates = () if policy.spec.suspend else tuple(
        Create(api_version=L.API_VERSION, kind=ReportExport.KIND, namespace=meta.namespace or "",
               name=name, body=export_manifest(policy, cert))
        for name, cert in sorted(_wanted(policy, obs.certifications).items())
        if name not in have)
    sources = {c.metadata.uid for c in obs.certifications}
    deletes, waits = [], []
    for export in obs.exports:
        st = export.status
        if st.phase not in FINISHED or st.finished_at is None \
                or export.spec.source.uid in sources:
            continue
        expires = st.finished_at + timedelta(
            seconds=retention_seconds(export.spec.retention, st.phase))
        if expires <= now:
            deletes.append(Delete(api_version=L.API_VERSION, kind=ReportExport.KIND,
                                  namespace=export.metadata.namespace or "",
                                  name=export.metadata.name or "",
                                  uid=export.metadata.uid or ""))
        else:
            waits.append((expires - now).total_seconds())
    return Plan(resource_version=meta.resource_version or "", creates=creates,
                deletes=tuple(deletes), requeue_after=min(waits, default=None))
