"""The ReportExport controller: one delivery's steps, and the only HTTP POST CRE makes.

Keyed by export (``namespace/name``). The Observation comes from shared caches: the source
(that uid: a Certification with its Workflows, or a Workflow), the Workflows' Jobs and the
Jobs' BandwidthMeasurements (the objects ``cre report`` reads, only gathered while the payload
is not snapshotted yet), the snapshot ConfigMap's bytes, and whether the export's policy is
suspended (the policies' cache, shared with the policy controller: a policy's change wakes its
unfinished exports).
:func:`cre.core.export.delivery.reconcile_reportexport` plans; its asks are answered here:
``ConfirmAbsent`` by a live read (the source, the snapshot), ``DeliverReport`` by
:class:`cre.controller.export.webhook.WebhookSender`, whose
:class:`~cre.core.export.delivery.Attempt` goes back to the core in the same reconcile; the
plan that records it is applied by the one :class:`cre.kube.executor.PlanExecutor`.

Every wait (the backoff before the next attempt) is in seconds of the controller's clock and
reaches the workqueue divided by ``time_scale`` (a simulated clock's pace); the per-attempt
``timeout`` is not a wait on that clock but on a real socket, and stays in wall seconds.

``cre_report_exports_total{result}`` counts attempts once their outcome is written:
``delivered``, ``retry`` (a failed attempt with another to come) and ``failed`` (the export
ended Failed).
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import attrs
from prometheus_client import REGISTRY, CollectorRegistry, Counter

from cre.api.certification import Certification
from cre.api.job import Job
from cre.api.labels import API_VERSION, CERTIFICATION, JOB
from cre.api.measurement import BandwidthMeasurement
from cre.api.reportexport import (
    EXPORT_LABEL,
    SNAPSHOT_KEY,
    ExportPhase,
    ExportSourceKind,
    ReportExport,
    ReportExportPolicy,
)
from cre.api.workflow import Workflow
from cre.controller.certification.controller import (
    INDEX_CERTIFICATION,
    certification_from_dict,
    certification_index,
)
from cre.controller.common.tiershell import TierController
from cre.controller.export.policy import export_from_dict, policy_from_dict
from cre.controller.export.webhook import WebhookSender
from cre.controller.job.shell import bandwidth_from_dict, involved_object, job_from_dict
from cre.controller.workflow.shell import workflow_from_dict
from cre.core.certification.report import Snapshot
from cre.core.common.plan import Ask, ConfirmAbsent, DeliverReport, Plan
from cre.core.export.delivery import (
    FINAL,
    ReportExportObservation,
    ReportExportPlan,
    reconcile_reportexport,
)
from cre.core.export.payload import workflow_snapshot
from cre.kube.client import (
    BANDWIDTHMEASUREMENTS,
    CERTIFICATIONS,
    CONFIGMAPS,
    JOBS,
    REPORTEXPORTPOLICIES,
    REPORTEXPORTS,
    WORKFLOWS,
    ApiError,
    KubeClient,
    Resource,
)
from cre.kube.factory import InformerFactory
from cre.kube.informer import Informer
from cre.kube.runtime import WatchEvent, enqueue_by_label, enqueue_mapped, key_of
from cre.kube.runtime.base import utcnow

log = logging.getLogger(__name__)

CONTROLLER: Final = "reportexport"
COMPONENT: Final = "cre.dev/reportexport-controller"
INDEX_SOURCE: Final = "source-uid"
INDEX_POLICY: Final = "policy"


def source_index(export: ReportExport) -> list[str]:
    """An export under the uid of its source."""
    return [export.spec.source.uid]


def policy_index(export: ReportExport) -> list[str]:
    """An export under ``namespace/policy``."""
    return [f"{export.metadata.namespace}/{export.spec.policy_ref.name}"]


@attrs.frozen(kw_only=True, slots=True)
class SnapshotBlob:
    """A snapshot ConfigMap as cached: its key and the gzip bytes (``None``: unreadable)."""

    namespace: str
    name: str
    export: str
    blob: bytes | None


def snapshot_blob(raw: dict[str, Any]) -> SnapshotBlob:
    """The cached view of a snapshot ConfigMap (only the payload kept)."""
    meta = raw.get("metadata") or {}
    data = (raw.get("binaryData") or {}).get(SNAPSHOT_KEY)
    try:
        blob = base64.b64decode(data, validate=True) if isinstance(data, str) else None
    except binascii.Error:
        blob = None
    return SnapshotBlob(namespace=meta.get("namespace") or "", name=meta.get("name") or "",
                        export=(meta.get("labels") or {}).get(EXPORT_LABEL) or "", blob=blob)


class ExportMetrics:
    """``cre_report_exports_total{result}`` on one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.exports = Counter("cre_report_exports", "ReportExport delivery attempts by outcome",
                               ["result"], registry=registry)

    def count(self, before: ReportExport, plan: Plan[Any]) -> None:
        """Count the attempt ``plan`` records, if it records one."""
        status = plan.status
        if status is None or status.attempts <= before.status.attempts:
            return
        result = {ExportPhase.DELIVERED: "delivered", ExportPhase.FAILED: "failed"}.get(
            status.phase, "retry")
        self.exports.labels(result=result).inc()


