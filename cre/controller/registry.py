"""The one list of CRE's controllers: a name, what must be served, and how to build it.

The manager (:mod:`cre_manager.controllers`, ``--controllers``) and the cluster simulator's
scenario runner (:mod:`cre.testing.cluster.scenario`, ``controllers:``) both build controllers
from :data:`CONTROLLERS`, so a golden scenario runs the wiring the manager runs, and a new kind
is one entry here. Every controller is built over the caller's
:class:`cre.kube.factory.InformerFactory`: controllers asking for the same query share one
informer (one list, one watch, one copy), and the factory's owner runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import attrs
from prometheus_client import CollectorRegistry

from cre.catalog.loader import load_catalog
from cre.catalog.model import Catalog
from cre.controller.certification.controller import CertificationController
from cre.controller.export.controller import ReportExportController
from cre.controller.export.policy import ReportExportPolicyController
from cre.controller.job.controller import JobController
from cre.controller.measure.bandwidth import BandwidthController
from cre.controller.measure.goodput import GoodputController
from cre.controller.nodecertification.controller import NodeCertificationController
from cre.controller.schedule.controller import ScheduleController
from cre.controller.workflow.controller import WorkflowController
from cre.controller.workloadrun.controller import WorkloadRunController
from cre.core.workflow.reconcile import DEFAULT_WORKFLOW_SETTINGS, WorkflowSettings
from cre.kube.client import (
    BANDWIDTHMEASUREMENTS,
    CERTIFICATIONS,
    CERTIFICATIONSCHEDULES,
    GOODPUTMEASUREMENTS,
    JOBS,
    LOGPROFILES,
    NODECERTIFICATIONS,
    REPORTEXPORTPOLICIES,
    REPORTEXPORTS,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    WORKFLOWS,
    WORKLOADRUNS,
    KubeClient,
    Resource,
)
from cre.kube.factory import InformerFactory
from cre.kube.runtime import CoreReconciler


@attrs.frozen(kw_only=True)
class ControllerContext:
    """What every controller is built from: the process's client, informer factory and metrics
    registry, the clock (and how fast it runs against the wall), and the manager's settings.

    ``max_concurrent_reconciles``: workers of every controller (``None``: each one's
    default); ``catalog``: loads the catalog the Certification and WorkloadRun cores render."""

    client: KubeClient
    informers: InformerFactory
    registry: CollectorRegistry
    clock: Callable[[], datetime]
    time_scale: float = 1.0
    max_concurrent_reconciles: int | None = None
    catalog: Callable[[], Catalog] = load_catalog
    workflow_settings: WorkflowSettings = DEFAULT_WORKFLOW_SETTINGS

    def workers(self, default: int) -> int:
        return self.max_concurrent_reconciles or default


Controller = CoreReconciler[Any, Any, Any]


@attrs.frozen(kw_only=True)
class ControllerEntry:
    """One controller: its name, the resources it reads or writes (checked as served before
    any informer starts), and its builder."""

    name: str
    requires: tuple[Resource, ...]
    build: Callable[[ControllerContext], Controller]


def _job(ctx: ControllerContext) -> Controller:
    return JobController(ctx.client, informers=ctx.informers, registry=ctx.registry,
                         max_concurrent_reconciles=ctx.workers(4), clock=ctx.clock,
                         time_scale=ctx.time_scale)


def _workflow(ctx: ControllerContext) -> Controller:
    return WorkflowController(ctx.client, informers=ctx.informers, registry=ctx.registry,
                              max_concurrent_reconciles=ctx.workers(4), clock=ctx.clock,
                              settings=ctx.workflow_settings)


def _certification(ctx: ControllerContext) -> Controller:
    return CertificationController(ctx.client, catalog=ctx.catalog(), informers=ctx.informers,
                                   registry=ctx.registry, clock=ctx.clock,
                                   max_concurrent_reconciles=ctx.workers(2))


def _workloadrun(ctx: ControllerContext) -> Controller:
    return WorkloadRunController(ctx.client, catalog=ctx.catalog(), informers=ctx.informers,
                                 registry=ctx.registry, clock=ctx.clock,
                                 max_concurrent_reconciles=ctx.workers(2))


def _measurement(ctx: ControllerContext) -> Controller:
    return BandwidthController(ctx.client, informers=ctx.informers, registry=ctx.registry,
                               clock=ctx.clock, time_scale=ctx.time_scale,
                               max_concurrent_reconciles=ctx.workers(2))


def _goodput(ctx: ControllerContext) -> Controller:
    return GoodputController(ctx.client, informers=ctx.informers, registry=ctx.registry,
                             clock=ctx.clock, time_scale=ctx.time_scale,
                             max_concurrent_reconciles=ctx.workers(2))


def _nodecertification(ctx: ControllerContext) -> Controller:
    return NodeCertificationController(ctx.client, informers=ctx.informers,
                                       registry=ctx.registry, clock=ctx.clock,
                                       time_scale=ctx.time_scale,
                                       max_concurrent_reconciles=ctx.workers(1))


def _schedule(ctx: ControllerContext) -> Controller:
    return ScheduleController(ctx.client, informers=ctx.informers, registry=ctx.registry,
                              clock=ctx.clock, time_scale=ctx.time_scale,
                              max_concurrent_reconciles=ctx.workers(1))
def _reportexportpolicy(ctx: ControllerContext) -> Controller:
    return ReportExportPolicyController(ctx.client, informers=ctx.informers,
                                        registry=ctx.registry, clock=ctx.clock,
                                        time_scale=ctx.time_scale,
                                        max_concurrent_reconciles=ctx.workers(1))


def _reportexport(ctx: ControllerContext) -> Controller:
    return ReportExportController(ctx.client, informers=ctx.informers, registry=ctx.registry,
                                  clock=ctx.clock, time_scale=ctx.time_scale,
                                  max_concurrent_reconciles=ctx.workers(2))


CONTROLLERS: tuple[ControllerEntry, ...] = (
    ControllerEntry(name="job", build=_job, requires=(
        JOBS, BANDWIDTHMEASUREMENTS, GOODPUTMEASUREMENTS, TRAINJOBS, TRAINING_RUNTIMES)),
    ControllerEntry(name="workflow", build=_workflow,
                    requires=(WORKFLOWS, JOBS, TRAINING_RUNTIMES)),
    ControllerEntry(name="certification", build=_certification,
                    requires=(CERTIFICATIONS, WORKFLOWS)),
    ControllerEntry(name="workloadrun", build=_workloadrun,
                    requires=(WORKLOADRUNS, WORKFLOWS, GOODPUTMEASUREMENTS)),
    ControllerEntry(name="measurement", build=_measurement,
                    requires=(BANDWIDTHMEASUREMENTS, JOBS, LOGPROFILES)),
    ControllerEntry(name="goodput", build=_goodput,
                    requires=(GOODPUTMEASUREMENTS, JOBS, LOGPROFILES)),
    ControllerEntry(name="nodecertification", build=_nodecertification,
                    requires=(NODECERTIFICATIONS, CERTIFICATIONS, WORKFLOWS)),
    ControllerEntry(name="schedule", build=_schedule,
                    requires=(CERTIFICATIONSCHEDULES, CERTIFICATIONS, NODECERTIFICATIONS)),
    ControllerEntry(name="reportexportpolicy", build=_reportexportpolicy,
                    requires=(REPORTEXPORTPOLICIES, REPORTEXPORTS, CERTIFICATIONS)),
    ControllerEntry(name="reportexport", build=_reportexport, requires=(
        REPORTEXPORTS, REPORTEXPORTPOLICIES, CERTIFICATIONS, WORKFLOWS, JOBS,
        BANDWIDTHMEASUREMENTS)),
)
BY_NAME: dict[str, ControllerEntry] = {entry.name: entry for entry in CONTROLLERS}
