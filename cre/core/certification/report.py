"""The Certification report: per category, per group and per node, as one value.

Built purely from a :class:`Snapshot` (the API models of the Certification, its Workflows,
their Jobs and the Jobs' BandwidthMeasurements), then printed three ways: a terminal table
(``cre report``), JSON for machines (``--json``, also the golden, and the body a ReportExport
sends: :mod:`cre.core.export`), and one self-contained HTML file (``--html``,
:mod:`cre.cli.htmlreport`). It lives in the pure core so the CLI and the export share it.

A node's verdict comes from its group: a node the group's Job names in ``failedNodes`` failed
for the reason given there; otherwise a Succeeded group passes its nodes, a Failed one fails
them with the group's failure reason, a Cancelled or InfraAborted group leaves them
Incomplete (not certified), and a group still running shows its phase. busBW is the Job's
measured peak (the largest ``busBW`` over message sizes, what a ``busBandwidthGBps``
threshold is judged on); the threshold line is the bound of a ``value >= N`` expression. A
finished diagnose run (``testScale: diagnose``) re-judges each node once, on its screening
group's row: Failed only when confirmed, Incomplete when the run left it Uncertified, else
Passed (the bisection, confirmation and cross-boundary groups stay listed as groups). A node
the fleet-relative rule flagged (the Job's ``status.outliers``, or the category's once the
Job is gone) carries the comparison (``outlier``), whatever its verdict: with ``action:
Report`` it passes and is still shown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import attrs

from cre.api.certification import Certification
from cre.api.conditions import ConditionType, FailedNodeReason, GroupPhase, Verdict
from cre.api.job import FailureClass, Job, NodeOutlier
from cre.api.measurement import BandwidthMeasurement
from cre.api.meta import Condition
from cre.api.workflow import DiagnoseStage, DiagnoseStatus, GroupStatus, Workflow
from cre.core.workflow import diagnose as DG

REPORT_KIND = "CertificationReport"
THRESHOLD_KEY = "busBandwidthGBps"
_LOWER_BOUND = re.compile(r"\bvalue\s*>=?\s*([0-9]+(?:\.[0-9]+)?)")


@attrs.frozen(kw_only=True)
class Snapshot:
    """A Certification and the objects under it, as API models."""

    certification: Certification
    workflows: Mapping[str, Workflow] = attrs.field(factory=dict)
    jobs: Mapping[str, Job] = attrs.field(factory=dict)
    # BandwidthMeasurement by the name of the Job it measures.
    bandwidth: Mapping[str, BandwidthMeasurement] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Point:
    """Bandwidth at one message size (GB/s)."""

    size_bytes: int
    alg_bw: float
    bus_bw: float
    samples: int


@attrs.frozen(kw_only=True)
class FailureLogView:
    """The captured log tail of a failed group's Job."""

    pod: str | None
    container: str | None
    node: str | None
    exit_code: int | None
    reason: str | None
    tail: str


@attrs.frozen(kw_only=True)
class NodePeak:
    """One node's own peak busBW in a per-node measurement (``nodeResults``, e.g.
    ``nccl-loopback``), or why it has none."""

    node: str
    pod: str
    bus_bw: float | None
    message: str | None


@attrs.frozen(kw_only=True)
class GroupReport:
    """One node group of a category: its Job, outcome and measurement."""

    name: str
    phase: str
    nodes: tuple[str, ...]
    job: str | None
    job_phase: str | None
    reason: str | None
    message: str | None
    failure_class: FailureClass | None
    bus_bw_peak: float | None
    points: tuple[Point, ...]
    failure_log: FailureLogView | None
    # Per-node peaks when the measurement judged each node on its own (``points`` are then
    # the per-size means over the nodes).
    node_peaks: tuple[NodePeak, ...] = ()


@attrs.frozen(kw_only=True)
class NodeReport:
    """One node's outcome in one category."""

    node: str
    group: str
    verdict: str
    reason: str | None
    failure_class: FailureClass | None
    bus_bw: float | None
    # The fleet-relative rule's finding on this node, if it flagged it.
    outlier: NodeOutlier | None = None


@attrs.frozen(kw_only=True)
class CategoryReport:
    """One category: its Workflow's outcome, groups, nodes and threshold."""

    entry: str
    state: str
    verdict: str | None
    message: str | None
    workflow: str | None
    platform: str | None
    architecture: str | None
    thresholds: Mapping[str, str]
    threshold_gbps: float | None
    groups: tuple[GroupReport, ...]
    nodes: tuple[NodeReport, ...]


