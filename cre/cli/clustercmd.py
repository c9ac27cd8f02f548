"""The ``cre cluster`` command group (flags and help); the work is in :mod:`cre.cli.clusterup`.

Registered on the root group of :mod:`cre.cli.root` when :mod:`cre.cli.app` imports it. Only
click loads here (``cre --help`` and TAB completion stay fast); each command imports its work.
"""

from __future__ import annotations

import click

from cre.cli.exitcodes import CliError, ExitCode
from cre.cli.root import cli, connection_from_flags, kube_flags, shipped_catalog

NAME_HELP = "Name of the local cluster (its state is in ~/.cache/cre/cluster/NAME)."


@cli.group()
def cluster() -> None:
    """A local emulated cluster in one command, and what any cluster offers CRE.

    \b
    Example:
      cre cluster up --nodes 8 --profile aws-h100 --manager
      export KUBECONFIG=~/.cache/cre/cluster/cre/kubeconfig
      cre cluster info
      cre cluster down
    """


@cluster.command("up")
@click.option("--name", default="cre", show_default=True, help=NAME_HELP)
@click.option("--nodes", type=int, default=8, show_default=True, help="Number of GPU nodes.")
@click.option("--profile", default="aws-h100", show_default=True,
              help="Node type of the simulated cluster (aws-h100, aws-gb200, gcp-h100, ...).")
@click.option("--manager", is_flag=True, help="Also run cre-manager against the cluster.")
@click.option("--real", is_flag=True, help="A real etcd + kube-apiserver (built from the Go "
              "modules into ~/.cache/cre/controlplane) instead of the API emulator.")
@click.option("--time-scale", type=float, default=1.0, show_default=True,
              help="Simulated seconds per wall-clock second (workloads finish sooner).")
@click.option("--wait", "timeout", type=float, default=180.0, show_default=True,
              metavar="SECONDS", help="How long to wait for every node to be Ready.")
def cluster_up(name: str, nodes: int, profile: str, manager: bool, real: bool,
               time_scale: float, timeout: float) -> int:
    """Start a local cluster in the background: the API emulator with the JobSet, Trainer
    and CRE CRDs, a simulated cluster of GPU nodes, and optionally cre-manager; write its
    kubeconfig and print how to use it.

    \b
    Example:
      cre cluster up --nodes 4 --manager
    """
    from cre.cli import clusterup

    click.echo(f'Creating cluster "{name}" ({nodes} {profile} nodes'
               + (", real kube-apiserver" if real else "")
               + (", cre-manager" if manager else "") + ") ...", err=True)
    for line in clusterup.up(name=name, nodes=nodes, profile=profile, manager=manager,
                             real=real, time_scale=time_scale, timeout=timeout):
        click.echo(line)
    return ExitCode.OK


@cluster.command("down")
@click.option("--name", default="cre", show_default=True, help=NAME_HELP)
def cluster_down(name: str) -> int:
    """Stop a local cluster started by `cre cluster up` and delete its state.

    \b
    Example:
      cre cluster down
    """
    from cre.cli import clusterup

    click.echo(clusterup.down(name=name))
    return ExitCode.OK


@cluster.command("info")
@kube_flags
@click.option("--name", help="Read the local cluster NAME (started by `cre cluster up`) "
              "instead of the kubeconfig.")
def cluster_info(kubeconfig: str | None, context: str | None, namespace: str | None,
                 request_timeout: float, name: str | None) -> int:
    """Show what CRE finds on a cluster: GPU nodes and why some are not eligible, platform,
    GPU architecture, topology labels and the catalog entries it would run.

    \b
    Example:
      cre cluster info --context prod
    """
    from cre.cli import clusterup

    if name is not None:
        state = clusterup.read_state(name)
        if state is None:
            raise CliError(ExitCode.NOT_FOUND, f'no running cluster "{name}" '
                           "(cre cluster up starts one)")
        kubeconfig = state["kubeconfig"]
    import anyio

    conn = connection_from_flags(kubeconfig, context, namespace, request_timeout)
    host, nodes = anyio.run(clusterup.read_nodes, conn)
    rows = clusterup.cluster_facts(host=host, nodes=nodes, catalog=shipped_catalog())
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        click.echo(f"{label + ':':<{width}}{value}")
    return ExitCode.OK
