"""``cre status|report workloadrun/NAME`` and ``cre report CERT1 CERT2 ...``.

A WorkloadRun runs one Workflow built from the user's image, so its report is the report of
one category: the same groups, nodes, failure classes, failure logs and bandwidth as a
Certification's category, read the same way
(:func:`cre.core.certification.report.build_report` over a
:class:`~cre.core.certification.report.Snapshot` holding the WorkloadRun's Workflow as that
one category, named ``workloadrun/<name>``). Its verdict is the Workflow's (``Passed`` /
``Failed`` / ``Incomplete``), or the WorkloadRun's phase when the Workflow is gone.

Several Certifications in one report: each report in turn, then one line over all of them;
as JSON a kubectl-style ``List`` of the reports with a ``summary`` across them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import anyio
import attrs
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from cre.api import labels as L
from cre.api.certification import (
    CategoryStatus,
    Certification,
    CertificationCategory,
    CertificationSpec,
    CertificationStatus,
)
from cre.api.conditions import CategoryState, Phase, Verdict
from cre.api.job import Job
from cre.api.measurement import BandwidthMeasurement
from cre.api.meta import ObjectMeta
from cre.api.workflow import Workflow
from cre.api.workloadrun import WorkloadRun
from cre.cli.cluster import (
    BANDWIDTH,
    JOBS,
    WORKFLOWS,
    Connection,
    api_failure,
    connect,
    cre_resource,
    namespace_of,
    read_model,
)
from cre.cli.exitcodes import CliError, ExitCode
from cre.core.certification.report import (
    Report,
    Snapshot,
    build_report,
    headline,
    job_reason,
    report_json,
)
from cre.kube.client import ApiError, KubeClient

WORKLOADRUNS = cre_resource("WorkloadRun")
PREFIXES: Final = ("workloadrun/", "workloadruns/", "workloadrun.cre.dev/",
                   "workloadruns.cre.dev/")
DOMAIN: Final = "workloadrun"


def workloadrun_name(arg: str | None) -> str | None:
    """``NAME`` of ``workloadrun/NAME`` (kubectl's TYPE/NAME forms); None for anything else."""
    if arg is None:
        return None
    lower = arg.lower()
    for prefix in PREFIXES:
        if lower.startswith(prefix):
            name = arg[len(prefix):]
            if not name:
                raise CliError(ExitCode.USAGE, f"{arg}: no WorkloadRun name after the '/'")
            return name
    return None


@attrs.frozen(kw_only=True)
class RunSnapshot:
    """A WorkloadRun and the objects under it, as API models."""

    run: WorkloadRun
    snapshot: Snapshot


async def _get_run(client: KubeClient, name: str, namespace: str) -> WorkloadRun:
    try:
        raw = await client.get(WORKLOADRUNS, name, namespace=namespace)
    except ApiError as exc:
        if exc.not_found:
            details = exc.body.get("details") or {}
            if details.get("name") == name or "not found" in exc.message:
                raise CliError(ExitCode.NOT_FOUND, f"WorkloadRun {namespace}/{name} not found "
                               f"(kubectl get workloadruns -n {namespace} lists them)") from None
            raise CliError(ExitCode.NOT_FOUND, f"{client.host} does not serve "
                           f"{WORKLOADRUNS.plural}.{L.GROUP}: CRE's CRDs are not installed "
                           "(kubectl apply -k deploy/crds)") from None
        raise api_failure(exc, host=client.host, what=f"WorkloadRun {namespace}/{name}") from None
    run: WorkloadRun = read_model(WorkloadRun, raw)
    return run


async def _items(client: KubeClient, res: Any, namespace: str,
                 query: dict[str, str] | None = None) -> list[dict[str, Any]]:
    try:
        raw = await client.list(res, namespace=namespace, query=query)
    except ApiError as exc:
        if exc.not_found:
            return []
        raise api_failure(exc, host=client.host, what=f"list {res.plural}") from None
    items: list[dict[str, Any]] = raw.get("items", [])
    return items


def _category_state(workflow: Workflow | None, run: WorkloadRun) -> CategoryState:
    phase = (workflow.status.phase if workflow else None) or run.status.phase
    return {Phase.SUCCEEDED: CategoryState.SUCCEEDED, Phase.FAILED: CategoryState.FAILED,
            Phase.RUNNING: CategoryState.IN_PROGRESS}.get(phase or Phase.PENDING,
                                                          CategoryState.PENDING)


def run_verdict(run: WorkloadRun, workflow: Workflow | None) -> Verdict | None:
    """The Workflow's verdict; else Passed/Failed from the WorkloadRun's terminal phase."""
    if workflow is not None and workflow.status.verdict is not None:
        return workflow.status.verdict
    if run.status.phase == Phase.SUCCEEDED:
        return Verdict.PASSED
    return Verdict.FAILED if run.status.phase == Phase.FAILED else None


def as_snapshot(run: WorkloadRun, *, workflow: Workflow | None, jobs: dict[str, Job],
                bandwidth: dict[str, BandwidthMeasurement]) -> Snapshot:
    """The WorkloadRun as a one-category snapshot (see the module docstring)."""
    name = run.metadata.name or ""
    ref = run.status.workflow_ref
    cond = headline(run.status.conditions)
    category = CategoryStatus(
        domain=DOMAIN, variant=name, workflow_ref=ref, status=_category_state(workflow, run),
        verdict=run_verdict(run, workflow) if run.status.phase in (Phase.SUCCEEDED,
                                                                   Phase.FAILED) else None,
        message=cond.message if cond else None)
    holder = Certification(
        metadata=ObjectMeta(name=name, namespace=run.metadata.namespace,
                            creation_timestamp=run.metadata.creation_timestamp),
        spec=CertificationSpec(categories=(CertificationCategory(domain=DOMAIN,
                                                                 variant=name),)),
        status=CertificationStatus(conditions=run.status.conditions, phase=run.status.phase,
                                   verdict=category.verdict, category_statuses=(category,)))
    workflows = {workflow.metadata.name or "": workflow} if workflow is not None else {}
    return Snapshot(certification=holder, workflows=workflows, jobs=jobs, bandwidth=bandwidth)


async def read_run(conn: Connection, name: str) -> RunSnapshot:
    """The WorkloadRun, its Workflow, the Workflow's Jobs and their measurements."""
    namespace = namespace_of(conn)
    client = await connect(conn)
    try:
        with anyio.fail_after(conn.timeout):
            run = await _get_run(client, name, namespace)
            ref = run.status.workflow_ref
            workflow = None
            if ref is not None:
                try:
                    workflow = read_model(Workflow, await client.get(
                        WORKFLOWS, ref.name, namespace=ref.namespace or namespace))
                except ApiError as exc:
                    if not exc.not_found:
                        raise api_failure(exc, host=client.host,
                                          what=f"Workflow {ref.name}") from None
            jobs: dict[str, Job] = {}
            bandwidth: dict[str, BandwidthMeasurement] = {}
            if workflow is not None:
                wf_ns = workflow.metadata.namespace or namespace
                selector = {"labelSelector": f"{L.WORKFLOW}={workflow.metadata.name}"}
                for item in await _items(client, JOBS, wf_ns, selector):
                    job: Job = read_model(Job, item)
                    jobs[job.metadata.name or ""] = job
                for item in await _items(client, BANDWIDTH, wf_ns) if jobs else []:
                    bm: BandwidthMeasurement = read_model(BandwidthMeasurement, item)
                    if bm.spec.job_ref.name in jobs:
                        bandwidth[bm.spec.job_ref.name] = bm
    except TimeoutError:
        raise CliError(ExitCode.UNREACHABLE, f"no answer from the API server at {client.host} "
                       f"within {conn.timeout:g}s (--request-timeout)") from None
    finally:
        await client.close()
    return RunSnapshot(run=run, snapshot=as_snapshot(run, workflow=workflow, jobs=jobs,
                                                     bandwidth=bandwidth))


def _text(label: str, *parts: object) -> str:
    return "  ".join([label, *(str(p) for p in parts if p)])


def run_tree(rs: RunSnapshot) -> Tree:
    """``cre status workloadrun/NAME``: the WorkloadRun, its Workflow, groups and Jobs."""
    run = rs.run
    cond = headline(run.status.conditions)
    workflow = next(iter(rs.snapshot.workflows.values()), None)
    where = ""
    if run.status.detected_platform:
        where = (f"on {run.status.detected_platform}/{run.status.detected_gpu_architecture}, "
                 f"{run.status.resolved_gpus_per_node} GPU(s)/node")
    tree = Tree(_text(f"WorkloadRun {run.metadata.namespace}/{run.metadata.name}",
                      run.status.phase or "Pending", run_verdict(run, workflow)
                      if run.status.phase in (Phase.SUCCEEDED, Phase.FAILED) else None,
                      cond.reason if cond else None, where), highlight=False)
    ref = run.status.workflow_ref
    if workflow is None:
        tree.add(f"Workflow {ref.name}  not found" if ref else "no Workflow yet")
        return tree
    wcond = headline(workflow.status.conditions)
    branch = tree.add(_text(f"Workflow {workflow.metadata.name}", workflow.status.phase,
                            workflow.status.verdict, wcond.reason if wcond else None))
    for group in workflow.status.groups:
        leaf = branch.add(_text(f"group {group.name} ({','.join(group.nodes) or 'unpinned'})",
                                group.phase, group.failure_reason))
        if group.job_ref is not None:
            job = rs.snapshot.jobs.get(group.job_ref.name)
            if job is None:
                leaf.add(f"Job {group.job_ref.name}  not found")
                continue
            bw = job.status.bus_bandwidth_gbps
            leaf.add(_text(f"Job {group.job_ref.name}", job.status.phase, job_reason(job),
                           f"busBW {float(bw):.2f} GB/s" if bw is not None else None))
    return tree


def print_run_report(console: Console, report: Report) -> None:
    """The tables of a WorkloadRun's report (one category: the run's Workflow)."""
    console.print(f"WorkloadRun {report.namespace}/{report.name}  result {report.result}  "
                  f"nodes {len(report.all_nodes)}  failed nodes {len(report.failed_nodes)}",
                  markup=False)
    if report.message:
        console.print(f"{report.reason}: {report.message}", markup=False)
    for category in report.categories:
        table = Table(title=f"Workflow {category.workflow or '-'}: "
                      f"{category.verdict or category.state}", title_justify="left")
        for column in ("node", "group", "verdict", "reason", "failure class", "busBW (GB/s)"):
            table.add_column(column, overflow="fold")
        for n in category.nodes:
            fc = f"{n.failure_class.scope}: {n.failure_class.reason}" if n.failure_class else ""
            table.add_row(n.node, n.group, n.verdict, n.reason or "", fc,
                          "" if n.bus_bw is None else f"{n.bus_bw:.2f}")
        if not category.nodes:
            table.add_row("(no groups yet)", "", category.state, "", "", "")
        console.print(table)


def run_report_json(report: Report) -> dict[str, Any]:
    """A WorkloadRun's report for machines: the Certification report's shape, with
    ``kind: WorkloadRunReport`` and the run under ``workloadRun``."""
    doc = report_json(report)
    doc["kind"] = "WorkloadRunReport"
    doc["workloadRun"] = doc.pop("certification")
    return doc


async def read_reports(conn: Connection, names: Sequence[str]) -> list[Report]:
    """One report per named Certification, in the order given."""
    from cre.cli.session import read_snapshots

    reports = []
    for name in names:
        (snap,) = await read_snapshots(conn, name)
        reports.append(build_report(snap))
    return reports


def combined_summary(reports: Sequence[Report]) -> dict[str, Any]:
    """Across several reports: how many of each result, and every failed node (in the order
    of the reports, each report's nodes sorted)."""
    results: dict[str, int] = {}
    for r in reports:
        results[r.result] = results.get(r.result, 0) + 1
    failed = [f"{r.namespace}/{r.name}:{n}" for r in reports for n in r.failed_nodes]
    return {"certifications": len(reports), "results": dict(sorted(results.items())),
            "failedNodes": failed}


def combined_json(reports: Sequence[Report]) -> dict[str, Any]:
    """Several reports as one kubectl-style List with a summary across them."""
    return {"apiVersion": "v1", "kind": "List", "summary": combined_summary(reports),
            "items": [report_json(r) for r in reports]}


def combined_line(reports: Sequence[Report]) -> str:
    """The closing line of a multi-Certification report."""
    summary = combined_summary(reports)
    counts = ", ".join(f"{n} {result}" for result, n in summary["results"].items())
    failed = summary["failedNodes"]
    return (f"{summary['certifications']} Certifications: {counts}; failed nodes: "
            f"{', '.join(failed) if failed else 'none'}")