@attrs.frozen(kw_only=True)
class Report:
    """A Certification's report."""

    name: str
    namespace: str
    phase: str | None
    verdict: str | None
    reason: str | None
    message: str | None
    categories: tuple[CategoryReport, ...]
    # The failure log lines that matter for the headline (NCCL WARN/ERROR, errors), and where
    # they come from ("<category> <group> <pod>").
    failure_lines: tuple[str, ...] = ()
    failure_source: str | None = None

    @property
    def result(self) -> str:
        """PASSED, FAILED or INCOMPLETE once terminal; RUNNING or PENDING before."""
        if self.verdict:
            return self.verdict.upper()
        return (self.phase or "Pending").upper()

    @property
    def failed_nodes(self) -> tuple[str, ...]:
        """Nodes that failed in any category, sorted."""
        return tuple(sorted({n.node for c in self.categories for n in c.nodes
                             if n.verdict == Verdict.FAILED}))

    @property
    def all_nodes(self) -> tuple[str, ...]:
        """Every node any category ran on, sorted."""
        return tuple(sorted({n.node for c in self.categories for n in c.nodes}))

    @property
    def outlier_nodes(self) -> tuple[str, ...]:
        """Nodes the fleet-relative rule flagged in any category, sorted."""
        return tuple(sorted({n.node for c in self.categories for n in c.nodes
                             if n.outlier is not None}))


# A log line that explains a failure: NCCL's own warnings and errors, and error words; NCCL
# INFO lines (every rank's channel and transport chatter) never, even when they say "error".
_KEY_LINE: Final = re.compile(
    r"NCCL (WARN|ERROR)|\b(error|errors|failure|failed|fatal|exception|traceback|abort(ed)?)\b"
    r"|non-zero status|segmentation fault|out of memory", re.IGNORECASE)
_CHATTER: Final = re.compile(r"NCCL INFO|^-+$")


def failure_lines(tail: str, *, limit: int = 8) -> tuple[str, ...]:
    """The lines of a failure log that matter, in order, without repeats (at most ``limit``)."""
    out: list[str] = []
    for raw in tail.splitlines():
        line = raw.strip()
        if not line or _CHATTER.search(line) or not _KEY_LINE.search(line) or line in out:
            continue
        out.append(line)
        if len(out) == limit:
            break
    return tuple(out)


def _headline_log(message: str | None,
                  categories: list[CategoryReport]) -> tuple[tuple[str, ...], str | None]:
    """The key failure log lines of the category the headline names (else the first failed
    category with a captured log)."""
    failed = [c for c in categories if c.state == "Failed"]
    named = [c for c in failed if message and message.startswith(f"Category {c.entry} ")]
    for category in named + [c for c in failed if c not in named]:
        for group in category.groups:
            log = group.failure_log
            lines = failure_lines(log.tail) if log is not None else ()
            if log is not None and lines:
                return lines, f"{category.entry} {group.name} {log.pod or ''}".rstrip()
    return (), None


def headline(conditions: tuple[Condition, ...]) -> Condition | None:
    """The condition that says where an object stands: the True trio member, else the first."""
    trio = (ConditionType.FAILED, ConditionType.SUCCEEDED, ConditionType.IN_PROGRESS)
    for ctype in trio:
        for cond in conditions:
            if cond.type == ctype and cond.status == "True":
                return cond
    return conditions[0] if conditions else None


def job_reason(job: Job) -> str | None:
    """Why a Job is where it is: a True ValidationFailed first (a threshold miss), else the
    headline condition's reason."""
    for cond in job.status.conditions:
        if cond.type == ConditionType.VALIDATION_FAILED and cond.status == "True":
            return cond.reason
    top = headline(job.status.conditions)
    return top.reason if top else None


def bandwidth_points(bm: BandwidthMeasurement | None) -> tuple[Point, ...]:
    """The measurement's results by size."""
    if bm is None:
        return ()
    return tuple(sorted(
        (Point(size_bytes=r.size_bytes, alg_bw=float(r.alg_bw), bus_bw=float(r.bus_bw),
               samples=r.samples) for r in bm.status.results),
        key=lambda p: p.size_bytes))


def threshold_gbps(thresholds: Mapping[str, str]) -> float | None:
    """The lower bound of the ``busBandwidthGBps`` expression (``value >= 300``), if simple."""
    expr = thresholds.get(THRESHOLD_KEY)
    match = _LOWER_BOUND.search(expr) if expr else None
    return float(match.group(1)) if match else None


def _workflow_thresholds(workflow: Workflow | None, jobs: list[Job]) -> dict[str, str]:
    for job in jobs:
        if job.spec.thresholds:
            return dict(job.spec.thresholds)
    perf = workflow.spec.validation.performance if workflow and workflow.spec.validation else None
    if perf is not None and perf.thresholds is not None:
        return dict(perf.thresholds.thresholds)
    return {}


