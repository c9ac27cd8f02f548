"""``status`` and ``report`` for WorkloadRuns (``workloadrun/NAME``) and several Certifications.

:mod:`cre.cli.root` defines ``status [CERTIFICATION]`` and ``report CERTIFICATION``; this
module, imported by :mod:`cre.cli.app`, replaces both on the root group with commands that have
the same flags, send ``workloadrun/NAME`` to :mod:`cre.cli.workloadrunview`, let ``report`` take
several Certifications, and hand everything else to the original command unchanged.
"""

from __future__ import annotations

from typing import Any

import click

from cre.cli.exitcodes import CliError, ExitCode
from cre.cli.root import cli, connection_from_flags

_STATUS = cli.commands["status"]
_REPORT = cli.commands["report"]
CONN = ("kubeconfig", "context", "namespace", "request_timeout")


def _connection(kw: dict[str, Any]) -> Any:
    return connection_from_flags(kw.get("kubeconfig"), kw.get("context"), kw.get("namespace"),
                                 float(kw.get("request_timeout") or 30.0))


def _status(**kw: Any) -> Any:
    from cre.cli.workloadrunview import workloadrun_name

    name = workloadrun_name(kw.get("certification"))
    if name is None:
        assert _STATUS.callback is not None
        return _STATUS.callback(**kw)
    if kw.get("all_namespaces"):
        raise CliError(ExitCode.USAGE, "-A: not with workloadrun/NAME")
    import time

    import anyio

    from cre.cli.root import make_console
    from cre.cli.run import exit_code
    from cre.cli.workloadrunview import read_run, run_tree, run_verdict

    conn = _connection(kw)
    console = make_console()
    rs = anyio.run(read_run, conn, name)
    console.print(run_tree(rs))
    shown = str(rs.run.status.phase)
    while kw.get("watch") and not (rs.run.status.phase and rs.run.status.phase.terminal):
        time.sleep(kw.get("interval") or 2.0)
        rs = anyio.run(read_run, conn, name)
        if str(rs.run.status.phase) != shown:
            shown = str(rs.run.status.phase)
            console.print(run_tree(rs))
    if kw.get("exit_code"):
        workflow = next(iter(rs.snapshot.workflows.values()), None)
        terminal = rs.run.status.phase is not None and rs.run.status.phase.terminal
        return exit_code(str(run_verdict(rs.run, workflow)) if terminal else None)
    return ExitCode.OK


def _wants_json(kw: dict[str, Any]) -> bool:
    return bool(kw.get("as_json")) or kw.get("output") == "json"


def _report(**kw: Any) -> Any:
    from cre.cli.workloadrunview import workloadrun_name

    names: tuple[str, ...] = kw.pop("certifications")
    runs = [workloadrun_name(n) for n in names]
    if not any(runs) and len(names) == 1:
        assert _REPORT.callback is not None
        return _REPORT.callback(certification=names[0], **kw)
    import json

    import anyio

    from cre.cli import workloadrunview as view
    from cre.cli.root import make_console

    conn = _connection(kw)
    if any(runs):
        if len(names) > 1:
            raise CliError(ExitCode.USAGE, "workloadrun/NAME: report one WorkloadRun at a time")
        from cre.core.certification.report import build_report

        assert runs[0] is not None
        rs = anyio.run(view.read_run, conn, runs[0])
        report = build_report(rs.snapshot)
        if _wants_json(kw):
            click.echo(json.dumps(view.run_report_json(report), indent=2, sort_keys=True,
                                  ensure_ascii=False))
        else:
            view.print_run_report(make_console(), report)
        if kw.get("html_path"):
            from pathlib import Path

            from cre.cli.htmlreport import render_html
            from cre.cli.session import write_text

            write_text(Path(kw["html_path"]), render_html(report))
            click.echo(f"wrote {kw['html_path']}", err=True)
        return ExitCode.OK
    if kw.get("html_path"):
        raise CliError(ExitCode.USAGE, "--html: one Certification per HTML file")
    if _wants_json(kw):
        reports = anyio.run(view.read_reports, conn, names)
        click.echo(json.dumps(view.combined_json(reports), indent=2, sort_keys=True,
                              ensure_ascii=False))
        return ExitCode.OK
    assert _REPORT.callback is not None
    for name in names:
        _REPORT.callback(certification=name, **kw)
    click.echo(view.combined_line(anyio.run(view.read_reports, conn, names)))
    return ExitCode.OK


def _report_params() -> list[click.Parameter]:
    params: list[click.Parameter] = [click.Argument(["certifications"], nargs=-1,
                                                    required=True)]
    params += [p for p in _REPORT.params if p.name != "certification"]
    return params


STATUS_HELP = (_STATUS.help or "") + """

workloadrun/NAME shows a WorkloadRun instead: its Workflow, groups and Jobs.
"""
REPORT_HELP = (_REPORT.help or "") + """

Several CERTIFICATIONs: each report, then one line over all of them (JSON: a List with a
summary across them). workloadrun/NAME reports a WorkloadRun's Workflow the same way.

\b
  cre report cert-a cert-b --json
  cre report workloadrun/my-run
"""

cli.add_command(click.Command("status", params=list(_STATUS.params), callback=_status,
                              help=STATUS_HELP, short_help=_STATUS.short_help,
                              context_settings=_STATUS.context_settings))
cli.add_command(click.Command("report", params=_report_params(), callback=_report,
                              help=REPORT_HELP, short_help=_REPORT.short_help,
                              context_settings=_REPORT.context_settings,
                              options_metavar="[OPTIONS]"))
