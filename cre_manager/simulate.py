"""``python -m cre_manager.simulate``: the simulated cluster with a failing launcher.

The failure demo (``make demo SCENARIO=launcher-failure``) needs the simulator's launcher
override, which ``python -m cre.testing.cluster`` does not expose as a flag. This runner takes the
same flags plus ``--fail-launcher`` and drives the same library object
(:class:`cre.testing.cluster.runtime.SimulatedCluster`), so behaviour is identical otherwise.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections.abc import Sequence

import anyio

from cre.kube.client import KubeClient
from cre.testing.cluster.clock import SimClock
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.profiles import PROFILES, get_profile
from cre.testing.cluster.runtime import HttpLogSink, SimulatedCluster

FAILURE_MESSAGE = ("NCCL WARN NET/IB : Got completion from peer with error 12, opcode 0, len 0, "
                   "vendor err 129 (Recv) localGid ::ffff:10.0.0.12 remoteGid ::ffff:10.0.0.17")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m cre_manager.simulate", description=__doc__)
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--profile", default="aws-h100", choices=sorted(PROFILES))
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--time-scale", type=float, default=1.0)
    p.add_argument("--fail-launcher", action="store_true",
                   help="every launcher container exits 1 with an NCCL error after 3 s")
    return p.parse_args(argv)


async def run(args: argparse.Namespace) -> None:
    client = await KubeClient.from_kubeconfig(args.kubeconfig)
    cluster = SimulatedCluster(client, config=SimConfig(profile=get_profile(args.profile)),
                               clock=SimClock(scale=args.time_scale, start=time.time()),
                               nodes=args.nodes, logs=HttpLogSink(client))
    if args.fail_launcher:
        cluster.fail_launcher(after=3.0, times=None, message=FAILURE_MESSAGE)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(cluster.run)
            logging.getLogger("cre_manager.simulate").info(
                "simulating %d %s nodes%s", args.nodes, args.profile,
                " (launchers fail)" if args.fail_launcher else "")
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    break
    finally:
        with anyio.CancelScope(shield=True):
            await client.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    anyio.run(run, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
