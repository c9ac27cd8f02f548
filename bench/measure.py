"""Measurement benchmark: nccl-tests parse throughput on a generated log (JSON on stdout).

A launcher's log with ``NCCL_DEBUG=INFO`` and a long sweep runs to tens of megabytes; the
BandwidthMeasurement parses it on every provisional sample and once more in full at the end,
so the parser's speed bounds how often a manager can sample. The generated log mixes, as real
ones do, kubelet timestamps, NCCL INFO chatter, warnings, banners, multi-line headers and table
rows (several runs), to ``--mb`` megabytes (default 50). Reported: MB/s and lines/s for whole
lines (:func:`cre.core.measure.ncclparse.parse_lines`) and for 64 KiB chunks as a stream delivers
them (:func:`cre.core.measure.ncclparse.parse_chunks`), best of ``--rounds``, and the parser's peak
traced memory on the chunked path (tracemalloc; the log itself is generated chunk by chunk and
never held whole on that path).

Streaming (``--stream-mb``, default 10 and 50): the API emulator runs as a separate process
holding a launcher pod whose log is the generated one; this process performs the
BandwidthMeasurement controller's final read (:meth:`BandwidthController.read`: the log
streamed through ``pods/log`` with timestamps, the window filter and the parser) and reports
the peak Python allocation above the baseline (tracemalloc) and the growth of the process's
peak RSS during the read. Target: independent of the log's size, under 20 MiB.

Usage: ``python -m bench measure [--mb 50] [--rounds 3] [--stream-mb 10,50] [--no-stream]``
"""

from __future__ import annotations

import argparse
import json
import resource
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import aiohttp
import anyio

from cre.core.measure.ncclparse import NCCL_ROW_REGEX, parse_chunks, parse_lines

_HEADER = (
    "#                                                              out-of-place"
    "                       in-place\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
    "            (us)  (GB/s)  (GB/s)\n")


def _block(run: int, second: int, *, stamped: bool = True) -> str:
    """One run: banner, INFO chatter, header and a 8 B .. 8 GiB sweep, with timestamps (as
    read with ``timestamps=true``; without, as a container writes it)."""
    out: list[str] = []
    stamp = (f"2026-12-01T10:{(second // 60) % 60:02d}:{second % 60:02d}.{run % 10**9:09d}Z "
             if stamped else "")
    out.append(stamp + "# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor)\n")
    for rank in range(8):
        out.append(stamp + f"node-{rank}:1234:{1290 + rank} [{rank}] NCCL INFO Channel "
                   f"{rank:02d}/0 : {rank}[{rank}] -> {(rank + 1) % 8}[{(rank + 1) % 8}] "
                   "via P2P/IPC/read\n")
    out.append(stamp + "node-0:1234:1290 [0] NCCL INFO Using network IB\n")
    out.append(stamp + "node-3:1240:1301 [3] NCCL WARN NET/IB : Got async event : port error\n")
    out.extend(stamp + line + "\n" for line in _HEADER.splitlines())
    size = 8
    while size <= 8 << 30:
        bus = 400.0 * size / (size + (32 << 20))
        alg = bus / 1.75
        out.append(f"{stamp}{size:12d}  {size // 4:12d}     float     sum      -1  {58.3:7.1f}"
                   f"  {alg:6.2f}  {bus:6.2f}       0  {58.4:7.1f}  {alg:6.2f}  {bus:6.2f}"
                   "       0\n")
        size *= 2
    out.append(stamp + "# Out of bounds values : 0 OK\n")
    out.append(stamp + "# Avg bus bandwidth    : 180.000\n#\n")
    return "".join(out)


def generated(total_bytes: int, *, chunk: int = 64 * 1024, stamped: bool = True
              ) -> Iterator[str]:
    """The synthetic log in chunks of ``chunk`` characters (cut anywhere, as a stream is)."""
    produced, run, pending = 0, 0, ""
    while produced < total_bytes:
        pending += _block(run, run, stamped=stamped)
        run += 1
        while len(pending) >= chunk:
            yield pending[:chunk]
            produced += chunk
            pending = pending[chunk:]
    if pending:
        yield pending


