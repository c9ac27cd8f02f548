"""The CertificationSchedule controller: recurring Certifications on idle nodes.

It reconciles CertificationSchedules (keyed ``namespace/name``) with
:func:`cre.core.schedule.reconcile.reconcile_schedule`, applied by the one
:class:`cre.kube.executor.PlanExecutor` (a :class:`cre.controller.common.tiershell.TierController`):
the runs it creates, the ended runs it prunes, its status and events. It reads, from caches
shared through the informer factory: the Certifications (a run's change wakes the schedule
that controls it), the GPU nodes and the NodeCertifications (read at a due time, never a wake-up
on their own), and the pods CRE did not make, reduced to the GPUs they hold per node
(:func:`cre.kube.pods.gpu_pod_informer`). The schedule wakes itself at its next due time
(``requeue_after``).

After each applied pass it counts ``cre_schedule_runs_total{namespace,schedule,result}`` (one
per due time handled, ``result`` the reason: RunCreated, ConcurrencyForbid, NoEligibleNodes,
MissedDeadline, RunCreateRefused) and ``cre_schedule_missed_runs_total{namespace,schedule}``
(the growth of ``status.missedRuns``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final

import attrs
from prometheus_client import REGISTRY, CollectorRegistry, Counter

from cre.api import labels as L
from cre.api.certification import Certification
from cre.api.converter import structure
from cre.api.nodecertification import NodeCertification
from cre.api.schedule import CertificationSchedule, ScheduleReason
from cre.controller.certification.controller import certification_from_dict
from cre.controller.common.tiershell import TierController
from cre.controller.job.shell import involved_object
from cre.controller.nodecertification.controller import nodecertification_from_dict
from cre.core.common.observed import NodeView
from cre.core.common.plan import Ask, Plan
from cre.core.common.projections import node_view
from cre.core.schedule.nodes import GpuPodView
from cre.core.schedule.reconcile import ScheduleObservation, reconcile_schedule
from cre.kube.client import (
    CERTIFICATIONS,
    CERTIFICATIONSCHEDULES,
    NODECERTIFICATIONS,
    NODES,
    KubeClient,
)
from cre.kube.factory import InformerFactory
from cre.kube.informer import Informer
from cre.kube.pods import busy_nodes_of, gpu_pod_informer
from cre.kube.runtime import Result, WatchEvent
from cre.kube.runtime.base import utcnow
from cre.kube.runtime.handlers import KeyQueue

CONTROLLER: Final = "schedule"
COMPONENT: Final = "cre.dev/schedule-controller"
INDEX_SCHEDULE: Final = "schedule"
#: The reasons that say what became of a due time (the ``result`` of the runs counter).
RUN_RESULTS: Final = frozenset({
    ScheduleReason.RUN_CREATED, ScheduleReason.CONCURRENCY_FORBID,
    ScheduleReason.NO_ELIGIBLE_NODES, ScheduleReason.MISSED_DEADLINE,
    ScheduleReason.RUN_CREATE_REFUSED})

_METRICS: dict[int, tuple[CollectorRegistry, Counter, Counter]] = {}


def schedule_counters(registry: CollectorRegistry | None = None) -> tuple[Counter, Counter]:
    """``cre_schedule_runs_total`` and ``cre_schedule_missed_runs_total`` on ``registry``
    (default: prometheus-client's), created on first use."""
    reg = REGISTRY if registry is None else registry
    held = _METRICS.get(id(reg))
    if held is None or held[0] is not reg:
        held = (reg,
                Counter("cre_schedule_runs_total", "Due times a CertificationSchedule handled, "
                        "by result (RunCreated or the reason it was skipped or missed)",
                        ["namespace", "schedule", "result"], registry=reg),
                Counter("cre_schedule_missed_runs_total", "Due times that passed without a "
                        "run (late past startingDeadlineSeconds, or several due at once)",
                        ["namespace", "schedule"], registry=reg))
        _METRICS[id(reg)] = held
    return held[1], held[2]


def read_only(event: WatchEvent[Any], queue: KeyQueue) -> None:
    """Enqueue nothing: nodes, their records and the GPU pods are read at a due time, never a
    reason to look again on their own, but watched so they are synced before the first pass."""
    del event, queue


def schedule_from_dict(raw: dict[str, Any]) -> CertificationSchedule:
    """The CertificationSchedule model of a served object."""
    return structure(raw, CertificationSchedule)


def involved_schedule(schedule: CertificationSchedule) -> dict[str, Any]:
    """The ``involvedObject`` of an Event about ``schedule``."""
    return involved_object("CertificationSchedule", schedule.metadata)


def schedule_index(cert: Certification) -> list[str]:
    """``namespace/<schedule>`` of a run (its ``cre.dev/schedule`` label)."""
    name = cert.metadata.labels.get(L.SCHEDULE)
    return [f"{cert.metadata.namespace or ''}/{name}"] if name else []


class ScheduleController(TierController[CertificationSchedule, ScheduleObservation]):
    """Reconciles ``cre.dev/v1alpha1`` CertificationSchedules in ``namespaces`` (``None``:
    all)."""

    def __init__(self, client: KubeClient, *, namespaces: Sequence[str] | None = None,
                 informers: InformerFactory | None = None, max_concurrent_reconciles: int = 1,
                 clock: Callable[[], datetime] = utcnow,
                 registry: CollectorRegistry | None = None, time_scale: float = 1.0) -> None:
        """``informers``: the process's shared informer factory (then its namespaces apply);
        ``time_scale``: how much faster than the wall ``clock`` runs (a simulated cluster's),
        so the wait until the next due time is that much shorter."""
        super().__init__(client, name=CONTROLLER, component=COMPONENT,
                         owner=CERTIFICATIONSCHEDULES, decode=schedule_from_dict,
                         involved=involved_schedule, workers=max_concurrent_reconciles,
                         clock=clock, informers=informers, namespaces=namespaces,
                         registry=registry, time_scale=time_scale)
        self.schedules: Informer[CertificationSchedule] = self.cache(
            CERTIFICATIONSCHEDULES, transform=schedule_from_dict, name="cre-schedules")
        self.certifications: Informer[Certification] = self.cache(
            CERTIFICATIONS, transform=certification_from_dict, name="cre-certifications",
            indexers={INDEX_SCHEDULE: schedule_index})
        self.nodes: Informer[NodeView] = self.cache(
            NODES, transform=node_view, label_selector=f"{L.GPU_PRESENT}=true",
            name="gpu-nodes")
        self.records: Informer[NodeCertification] = self.cache(
            NODECERTIFICATIONS, transform=nodecertification_from_dict,
            name="cre-nodecertifications")
        self.gpu_pods: Informer[GpuPodView] = gpu_pod_informer(self.informer_factory)
        self.runs_total, self.missed_total = schedule_counters(registry)
        (self.managed_for(self.schedules, on_deleted=self._forget).owns(self.certifications)
            .watches(self.nodes, read_only).watches(self.records, read_only)
            .watches(self.gpu_pods, read_only))

    async def reconcile(self, key: str) -> Result:
        """One pass over the schedule ``namespace/name``; the requeue in wall seconds."""
        result = await super().reconcile(key)
        return attrs.evolve(result, requeue_after=self.requeue(result.requeue_after).requeue_after)

    def observe(self, schedule: CertificationSchedule) -> ScheduleObservation:
        """The Observation of ``schedule`` from the caches."""
        key = f"{schedule.metadata.namespace or ''}/{schedule.metadata.name or ''}"
        return ScheduleObservation(
            certifications=self.certifications.store.by_index(INDEX_SCHEDULE, key),
            nodes=tuple(self.nodes.store.list()),
            records={r.metadata.name or "": r for r in self.records.store.list()},
            busy=busy_nodes_of(self.gpu_pods))

    async def first_observation(self, schedule: CertificationSchedule) -> ScheduleObservation:
        return self.observe(schedule)

    async def answer(self, schedule: CertificationSchedule, obs: ScheduleObservation,
                     asks: Sequence[Ask]) -> ScheduleObservation:
        """The schedule core asks nothing; answered as is."""
        return attrs.evolve(obs, feedback=obs.feedback.answering(*asks))

    def plan(self, schedule: CertificationSchedule, obs: ScheduleObservation,
             now: datetime) -> Plan[Any]:
        return reconcile_schedule(schedule, obs, now)

    def applied(self, schedule: CertificationSchedule, plan: Plan[Any]) -> None:
        """Count the due time the pass handled and the runs it found missed."""
        ns, name = schedule.metadata.namespace or "", schedule.metadata.name or ""
        for event in plan.events:
            if event.reason in RUN_RESULTS:
                self.runs_total.labels(namespace=ns, schedule=name, result=event.reason).inc()
        if plan.status is not None:
            grown = plan.status.missed_runs - schedule.status.missed_runs
            if grown > 0:
                self.missed_total.labels(namespace=ns, schedule=name).inc(grown)

    def _forget(self, schedule: CertificationSchedule) -> None:
        ns, name = schedule.metadata.namespace or "", schedule.metadata.name or ""
        with contextlib.suppress(KeyError):
            self.missed_total.remove(ns, name)
        for result in RUN_RESULTS:
            with contextlib.suppress(KeyError):
                self.runs_total.remove(ns, name, result)
