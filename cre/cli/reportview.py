"""``cre report -o table|wide|json|yaml``: the report as kubectl prints objects.

Tables are plain columns padded to their widest cell, as ``kubectl get`` prints them: a node,
group or Job name is never cut or folded, whatever the terminal width (a narrow terminal wraps
the line, a pager scrolls it). ``wide`` adds the busBW threshold and the Job of each row;
``json`` and ``yaml`` are :func:`cre.core.certification.report.report_json` for machines.
"""

from __future__ import annotations

import json
from typing import TextIO

from ruamel.yaml import YAML

from cre.cli.columns import columns
from cre.core.certification.report import CategoryReport, Report, report_json

COLUMNS = ("NODE", "GROUP", "VERDICT", "REASON", "FAILURE CLASS", "BUSBW(GB/s)")
WIDE_COLUMNS = (*COLUMNS, "THRESHOLD(GB/s)", "JOB")


def category_rows(category: CategoryReport, *, wide: bool) -> list[list[str]]:
    """The header and one row per node of a category."""
    jobs = {g.name: g.job or "" for g in category.groups}
    gbps = category.threshold_gbps
    threshold = "-" if gbps is None else f"{gbps:.2f}"
    rows = [list(WIDE_COLUMNS if wide else COLUMNS)]
    for n in category.nodes:
        fc = n.failure_class
        reason = n.reason or ("Outlier" if n.outlier is not None else "-")
        row = [n.node, n.group, n.verdict, reason,
               f"{fc.scope}: {fc.reason}" if fc else "-",
               "-" if n.bus_bw is None else f"{n.bus_bw:.2f}"]
        if wide:
            row += [threshold, jobs.get(n.group) or "-"]
        rows.append(row)
    if not category.nodes:
        rows.append(["(no groups yet)", "-", category.state, "-", "-", "-"]
                    + (["-", "-"] if wide else []))
    return rows


def report_lines(report: Report, *, wide: bool) -> list[str]:
    """The report as text: a summary line, the headline and the failure log lines that matter
    when it failed, then per category a title and its table."""
    passed = sum(1 for c in report.categories if c.verdict == "Passed")
    out = [f"Certification {report.namespace}/{report.name}  result {report.result}  "
           f"categories passed {passed}/{len(report.categories)}  "
           f"failed nodes {len(report.failed_nodes)}"
           + (f"  outliers {len(report.outlier_nodes)}" if report.outlier_nodes else "")]
    if report.verdict == "Failed" and report.message:
        out.append(f"{report.reason}: {report.message}")
    if report.failure_lines:
        out.append(f"failure log ({report.failure_source}):")
        out += [f"  {line}" for line in report.failure_lines]
    for category in report.categories:
        title = f"{category.entry}: {category.verdict or category.state}"
        if category.message:
            title += f" ({category.message})"
        out += ["", title, *columns(category_rows(category, wide=wide))]
    return out


def print_report(report: Report, *, output: str, out: TextIO) -> None:
    """Write the report in the ``-o`` format asked for."""
    if output == "json":
        out.write(json.dumps(report_json(report), indent=2, sort_keys=True,
                             ensure_ascii=False) + "\n")
    elif output == "yaml":
        yaml = YAML(typ="safe", pure=True)
        yaml.default_flow_style = False
        yaml.dump(report_json(report), out)
    else:
        out.write("\n".join(report_lines(report, wide=output == "wide")) + "\n")