def _group(group: GroupStatus, snap: Snapshot) -> GroupReport:
    job = snap.jobs.get(group.job_ref.name) if group.job_ref else None
    bm = snap.bandwidth.get(job.metadata.name or "") if job else None
    points = bandwidth_points(bm)
    log = job.status.failure_log if job else None
    return GroupReport(
        name=group.name,
        phase=str(group.phase),
        nodes=group.nodes,
        job=group.job_ref.name if group.job_ref else None,
        job_phase=str(job.status.phase) if job and job.status.phase else None,
        reason=group.failure_reason or (job_reason(job) if job else None),
        message=group.message,
        failure_class=group.failure_class or (job.status.failure_class if job else None),
        bus_bw_peak=max((p.bus_bw for p in points), default=None),
        points=points,
        failure_log=None if log is None else FailureLogView(
            pod=log.pod_name, container=log.container_name, node=log.node_name,
            exit_code=log.exit_code, reason=log.reason, tail=log.tail),
        node_peaks=() if bm is None else tuple(
            NodePeak(node=n.node_name, pod=n.pod_name,
                     bus_bw=None if n.bus_bw is None else float(n.bus_bw), message=n.message)
            for n in bm.status.node_results),
    )


def node_bandwidth(bm: BandwidthMeasurement | None) -> dict[str, float]:
    """Node -> its own peak busBW, from a per-node measurement (``nccl-loopback``)."""
    if bm is None:
        return {}
    return {n.node_name: float(n.bus_bw) for n in bm.status.node_results
            if n.bus_bw is not None}


def _nodes(group: GroupReport, job: Job | None,
           bm: BandwidthMeasurement | None = None,
           recorded: tuple[NodeOutlier, ...] = ()) -> list[NodeReport]:
    """The group's nodes; ``recorded`` are the outliers the category kept (its status), for
    a Job that is gone (the Job's own list wins while it exists)."""
    failed = {f.name: f for f in job.status.failed_nodes} if job else {}
    outliers = {o.node_name: o for o in (*recorded, *(job.status.outliers if job else ()))}
    own = node_bandwidth(bm)
    # A per-node threshold miss blames the nodes listed; the other nodes of the group passed.
    per_node = bool(own) and bool(failed) and all(
        f.reason == FailedNodeReason.THRESHOLD_VIOLATION for f in failed.values())
    out = []
    for node in group.nodes:
        reason = group.reason
        if node in failed:
            verdict, reason = str(Verdict.FAILED), str(failed[node].reason)
        elif group.phase == GroupPhase.SUCCEEDED or (per_node and group.phase
                                                     == GroupPhase.FAILED):
            verdict, reason = str(Verdict.PASSED), None
        elif group.phase == GroupPhase.FAILED:
            verdict = str(Verdict.FAILED)
        elif group.phase in (GroupPhase.CANCELLED, GroupPhase.INFRA_ABORTED):
            verdict, reason = str(Verdict.INCOMPLETE), reason or group.phase
        else:
            verdict = group.phase
        out.append(NodeReport(node=node, group=group.name, verdict=verdict, reason=reason,
                              failure_class=group.failure_class if verdict != Verdict.PASSED
                              else None, bus_bw=own.get(node, group.bus_bw_peak),
                              outlier=outliers.get(node)))
    return out


def _diagnosed(nodes: list[NodeReport], diag: DiagnoseStatus) -> list[NodeReport]:
    """One row per node, its screening row, re-judged by what the diagnose run concluded."""
    screening = {s.name for s in diag.steps if s.stage == DiagnoseStage.SCREENING}
    failed, uncertified = (({r.name: r.reason for r in rs}) for rs in DG.records(diag))
    out = []
    for row in nodes:
        if row.group not in screening:
            continue
        if row.node in failed:
            row = attrs.evolve(row, verdict=str(Verdict.FAILED), reason=failed[row.node])
        elif row.node in uncertified:
            row = attrs.evolve(row, verdict=str(Verdict.INCOMPLETE),
                               reason=uncertified[row.node])
        elif row.verdict == Verdict.FAILED and row.reason != FailedNodeReason.\
                HARDWARE_FAILURE_DETECTED:
            # A suspect the run cleared (or a node of a bad link: the link failed, not it).
            row = attrs.evolve(row, verdict=str(Verdict.PASSED), reason=None,
                               failure_class=None)
        out.append(row)
    return out


