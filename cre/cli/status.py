"""``cre status``: a Certification as a tree, Certification -> categories -> Workflows ->
groups -> Jobs, with phase, verdict, reason, measured busBW and age on every line.

Pure over a :class:`~cre.core.certification.report.Snapshot` and the current time (a
parameter, so a test fixes it); ``--watch`` redraws the tree in a rich ``Live`` until the
Certification is terminal.
"""

from __future__ import annotations

from datetime import datetime

import attrs
from rich.text import Text
from rich.tree import Tree

from cre.api.job import Job
from cre.api.workflow import GroupStatus, Workflow
from cre.core.certification.report import Snapshot, bandwidth_points, headline, job_reason

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


@attrs.frozen(kw_only=True)
class Row:
    """One object of the tree: its depth, a key stable across reads, and what a line shows."""

    depth: int
    key: str
    label: str
    phase: object | None
    verdict: object | None = None
    reason: str | None = None
    bus_bw: float | None = None
    created: datetime | None = None


def line(label: str, *, phase: object | None, verdict: object | None = None,
         reason: str | None = None, bus_bw: float | None = None,
         since: str | None = "-") -> Text:
    """One tree line: label, phase, verdict, reason, busBW, age (left out when ``since`` is
    None: the change lines of ``--watch`` must not change every second)."""
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
    if since is not None:
        out.append(f"  {since}", style="dim")
    return out


def _job_row(job: Job | None, name: str, snap: Snapshot, key: str) -> Row:
    if job is None:
        return Row(depth=4, key=key, label=f"Job {name}", phase="not found")
    points = bandwidth_points(snap.bandwidth.get(name))
    peak = max((p.bus_bw for p in points), default=None)
    if job.status.bus_bandwidth_gbps is not None:
        # The Job's judged value (for a per-node measurement: the lowest node's peak).
        peak = float(job.status.bus_bandwidth_gbps)
    return Row(depth=4, key=key, label=f"Job {name}", phase=job.status.phase,
               reason=job_reason(job), bus_bw=peak, created=job.metadata.creation_timestamp)


def _group_row(group: GroupStatus, key: str) -> Row:
    nodes = ",".join(group.nodes) if group.nodes else "unpinned"
    reason = group.failure_reason
    if group.failure_class is not None:
        reason = f"{reason or ''} [{group.failure_class.scope}]".strip()
    return Row(depth=3, key=key, label=f"group {group.name} ({nodes})", phase=group.phase,
               reason=reason)


def _workflow_rows(workflow: Workflow, snap: Snapshot, key: str) -> list[Row]:
    cond = headline(workflow.status.conditions)
    rows = [Row(depth=2, key=key, label=f"Workflow {workflow.metadata.name}",
                phase=workflow.status.phase, verdict=workflow.status.verdict,
                reason=cond.reason if cond else None,
                created=workflow.metadata.creation_timestamp)]
    for group in workflow.status.groups:
        rows.append(_group_row(group, f"{key}/group/{group.name}"))
        if group.job_ref is not None:
            name = group.job_ref.name
            rows.append(_job_row(snap.jobs.get(name), name, snap, f"{key}/job/{name}"))
    return rows


def status_rows(snap: Snapshot) -> list[Row]:
    """The objects of one Certification, top down (the tree, flattened)."""
    cert = snap.certification
    cond = headline(cert.status.conditions)
    top = f"{cert.metadata.namespace}/{cert.metadata.name}"
    title = f"Certification {top}"
    if cert.status.categories:
        title += f" ({cert.status.categories} categories passed)"
    rows = [Row(depth=0, key=top, label=title, phase=cert.status.phase or "Pending",
                verdict=cert.status.verdict, reason=cond.reason if cond else None,
                created=cert.metadata.creation_timestamp)]
    for i, category in enumerate(cert.status.category_statuses):
        entry = f"{category.domain}/{category.variant}"
        key = f"{top}/{i}"
        rows.append(Row(depth=1, key=key, label=entry, phase=category.status,
                        verdict=category.verdict, reason=category.message))
        ref = category.workflow_ref
        workflow = snap.workflows.get(ref.name) if ref else None
        if workflow is not None:
            rows += _workflow_rows(workflow, snap, f"{key}/workflow")
        elif ref is not None:
            rows.append(Row(depth=2, key=f"{key}/workflow", label=f"Workflow {ref.name}",
                            phase="not found"))
    done = len(cert.status.category_statuses)
    for i, pending in enumerate(cert.spec.categories[done:], start=done):
        rows.append(Row(depth=1, key=f"{top}/{i}", label=f"{pending.domain}/{pending.variant}",
                        phase="Pending"))  # not started
    return rows


def row_line(row: Row, now: datetime | None) -> Text:
    """A row as a line; with ``now`` its age too."""
    return line(row.label, phase=row.phase, verdict=row.verdict, reason=row.reason,
                bus_bw=row.bus_bw, since=None if now is None else age(row.created, now))


def status_tree(snap: Snapshot, now: datetime) -> Tree:
    """The tree of one Certification."""
    rows = status_rows(snap)
    tree = Tree(row_line(rows[0], now))
    parents: list[Tree] = [tree]
    for row in rows[1:]:
        del parents[row.depth:]
        # A level with nothing above it (a Job under a missing group) hangs off the nearest.
        parents.append(parents[-1].add(row_line(row, now)))
    return tree


def change_lines(snaps: list[Snapshot], seen: dict[str, str]) -> list[str]:
    """The lines of ``--watch`` without a terminal: each object whose line differs from the
    one printed before (all of them the first time), indented by depth, without ages;
    ``seen`` is updated."""
    out = []
    for snap in snaps:
        for row in status_rows(snap):
            text = "  " * row.depth + row_line(row, None).plain
            if seen.get(row.key) != text:
                seen[row.key] = text
                out.append(text)
    return out


def terminal(snap: Snapshot) -> bool:
    """Whether the Certification has finished (``--watch`` stops then)."""
    phase = snap.certification.status.phase
    return phase is not None and phase.terminal
