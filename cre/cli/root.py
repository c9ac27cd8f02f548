"""The ``cre`` root command group (click), its shared flags and helpers, and the commands
defined with it: ``render``, ``validate``, ``catalog``, ``status``, ``report``, ``completion``.

Each command parses its flags and calls the module that does the work; every bad input comes
back as :class:`~cre.cli.exitcodes.CliError`. The command groups kept in their own modules
(:mod:`cre.cli.clustercmd`, :mod:`cre.cli.runcmd`, :mod:`cre.cli.kindcmd`,
:mod:`cre.cli.rendercmd`) build on this module and never the reverse; :mod:`cre.cli.app`
assembles them and runs the result.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

import cre
from cre.cli.exitcodes import CliError, ExitCode

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem
    from rich.console import Console

    from cre.catalog import Catalog
    from cre.cli.cluster import Connection

# Only click and this module load for `cre --help` and TAB completion; every command imports
# what it needs when it runs (bench: `python -m bench cli`). These mirror the values of the
# modules they come from (tests/cli/test_lazy.py checks they agree).
DEFAULT_TIMEOUT = 30.0  # cre.cli.cluster.DEFAULT_TIMEOUT
KAI_SCHEDULER = "kai-scheduler"  # cre.render.options.KAI_SCHEDULER
DEFAULT_WORKER_BACKOFF_LIMIT = 3  # cre.render.options.DEFAULT_WORKER_BACKOFF_LIMIT
F = TypeVar("F", bound=Callable[..., Any])
COMPLETE_VAR = "_CRE_COMPLETE"
SHELLS = ("bash", "zsh", "fish")


@functools.cache
def shipped_catalog() -> Catalog:
    """The shipped catalog, loaded once; :class:`CliError` (exit code CATALOG) when invalid."""
    from cre.catalog import CatalogError, load_catalog

    try:
        return load_catalog()
    except CatalogError as exc:
        raise CliError(ExitCode.CATALOG, f"the shipped catalog is invalid: {exc}") from None


def catalog_dir() -> Path:
    """The shipped catalog's folder, found as :func:`cre.catalog.default_catalog_dir` finds
    it, without importing the catalog package (TAB completion must answer at once)."""
    package = Path(cre.__file__).resolve().parent
    for candidate in (package / "_catalog", package.parent / "catalog"):
        if (candidate / "_lib" / "gpu-defaults.yaml").is_file():
            return candidate
    raise CliError(ExitCode.CATALOG, f"no shipped catalog found under {package}")


def entry_names() -> list[str]:
    """The catalog's entry names from its file names (``domain/variant.yaml``), unparsed."""
    root = catalog_dir()
    return sorted(p.relative_to(root).with_suffix("").as_posix() for p in root.glob("*/*.yaml")
                  if not p.parent.name.startswith("_"))


def platform_architectures() -> dict[str, list[str]]:
    """Platform -> its architectures, from the platform files alone."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    out = {}
    for path in sorted((catalog_dir() / "_lib" / "platforms").glob("*.yaml")):
        doc = yaml.load(path.read_text(encoding="utf-8")) or {}
        out[path.stem] = sorted(doc.get("architectures") or {})
    return out


def _complete_entry(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    return [n for n in entry_names() if n.startswith(incomplete)]


def _complete_platform(ctx: click.Context, param: click.Parameter,
                       incomplete: str) -> list[str]:
    return [n for n in sorted(platform_architectures()) if n.startswith(incomplete)]


def _complete_arch(ctx: click.Context, param: click.Parameter,
                   incomplete: str) -> list[CompletionItem]:
    from click.shell_completion import CompletionItem

    platform = ctx.params.get("platform")
    archs = {a for name, found in platform_architectures().items() if platform in (None, name)
             for a in found}
    return [CompletionItem(a) for a in sorted(archs) if a.startswith(incomplete)]


def make_console() -> Console:
    """A rich console for the commands' tables (no highlighting, no soft wrap)."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


