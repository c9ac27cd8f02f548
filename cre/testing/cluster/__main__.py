"""``python -m cre.testing.cluster``: a simulated GPU cluster against a running API server.

The demo starts the API emulator in one process and this in another: it registers the
profile's nodes and plays Trainer, JobSet, the batch Job controller, the scheduler and the
kubelets until SIGTERM/SIGINT, writing container logs through the emulator's
``/_emulator/logs`` control API. Failures a demo or a manual test wants to show are injected
with flags rather than with a separate runner: ``--bad-node`` degrades a node's NCCL bandwidth,
``--unavailable-image`` makes pulls of an image, repository or registry fail (on some nodes or
all: containers wait ``ErrImagePull`` / ``ImagePullBackOff``),
``--fail-launcher`` makes MPI launchers exit 1 with an NCCL error (the
``make demo SCENARIO=launcher-failure`` path). SIGUSR1 repairs the nodes ``--dcgm-fail-node``,
``--broken-node`` and ``--bad-node`` broke (containers started there afterwards run normally:
the ``make demo SCENARIO=fleet`` path). ``--roles`` runs only some of the simulated
controllers, e.g. ``trainer,jobset,nodelifecycle,kubelet`` beside the real Job controller and
kube-scheduler.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import anyio

from cre.kube.client import KubeClient
from cre.testing.cluster import engine
from cre.testing.cluster.clock import SimClock
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.kubelet_logs import KubeletLogs
from cre.testing.cluster.profiles import PROFILES, get_profile
from cre.testing.cluster.program import Role
from cre.testing.cluster.runtime import HttpLogSink, LogSink, SimulatedCluster
from cre.testing.cluster.stubs import Behaviour, Override

# What a failing launcher prints: the NCCL InfiniBand completion error of a broken link.
FAILURE_MESSAGE: Final = (
    "NCCL WARN NET/IB : Got completion from peer with error 12, opcode 0, len 0, "
    "vendor err 129 (Recv) localGid ::ffff:10.0.0.12 remoteGid ::ffff:10.0.0.17")
FAIL_AFTER: Final = 3.0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The CLI options; out-of-range values stop with a message naming the flag."""
    p = argparse.ArgumentParser(prog="python -m cre.testing.cluster",
                                description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--kubeconfig", required=True, help="kubeconfig of the API server")
    p.add_argument("--profile", default="aws-h100", choices=sorted(PROFILES))
    p.add_argument("--kubelet-logs", metavar="CERT,KEY",
                   help="serve container logs kubelet-style over HTTPS with this certificate "
                        "and point the nodes at it, for a real kube-apiserver's pod-log proxy "
                        "(cre.testing.controlplane); default: the emulator's log API")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="simulated seconds per wall second (10 = backoffs ten times faster)")
    p.add_argument("--time-origin", type=float, default=None, metavar="UNIX_SECONDS",
                   help="share the scaled clock origin + (now - origin) x scale with the API "
                        "emulator and cre-manager started with the same origin (default: the "
                        "simulator's own clock, starting at its start time)")
    p.add_argument("--write-concurrency", type=int, default=8, metavar="N",
                   help="writes in flight at once per controller step (1: strictly in order)")
    p.add_argument("--bad-node", action="append", default=[], metavar="NODE[=FACTOR]",
                   help="scale the NCCL bandwidth of NODE (default factor 0.4)")
    p.add_argument("--unavailable-image", action="append", default=[],
                   metavar="REF[@NODE,NODE...]",
                   help="pulls of REF (an image, repository or registry host) fail, on the "
                        "given nodes or all (containers wait ErrImagePull/ImagePullBackOff)")
    fail = p.add_argument_group("launcher failure injection")
    fail.add_argument("--fail-launcher", action="store_true",
                      help="MPI launcher containers exit 1 with an NCCL error (every launcher, "
                           "unless --fail-launcher-times limits it)")
    fail.add_argument("--fail-launcher-after", type=float, default=FAIL_AFTER, metavar="SECONDS",
                      help=f"simulated seconds a failing launcher runs first "
                           f"(default {FAIL_AFTER:g})")
    fail.add_argument("--fail-launcher-times", type=int, default=None, metavar="N",
                      help="only the next N launchers fail (default: all of them)")
    fail.add_argument("--fail-launcher-pod-prefix", default="", metavar="PREFIX",
                      help="only launchers whose pod name starts with PREFIX fail (e.g. one "
                           "group's first run: <job>-workload-launcher)")
    fail.add_argument("--fail-launcher-message", default=FAILURE_MESSAGE, metavar="TEXT",
                      help="the error line the failing launcher prints (default: an NCCL "
                           "NET/IB completion error)")
    fail.add_argument("--broken-node", action="append", default=[], metavar="NODE",
                      help="every group that holds NODE fails: its MPI launcher exits 1 with an "
                           "NCCL error (what diagnose bisects down to)")
    p.add_argument("--dcgm-fail-node", action="append", default=[], metavar="NODE",
                   help="the DCGM diagnostic on NODE reports a failed GPU test (a broken GPU)")
    p.add_argument("--roles", default=None, metavar="NAME,...",
                   help="the simulated controllers to run (default all: "
                        f"{','.join(engine.ROLES)}); leave out job and scheduler when the "
                        "real kube-controller-manager and kube-scheduler play them")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    if args.roles is not None:
        try:
            args.roles = engine.parse_roles(args.roles, where="--roles")
        except ValueError as exc:
            p.error(str(exc))
    if args.nodes < 1:
        p.error("--nodes: must be at least 1")
    if args.time_scale <= 0:
        p.error("--time-scale: must be > 0")
    if args.write_concurrency < 1:
        p.error("--write-concurrency: must be at least 1")
    if args.fail_launcher_after < 0:
        p.error("--fail-launcher-after: must be >= 0")
    if args.fail_launcher_pod_prefix and not args.fail_launcher:
        p.error("--fail-launcher-pod-prefix: needs --fail-launcher")
    if args.fail_launcher_times is not None and args.fail_launcher_times < 1:
        p.error("--fail-launcher-times: must be at least 1")
    for item in args.unavailable_image:
        ref, _, nodes = item.partition("@")
        if not ref or (nodes and not all(nodes.split(","))):
            p.error(f"--unavailable-image {item!r}: expected REF[@NODE,NODE...]")
    for item in args.bad_node:
        node, _, factor = item.partition("=")
        try:
            value = float(factor or 0.4)
        except ValueError:
            p.error(f"--bad-node {item!r}: FACTOR must be a number")
        if not node or value <= 0:
            p.error(f"--bad-node {item!r}: expected NODE[=FACTOR] with FACTOR > 0")
    return args