def build_report(snap: Snapshot) -> Report:
    """The report of one snapshot."""
    cert = snap.certification
    categories = []
    for status in cert.status.category_statuses:
        ref = status.workflow_ref
        workflow = snap.workflows.get(ref.name) if ref else None
        groups = [_group(g, snap) for g in workflow.status.groups] if workflow else []
        jobs = [snap.jobs[g.job] for g in groups if g.job is not None and g.job in snap.jobs]
        nodes = [n for g in groups for n in _nodes(g, snap.jobs.get(g.job or ""),
                                                   snap.bandwidth.get(g.job or ""),
                                                   status.outliers)]
        diag = workflow.status.orchestration.diagnose if workflow and \
            workflow.status.orchestration else None
        if diag is not None and diag.stage == DiagnoseStage.COMPLETE:
            nodes = _diagnosed(nodes, diag)
        thresholds = _workflow_thresholds(workflow, jobs)
        orch = workflow.status.orchestration if workflow else None
        categories.append(CategoryReport(
            entry=f"{status.domain}/{status.variant}",
            state=str(status.status),
            verdict=str(status.verdict) if status.verdict else None,
            message=status.message,
            workflow=ref.name if ref else None,
            platform=orch.detected_platform if orch else None,
            architecture=orch.detected_gpu_architecture if orch else None,
            thresholds=thresholds,
            threshold_gbps=threshold_gbps(thresholds),
            groups=tuple(groups),
            nodes=tuple(sorted(nodes, key=lambda n: (n.node, n.group))),
        ))
    for pending in cert.spec.categories[len(cert.status.category_statuses):]:
        categories.append(CategoryReport(  # not started yet: no status entry
            entry=f"{pending.domain}/{pending.variant}", state="Pending", verdict=None,
            message=None, workflow=None, platform=None, architecture=None, thresholds={},
            threshold_gbps=None, groups=(), nodes=()))
    cond = headline(cert.status.conditions)
    lines, source = _headline_log(cond.message if cond else None, categories)
    return Report(
        name=cert.metadata.name or "",
        namespace=cert.metadata.namespace or "",
        phase=str(cert.status.phase) if cert.status.phase else None,
        verdict=str(cert.status.verdict) if cert.status.verdict else None,
        reason=cond.reason if cond else None,
        message=cond.message if cond else None,
        categories=tuple(categories),
        failure_lines=lines,
        failure_source=source,
    )


def _failure_class(fc: FailureClass | None) -> dict[str, str] | None:
    if fc is None:
        return None
    return {"scope": str(fc.scope), "reason": fc.reason, "message": fc.message}


def _outlier(o: NodeOutlier | None) -> dict[str, Any] | None:
    if o is None:
        return None
    return {"busBW": o.bus_bw, "reference": o.reference, "basis": str(o.basis),
            "peers": o.peers, "domain": o.domain, "message": o.message}


def _gbps(value: float | None) -> str | None:
    return None if value is None else f"{value:.2f}"


def report_json(report: Report) -> dict[str, Any]:
    """The report for machines (``cre report --json``); bandwidths as ``%.2f`` GB/s strings,
    as the measurement API stores them. No clock readings, so it is stable for a golden."""
    passed = sum(1 for c in report.categories if c.verdict == Verdict.PASSED)
    return {
        "apiVersion": "cre.dev/v1alpha1",
        "kind": REPORT_KIND,
        "certification": {"name": report.name, "namespace": report.namespace,
                          "phase": report.phase, "verdict": report.verdict,
                          "reason": report.reason, "message": report.message,
                          "failureLines": list(report.failure_lines),
                          "failureSource": report.failure_source},
        "summary": {
            "result": report.result,
            "categories": len(report.categories),
            "categoriesPassed": passed,
            "nodes": len(report.all_nodes),
            "failedNodes": list(report.failed_nodes),
            "outlierNodes": list(report.outlier_nodes),
        },
        "categories": [
            {
                "entry": c.entry, "state": c.state, "verdict": c.verdict, "message": c.message,
                "workflow": c.workflow, "platform": c.platform, "architecture": c.architecture,
                "thresholds": dict(c.thresholds),
                "busBandwidthThresholdGBps": _gbps(c.threshold_gbps),
                "groups": [
                    {
                        "name": g.name, "phase": g.phase, "nodes": list(g.nodes),
                        "job": g.job, "jobPhase": g.job_phase, "reason": g.reason,
                        "message": g.message, "failureClass": _failure_class(g.failure_class),
                        "busBWPeakGBps": _gbps(g.bus_bw_peak),
                        "bandwidth": [
                            {"sizeBytes": p.size_bytes, "algBW": f"{p.alg_bw:.2f}",
                             "busBW": f"{p.bus_bw:.2f}", "samples": p.samples}
                            for p in g.points
                        ],
                        "failureLog": None if g.failure_log is None else {
                            "pod": g.failure_log.pod, "container": g.failure_log.container,
                            "node": g.failure_log.node, "exitCode": g.failure_log.exit_code,
                            "reason": g.failure_log.reason, "tail": g.failure_log.tail,
                        },
                    }
                    for g in c.groups
                ],
                "nodes": [
                    {"node": n.node, "group": n.group, "verdict": n.verdict, "reason": n.reason,
                     "failureClass": _failure_class(n.failure_class),
                     "busBWGBps": _gbps(n.bus_bw), "outlier": _outlier(n.outlier)}
                    for n in c.nodes
                ],
            }
            for c in report.categories
        ],
    }
