"""``cre render FILE``: the ``render`` command also takes a Certification or Workflow file.

:mod:`cre.cli.root` defines ``render ENTRY`` (one catalog entry); this module, imported by
:mod:`cre.cli.app`, replaces that command on the root group with one that has the same flags plus
``--nodes-file``, ``--dry-run=server`` and the connection flags, renders a file with
:mod:`cre.cli.renderplan` and hands a catalog entry to the original command unchanged.
"""

from __future__ import annotations

from typing import Any

import click

from cre.cli.exitcodes import CliError, ExitCode
from cre.cli.root import cli, shipped_catalog

_ENTRY = cli.commands["render"]
FILE_ONLY = ("nodes_file", "dry_run", "kubeconfig", "context")
ENTRY_ONLY = ("options", "job_name", "image", "kai", "gang_scheduler", "queue",
              "queue_label_key", "launcher_backoff_limit", "nic_resource_name")


def _render_file(path: str, **kw: Any) -> int:
    import sys
    from pathlib import Path

    import anyio

    from cre.cli import renderplan
    from cre.cli.cluster import Connection
    from cre.cli.render import node_names, write_documents

    used = [k for k in ENTRY_ONLY if kw.get(k)]
    if used:
        flags = ", ".join("--" + k.replace("_", "-") for k in used)
        raise CliError(ExitCode.USAGE, f"{flags}: only for a catalog ENTRY; a FILE carries "
                       "its own options")
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(ExitCode.INPUT, f"{path}: cannot read: {exc.strerror or exc}") from None
    obj = renderplan.load_object(path, text)
    if kw["nodes_file"]:
        if kw["nodes"] or kw["node_count"]:
            raise CliError(ExitCode.USAGE, "give --nodes-file or --nodes/--node-count, not both")
        nodes = renderplan.nodes_from_file(kw["nodes_file"])
    else:
        if not kw["platform"] or not kw["arch"]:
            raise CliError(ExitCode.USAGE, "--platform and --arch are needed with --nodes or "
                           "--node-count (or give the cluster's Nodes with --nodes-file)")
        nodes = renderplan.synthetic_nodes(
            catalog=shipped_catalog(), platform=kw["platform"], arch=kw["arch"],
            names=node_names(nodes=kw["nodes"], node_count=kw["node_count"]))
    rendered = renderplan.render_object(obj, nodes=nodes, catalog=shipped_catalog())
    for note in rendered.notes:
        click.echo(note, err=True)
    if kw["dry_run"]:
        from cre.cli import dryrun

        conn = Connection(kubeconfig=kw["kubeconfig"], context=kw["context"],
                          namespace=kw["namespace"], timeout=kw["request_timeout"])
        lines, problems = anyio.run(dryrun.send, conn, rendered.documents)
        for line in lines:
            click.echo(line)
        for problem in problems:
            click.echo(problem, err=True)
        return ExitCode.PROBLEMS if problems else ExitCode.OK
    write_documents(rendered.documents, output=kw["output"], out=sys.stdout)
    return ExitCode.OK


def _callback(**kw: Any) -> Any:
    from cre.cli.renderplan import is_object_file

    if is_object_file(kw["entry"]):
        return _render_file(kw["entry"], **kw)
    given = [k for k in FILE_ONLY if kw.get(k)]
    if given:
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise CliError(ExitCode.USAGE, f"{flags}: only when rendering a Certification or "
                       "Workflow FILE")
    for param in _ENTRY.params:
        if param.name in ("platform", "arch") and not kw.get(param.name):
            raise click.MissingParameter(ctx=click.get_current_context(), param=param)
    for key in (*FILE_ONLY, "request_timeout"):
        kw.pop(key, None)
    assert _ENTRY.callback is not None
    return _ENTRY.callback(**kw)


def _params() -> list[click.Parameter]:
    params: list[click.Parameter] = []
    for param in _ENTRY.params:
        if param.name in ("platform", "arch"):
            param.required = False  # a --nodes-file says them; an ENTRY still needs them
        params.append(param)
    return [*params,
            click.Option(["--nodes-file"], type=click.Path(dir_okay=False), metavar="FILE",
                         help="FILE only: the cluster's Nodes (kubectl get nodes -o yaml) "
                         "instead of --nodes/--node-count with --platform/--arch."),
            click.Option(["--dry-run"], type=click.Choice(["server"]),
                         help="FILE only: send every rendered object to the cluster with "
                         "dryRun=All (validated, defaulted, not stored) instead of printing."),
            click.Option(["--kubeconfig"], type=click.Path(dir_okay=False),
                         help="With --dry-run: the kubeconfig (default: $KUBECONFIG, "
                         "~/.kube/config)."),
            click.Option(["--context"], help="With --dry-run: the kubeconfig context."),
            click.Option(["--request-timeout"], type=float, default=30.0,
                         show_default=True, help="With --dry-run: seconds to wait for the "
                         "API server.")]


HELP = (_ENTRY.help or "") + """

With a FILE in place of ENTRY (a Certification or Workflow; - for stdin): every Workflow,
Job and TrainJob it would create on the given nodes, decided by the same code as the
controllers (first iteration; notes on stderr).

\b
Example:
  cre render certification.yaml --platform aws --arch h100 --node-count 4
  kubectl get nodes -o yaml > nodes.yaml
  cre render certification.yaml --nodes-file nodes.yaml --dry-run server
"""

cli.add_command(click.Command("render", params=_params(), callback=_callback, help=HELP,
                              short_help=_ENTRY.short_help,
                              context_settings=_ENTRY.context_settings))