def kube_flags(func: F) -> F:
    """kubectl's connection flags."""
    options = [
        click.option("--kubeconfig", type=click.Path(dir_okay=False),
                     help="Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, "
                     "then the in-cluster service account)."),
        click.option("--context", help="The kubeconfig context to use."),
        click.option("-n", "--namespace", help="Namespace (default: the context's, else "
                     "default)."),
        click.option("--request-timeout", type=float, default=DEFAULT_TIMEOUT, show_default=True,
                     help="Seconds to wait for the API server before giving up."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def connection_from_flags(kubeconfig: str | None, context: str | None, namespace: str | None,
                          request_timeout: float) -> Connection:
    """The connection the kubectl-style flags of :func:`kube_flags` describe."""
    from cre.cli.cluster import Connection

    return Connection(kubeconfig=kubeconfig, context=context, namespace=namespace,
                      timeout=request_timeout)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(cre.__version__, "--version", prog_name="cre")
def cli() -> None:
    """CRE, the Cluster Readiness Engine: render and validate workloads offline, follow a
    Certification on a cluster and report on it.

    Exit codes: 0 ok, 1 validation problems, 2 usage, 3 input file, 4 catalog, 5 cluster
    unreachable, 6 not found, 7 API error, 8 missing extra, 9 verdict Failed and 10 not
    certified (status --exit-code), 70 internal error, 130 interrupted.

    \b
    Example:
      cre catalog list
      cre render communication/nccl-all-reduce --platform aws --arch h100 --node-count 2
      cre status my-cert --watch
    """


@cli.command()
@click.argument("entry", shell_complete=_complete_entry)
@click.option("--platform", required=True, shell_complete=_complete_platform,
              help="Platform (aws, azure, gcp, nscale, oci, onprem).")
@click.option("--arch", required=True, shell_complete=_complete_arch,
              help="GPU architecture, e.g. h100, gb200.")
@click.option("--nodes", help="Comma-separated node names to pin the workload to.")
@click.option("--node-count", type=int, help="Number of nodes, named node-01, node-02, ...")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="An entry parameter (see `cre catalog show ENTRY`); repeatable.")
@click.option("--job-name", help="Name of the Job (default: the entry's variant).")
@click.option("--namespace", "-n", default="default", show_default=True)
@click.option("--image", help="Replace the workload image.")
@click.option("--kai", is_flag=True, help=f"Gang-schedule with KAI ({KAI_SCHEDULER}).")
@click.option("--gang-scheduler", metavar="NAME", help="Gang-schedule with this scheduler.")
@click.option("--queue", help="Gang queue (with --kai or --gang-scheduler).")
@click.option("--queue-label-key", help="Label key of the gang queue.")
@click.option("--worker-backoff-limit", type=int, default=DEFAULT_WORKER_BACKOFF_LIMIT,
              show_default=True)
@click.option("--launcher-backoff-limit", type=int)
@click.option("--nic-resource-name", help="RDMA NIC extended resource, e.g. rdma/ib.")
@click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default="yaml",
              show_default=True, help="YAML documents, or a JSON List.")
def render(entry: str, platform: str, arch: str, nodes: str | None, node_count: int | None,
           options: Sequence[str], job_name: str | None, namespace: str, image: str | None,
           kai: bool, gang_scheduler: str | None, queue: str | None,
           queue_label_key: str | None, worker_backoff_limit: int,
           launcher_backoff_limit: int | None, nic_resource_name: str | None,
           output: str) -> int:
    """Render a catalog ENTRY offline: the CRE Job and the objects it needs.

    \b
    Example:
      cre render communication/nccl-all-reduce --platform aws --arch h100 \\
          --nodes gpu-1,gpu-2 --option iterations=20 | kubectl apply -f -
    """
    from cre.cli.catalogview import resolve_target
    from cre.cli.render import (
        RenderRequest,
        node_names,
        parse_options,
        render_documents,
        write_documents,
    )

    platform, arch = resolve_target(shipped_catalog(), entry=entry, platform=platform, arch=arch)
    if kai and gang_scheduler and gang_scheduler != KAI_SCHEDULER:
        raise CliError(ExitCode.USAGE, "--kai and --gang-scheduler name different schedulers")
    request = RenderRequest(
        entry=entry, platform=platform, arch=arch,
        nodes=node_names(nodes=nodes, node_count=node_count), job_name=job_name,
        namespace=namespace, options=parse_options(options), image=image,
        gang_scheduler=KAI_SCHEDULER if kai else gang_scheduler, queue=queue,
        queue_label_key=queue_label_key, worker_backoff_limit=worker_backoff_limit,
        launcher_backoff_limit=launcher_backoff_limit, nic_resource_name=nic_resource_name)
    docs = render_documents(shipped_catalog(), request)
    write_documents(docs, output=output, out=sys.stdout)
    return ExitCode.OK


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--kubernetes-version", "versions", multiple=True, metavar="1.N",
              help="Kubernetes release(s) to check built-in objects against (repeatable; "
              "default: every supported release, 1.30-1.37).")
def validate(files: Sequence[str], versions: Sequence[str]) -> int:
    """Validate CRE objects (and the TrainJobs and TrainingRuntimes they carry) in FILES
    offline; every problem is printed as file:line: field.path: message. Exit 1 when any.

    \b
    Example:
      cre validate certification.yaml workflow.yaml --kubernetes-version 1.33
    """
    from cre.cli.validate import kube_versions, validate_files
    from cre.core.common.wording import count

    found = validate_files(files, versions=kube_versions(versions))
    for note in (p for p in found if p.note):
        click.echo(str(note), err=True)
    problems = [p for p in found if not p.note]
    for problem in problems:
        click.echo(str(problem))
    if problems:
        where = count(len({p.file for p in problems}), "file")
        click.echo(f"{count(len(problems), 'problem')} in {where}", err=True)
        return ExitCode.PROBLEMS
    click.echo(f"{count(len(files), 'file')} valid", err=True)
    return ExitCode.OK


