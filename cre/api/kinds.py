"""The registry of CRE kinds: names, scope, short names and printer columns per model.

``cre.api.crdgen`` builds one CRD per entry and ``cre.api.converter.from_dict`` dispatches on
``kind`` through it, so adding a kind means adding one ``KindInfo`` here.
"""

from __future__ import annotations

import attrs

from cre.api.certification import Certification
from cre.api.goodput import GoodputMeasurement
from cre.api.job import Job
from cre.api.measurement import BandwidthMeasurement, LogProfile
from cre.api.nodecertification import NodeCertification
from cre.api.reportexport import ReportExport, ReportExportPolicy
from cre.api.schedule import CertificationSchedule
from cre.api.workflow import Workflow
from cre.api.workloadrun import WorkloadRun


@attrs.frozen(kw_only=True)
class PrinterColumn:
    """One ``additionalPrinterColumns`` entry for ``kubectl get``."""

    name: str
    json_path: str
    type: str = "string"
    description: str = ""
    priority: int = 0


PHASE = PrinterColumn(name="Phase", json_path=".status.phase", description="Lifecycle phase")
REASON = PrinterColumn(
    name="Reason",
    json_path='.status.conditions[?(@.status=="True")].reason',
    description="Reason of the conditions that are True",
)
VERDICT = PrinterColumn(
    name="Verdict", json_path=".status.verdict", description="Passed, Failed or Incomplete"
)
AGE = PrinterColumn(name="Age", json_path=".metadata.creationTimestamp", type="date")


@attrs.frozen(kw_only=True)
class KindInfo:
    """How one model is served: names, scope and columns."""

    kind: str
    model: type
    plural: str
    short_names: tuple[str, ...]
    namespaced: bool = True
    status: bool = True
    columns: tuple[PrinterColumn, ...] = ()

    @property
    def singular(self) -> str:
        """The lower-case singular resource name."""
        return self.kind.lower()


