"""Which ReportExports a ReportExportPolicy has: one per selected source that ended, and none
kept past retention once its source is gone.

:func:`reconcile_reportexportpolicy` reads the policy, the Certifications and Workflows of its
namespace and the exports it owns, and plans:

* a create of one ReportExport for every source of the policy's ``kind`` (Certification or
  Workflow) the selector matches that ended (its Succeeded or Failed condition) no earlier than
  the policy was created, unless the policy is suspended. The export's name comes from the
  policy's name and the source's uid, so a verdict gets at most one export however often this
  runs, in however many processes; a source that ended before the policy existed is history
  and is not sent;
* a delete of every finished export (Delivered, Failed or Cancelled) whose retention has
  passed and whose source (that uid) is gone. While the source exists its export stays: it is
  the record that the report was sent, and deleting it would send it again;
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
    ExportSourceKind,
    ExportSourceRef,
    PolicyRef,
    ReportExport,
    ReportExportPolicy,
    ReportExportSpec,
    RetentionPolicy,
)
from cre.api.workflow import Workflow
from cre.core.common.lifecycle import true_member
from cre.core.common.plan import Create, Delete, Feedback, Plan
from cre.core.export.delivery import FINAL

#: Characters of the policy's name kept in an export's name (the rest is 10 hex digits).
NAME_PREFIX: Final = 45

ReportExportPolicyPlan = Plan[None]
Source = Certification | Workflow
#: The label on an export naming its source, by the source's kind.
SOURCE_LABEL: Final = {ExportSourceKind.CERTIFICATION: L.CERTIFICATION,
                       ExportSourceKind.WORKFLOW: L.WORKFLOW}


@attrs.frozen(kw_only=True)
class ReportExportPolicyObservation:
    """The Certifications and Workflows of the policy's namespace and the exports the policy
    owns."""

    certifications: tuple[Certification, ...] = ()
    workflows: tuple[Workflow, ...] = ()
    exports: tuple[ReportExport, ...] = ()

    def sources(self, kind: ExportSourceKind) -> tuple[Source, ...]:
        """The observed objects of ``kind``."""
        return self.workflows if kind == ExportSourceKind.WORKFLOW else self.certifications
    feedback: Feedback = attrs.field(factory=Feedback)


def export_name(policy: str, source_uid: str) -> str:
    """The export of ``source_uid`` under the policy named ``policy`` (at most 56 characters,
    a valid label value too)."""
    digest = hashlib.sha256(f"{policy}/{source_uid}".encode()).hexdigest()[:10]
    return f"{policy[:NAME_PREFIX].rstrip('-.')}-{digest}"


def ended_at(source: Source) -> datetime | None:
    """When the source reached its verdict (Succeeded or Failed became True)."""
    member = true_member(source.status.conditions)
    if member is None or member.type not in (ConditionType.SUCCEEDED, ConditionType.FAILED):
        return None
    return member.last_transition_time


def selects(policy: ReportExportPolicy, source: Source) -> bool:
    """Whether the policy's selector matches the source (same namespace, every label)."""
    labels = source.metadata.labels
    return (source.metadata.namespace == policy.metadata.namespace
            and all(labels.get(k) == v for k, v in policy.spec.selector.items()))


def retention_seconds(retention: RetentionPolicy, phase: ExportPhase) -> float:
    """How long a finished export in ``phase`` is kept (a Cancelled one as a Failed one; the
    bound when the value is bad)."""
    text = retention.delivered if phase == ExportPhase.DELIVERED else retention.failed
    try:
        return min(duration_seconds(text), MAX_DURATION_SECONDS)
    except ValueError:
        return MAX_DURATION_SECONDS


def export_manifest(policy: ReportExportPolicy, source: Source) -> dict[str, Any]:
    """The ReportExport of ``source`` (of the policy's kind) under ``policy``, owned by the
    policy."""
    meta = policy.metadata
    uid = source.metadata.uid or ""
    kind = policy.spec.kind
    spec = ReportExportSpec(
        source=ExportSourceRef(kind=kind, name=source.metadata.name or "", uid=uid),
        policy_ref=PolicyRef(name=meta.name or "", uid=meta.uid or ""),
        webhook=policy.spec.webhook, content=policy.spec.content, retry=policy.spec.retry,
        retention=policy.spec.retention)
    return {
        "apiVersion": L.API_VERSION, "kind": ReportExport.KIND,
        "metadata": {
            "name": export_name(meta.name or "", uid), "namespace": meta.namespace,
            "labels": {L.MANAGED_BY: L.MANAGED_BY_VALUE, POLICY_LABEL: meta.name,
                       SOURCE_LABEL[kind]: source.metadata.name},
            "ownerReferences": [{"apiVersion": L.API_VERSION, "kind": ReportExportPolicy.KIND,
                                 "name": meta.name, "uid": meta.uid, "controller": True}],
        },
        "spec": to_dict(spec),
    }


def _wanted(policy: ReportExportPolicy, sources: tuple[Source, ...]) -> Mapping[str, Source]:
    since = policy.metadata.creation_timestamp
    out = {}
    for source in sources:
        at = ended_at(source)
        if at is None or not source.metadata.uid or not selects(policy, source):
            continue
        if since is not None and at < since:
            continue
        out[export_name(policy.metadata.name or "", source.metadata.uid)] = source
    return out


def reconcile_reportexportpolicy(policy: ReportExportPolicy,
                                 obs: ReportExportPolicyObservation,
                                 now: datetime) -> ReportExportPolicyPlan:
    """The exports to create and to prune for ``policy`` at ``now``."""
    meta = policy.metadata
    have = {x.metadata.name for x in obs.exports}
    creates = () if policy.spec.suspend else tuple(
        Create(api_version=L.API_VERSION, kind=ReportExport.KIND, namespace=meta.namespace or "",
               name=name, body=export_manifest(policy, source))
        for name, source in sorted(_wanted(policy, obs.sources(policy.spec.kind)).items())
        if name not in have)
    sources = {c.metadata.uid for c in obs.certifications} | {
        w.metadata.uid for w in obs.workflows}
    deletes, waits = [], []
    for export in obs.exports:
        st = export.status
        if st.phase not in FINAL or st.finished_at is None \
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