@cli.group()
def catalog() -> None:
    """The shipped workload catalog.

    \b
    Example:
      cre catalog list
      cre catalog show communication/nccl-all-reduce
    """


@catalog.command("list")
def catalog_list() -> int:
    """List the catalog's entries: kind, platforms, architectures, default nodes.

    \b
    Example:
      cre catalog list
    """
    from cre.cli import catalogview

    catalogview.print_list(make_console(), shipped_catalog())
    return ExitCode.OK


@catalog.command("show")
@click.argument("entry", shell_complete=_complete_entry)
def catalog_show(entry: str) -> int:
    """Show one ENTRY: what it runs, where, and its options with defaults and descriptions.

    \b
    Example:
      cre catalog show diagnostics/dcgm-level1
    """
    from cre.cli import catalogview

    catalogview.print_entry(make_console(), shipped_catalog(), entry)
    return ExitCode.OK


@cli.command()
@click.argument("certification", required=False)
@kube_flags
@click.option("-A", "--all-namespaces", is_flag=True, help="Certifications of every namespace.")
@click.option("-w", "--watch", is_flag=True, help="Follow until every Certification shown is "
              "terminal: a live tree on a terminal, else one line per change.")
@click.option("--interval", type=float, default=2.0, show_default=True,
              help="Seconds between reads with --watch.")
@click.option("--exit-code", is_flag=True, help="Exit by verdict: 0 Passed, 9 Failed, 10 "
              "Incomplete or not finished (for scripts and CI).")
def status(certification: str | None, kubeconfig: str | None, context: str | None,
           namespace: str | None, request_timeout: float, all_namespaces: bool, watch: bool,
           interval: float, exit_code: bool) -> int:
    """Show a CERTIFICATION (or every one of the namespace) as a tree: categories, Workflows,
    groups and Jobs, with phase, verdict, reason, measured busBW and age.

    \b
    Example:
      cre status gpu-cert -n team-a --watch
      cre status gpu-cert --watch --exit-code | tee status.log   # CI: fail on Failed
    """
    from cre.cli.follow import follow

    conn = connection_from_flags(kubeconfig, context, namespace, request_timeout)
    return follow(conn, certification, all_namespaces=all_namespaces, watch=watch,
                  interval=interval, exit_code=exit_code, console=make_console())


@cli.command()
@click.argument("certification")
@kube_flags
@click.option("-o", "--output", type=click.Choice(["table", "wide", "json", "yaml"]),
              default="table", show_default=True, help="Tables (wide: also the busBW threshold "
              "and the Job), or the report for machines as JSON or YAML.")
@click.option("--json", "as_json", is_flag=True, help="Same as -o json.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False),
              help="Also write one self-contained HTML file (charts, filters, failure logs).")
def report(certification: str, kubeconfig: str | None, context: str | None,
           namespace: str | None, request_timeout: float, output: str, as_json: bool,
           html_path: str | None) -> int:
    """Report on a CERTIFICATION: per category and per node, verdict, reason, failure class
    and measured busBW. Identifiers are never cut: rows are as wide as their content.

    \b
    Example:
      cre report gpu-cert -o wide
      cre report gpu-cert --html report.html
      cre report gpu-cert -o json | jq .summary
    """
    import anyio

    from cre.cli.htmlreport import render_html
    from cre.cli.reportview import print_report
    from cre.cli.session import read_snapshots, write_text
    from cre.core.certification.report import build_report

    conn = connection_from_flags(kubeconfig, context, namespace, request_timeout)
    (snap,) = anyio.run(read_snapshots, conn, certification)
    result = build_report(snap)
    print_report(result, output="json" if as_json else output, out=sys.stdout)
    if html_path is not None:
        path = Path(html_path)
        write_text(path, render_html(result))
        click.echo(f"wrote {path}", err=True)
    return ExitCode.OK


@cli.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> int:
    """Print the shell completion script for SHELL (bash, zsh or fish).

    \b
    Example:
      source <(cre completion bash)          # this shell
      cre completion zsh > "${fpath[1]}/_cre"  # every zsh
    """
    from click.shell_completion import get_completion_class

    comp_cls = get_completion_class(shell)
    assert comp_cls is not None
    ctx = click.get_current_context()
    comp = comp_cls(cli, {}, ctx.find_root().info_name or "cre", COMPLETE_VAR)
    click.echo(comp.source())
    return ExitCode.OK