KINDS: tuple[KindInfo, ...] = (
    KindInfo(
        kind="Certification",
        model=Certification,
        plural="certifications",
        # Not "cert": cert-manager's Certificate already answers to it.
        short_names=("crecert",),
        columns=(
            PHASE,
            VERDICT,
            PrinterColumn(
                name="Passed",
                json_path=".status.categories",
                description="Categories passed / total",
            ),
            AGE,
            attrs.evolve(REASON, priority=1),
            PrinterColumn(
                name="Variants",
                json_path=".status.variants",
                description="Catalog variants to run, every category",
                priority=1,
            ),
        ),
    ),
    KindInfo(
        kind="Workflow",
        model=Workflow,
        plural="workflows",
        short_names=("crewf",),
        columns=(
            PHASE,
            VERDICT,
            REASON,
            PrinterColumn(
                name="Groups", json_path=".status.orchestration.totalGroups", type="integer"
            ),
            PrinterColumn(
                name="Iteration",
                json_path=".status.orchestration.currentIteration",
                type="integer",
                priority=1,
            ),
            PrinterColumn(
                name="Platform", json_path=".status.orchestration.detectedPlatform", priority=1
            ),
            AGE,
        ),
    ),
    KindInfo(
        kind="Job",
        model=Job,
        plural="jobs",
        short_names=("crejob",),
        columns=(
            PHASE,
            REASON,
            PrinterColumn(name="Restarts", json_path=".status.restartCount", type="integer"),
            PrinterColumn(name="BusBW", json_path=".status.busBandwidthGBps",
                          description="Measured bus bandwidth, GB/s (max over sizes)"),
            PrinterColumn(name="Workload", json_path=".status.workloadRef.name", priority=1),
            PrinterColumn(name="Failure", json_path=".status.failureClass.scope", priority=1),
            AGE,
        ),
    ),
    KindInfo(
        kind="WorkloadRun",
        model=WorkloadRun,
        plural="workloadruns",
        short_names=("wlrun",),
        columns=(
            PHASE,
            REASON,
            PrinterColumn(name="Nodes", json_path=".spec.numNodes", type="integer"),
            PrinterColumn(name="Platform", json_path=".status.detectedPlatform", priority=1),
            PrinterColumn(name="GPU", json_path=".status.detectedGPUArchitecture", priority=1),
            PrinterColumn(name="Workflow", json_path=".status.workflowRef.name", priority=1),
            AGE,
        ),
    ),
    KindInfo(
        kind="BandwidthMeasurement",
        model=BandwidthMeasurement,
        plural="bandwidthmeasurements",
        short_names=("bwm",),
        columns=(
            PrinterColumn(name="Phase", json_path=".status.phase"),
            PrinterColumn(name="Job", json_path=".spec.jobRef.name"),
            PrinterColumn(name="Test", json_path=".spec.testType", priority=1),
            AGE,
        ),
    ),
    KindInfo(
        kind="GoodputMeasurement",
        model=GoodputMeasurement,
        plural="goodputmeasurements",
        short_names=("gpm",),
        columns=(
            PrinterColumn(name="Phase", json_path=".status.phase"),
            PrinterColumn(name="Job", json_path=".spec.jobRef.name"),
            PrinterColumn(name="Goodput", json_path=".status.result",
                          description="Useful share of the wall time"),
            PrinterColumn(name="Step", json_path=".status.currentStep", type="integer"),
            PrinterColumn(name="Interruptions", json_path=".status.interruptionCount",
                          type="integer", priority=1),
            AGE,
        ),
    ),
    KindInfo(
        kind="NodeCertification",
        model=NodeCertification,
        plural="nodecertifications",
        short_names=("nodecert",),
        namespaced=False,
        columns=(
            PrinterColumn(name="Node", json_path=".spec.nodeName"),
            PrinterColumn(name="State", json_path=".status.state",
                          description="Passed, Failed, Expired or Uncertified"),
            PrinterColumn(name="Passed", json_path=".status.categoriesPassed",
                          description="Categories passed / with a result"),
            PrinterColumn(name="Valid Until", json_path=".status.validUntil", type="date"),
            AGE,
        ),
    ),
    KindInfo(
        kind="CertificationSchedule",
        model=CertificationSchedule,
        plural="certificationschedules",
        short_names=("certsched",),
        columns=(
            PrinterColumn(name="Schedule", json_path=".spec.schedule",
                          description="Cron expression of the run times"),
            PrinterColumn(name="Interval", json_path=".spec.interval",
                          description="Time between runs"),
            PrinterColumn(name="Suspend", json_path=".spec.suspend", type="boolean"),
            PrinterColumn(name="Active", json_path=".status.active[*].name",
                          description="The run not ended yet"),
            PrinterColumn(name="Last Run", json_path=".status.lastScheduleTime", type="date",
                          description="The latest due time handled"),
            # A string, not a date: kubectl shows a future date as <invalid>.
            PrinterColumn(name="Next Run", json_path=".status.nextScheduleTime",
                          description="The next due time"),
            AGE,
            PrinterColumn(name="Missed", json_path=".status.missedRuns", type="integer",
                          priority=1),
            PrinterColumn(name="Skipped", json_path=".status.skippedRuns", type="integer",
                          priority=1),
        ),
    ),
    KindInfo(
        kind="ReportExportPolicy",
        model=ReportExportPolicy,
        plural="reportexportpolicies",
        short_names=("rep",),
        status=False,
        columns=(
            PrinterColumn(name="URL", json_path=".spec.webhook.url"),
            PrinterColumn(name="Suspended", json_path=".spec.suspend", type="boolean"),
            AGE,
        ),
    ),
    KindInfo(
        kind="ReportExport",
        model=ReportExport,
        plural="reportexports",
        short_names=("rex",),
        columns=(
            PrinterColumn(name="Source", json_path=".spec.source.name"),
            PHASE,
            PrinterColumn(name="Attempts", json_path=".status.attempts", type="integer"),
            PrinterColumn(name="HTTP", json_path=".status.lastHttpStatus", type="integer",
                          priority=1),
            PrinterColumn(name="Delivered", json_path=".status.deliveredAt", type="date"),
            AGE,
        ),
    ),
    KindInfo(
        kind="LogProfile",
        model=LogProfile,
        plural="logprofiles",
        short_names=("logprof",),
        namespaced=False,
        status=False,
        columns=(
            PrinterColumn(name="Strategy", json_path=".spec.workerStrategy.type"),
            PrinterColumn(name="ReplicatedJob", json_path=".spec.workerStrategy.replicatedJobName"),
            AGE,
        ),
    ),
)

BY_KIND: dict[str, KindInfo] = {info.kind: info for info in KINDS}
