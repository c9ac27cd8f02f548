"""The body a ReportExport sends: the Certification report as deterministic JSON.

The report is the one ``cre report --json`` prints (:func:`cre.core.certification.report.
report_json`, the same builder), cut down to the parts the policy asks for, wrapped in an
envelope with a schema version and the source (kind, namespace, name, uid). It holds no clock
reading and no resourceVersion, and is serialised with sorted keys and no spaces, so the same
Certification gives the same bytes on every pass and in every process. The Idempotency-Key is
the SHA-256 of the source uid and those bytes: retries and a restarted manager send the same key,
and another Certification (another uid) never shares it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from cre.api.certification import (
    CategoryStatus,
    Certification,
    CertificationCategory,
    CertificationSpec,
    CertificationStatus,
)
from cre.api.conditions import CategoryState, Phase
from cre.api.job import Job
from cre.api.measurement import BandwidthMeasurement
from cre.api.meta import NamespacedName, ObjectMeta
from cre.api.reportexport import ExportContent, ExportSourceRef
from cre.api.workflow import Workflow
from cre.core.certification.report import Snapshot, build_report, report_json

#: The envelope's ``schemaVersion``; bumped when a field changes meaning or goes away.
SCHEMA_VERSION: Final = "cre.dev/report-export/v1"

# What each content switch removes, per level of the report.
_VERDICT_KEYS: Final = ("certification", "summary")
_CATEGORY_MEASUREMENTS: Final = ("thresholds", "busBandwidthThresholdGBps")
_GROUP_MEASUREMENTS: Final = ("busBWPeakGBps", "bandwidth")
_NODE_MEASUREMENTS: Final = ("busBWGBps", "outlier")
#: The category a Workflow source's report shows it as (``workflow/<name>``).
WORKFLOW_DOMAIN: Final = "workflow"
_CATEGORY_STATE: Final = {Phase.SUCCEEDED: CategoryState.SUCCEEDED,
                          Phase.FAILED: CategoryState.FAILED,
                          Phase.RUNNING: CategoryState.IN_PROGRESS}


def workflow_snapshot(wf: Workflow, *, jobs: Mapping[str, Job],
                      bandwidth: Mapping[str, BandwidthMeasurement]) -> Snapshot:
    """A Workflow source as the report builder reads it: one category, ``workflow/<name>``,
    whose state, verdict and conditions are the Workflow's (as ``cre report
    workloadrun/NAME`` shows a WorkloadRun's Workflow)."""
    name = wf.metadata.name or ""
    st = wf.status
    category = CategoryStatus(
        domain=WORKFLOW_DOMAIN, variant=name, workflow_ref=NamespacedName(name=name),
        status=_CATEGORY_STATE.get(st.phase or Phase.PENDING, CategoryState.PENDING),
        verdict=st.verdict)
    holder = Certification(
        metadata=ObjectMeta(name=name, namespace=wf.metadata.namespace, uid=wf.metadata.uid,
                            creation_timestamp=wf.metadata.creation_timestamp),
        spec=CertificationSpec(categories=(CertificationCategory(domain=WORKFLOW_DOMAIN,
                                                                 variant=name),)),
        status=CertificationStatus(conditions=st.conditions, phase=st.phase, verdict=st.verdict,
                                   category_statuses=(category,)))
    return Snapshot(certification=holder, workflows={name: wf}, jobs=jobs, bandwidth=bandwidth)


def _without(obj: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in keys}


def select(report: dict[str, Any], content: ExportContent) -> dict[str, Any]:
    """``report`` (``report_json``'s shape) with only the parts ``content`` asks for."""
    out = dict(report) if content.verdict else _without(report, _VERDICT_KEYS)
    categories = []
    for cat in report["categories"]:
        if not content.measurements:
            cat = _without(cat, _CATEGORY_MEASUREMENTS)
            cat["groups"] = [_without(g, _GROUP_MEASUREMENTS) for g in cat["groups"]]
            cat["nodes"] = [_without(n, _NODE_MEASUREMENTS) for n in cat["nodes"]]
        if not content.per_node:
            cat = _without(cat, ("groups", "nodes"))
        categories.append(cat)
    out["categories"] = categories
    return out


def build_payload(snap: Snapshot, *, source: ExportSourceRef, content: ExportContent) -> bytes:
    """The bytes POSTed for ``snap``'s Certification."""
    cert = snap.certification
    envelope = {
        "schemaVersion": SCHEMA_VERSION,
        "source": {"kind": source.kind, "namespace": cert.metadata.namespace or "",
                   "name": source.name, "uid": source.uid},
        "report": select(report_json(build_report(snap)), content),
    }
    return json.dumps(envelope, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode()


def digest(payload: bytes) -> str:
    """``sha256:<hex>`` of the payload."""
    return "sha256:" + hashlib.sha256(payload).hexdigest()


def idempotency_key(source_uid: str, payload: bytes) -> str:
    """The Idempotency-Key: a digest of the source uid and the payload (64 hex digits)."""
    return hashlib.sha256(source_uid.encode() + b"\0" + payload).hexdigest()


def compress(payload: bytes) -> bytes:
    """gzip with no timestamp: the same payload always compresses to the same bytes."""
    return gzip.compress(payload, mtime=0)


def decompress(blob: bytes) -> bytes | None:
    """The payload of a snapshot, ``None`` when the bytes are not gzip."""
    try:
        return gzip.decompress(blob)
    except (OSError, EOFError):
        return None