async def _stream_round(kubeconfig: str, server: str, mb: float, index: int) -> dict[str, Any]:
    """Feed a ``mb`` MB log to a fresh pod on the emulator, then measure one final read."""
    from cre.controller.measure.bandwidth import BandwidthController
    from cre.core.measure.bandwidth import FINAL_LIMIT_BYTES, ReadRequest
    from cre.kube.client import PODS, KubeClient

    pod = f"bench-launcher-{index}"
    client = await KubeClient.from_kubeconfig(kubeconfig)
    try:
        created = await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": pod, "namespace": "default"}, "spec": {"nodeName": "n0", "containers": [
                {"name": "launcher", "image": "stub"}]}}, namespace="default")
        created["status"] = {"phase": "Running", "containerStatuses": [{
            "name": "launcher", "image": "stub", "imageID": "", "ready": True,
            "restartCount": 0, "state": {"running": {"startedAt": "2026-12-01T10:00:00Z"}}}]}
        await client.replace(PODS, created, subresource="status")
        sent = 0
        async with aiohttp.ClientSession() as http:
            pending = ""
            for chunk in generated(int(mb * 1024 * 1024), chunk=1024 * 1024, stamped=False):
                # Whole lines only: the emulator stamps each appended line.
                text, _, pending = (pending + chunk).rpartition("\n")
                if not text:
                    continue
                body = (text + "\n").encode()
                sent += len(body)
                async with http.post(f"{server}/_emulator/logs/default/{pod}/launcher",
                                     data=body) as resp:
                    resp.raise_for_status()
        controller = BandwidthController(client, namespaces=["default"], log_timeout=600)
        request = ReadRequest(namespace="default", pod=pod, container="launcher", pod_uid="",
                              final=True, regex=NCCL_ROW_REGEX, limit_bytes=FINAL_LIMIT_BYTES)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tracemalloc.start()
        base, _ = tracemalloc.get_traced_memory()
        t0 = time.perf_counter()
        result = await controller.read(request)
        seconds = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    finally:
        await client.close()
    mb = sent / (1024 * 1024)
    return {"log_mb": round(mb, 1), "rows": result.rows, "lines": result.lines,
            "error": result.error,
            "seconds": round(seconds, 2), "mb_per_s": round(mb / seconds, 1),
            "peak_traced_above_baseline_mib": round((peak - base) / (1024 * 1024), 2),
            "peak_rss_growth_mib": round((rss_after - rss_before) / 1024, 1)}


def streaming(sizes: list[float]) -> list[dict[str, Any]]:
    """One final read per size through a separate emulator process."""
    from cre.testing.procs import Stack

    out: list[dict[str, Any]] = []
    with Stack() as stack:
        stack.start_emulator(crds=[])
        kubeconfig = str(stack.kubeconfig)
        server = next(line.split("server:", 1)[1].strip()
                      for line in stack.kubeconfig.read_text().splitlines()
                      if "server:" in line)
        for i, mb in enumerate(sizes):
            out.append(anyio.run(_stream_round, kubeconfig, server, mb, i))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(prog="bench measure")
    ap.add_argument("--mb", type=float, default=50.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stream-mb", default="10,50")
    ap.add_argument("--no-stream", action="store_true")
    args = ap.parse_args()
    total = int(args.mb * 1024 * 1024)
    text = "".join(generated(total))
    size_mb = len(text.encode()) / (1024 * 1024)
    lines = text.splitlines()
    best_lines = best_chunks = float("inf")
    summary = None
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        summary = parse_lines(lines)
        best_lines = min(best_lines, time.perf_counter() - t0)
        t0 = time.perf_counter()
        parse_chunks(generated(total))
        best_chunks = min(best_chunks, time.perf_counter() - t0)
    assert summary is not None
    del text, lines
    tracemalloc.start()
    parse_chunks(generated(total))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    stream = [] if args.no_stream else streaming(
        [float(x) for x in args.stream_mb.split(",") if x])
    print(json.dumps({
        "log_mb": round(size_mb, 1),
        "lines": summary.lines,
        "rows": summary.rows,
        "sizes": len(summary.results),
        "runs": summary.runs,
        "whole_lines": {"seconds": round(best_lines, 3),
                        "mb_per_s": round(size_mb / best_lines, 1),
                        "lines_per_s": round(summary.lines / best_lines)},
        "chunked_64k_incl_generation": {"seconds": round(best_chunks, 3),
                                        "mb_per_s": round(size_mb / best_chunks, 1)},
        "chunked_peak_traced_mib": round(peak / (1024 * 1024), 2),
        "final_read_streamed_through_emulator": stream,
    }, indent=2))


if __name__ == "__main__":
    main()
