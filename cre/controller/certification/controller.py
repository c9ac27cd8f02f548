"""The Certification controller: a Reconciler for ``cre.dev`` Certifications on the generic
runtime.

It watches Certifications, the Workflows labelled ``cre.dev/certification`` (a Workflow change
enqueues its controlling Certification) and GPU nodes (a node appearing or changing readiness
wakes the Certifications still in progress: one ``WaitingForNodes`` may now find its target).
The catalog the categories come from is loaded once by the caller (the manager's
``--catalog-dir``, default the shipped catalog) and passed in.

One reconcile is :func:`cre.kube.runtime.converge` around
:func:`cre.core.certification.reconcile.reconcile_certification`, applied by
:class:`cre.kube.executor.PlanExecutor`, with the same feedback as the Workflow controller (both
are a :class:`cre.controller.common.tiershell.TierController`): a ``ListLive`` ask is answered by
listing the Certification's Workflows live, a Workflow name a foreign object holds goes back as
a ``CreateConflict`` in the Observation's ``feedback``, a status write that conflicts re-reads
the Certification.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Final

import attrs
from prometheus_client import CollectorRegistry

from cre.api import labels as L
from cre.api.certification import Certification
from cre.api.conditions import ConditionType
from cre.api.converter import structure
from cre.api.workflow import Workflow
from cre.catalog.model import Catalog
from cre.controller.common.phasemetrics import phase_metrics_for
from cre.controller.common.tiershell import TierController
from cre.controller.job.events import node_changed
from cre.controller.job.shell import involved_object
from cre.controller.workflow.shell import workflow_from_dict
from cre.core.certification.reconcile import (
    DEFAULT_CERTIFICATION_SETTINGS,
    CertificationObservation,
    CertificationPlan,
    CertificationSettings,
    reconcile_certification,
)
from cre.core.common.lifecycle import true_member
from cre.core.common.observed import NodeView
from cre.core.common.plan import Ask
from cre.core.common.projections import node_view
from cre.kube.client import CERTIFICATIONS, NODES, WORKFLOWS, KubeClient
from cre.kube.factory import InformerFactory
from cre.kube.informer import Informer
from cre.kube.runtime import WatchEvent, enqueue_mapped, key_of
from cre.kube.runtime.base import utcnow

log = logging.getLogger(__name__)

CONTROLLER: Final = "certification"
COMPONENT: Final = "cre.dev/certification-controller"
INDEX_CERTIFICATION: Final = "certification"

__all__ = ["CERTIFICATIONS", "CertificationController", "certification_from_dict"]


def certification_from_dict(raw: dict[str, Any]) -> Certification:
    """The Certification model of a served object (unreadable objects are dropped)."""
    return structure(raw, Certification)


def involved_certification(cert: Certification) -> dict[str, Any]:
    """The ``involvedObject`` of an Event about ``cert``."""
    return involved_object("Certification", cert.metadata)


def certification_index(wf: Workflow) -> list[str]:
    value = wf.metadata.labels.get(L.CERTIFICATION)
    return [f"{wf.metadata.namespace or ''}/{value}"] if value else []


def _in_progress(cert: Certification) -> bool:
    member = true_member(cert.status.conditions)
    return member is None or member.type == ConditionType.IN_PROGRESS


class CertificationController(TierController[Certification, CertificationObservation]):
    """Reconciles ``cre.dev/v1alpha1`` Certifications in ``namespaces`` (``None``: all), with
    the categories of ``catalog``."""

    def __init__(self, client: KubeClient, *, catalog: Catalog,
                 namespaces: Sequence[str] | None = None,
                 informers: InformerFactory | None = None, max_concurrent_reconciles: int = 2,
                 settings: CertificationSettings = DEFAULT_CERTIFICATION_SETTINGS,
                 clock: Callable[[], datetime] = utcnow,
                 registry: CollectorRegistry | None = None) -> None:
        """``informers``: the process's shared informer factory (then its namespaces apply)."""
        super().__init__(client, name=CONTROLLER, component=COMPONENT, owner=CERTIFICATIONS,
                         decode=certification_from_dict, involved=involved_certification,
                         workers=max_concurrent_reconciles, clock=clock, informers=informers,
                         namespaces=namespaces, registry=registry)
        self.catalog = catalog
        self.settings = settings
        self.certifications: Informer[Certification] = self.cache(
            CERTIFICATIONS, transform=certification_from_dict, name="cre-certifications")
        self.workflows: Informer[Workflow] = self.cache(
            WORKFLOWS, transform=workflow_from_dict, label_selector=L.CERTIFICATION,
            indexers={INDEX_CERTIFICATION: certification_index},
            name="certification-workflows")
        self.nodes: Informer[NodeView] = self.cache(
            NODES, transform=node_view, label_selector=f"{L.GPU_PRESENT}=true",
            name="gpu-nodes")
        self.metrics = phase_metrics_for(CONTROLLER, registry)
        (self.managed_for(self.certifications, on_deleted=self._deleted).owns(self.workflows)
            .watches(self.nodes, enqueue_mapped(self._in_progress_keys), node_changed))

    def _in_progress_keys(self, event: WatchEvent[NodeView]) -> Iterable[str]:
        del event
        for cert in self.certifications.store.list():
            if _in_progress(cert) and cert.metadata.deletion_timestamp is None:
                yield key_of(cert)

    # --- metrics ---------------------------------------------------------------------------

    def _deleted(self, cert: Certification) -> None:
        self.metrics.forget(cert.metadata.namespace or "", cert.metadata.name or "")

    def applied(self, cert: Certification, plan: CertificationPlan) -> None:
        """Publish the phase and verdict gauges of the status just applied (a
        Certification being deleted, or already gone from the cache, loses them instead: a late
        reconcile never brings back the series of a deleted object)."""
        if (cert.metadata.deletion_timestamp is not None
                or self.certifications.store.get(key_of(cert)) is None):
            self._deleted(cert)
            return
        status = plan.status or cert.status
        self.metrics.publish(cert.metadata.namespace or "", cert.metadata.name or "",
                             phase=status.phase, verdict=status.verdict)

    def observe(self, cert: Certification) -> CertificationObservation:
        """The Observation of ``cert`` from the caches."""
        index = f"{cert.metadata.namespace or ''}/{cert.metadata.name or ''}"
        workflows = tuple(sorted(self.workflows.store.by_index(INDEX_CERTIFICATION, index),
                                 key=lambda w: w.metadata.name or ""))
        nodes = tuple(sorted(self.nodes.store.list(), key=lambda n: n.name))
        return CertificationObservation(nodes=nodes, workflows=workflows)

    async def first_observation(self, cert: Certification) -> CertificationObservation:
        return self.observe(cert)

    async def answer(self, cert: Certification, obs: CertificationObservation,
                     asks: Sequence[Ask]) -> CertificationObservation:
        """``obs`` with the Certification's Workflows listed live (its only ask)."""
        return attrs.evolve(obs, workflows=await self._live_workflows(cert),
                            feedback=obs.feedback.answering(*asks))

    def plan(self, cert: Certification, obs: CertificationObservation, now: datetime
             ) -> CertificationPlan:
        return reconcile_certification(cert, obs, now, catalog=self.catalog,
                                       settings=self.settings)

    async def _live_workflows(self, cert: Certification) -> tuple[Workflow, ...]:
        page = await self.client.list(
            WORKFLOWS, namespace=cert.metadata.namespace,
            query={"labelSelector": f"{L.CERTIFICATION}={cert.metadata.name}"})
        out = []
        for item in page.get("items") or []:
            try:
                out.append(workflow_from_dict({"apiVersion": L.API_VERSION, "kind": "Workflow",
                                               **item}))
            except Exception:  # unreadable: skipped as the cache skips it
                continue
        return tuple(sorted(out, key=lambda w: w.metadata.name or ""))
