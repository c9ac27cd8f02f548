"""``python -m cre.testing.apiserver``: run the API emulator until SIGTERM.

Serves on 127.0.0.1, installs CRDs from ``--crds`` folders or files, and writes the kubeconfig
(``--write-kubeconfig``) only once the server accepts connections, so a supervisor can wait for
the file to appear.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from .emulator import Clock, serve


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m cre.testing.apiserver",
                                description="Kubernetes API server emulator")
    p.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any free)")
    p.add_argument("--write-kubeconfig", type=Path, required=True, metavar="FILE",
                   help="where to write the kubeconfig once serving")
    p.add_argument("--crds", type=Path, action="append", default=[], metavar="DIR",
                   help="a CRD file or a folder of CRD YAML files (repeatable)")
    p.add_argument("--kubernetes-version", default="1.33",
                   help="emulated Kubernetes minor release, e.g. 1.33")
    p.add_argument("--tls", action="store_true", help="serve HTTPS with a self-signed CA")
    p.add_argument("--seed", type=int, default=0, help="seed for names, uids and faults")
    p.add_argument("--rbac", action="store_true",
                   help="enforce RBAC for service-account tokens (kubectl create token)")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="with --time-origin: server timestamps follow the scaled clock "
                        "origin + (now - origin) x scale a simulated cluster shares")
    p.add_argument("--time-origin", type=float, default=None, metavar="UNIX_SECONDS",
                   help="the shared scaled clock's origin (default: the wall clock)")
    args = p.parse_args(argv)
    if args.time_scale <= 0:
        p.error("--time-scale: must be > 0")
    return args


class _ScaledClock(Clock):
    """Server time on the clock a simulated cluster shares (``SimClock.shared`` in
    cre.testing.cluster.clock): ``origin + (time.time() - origin) x scale``."""

    def __init__(self, *, scale: float, origin: float) -> None:
        super().__init__()
        self.scale, self.origin = scale, origin

    def __call__(self) -> datetime:
        return datetime.fromtimestamp(self.origin + (time.time() - self.origin) * self.scale,
                                      tz=UTC)


async def _freeze_heap(interval: float) -> None:
    """Move what survived so far out of the cyclic GC's reach, every ``interval`` seconds.

    Stored objects are long-lived and acyclic (refcounting frees them), but with 10,000 pods
    each full collection walks millions of containers and stalls every request and watch for
    100 ms or more. A standalone emulator owns its process, so it can freeze its heap.
    """
    while True:
        await asyncio.sleep(interval)
        gc.freeze()


async def run(args: argparse.Namespace) -> None:
    freezer = asyncio.get_running_loop().create_task(_freeze_heap(1.0))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    clock = (None if args.time_origin is None
             else _ScaledClock(scale=args.time_scale, origin=args.time_origin))
    async with serve(crds=args.crds, kubernetes_version=args.kubernetes_version,
                     port=args.port, tls=args.tls, seed=args.seed, rbac=args.rbac, clock=clock,
                     kubeconfig_path=args.write_kubeconfig.resolve()) as emu:
        print(f"cre api emulator serving {emu.url} (Kubernetes {emu.kubernetes_version}); "
              f"kubeconfig {emu.kubeconfig_path}", file=sys.stderr, flush=True)
        await stop.wait()
    freezer.cancel()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for path in args.crds:
        if not path.exists():
            print(f"error: --crds {path}: no such file or directory", file=sys.stderr)
            return 2
    try:
        asyncio.run(run(args))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