def sim_config(args: argparse.Namespace) -> SimConfig:
    """The simulator configuration the options describe, failure overrides included."""
    bad = []
    for item in args.bad_node:
        node, _, factor = item.partition("=")
        bad.append((node, float(factor or 0.4)))
    overrides: tuple[Override, ...] = ()
    if args.fail_launcher:
        # What SimulatedCluster.fail_launcher registers, fixed before the cluster starts.
        overrides = (Override(behaviour=Behaviour.FAIL, role=Role.LAUNCHER,
                              after=args.fail_launcher_after, times=args.fail_launcher_times,
                              pod_prefix=args.fail_launcher_pod_prefix,
                              message=args.fail_launcher_message, id="cli-fail-launcher"),)
    overrides += tuple(Override(behaviour=Behaviour.FAIL, role=Role.LAUNCHER, after=FAIL_AFTER,
                                group_touches=((node,),), message=args.fail_launcher_message,
                                id=f"cli-broken-{node}") for node in args.broken_node)
    overrides += tuple(Override(behaviour=Behaviour.DCGM_FAIL, node=node, after=3.0,
                                id=f"cli-dcgm-fail-{node}") for node in args.dcgm_fail_node)
    return SimConfig(profile=get_profile(args.profile), node_bandwidth=tuple(bad),
                     overrides=overrides, write_concurrency=args.write_concurrency,
                     roles=args.roles)


def faulty_nodes(args: argparse.Namespace) -> list[str]:
    """The nodes the flags broke, in order and once each (what SIGUSR1 repairs)."""
    names = [*args.dcgm_fail_node, *args.broken_node,
             *(item.partition("=")[0] for item in args.bad_node)]
    return list(dict.fromkeys(names))


def unavailable_images(args: argparse.Namespace) -> list[tuple[str, tuple[str, ...]]]:
    """``--unavailable-image`` as ``(ref, nodes)`` pairs (no nodes: every node)."""
    out = []
    for item in args.unavailable_image:
        ref, _, nodes = item.partition("@")
        out.append((ref, tuple(n for n in nodes.split(",") if n)))
    return out


async def run(args: argparse.Namespace) -> None:
    """Simulate until SIGTERM/SIGINT."""
    client = await KubeClient.from_kubeconfig(args.kubeconfig, user_agent="cre-simulator")
    kubelet_logs = None
    try:
        logs: LogSink = HttpLogSink(client)
        node_status = None
        if args.kubelet_logs:
            cert, _, key = args.kubelet_logs.partition(",")
            kubelet_logs = KubeletLogs(cert=Path(cert), key=Path(key))
            await kubelet_logs.start()
            logs, node_status = kubelet_logs, kubelet_logs.node_status()
        cluster = SimulatedCluster(client, config=sim_config(args),
                                   clock=SimClock(scale=args.time_scale, start=time.time())
                                   if args.time_origin is None else
                                   SimClock.shared(scale=args.time_scale,
                                                   origin=args.time_origin),
                                   nodes=args.nodes, logs=logs, node_status=node_status)
        for ref, nodes in unavailable_images(args):
            cluster.set_image_pull(ref, available=False, nodes=nodes)
        async with anyio.create_task_group() as tg:
            await tg.start(cluster.run)
            logging.getLogger("cre.testing.cluster").info(
                "simulating %d %s nodes (time scale %g)%s", args.nodes, args.profile,
                args.time_scale, " (launchers fail)" if args.fail_launcher else "")
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT,
                                            signal.SIGUSR1) as signals:
                async for signum in signals:
                    if signum == signal.SIGUSR1:
                        for node in faulty_nodes(args):
                            cluster.repair_node(node)
                        logging.getLogger("cre.testing.cluster").info(
                            "repaired %s", ", ".join(faulty_nodes(args)) or "no node")
                        continue
                    tg.cancel_scope.cancel()
                    break
    finally:
        with anyio.CancelScope(shield=True):
            if kubelet_logs is not None:
                await kubelet_logs.close()
            await client.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, configure logging, simulate; 0 on a signalled stop."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    anyio.run(run, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