_METRICS: dict[int, tuple[CollectorRegistry, ExportMetrics]] = {}


def export_metrics_for(registry: CollectorRegistry | None) -> ExportMetrics:
    """The export collectors of ``registry`` (default: prometheus-client's), made once."""
    reg = REGISTRY if registry is None else registry
    held = _METRICS.get(id(reg))
    if held is None or held[0] is not reg:
        held = (reg, ExportMetrics(reg))
        _METRICS[id(reg)] = held
    return held[1]


def involved_export(export: ReportExport) -> dict[str, Any]:
    """The ``involvedObject`` of an Event about ``export``."""
    return involved_object(ReportExport.KIND, export.metadata)


class ReportExportController(TierController[ReportExport, ReportExportObservation]):
    """Snapshots, delivers and retries the reports of ``ReportExport`` objects."""

    def __init__(self, client: KubeClient, *, informers: InformerFactory | None = None,
                 namespaces: Sequence[str] | None = None, max_concurrent_reconciles: int = 2,
                 clock: Callable[[], datetime] = utcnow,
                 registry: CollectorRegistry | None = None, time_scale: float = 1.0) -> None:
        super().__init__(client, name=CONTROLLER, component=COMPONENT, owner=REPORTEXPORTS,
                         decode=export_from_dict, involved=involved_export,
                         workers=max_concurrent_reconciles, clock=clock, informers=informers,
                         namespaces=namespaces, registry=registry, time_scale=time_scale)
        self.sender = WebhookSender(client)
        self.metrics = export_metrics_for(registry)
        self.exports: Informer[ReportExport] = self.cache(
            REPORTEXPORTS, transform=export_from_dict, name="cre-reportexports",
            indexers={INDEX_SOURCE: source_index, INDEX_POLICY: policy_index})
        self.policies: Informer[ReportExportPolicy] = self.cache(
            REPORTEXPORTPOLICIES, transform=policy_from_dict, name="cre-reportexportpolicies")
        self.snapshots: Informer[SnapshotBlob] = self.cache(
            CONFIGMAPS, transform=snapshot_blob, label_selector=EXPORT_LABEL,
            name="reportexport-snapshots")
        self.certifications: Informer[Certification] = self.cache(
            CERTIFICATIONS, transform=certification_from_dict, name="cre-certifications")
        self.workflows: Informer[Workflow] = self.cache(
            WORKFLOWS, transform=workflow_from_dict, label_selector=CERTIFICATION,
            indexers={INDEX_CERTIFICATION: certification_index},
            name="certification-workflows")
        self.all_workflows: Informer[Workflow] = self.cache(
            WORKFLOWS, transform=workflow_from_dict, name="cre-workflows")
        self.jobs: Informer[Job] = self.cache(JOBS, transform=job_from_dict, name="cre-jobs")
        self.bandwidth: Informer[BandwidthMeasurement] = self.cache(
            BANDWIDTHMEASUREMENTS, transform=bandwidth_from_dict, label_selector=JOB,
            name="cre-bandwidthmeasurements")
        (self.managed_for(self.exports)
            .watches(self.snapshots, enqueue_by_label(EXPORT_LABEL))
            .watches(self.policies, enqueue_mapped(self._unfinished_of))
            .watches(self.certifications, enqueue_mapped(self._waiting_for))
            .watches(self.all_workflows, enqueue_mapped(self._waiting_for)))

    def _waiting_for(self, event: WatchEvent[Any]) -> Iterable[str]:
        """The exports of the source (a Certification, a Workflow) still waiting for their
        snapshot."""
        return (key_of(x) for x in self.exports.store.by_index(
            INDEX_SOURCE, event.obj.metadata.uid or "") if x.status.payload_digest is None)

    def _unfinished_of(self, event: WatchEvent[ReportExportPolicy]) -> Iterable[str]:
        """The policy's exports still under way (its ``suspend`` may have changed)."""
        return (key_of(x) for x in self.exports.store.by_index(INDEX_POLICY, key_of(event.obj))
                if x.status.phase not in FINAL)

    def suspended(self, export: ReportExport) -> bool:
        """Whether the export's policy (that uid) is cached and suspended."""
        ref = export.spec.policy_ref
        policy = self.policies.store.get(f"{export.metadata.namespace}/{ref.name}")
        return policy is not None and policy.spec.suspend and (
            not ref.uid or policy.metadata.uid == ref.uid)

    def source(self, export: ReportExport, obj: Certification | Workflow | None
               ) -> Snapshot | None:
        """``obj`` (when it is the export's source, that uid) and the objects under it."""
        if obj is None or obj.metadata.uid != export.spec.source.uid:
            return None
        ns = obj.metadata.namespace or ""
        if isinstance(obj, Workflow):
            jobs = self._jobs(ns, [obj])
            return workflow_snapshot(obj, jobs=jobs, bandwidth=self._bandwidth(ns, jobs))
        workflows = {wf.metadata.name or "": wf for wf in self.workflows.store.by_index(
            INDEX_CERTIFICATION, f"{ns}/{obj.metadata.name}")}
        jobs = self._jobs(ns, workflows.values())
        return Snapshot(certification=obj, workflows=workflows, jobs=jobs,
                        bandwidth=self._bandwidth(ns, jobs))

    def _jobs(self, ns: str, workflows: Iterable[Workflow]) -> dict[str, Job]:
        """The Jobs the Workflows' groups name, by name."""
        refs = (g.job_ref.name for wf in workflows for g in wf.status.groups if g.job_ref)
        found = (self.jobs.store.get(f"{ns}/{name}") for name in refs)
        return {job.metadata.name or "": job for job in found if job is not None}

    def _bandwidth(self, ns: str, jobs: Mapping[str, Job]) -> dict[str, BandwidthMeasurement]:
        """The Jobs' BandwidthMeasurements, by the Job's name."""
        return {bm.spec.job_ref.name: bm for bm in self.bandwidth.store.list()
                if bm.metadata.namespace == ns and bm.spec.job_ref.name in jobs}

    def cached_source(self, export: ReportExport) -> Certification | Workflow | None:
        """The export's source as cached (any uid)."""
        key = f"{export.metadata.namespace}/{export.spec.source.name}"
        if export.spec.source.kind == ExportSourceKind.WORKFLOW:
            return self.all_workflows.store.get(key)
        return self.certifications.store.get(key)

    async def current(self, export: ReportExport) -> ReportExport | None:
        """The export read live once its payload is snapshotted (an attempt may be due): a
        cache lagging behind the last attempt's status would otherwise POST once more than
        the status says (seen under load: the requeue after a short backoff came before the
        status write's watch event)."""
        if export.status.phase in FINAL or export.status.payload_digest is None:
            return export
        raw = await self.executor.live(export)
        return None if raw is None else export_from_dict(
            {"apiVersion": API_VERSION, "kind": ReportExport.KIND, **raw})

    async def first_observation(self, export: ReportExport) -> ReportExportObservation:
        ns = export.metadata.namespace or ""
        source = None
        if export.status.payload_digest is None:
            source = self.source(export, self.cached_source(export))
        cached = self.snapshots.store.get(f"{ns}/{export.status.snapshot_ref}") \
            if export.status.snapshot_ref else None
        return ReportExportObservation(source=source,
                                       snapshot=cached.blob if cached is not None else None,
                                       suspended=self.suspended(export))

    async def answer(self, export: ReportExport, obs: ReportExportObservation,
                     asks: Sequence[Ask]) -> ReportExportObservation:
        """``obs`` with the live reads and the delivery attempt the plan asked for."""
        ns = export.metadata.namespace or ""
        for ask in asks:
            if isinstance(ask, DeliverReport):
                attempt = await self.sender.send(ask, namespace=ns)
                log.info("ReportExport %s/%s: attempt %d: %s", ns, export.metadata.name,
                         export.status.attempts + 1, attempt.describe())
                obs = attrs.evolve(obs, attempt=attempt)
            elif isinstance(ask, ConfirmAbsent) and ask.kind == "ConfigMap":
                raw = await self._live(CONFIGMAPS, ask.name, ns)
                obs = attrs.evolve(obs, snapshot=None if raw is None else snapshot_blob(raw).blob)
            elif isinstance(ask, ConfirmAbsent) and ask.kind == ExportSourceKind.WORKFLOW:
                raw = await self._live(WORKFLOWS, ask.name, ns)
                wf = None if raw is None else workflow_from_dict(
                    {"apiVersion": API_VERSION, "kind": "Workflow", **raw})
                obs = attrs.evolve(obs, source=self.source(export, wf))
            elif isinstance(ask, ConfirmAbsent):
                raw = await self._live(CERTIFICATIONS, ask.name, ns)
                cert = None if raw is None else certification_from_dict(
                    {"apiVersion": API_VERSION, "kind": "Certification", **raw})
                obs = attrs.evolve(obs, source=self.source(export, cert))
        return attrs.evolve(obs, feedback=obs.feedback.answering(*asks))

    async def _live(self, res: Resource, name: str, namespace: str) -> dict[str, Any] | None:
        try:
            return await self.client.get(res, name, namespace=namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def plan(self, export: ReportExport, obs: ReportExportObservation,
             now: datetime) -> ReportExportPlan:
        return reconcile_reportexport(export, obs, now)

    def applied(self, export: ReportExport, plan: Plan[Any]) -> None:
        self.metrics.count(export, plan)
