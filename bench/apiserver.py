"""API emulator benchmark: pod writes/s, list latency at 10,000 pods, watch fan-out latency.

The emulator runs as its own process (the CLI) pinned to one CPU, so the figures are the
server's, not the load generator's. Watch delivery latency is measured from just before a
write is sent to the moment each of the 20 watchers reads the event; both sides use the
system-wide monotonic clock (carried in a pod annotation). Prints one JSON document.

Usage: ``python -m bench apiserver [--pods 10000] [--watchers 20] [--watch-rates 500 1000 2000]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

PODS = "/api/v1/namespaces/default/pods"


def _pod(name: str, sent: float) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"},
                     "annotations": {"bench/sent": repr(sent)}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentile(values: list[float], pct: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))
    return ordered[idx]


async def _start_server(folder: Path, cpu: int | None) -> tuple[asyncio.subprocess.Process, str]:
    kc = folder / "kubeconfig"
    cmd = [sys.executable, "-m", "cre.testing.apiserver", "--port", "0",
           "--write-kubeconfig", str(kc)]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu), *cmd]
    proc = await asyncio.create_subprocess_exec(*cmd, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    line = (await proc.stderr.readline()).decode()
    if "serving" not in line:
        raise RuntimeError(f"emulator did not start: {line}")
    url = line.split("serving ", 1)[1].split(" ", 1)[0]
    return proc, url


async def _writes(session: aiohttp.ClientSession, url: str, *, count: int, concurrency: int,
                  prefix: str, rate: float | None = None) -> float:
    """Create ``count`` pods with ``concurrency`` requests in flight; returns writes/s.

    With ``rate``, request ``i`` is not sent before ``start + i / rate`` (an open-loop load).
    """
    names = iter(range(count))
    begin = time.monotonic()

    async def worker() -> None:
        for i in names:
            if rate:
                delay = begin + i / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            body = json.dumps(_pod(f"{prefix}{i}", time.monotonic())).encode()
            async with session.post(url + PODS, data=body,
                                    headers={"Content-Type": "application/json"}) as r:
                if r.status != 201:
                    raise RuntimeError(f"create failed: {r.status} {await r.text()}")
                await r.read()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / (time.perf_counter() - start)


async def _list_latency(session: aiohttp.ClientSession, url: str, *, repeat: int
                        ) -> dict[str, float]:
    times: list[float] = []
    size = 0
    for _ in range(repeat):
        start = time.perf_counter()
        async with session.get(url + PODS) as r:
            data = await r.read()
        times.append((time.perf_counter() - start) * 1000)
        size = len(data)
    return {"p50_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1),
            "bytes": size}


async def _fanout(session: aiohttp.ClientSession, url: str, *, watchers: int, events: int,
                  concurrency: int, rate: float | None, pid: int) -> dict[str, float | None]:
    async with session.get(url + PODS + "?limit=1") as r:
        rv = (await r.json())["metadata"]["resourceVersion"]
    latencies: list[float] = []
    ready = 0
    all_ready = asyncio.Event()

    async def watch() -> None:
        nonlocal ready
        async with session.get(f"{url}{PODS}?watch=true&resourceVersion={rv}",
                               timeout=aiohttp.ClientTimeout(total=None)) as r:
            ready += 1
            if ready == watchers:
                all_ready.set()
            seen = 0
            while seen < events:
                line = await r.content.readline()
                if not line:
                    break
                now = time.monotonic()
                ev = orjson.loads(line)
                sent = float(ev["object"]["metadata"]["annotations"]["bench/sent"])
                latencies.append((now - sent) * 1000)
                seen += 1

    tasks = [asyncio.create_task(watch()) for _ in range(watchers)]
    await all_ready.wait()
    cpu_before = _cpu_seconds(pid)
    achieved = await _writes(session, url, count=events, concurrency=concurrency,
                             prefix=f"w{rate or 0:g}-", rate=rate)
    await asyncio.gather(*tasks)
    server_cpu = _cpu_seconds(pid) - cpu_before
    return {"watchers": watchers, "events": events,
            "server_cpu_ms_per_event_all_watchers": round(server_cpu / events * 1000, 3),
            "target_write_rate_per_s": rate, "write_rate_per_s": round(achieved),
            "p50_ms": round(_percentile(latencies, 50), 2),
            "p99_ms": round(_percentile(latencies, 99), 2),
            "deliveries": len(latencies)}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    cpus = sorted(os.sched_getaffinity(0))
    cpu = cpus[-1] if len(cpus) > 1 else None
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = await _start_server(Path(tmp), cpu)
        try:
            conn = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=conn) as session:
                warm = await _writes(session, url, count=200, concurrency=args.concurrency,
                                     prefix="warm")
                cpu_before = _cpu_seconds(proc.pid)
                writes = await _writes(session, url, count=args.pods - 200,
                                       concurrency=args.concurrency, prefix="p")
                cpu_per_write = (_cpu_seconds(proc.pid) - cpu_before) / (args.pods - 200)
                listing = await _list_latency(session, url, repeat=5)
                fanout = [
                    await _fanout(session, url, watchers=args.watchers, events=args.watch_events,
                                  concurrency=args.concurrency, rate=rate, pid=proc.pid)
                    for rate in args.watch_rates
                ]
        finally:
            proc.send_signal(signal.SIGTERM)
            await proc.wait()
    return {
        "benchmark": "apiserver",
        "server_cpu_pinned": cpu is not None,
        "pod_writes_per_s": round(writes),
        "server_cpu_ms_per_write": round(cpu_per_write * 1000, 3),
        "pod_writes_per_cpu_second": round(1 / cpu_per_write) if cpu_per_write else None,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "warmup_writes_per_s": round(warm),
        "list_pods": {"count": args.pods, **listing},
        "watch_fanout": fanout,
        "targets": {"pod_writes_per_s": 2000, "watch_p99_ms": 50},
    }


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench apiserver")
    p.add_argument("--pods", type=int, default=10_000)
    p.add_argument("--watchers", type=int, default=20)
    p.add_argument("--watch-events", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--watch-rates", type=float, nargs="+", default=[500.0, 1000.0, 2000.0],
                   help="write rates (per second) at which watch delivery is measured")
    args = p.parse_args()
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
