"""``python -m bench logs``: a 1 GB container log does not grow the manager's memory.

A workload may write a gigabyte of log, or a gigabyte without one newline (a progress bar that
only redraws with ``\\r``, a binary dumped to stdout). The Job controller reads failed
containers' logs twice (the prefetcher at the exit, the reconcile if the prefetch missed) and
must hold at most its bound whatever the log: ``limitBytes`` on the read, the body streamed and
cut there, and only the sanitized last ``LIMIT_BYTES`` kept per tail.

The API emulator runs in its own process and serves the log (1 GiB by default, ``--mib``) in
three shapes: lines with ANSI colour codes, one line without a newline, and the same line from a
server that ignores ``limitBytes`` (a tiny in-process server that streams it chunk by chunk, so
the client's cut is what bounds memory). Each shape is read ``--reads`` times through
:func:`cre.kube.pods.read_pod_log` and through the :class:`LogPrefetcher` (``--parallel``
concurrent reads, tails kept). Prints JSON: the manager process's peak RSS growth per shape (a
2 ms sampler of ``/proc/self/statm``), the bytes read and kept per tail, and the bound.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import anyio

from cre.controller.job.prefetch import LogPrefetcher
from cre.core.common.plan import LIMIT_BYTES, READ_LIMIT_BYTES, ReadLog
from cre.core.common.projections import pod_view
from cre.kube.client import NAMESPACES, PODS, KubeClient
from cre.kube.pods import read_pod_log
from cre.testing.apiserver.emulator import write_kubeconfig
from cre.testing.logserver import flooding_log_server

NS = "bench"
MIB = 1024 * 1024
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * _PAGE


class _PeakRss:
    """The highest resident set size seen while active (sampled every 2 ms in a thread, so a
    blocked event loop is still measured)."""

    def __init__(self) -> None:
        self.base = self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _PeakRss:
        self.base = self.peak = _rss()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        self.peak = max(self.peak, _rss())

    @property
    def growth_mb(self) -> float:
        return round((self.peak - self.base) / MIB, 2)


@asynccontextmanager
async def _emulator(folder: Path) -> AsyncIterator[tuple[str, Path]]:
    kc = folder / "kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cre.testing.apiserver", "--port", "0", "--write-kubeconfig",
        str(kc), stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stderr is not None
        line = (await proc.stderr.readline()).decode()
        if "serving" not in line:
            raise RuntimeError(f"emulator did not start: {line}")
        yield line.split("serving ", 1)[1].split(" ", 1)[0], kc
    finally:
        proc.terminate()
        await proc.wait()


def _pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
            "spec": {"nodeName": "node-0",
                     "containers": [{"name": "node", "image": "busybox"}]}}


async def _feed(url: str, pod: str, body: bytes, repeat: int) -> float:
    started = time.monotonic()
    async with aiohttp.ClientSession() as s, s.post(
            f"{url}/_emulator/logs/{NS}/{pod}/node", params={"repeat": str(repeat)},
            data=body, timeout=aiohttp.ClientTimeout(total=None)) as r:
        if r.status != 204:
            raise RuntimeError(f"feeding {pod}: {r.status} {await r.text()}")
    return time.monotonic() - started


async def _measure(client: KubeClient, pod: dict[str, Any], *, reads: int,
                   parallel: int, timeout: float) -> dict[str, Any]:
    view = pod_view(pod)
    name = view.name
    request = ReadLog(namespace=NS, pod=name, container="node", pod_uid=view.uid)
    kept: list[int] = []
    with _PeakRss() as direct:
        started = time.monotonic()
        for _ in range(reads):
            tail = await read_pod_log(client, request, timeout=timeout)
            if tail.error:
                raise RuntimeError(tail.error)
            kept.append(len(tail.text.encode()))
        direct_s = (time.monotonic() - started) / reads
    prefetcher = LogPrefetcher(client, timeout=timeout, parallel=parallel)
    with _PeakRss() as prefetched:
        async with anyio.create_task_group() as tg:
            prefetcher.bind(tg)
            for i in range(reads):
                # A distinct pod uid per request: every read is a real one, and each tail is kept.
                prefetcher.request(pod_view({**pod, "metadata": {**pod["metadata"],
                                                                 "uid": f"{view.uid}-{i}"}}),
                                   "node", owner=f"{NS}/job-{i}")
        prefetcher.bind(None)
    return {"pod": name, "reads": reads, "bytes_kept_per_tail": max(kept),
            "read_s": round(direct_s, 4),
            "peak_rss_growth_mb": {"read_pod_log": direct.growth_mb,
                                   "prefetcher": prefetched.growth_mb},
            "tails_held": len(prefetcher)}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    total = args.mib * MIB
    line = b"\x1b[32mINFO\x1b[0m step 000123 loss=0.4242 lr=3e-4 " + b"x" * 50 + b"\n"
    lines_chunk = line * (MIB // len(line))
    no_newline_chunk = b"\x1b[2K\rprogress " + b"#" * (MIB - 12)
    shapes: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with _emulator(Path(tmp)) as (url, kc):
            client = await KubeClient.from_kubeconfig(str(kc))
            try:
                await client.create(NAMESPACES, {"metadata": {"name": NS}})
                for shape, chunk in (("lines_ansi", lines_chunk),
                                     ("no_newline", no_newline_chunk)):
                    pod = _pod(shape.replace("_", "-"))
                    await client.create(PODS, pod, namespace=NS)
                    feed_s = await _feed(url, pod["metadata"]["name"], chunk, total // len(chunk))
                    out = await _measure(client, pod, reads=args.reads, parallel=args.parallel,
                                         timeout=args.timeout)
                    out["log_bytes"] = (total // len(chunk)) * len(chunk)
                    out["feed_s"] = round(feed_s, 2)
                    shapes[shape] = out
                    await client.delete(PODS, pod["metadata"]["name"], namespace=NS)
            finally:
                await client.close()
    async with flooding_log_server(no_newline_chunk, total // MIB) as url:
        client = await KubeClient.from_kubeconfig(_kubeconfig(url, Path(tempfile.mkdtemp())))
        try:
            out = await _measure(client, _pod("ignores-limit"), reads=args.reads,
                                 parallel=args.parallel, timeout=args.timeout)
            out["log_bytes"] = (total // MIB) * MIB
            shapes["server_ignores_limitBytes"] = out
        finally:
            await client.close()
    # In flight per parallel read: the socket buffer, the chunks read, their decoded text and
    # the joined text (4 x the read limit at most); kept: one bounded tail per read.
    bound = args.parallel * 4 * READ_LIMIT_BYTES + args.reads * LIMIT_BYTES
    return {
        "benchmark": "logs",
        "log_mib": args.mib,
        "read_limit_bytes": READ_LIMIT_BYTES,
        "kept_limit_bytes": LIMIT_BYTES,
        "parallel": args.parallel,
        "bound_mb": round(bound / MIB, 2),
        "within_bound": all(v <= bound / MIB for s in shapes.values()
                            for v in s["peak_rss_growth_mb"].values()),
        "shapes": shapes,
    }


def _kubeconfig(url: str, folder: Path) -> str:
    path = folder / "kubeconfig"
    write_kubeconfig(path, url=url, ca_path=None)
    return str(path)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench logs", description=__doc__)
    p.add_argument("--mib", type=int, default=1024, help="log size in MiB (default 1 GiB)")
    p.add_argument("--reads", type=int, default=32, help="reads per shape and path")
    p.add_argument("--parallel", type=int, default=16, help="prefetcher parallelism")
    p.add_argument("--timeout", type=float, default=60.0, help="per-read timeout (s)")
    args = p.parse_args()
    print(json.dumps(anyio.run(run, args), indent=2))


if __name__ == "__main__":
    main()
