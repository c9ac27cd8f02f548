"""``python -m cre.testing.cluster``: a simulated GPU cluster against a running API server.

The demo starts the API emulator in one process and this in another: it registers the
profile's nodes and plays Trainer, JobSet, the batch Job controller, the scheduler and the
kubelets until SIGTERM/SIGINT, writing container logs through the emulator's
``/_emulator/logs`` control API.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time

import anyio

from cre.kube.client import KubeClient
from cre.testing.cluster.clock import SimClock
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.profiles import PROFILES, get_profile
from cre.testing.cluster.runtime import HttpLogSink, SimulatedCluster


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m cre.testing.cluster",
                                description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--kubeconfig", required=True, help="kubeconfig of the API server")
    p.add_argument("--profile", default="aws-h100", choices=sorted(PROFILES))
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="simulated seconds per wall second (10 = backoffs ten times faster)")
    p.add_argument("--bad-node", action="append", default=[], metavar="NODE[=FACTOR]",
                   help="scale the NCCL bandwidth of NODE (default factor 0.4)")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    if args.nodes < 1:
        p.error("--nodes: must be at least 1")
    if args.time_scale <= 0:
        p.error("--time-scale: must be > 0")
    return args


async def main(args: argparse.Namespace) -> None:
    bad = []
    for item in args.bad_node:
        node, _, factor = item.partition("=")
        bad.append((node, float(factor or 0.4)))
    cfg = SimConfig(profile=get_profile(args.profile), node_bandwidth=tuple(bad))
    client = await KubeClient.from_kubeconfig(args.kubeconfig)
    cluster = SimulatedCluster(client, config=cfg,
                               clock=SimClock(scale=args.time_scale, start=time.time()),
                               nodes=args.nodes, logs=HttpLogSink(client))
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(cluster.run)
            logging.getLogger("cre.testing.cluster").info(
                "simulating %d %s nodes (time scale %g)", args.nodes, args.profile,
                args.time_scale)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    break
    finally:
        await client.close()


if __name__ == "__main__":
    ns = parse_args()
    logging.basicConfig(level=logging.DEBUG if ns.verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    anyio.run(main, ns)
