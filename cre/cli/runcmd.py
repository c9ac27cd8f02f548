"""The ``cre run`` command (flags and help); the work is in :mod:`cre.cli.run`.

Registered on the root group of :mod:`cre.cli.root` when :mod:`cre.cli.app` imports it. Only
click loads here (``cre --help`` and TAB completion stay fast); the command imports its work.
"""

from __future__ import annotations

import functools

import click

from cre.cli.root import cli, connection_from_flags, kube_flags


@cli.command("run")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@kube_flags
@click.option("--wait", is_flag=True, help="Follow the object until it has a verdict: one "
              "line per change, then the verdict; exit 0 Passed, 9 Failed, 10 not certified.")
@click.option("--timeout", type=float, metavar="SECONDS",
              help="Stop following after SECONDS (exit 10); implies --wait.")
@click.option("--interval", type=float, default=2.0, show_default=True,
              help="Seconds between reads while following.")
@click.option("--cleanup", is_flag=True, help="Delete the object (and so everything it "
              "created) once it has finished.")
@click.option("--results-file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the JSON report there (the Certification report of "
              "`cre report --json`; phase, verdict and status for other kinds).")
@click.option("--dry-run", type=click.Choice(["server"]),
              help="Send it with dryRun=All: the API server validates and defaults it, nothing "
              "is stored.")
def run_command(file: str, kubeconfig: str | None, context: str | None, namespace: str | None,
                request_timeout: float, wait: bool, timeout: float | None, interval: float,
                cleanup: bool, results_file: str | None, dry_run: str | None) -> int:
    """Apply the Certification, Workflow, WorkloadRun or Job in FILE (- for stdin) and, with
    --wait, follow it to its verdict, print it, write the report and exit by verdict.

    \b
    Example:
      cre run certification.yaml --wait --timeout 3600 --results-file results.json
      cre run workloadrun.yaml --wait --cleanup
    """
    import anyio

    from cre.cli import run as runner

    conn = connection_from_flags(kubeconfig, context, namespace, request_timeout)
    item = runner.load_runnable(file, namespace=runner.default_namespace(conn))
    options = runner.RunOptions(wait=wait or timeout is not None, timeout=timeout,
                                interval=interval, cleanup=cleanup, results_file=results_file,
                                dry_run=dry_run == "server")
    code: int = anyio.run(functools.partial(runner.run, conn, item, options,
                                            functools.partial(click.echo)))
    return code
