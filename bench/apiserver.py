"""API emulator benchmark: pod writes/s, list latency at 10,000 pods, watch fan-out latency.

Three processes, so the figures are the server's and not the load generator's: the emulator (the
CLI, pinned to one CPU when there are several), the writer (this process) and the watchers (a
child process holding every watch connection), both kept off the server's CPU. Server CPU time
is read from ``/proc`` around each phase, so a write's cost is reported next to the wall-clock
rate, which a shared machine makes noisy. Watch delivery latency runs from just before a create
is sent to the moment a watcher reads the event; the writer stamps that instant (system-wide
monotonic clock) into a pod annotation and the watchers find it in the raw event line without
decoding the whole event.

Rated phases are open-loop: create ``i`` is not sent before ``start + i / rate``; the achieved
rate is reported next to the requested one, so an overloaded run is visible as such.

``--baseline-src DIR`` starts a second emulator from another source tree (for example
``git archive HEAD cre | tar -x -C DIR``) and runs every phase against both, interleaved, so
before/after ratios come from the same run on the same machine load.

Usage: ``python -m bench apiserver [--pods 10000] [--watchers 20] [--watch-rates 500 2000]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import signal
import statistics
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import aiohttp
import orjson

PODS = "/api/v1/namespaces/default/pods"
SENT = b'"bench/sent":"'
TARGETS = {"pod_writes_per_s": 2000, "watch_p99_ms": 50}


@dataclass
class Server:
    label: str
    proc: asyncio.subprocess.Process
    url: str


def _pod(name: str, sent: float) -> bytes:
    return orjson.dumps({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"},
                     "annotations": {"bench/sent": repr(sent)}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    })


def _cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _percentile(ordered: list[float], pct: float) -> float:
    if not ordered:
        return float("nan")
    idx = min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))
    return ordered[idx]


async def _start_server(folder: Path, *, label: str, cpu: int | None,
                        source: Path | None) -> Server:
    kc = folder / f"kubeconfig-{label}"
    cmd = [sys.executable, "-m", "cre.testing.apiserver", "--port", "0",
           "--write-kubeconfig", str(kc)]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu), *cmd]
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    proc = await asyncio.create_subprocess_exec(*cmd, stderr=asyncio.subprocess.PIPE, env=env,
                                                cwd=str(source) if source else None)
    assert proc.stderr is not None
    line = (await proc.stderr.readline()).decode()
    if "serving" not in line:
        raise RuntimeError(f"emulator {label} did not start: {line}")
    url = line.split("serving ", 1)[1].split(" ", 1)[0]
    return Server(label, proc, url)


class _Phase:
    """Server CPU time and wall-clock time around one phase."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __enter__(self) -> _Phase:
        self.cpu = _cpu_seconds(self.pid)
        self.start = time.perf_counter()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall = time.perf_counter() - self.start
        user, system = _cpu_seconds(self.pid)
        self.user = user - self.cpu[0]
        self.system = system - self.cpu[1]

    def per_op(self, count: int) -> dict[str, float]:
        return {"server_cpu_ms_per_write": round((self.user + self.system) / count * 1000, 3),
                "server_user_ms_per_write": round(self.user / count * 1000, 3),
                "server_sys_ms_per_write": round(self.system / count * 1000, 3)}


