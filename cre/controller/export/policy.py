"""The ReportExportPolicy controller: which ReportExports each policy has.

Keyed by policy (``namespace/name``). It reads the Certifications and Workflows (the caches the
Certification and Workflow controllers read too) and the exports the policy owns, runs
:func:`cre.core.export.policy.reconcile_reportexportpolicy` and applies its plan with the one
:class:`cre.kube.executor.PlanExecutor` (creates of exports owned by the policy, deletes past
retention). A Certification's change, a Workflow's end or deletion wake every policy of its
namespace (a namespace holds a handful of policies); an export's change wakes the policy that
owns it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Final

from prometheus_client import CollectorRegistry

from cre.api.certification import Certification
from cre.api.converter import structure
from cre.api.labels import GROUP
from cre.api.reportexport import POLICY_LABEL, ReportExport, ReportExportPolicy
from cre.api.watch import WatchEventType
from cre.api.workflow import Workflow
from cre.controller.certification.controller import certification_from_dict
from cre.controller.common.tiershell import TierController
from cre.controller.job.shell import involved_object
from cre.controller.workflow.shell import workflow_from_dict
from cre.core.common.plan import Ask
from cre.core.export.policy import (
    ReportExportPolicyObservation,
    ReportExportPolicyPlan,
    Source,
    ended_at,
    reconcile_reportexportpolicy,
)
from cre.kube.client import (
    CERTIFICATIONS,
    REPORTEXPORTPOLICIES,
    REPORTEXPORTS,
    WORKFLOWS,
    KubeClient,
)
from cre.kube.factory import InformerFactory
from cre.kube.informer import Informer
from cre.kube.runtime import WatchEvent, enqueue_mapped, enqueue_owner, key_of
from cre.kube.runtime.base import utcnow

CONTROLLER: Final = "reportexportpolicy"
COMPONENT: Final = "cre.dev/reportexportpolicy-controller"


def policy_from_dict(raw: dict[str, Any]) -> ReportExportPolicy:
    """The ReportExportPolicy model of a served object."""
    return structure(raw, ReportExportPolicy)


def export_from_dict(raw: dict[str, Any]) -> ReportExport:
    """The ReportExport model of a served object."""
    return structure(raw, ReportExport)


def involved_policy(policy: ReportExportPolicy) -> dict[str, Any]:
    """The ``involvedObject`` of an Event about ``policy``."""
    return involved_object(ReportExportPolicy.KIND, policy.metadata)


class ReportExportPolicyController(TierController[ReportExportPolicy,
                                                  ReportExportPolicyObservation]):
    """Creates one ReportExport per selected ended Certification and prunes finished ones."""

    def __init__(self, client: KubeClient, *, informers: InformerFactory | None = None,
                 namespaces: Sequence[str] | None = None, max_concurrent_reconciles: int = 1,
                 clock: Callable[[], datetime] = utcnow,
                 registry: CollectorRegistry | None = None, time_scale: float = 1.0) -> None:
        """``time_scale``: seconds of ``clock`` per wall second (retention waits are on it)."""
        super().__init__(client, name=CONTROLLER, component=COMPONENT,
                         owner=REPORTEXPORTPOLICIES, decode=policy_from_dict,
                         involved=involved_policy, workers=max_concurrent_reconciles,
                         clock=clock, informers=informers, namespaces=namespaces,
                         registry=registry, time_scale=time_scale)
        self.policies: Informer[ReportExportPolicy] = self.cache(
            REPORTEXPORTPOLICIES, transform=policy_from_dict, name="cre-reportexportpolicies")
        self.certifications: Informer[Certification] = self.cache(
            CERTIFICATIONS, transform=certification_from_dict, name="cre-certifications")
        self.workflows: Informer[Workflow] = self.cache(
            WORKFLOWS, transform=workflow_from_dict, name="cre-workflows")
        self.exports: Informer[ReportExport] = self.cache(
            REPORTEXPORTS, transform=export_from_dict, name="cre-reportexports")
        (self.managed_for(self.policies)
            .watches(self.certifications, enqueue_mapped(self._policies_of))
            .watches(self.workflows, enqueue_mapped(self._policies_of_ended))
            .watches(self.exports, enqueue_owner(kind=ReportExportPolicy.KIND, group=GROUP)))

    def _in_namespace(self, source: Source) -> Iterable[str]:
        ns = source.metadata.namespace
        return (key_of(p) for p in self.policies.store.list() if p.metadata.namespace == ns)

    def _policies_of(self, event: WatchEvent[Certification]) -> Iterable[str]:
        return self._in_namespace(event.obj)

    def _policies_of_ended(self, event: WatchEvent[Workflow]) -> Iterable[str]:
        """A Workflow matters once it ended or went (its status changes often before)."""
        if event.type == WatchEventType.DELETED or ended_at(event.obj) is not None:
            yield from self._in_namespace(event.obj)

    async def first_observation(self, policy: ReportExportPolicy
                                ) -> ReportExportPolicyObservation:
        ns, name = policy.metadata.namespace, policy.metadata.name
        return ReportExportPolicyObservation(
            certifications=tuple(c for c in self.certifications.store.list()
                                 if c.metadata.namespace == ns),
            workflows=tuple(w for w in self.workflows.store.list()
                            if w.metadata.namespace == ns),
            exports=tuple(x for x in self.exports.store.list()
                          if x.metadata.namespace == ns
                          and x.metadata.labels.get(POLICY_LABEL) == name))

    async def answer(self, policy: ReportExportPolicy, obs: ReportExportPolicyObservation,
                     asks: Sequence[Ask]) -> ReportExportPolicyObservation:
        """Never called: the policy core plans from the caches alone and asks nothing."""
        raise RuntimeError(f"{CONTROLLER}: the policy core asks nothing, got {asks}")

    def plan(self, policy: ReportExportPolicy, obs: ReportExportPolicyObservation,
             now: datetime) -> ReportExportPolicyPlan:
        return reconcile_reportexportpolicy(policy, obs, now)
