"""cre.controller: the glue per kind — caches -> Observation -> pure core -> Plan -> executor.

:class:`cre.controller.job.controller.JobController` runs the Job tier: a Reconciler on
:mod:`cre.kube.runtime` plus its early capture (:mod:`~cre.controller.job.prefetch`,
:mod:`~cre.controller.job.tombstones`); its I/O is in :mod:`cre.controller.job.shell`. The test kit
drives it through :mod:`cre.testing.jobharness` (a scripted cluster side for tests, goldens and
benchmarks). :class:`cre.controller.workflow.controller.WorkflowController` and
:class:`cre.controller.certification.controller.CertificationController` run the two tiers above it
on the same runtime, as does :class:`cre.controller.workloadrun.controller.WorkloadRunController`;
the three share :class:`cre.controller.common.tiershell.TierController` (every plan is applied by
:class:`cre.kube.executor.PlanExecutor`), the Workflow's views and live reads are in
:mod:`cre.controller.workflow.shell`. The BandwidthMeasurement and GoodputMeasurement controllers
(:mod:`~cre.controller.measure.bandwidth`, :mod:`~cre.controller.measure.goodput`) share
:class:`cre.controller.measure.logread.LogMeasurementController`. All of them stand on
:class:`cre.kube.runtime.CoreReconciler` (queue, caches from an informer factory, run and stop),
as does :class:`cre.controller.nodecertification.controller.NodeCertificationController` (an
ended Certification's per-node results folded into NodeCertifications, node labels and taint)
and :class:`cre.controller.schedule.controller.ScheduleController` (recurring Certifications on
idle nodes, a TierController), :class:`cre.controller.export.policy.ReportExportPolicyController`
(one ReportExport per selected ended Certification) and
:class:`cre.controller.export.controller.ReportExportController` (the report POSTed to a webhook,
retried); :mod:`cre.controller.registry` lists them once for the manager and the scenario runner.
"""

from cre.controller.certification.controller import CertificationController
from cre.controller.export.controller import ReportExportController
from cre.controller.export.policy import ReportExportPolicyController
from cre.controller.job.controller import JobController
from cre.controller.measure.bandwidth import BandwidthController
from cre.controller.measure.goodput import GoodputController
from cre.controller.nodecertification.controller import NodeCertificationController
from cre.controller.registry import CONTROLLERS, ControllerContext, ControllerEntry
from cre.controller.schedule.controller import ScheduleController
from cre.controller.workflow.controller import WorkflowController
from cre.controller.workloadrun.controller import WorkloadRunController

__all__ = [
    "CONTROLLERS",
    "BandwidthController",
    "CertificationController",
    "ControllerContext",
    "ControllerEntry",
    "GoodputController",
    "JobController",
    "NodeCertificationController",
    "ReportExportController",
    "ReportExportPolicyController",
    "ScheduleController",
    "WorkflowController",
    "WorkloadRunController",
]