class _Http(asyncio.Protocol):
    """A minimal keep-alive HTTP/1.1 client connection for the write load.

    aiohttp's client costs more CPU per request than the emulator spends serving a create, so
    on a small machine it, not the server, would set the rate. Requests here are pre-formatted
    bytes and responses are framed by Content-Length (every create answer has one).
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionResetError("connection closed")
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(self.lost)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0 or self.waiter is None:
            return
        head = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
        length = 0
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if len(self.buffer) < end + 4 + length:
            return
        body = bytes(self.buffer[end + 4:end + 4 + length])
        del self.buffer[:end + 4 + length]
        waiter, self.waiter = self.waiter, None
        waiter.set_result((int(head[0].split()[1]), body))

    async def post(self, path: str, host: str, body: bytes) -> tuple[int, bytes]:
        if self.lost is not None:
            raise self.lost
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"User-Agent: bench\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        return await self.waiter


async def _writes(url: str, *, count: int, concurrency: int, prefix: str,
                  rate: float | None = None) -> float:
    """Create ``count`` pods with up to ``concurrency`` requests in flight; returns writes/s.

    With ``rate``, create ``i`` is not sent before ``start + i / rate`` (an open-loop load).
    """
    parsed = urllib.parse.urlsplit(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
    loop = asyncio.get_running_loop()
    conns = [(await loop.create_connection(_Http, host, port))[1] for _ in range(concurrency)]
    names = iter(range(count))
    begin = time.monotonic()

    async def worker(conn: _Http) -> None:
        for i in names:
            if rate:
                delay = begin + i / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            status, answer = await conn.post(PODS, f"{host}:{port}",
                                             _pod(f"{prefix}{i}", time.monotonic()))
            if status != 201:
                raise RuntimeError(f"create failed: {status} {answer[:300]!r}")

    start = time.perf_counter()
    try:
        await asyncio.gather(*(worker(c) for c in conns))
    finally:
        for c in conns:
            if c.transport is not None:
                c.transport.close()
    return count / (time.perf_counter() - start)


async def _list_latency(session: aiohttp.ClientSession, url: str, *, pid: int,
                        repeat: int) -> dict[str, float]:
    times: list[float] = []
    size = 0
    with _Phase(pid) as phase:
        for _ in range(repeat):
            start = time.perf_counter()
            async with session.get(url + PODS) as r:
                data = await r.read()
            times.append((time.perf_counter() - start) * 1000)
            size = len(data)
    return {"p50_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1),
            "server_cpu_ms_per_list": round((phase.user + phase.system) / repeat * 1000, 1),
            "bytes": size}


# -- the watcher process ------------------------------------------------------------------------


def _watch_main(url: str, rv: str, watchers: int, events: int, conn: Connection) -> None:
    """Child process: open the watches, report ready, then send back every delivery latency."""
    latencies = asyncio.run(_watch_all(url, rv, watchers, events, conn))
    conn.send_bytes(orjson.dumps(latencies))
    conn.close()


class _Watch(asyncio.Protocol):
    """One raw watch connection: records the delivery latency of every event line it reads.

    Each event is one JSON line and a chunk of the chunked body holds whole lines, so splitting
    the raw stream on newlines yields every event intact (chunk-size lines carry no stamp).
    """

    def __init__(self, request: bytes, events: int, latencies: list[float],
                 opened: asyncio.Queue[None]) -> None:
        self.request = request
        self.events = events
        self.latencies = latencies
        self.opened = opened
        self.seen = 0
        self.rest = b""
        self.headers_done = False
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.request)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(exc or ConnectionResetError("watch closed early"))

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        if not self.headers_done:
            if not lines or not lines[0].startswith(b"HTTP/1.1 200"):
                self.rest = b"\n".join([*lines, self.rest])
                if lines:
                    self.done.set_exception(RuntimeError(f"watch failed: {lines[0]!r}"))
                return
            self.headers_done = True
            self.opened.put_nowait(None)
        for line in lines:
            at = line.find(SENT) + len(SENT)
            if at < len(SENT):
                continue
            self.latencies.append((now - float(line[at:line.index(b'"', at)])) * 1000)
            self.seen += 1
        if self.seen >= self.events and not self.done.done():
            self.done.set_result(None)
            self.transport.close()


async def _watch_all(url: str, rv: str, watchers: int, events: int,
                     conn: Connection) -> list[float]:
    parsed = urllib.parse.urlsplit(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
    request = (f"GET {PODS}?watch=true&resourceVersion={rv} HTTP/1.1\r\n"
               f"Host: {host}:{port}\r\nUser-Agent: bench\r\n\r\n").encode()
    latencies: list[float] = []
    opened: asyncio.Queue[None] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    protocols = []
    for _ in range(watchers):
        _, proto = await loop.create_connection(
            lambda: _Watch(request, events, latencies, opened), host, port)
        protocols.append(proto)
    for _ in range(watchers):
        await opened.get()
    # the server registers a watch before it answers the headers: every watcher is live
    conn.send_bytes(b"ready")
    await asyncio.gather(*(p.done for p in protocols))
    return latencies


async def _fanout(session: aiohttp.ClientSession, server: Server, *, watchers: int,
                  events: int, concurrency: int, rate: float) -> dict[str, Any]:
    async with session.get(server.url + PODS + "?limit=1") as r:
        rv = (await r.json())["metadata"]["resourceVersion"]
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_watch_main, args=(server.url, rv, watchers, events, child))
    proc.start()
    loop = asyncio.get_running_loop()
    try:
        ready = await loop.run_in_executor(None, parent.recv_bytes)
        assert ready == b"ready"
        with _Phase(server.proc.pid) as phase:
            achieved = await _writes(server.url, count=events, concurrency=concurrency,
                                     prefix=f"w{rv}-", rate=rate)
            raw = await loop.run_in_executor(None, parent.recv_bytes)
    except BaseException:
        proc.terminate()  # its watchers would wait for events that never come
        raise
    finally:
        await loop.run_in_executor(None, proc.join)
    ordered = sorted(orjson.loads(raw))
    return {"watchers": watchers, "events": events,
            "requested_write_rate_per_s": rate, "achieved_write_rate_per_s": round(achieved),
            **phase.per_op(events),
            "delivery_p50_ms": round(_percentile(ordered, 50), 2),
            "delivery_p99_ms": round(_percentile(ordered, 99), 2),
            "delivery_max_ms": round(ordered[-1], 2) if ordered else None,
            "deliveries": len(ordered)}


# -- phases -------------------------------------------------------------------------------------


async def _bulk(session: aiohttp.ClientSession, server: Server,
                args: argparse.Namespace) -> dict[str, Any]:
    await _writes(server.url, count=200, concurrency=args.concurrency, prefix="warm")
    count = args.pods - 200
    with _Phase(server.proc.pid) as phase:
        rate = await _writes(server.url, count=count, concurrency=args.concurrency,
                             prefix="p")
    cpu = (phase.user + phase.system) / count
    return {"pod_writes_per_s": round(rate), **phase.per_op(count),
            "pod_writes_per_server_cpu_second": round(1 / cpu) if cpu else None}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    cpus = sorted(os.sched_getaffinity(0))
    cpu = cpus[-1] if len(cpus) > 1 else None
    if cpu is not None:
        # keep the writer and the watcher process (which inherits this) off the server's CPU
        os.sched_setaffinity(0, cpus[:-1])
    sources: list[tuple[str, Path | None]] = [("current", None)]
    if args.baseline_src is not None:
        sources.append(("baseline", args.baseline_src))  # made absolute by main()
    results: dict[str, dict[str, Any]] = {label: {} for label, _ in sources}
    with tempfile.TemporaryDirectory() as tmp:
        servers = [await _start_server(Path(tmp), label=label, cpu=cpu, source=src)
                   for label, src in sources]
        try:
            conn = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=conn) as session:
                for s in servers:
                    results[s.label]["writes"] = await _bulk(session, s, args)
                for s in servers:
                    results[s.label]["list_pods"] = {
                        "count": args.pods,
                        **await _list_latency(session, s.url, pid=s.proc.pid, repeat=5)}
                for rate in args.watch_rates:
                    for s in servers:
                        results[s.label].setdefault("watch_fanout", []).append(await _fanout(
                            session, s, watchers=args.watchers, events=args.watch_events,
                            concurrency=args.rated_concurrency, rate=rate))
        finally:
            for s in servers:
                s.proc.send_signal(signal.SIGTERM)
                await s.proc.wait()
    out: dict[str, Any] = {
        "benchmark": "apiserver",
        "server_cpu_pinned": cpu is not None,
        "load_average_1m": round(os.getloadavg()[0], 2),
        **results["current"],
        "targets": TARGETS,
    }
    if "baseline" in results:
        out["baseline"] = results["baseline"]
        out["current_vs_baseline"] = _ratios(results["current"], results["baseline"])
    return out


def _ratios(cur: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """Baseline cost / current cost (> 1: the current tree is faster)."""
    def ratio(a: float, b: float) -> float | None:
        return round(b / a, 2) if a else None

    out: dict[str, Any] = {
        "server_cpu_per_write": ratio(cur["writes"]["server_cpu_ms_per_write"],
                                      base["writes"]["server_cpu_ms_per_write"]),
        "list_p50": ratio(cur["list_pods"]["p50_ms"], base["list_pods"]["p50_ms"]),
    }
    for c, b in zip(cur["watch_fanout"], base["watch_fanout"], strict=True):
        rate = f"{c['requested_write_rate_per_s']:g}/s"
        out[f"fanout_cpu_per_write@{rate}"] = ratio(c["server_cpu_ms_per_write"],
                                                     b["server_cpu_ms_per_write"])
        out[f"delivery_p99@{rate}"] = ratio(c["delivery_p99_ms"], b["delivery_p99_ms"])
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench apiserver")
    p.add_argument("--pods", type=int, default=10_000)
    p.add_argument("--watchers", type=int, default=20)
    p.add_argument("--watch-events", type=int, default=4000)
    p.add_argument("--concurrency", type=int, default=16,
                   help="requests in flight for the closed-loop write phase")
    p.add_argument("--rated-concurrency", type=int, default=64,
                   help="most requests in flight for the open-loop (rated) write phases")
    p.add_argument("--watch-rates", type=float, nargs="+", default=[500.0, 2000.0],
                   help="write rates (per second) at which watch delivery is measured")
    p.add_argument("--baseline-src", type=Path, default=None, metavar="DIR",
                   help="also run every phase against the emulator of this source tree")
    args = p.parse_args()
    if args.baseline_src is not None:
        args.baseline_src = args.baseline_src.resolve()
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
