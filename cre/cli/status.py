"""``cre status``: a Certification as a tree, Certification -> categories -> Workflows ->
groups -> Jobs, with phase, verdict, reason, measured busBW and age on every line.

Pure over a :class:`~cre.cli.cluster.Snapshot` and the current time (a parameter, so a test
fixes it); ``--watch`` redraws the tree in a rich ``Live`` until the Certification is terminal.
"""

from __future__ import annotations

from datetime import datetime

from rich.text import Text
from rich.tree import Tree

from cre.api.job import Job
from cre.api.workflow import GroupStatus, Workflow
from cre.cli.cluster import Snapshot
from cre.cli.report import bandwidth_points, headline, job_reason

STYLES = {"Passed": "green", "Succeeded": "green", "Failed": "red", "Incomplete": "yellow",
          "Running": "cyan", "InProgress": "cyan", "Cancelled": "yellow",
          "InfraAborted": "yellow", "Pending": "dim"}


def age(then: datetime | None, now: datetime) -> str:
    """kubectl's short age: ``45s``, ``12m``, ``3h``, ``2d``."""
    if then is None:
        return "-"
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _word(value: object | None) -> Text:
    text = str(value) if value else "-"
    return Text(text, style=STYLES.get(text, ""))


def line(label: str, *, phase: object | None, verdict: object | None = None,
         reason: str | None = None, bus_bw: float | None = None, since: str = "-") -> Text:
    """One tree line: label, phase, verdict, reason, busBW, age."""
    out = Text(label, style="bold")
    out.append("  ")
    out.append_text(_word(phase))
    if verdict:
        out.append("  verdict ")
        out.append_text(_word(verdict))
    if reason:
        out.append(f"  {reason}", style="dim")
    if bus_bw is not None:
        out.append(f"  busBW {bus_bw:.2f} GB/s", style="magenta")
    out.append(f"  {since}", style="dim")
    return out


def _job_line(job: Job | None, name: str, snap: Snapshot, now: datetime) -> Text:
    if job is None:
        return line(f"Job {name}", phase="not found")
    points = bandwidth_points(snap.bandwidth.get(name))
    peak = max((p.bus_bw for p in points), default=None)
    if job.status.bus_bandwidth_gbps is not None:
        # The Job's judged value (for a per-node measurement: the lowest node's peak).
        peak = float(job.status.bus_bandwidth_gbps)
    return line(f"Job {name}", phase=job.status.phase, reason=job_reason(job), bus_bw=peak,
                since=age(job.metadata.creation_timestamp, now))


def _group_line(group: GroupStatus) -> Text:
    nodes = ",".join(group.nodes) if group.nodes else "unpinned"
    reason = group.failure_reason
    if group.failure_class is not None:
        reason = f"{reason or ''} [{group.failure_class.scope}]".strip()
    return line(f"group {group.name} ({nodes})", phase=group.phase, reason=reason)


def _workflow(tree: Tree, workflow: Workflow, snap: Snapshot, now: datetime) -> None:
    cond = headline(workflow.status.conditions)
    branch = tree.add(line(f"Workflow {workflow.metadata.name}", phase=workflow.status.phase,
                           verdict=workflow.status.verdict, reason=cond.reason if cond else None,
                           since=age(workflow.metadata.creation_timestamp, now)))
    for group in workflow.status.groups:
        leaf = branch.add(_group_line(group))
        if group.job_ref is not None:
            name = group.job_ref.name
            leaf.add(_job_line(snap.jobs.get(name), name, snap, now))


def status_tree(snap: Snapshot, now: datetime) -> Tree:
    """The tree of one Certification."""
    cert = snap.certification
    cond = headline(cert.status.conditions)
    title = f"Certification {cert.metadata.namespace}/{cert.metadata.name}"
    if cert.status.categories:
        title += f" ({cert.status.categories} categories passed)"
    tree = Tree(line(title, phase=cert.status.phase or "Pending", verdict=cert.status.verdict,
                     reason=cond.reason if cond else None,
                     since=age(cert.metadata.creation_timestamp, now)))
    for category in cert.status.category_statuses:
        branch = tree.add(line(f"{category.domain}/{category.variant}", phase=category.status,
                               verdict=category.verdict, reason=category.message))
        ref = category.workflow_ref
        workflow = snap.workflows.get(ref.name) if ref else None
        if workflow is not None:
            _workflow(branch, workflow, snap, now)
        elif ref is not None:
            branch.add(line(f"Workflow {ref.name}", phase="not found"))
    for pending in cert.spec.categories[len(cert.status.category_statuses):]:
        tree.add(line(f"{pending.domain}/{pending.variant}", phase="Pending"))  # not started
    return tree


def terminal(snap: Snapshot) -> bool:
    """Whether the Certification has finished (``--watch`` stops then)."""
    phase = snap.certification.status.phase
    return phase is not None and phase.terminal
