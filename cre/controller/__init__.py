"""cre.controller: the glue per kind — caches -> Observation -> pure core -> Plan -> executor.

:class:`cre.controller.job.JobController` runs the Job tier: a Reconciler on
:mod:`cre.kube.runtime` plus its early capture (:mod:`~cre.controller.prefetch`,
:mod:`~cre.controller.tombstones`); its I/O is in :mod:`cre.controller.jobshell`. The test kit
drives it through :mod:`cre.testing.jobharness` (a scripted cluster side for tests, goldens and
benchmarks). :class:`cre.controller.workflow.WorkflowController` and
:class:`cre.controller.certification.CertificationController` run the two tiers above it on the
same runtime, as does :class:`cre.controller.workloadrun.WorkloadRunController`; the three share
:class:`cre.controller.tiershell.TierController` (every plan is applied by
:class:`cre.kube.executor.PlanExecutor`), the Workflow's views and live reads are in
:mod:`cre.controller.workflowshell`. The BandwidthMeasurement and GoodputMeasurement controllers
(:mod:`~cre.controller.measurement`, :mod:`~cre.controller.goodput`) share
:class:`cre.controller.logmeasure.LogMeasurementController`. All of them stand on
:class:`cre.kube.runtime.CoreReconciler` (queue, caches from an informer factory, run and stop),
and :mod:`cre.controller.registry` lists them once for the manager and the scenario runner.
"""

from cre.controller.certification import CertificationController
from cre.controller.job import JobController
from cre.controller.workflow import WorkflowController

__all__ = ["CertificationController", "JobController", "WorkflowController"]
