"""``python -m bench capture``: does the early launcher capture beat JobSet's pod deletion?

Runs the real Job controller against the in-process API emulator and scripts N launcher
failures (default 200): each Job's launcher pod exits 1 with a marker line in its log and is
deleted 0.5 s later, as JobSet deletes a failed launcher's Job on a real cluster. A separate Job
watch records when each Job's ``status.failureLog`` first appears. Prints JSON: the capture rate
(the record names the launcher and carries the marker; target 100%) and the delay from the
container's exit to the record being visible (p50/p90/p99/max; target p99 < 300 ms).

Failures are spread over ``--concurrency`` Jobs in flight at a time, so the figure includes
queueing behind other Jobs' reconciles, not just one uncontended pass.

``--backend real`` runs the same script against a real etcd + kube-apiserver
(:mod:`cre.testing.controlplane`): the launcher's log is served kubelet-style and reached
through kube-apiserver's pod-log proxy, as on a cluster. ``--backend both`` runs the emulator
and then the real server in one invocation and prints both records with their p50/p99 ratios
(real over emulator), so the two are measured side by side on the same machine load.
``--backend allreal`` scripts nothing: see :mod:`bench._allreal_capture`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio

from cre.api.watch import WatchEventType
from cre.core.common.plan import JobSettings
from cre.kube.client import JOBS
from cre.kube.informer import Informer
from cre.testing import controlplane
from cre.testing.apiserver import serve
from cre.testing.apiserver.pytest_fixtures import default_crd_sources
from cre.testing.controlplane import ControlPlane
from cre.testing.controlplane.backend import real_logs_backend
from cre.testing.jobharness import JobHarness, ServesLogs, condition, running_harness

MARKER = "[stub] simulated failure"


class _Seen:
    """Job watch: the latest state of each Job, and the monotonic time each first showed a
    failureLog (with that record). Waiting goes through the watch, never by polling, so the
    benchmark does not load the server it measures."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self.record: dict[str, dict[str, Any]] = {}
        self.latest: dict[str, dict[str, Any]] = {}
        self.changed = anyio.Event()

    def handler(self, etype: WatchEventType, old: dict[str, Any] | None,
                new: dict[str, Any] | None) -> None:
        if new is None:
            return
        name = new["metadata"]["name"]
        self.latest[name] = new
        log = (new.get("status") or {}).get("failureLog")
        if log and name not in self.at:
            self.at[name] = time.monotonic()
            self.record[name] = dict(log)
        self.changed.set()
        self.changed = anyio.Event()

    async def until(self, name: str, check: Callable[[dict[str, Any]], bool]) -> None:
        """Wait until the watched Job ``name`` satisfies ``check``."""
        while True:
            changed = self.changed
            job = self.latest.get(name)
            if job is not None and check(job):
                return
            await changed.wait()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def delay_summary(seconds: list[float]) -> dict[str, float | None]:
    """p50/p90/p99/max/mean of delays given in seconds, in milliseconds."""
    ms = [d * 1000.0 for d in seconds]
    return {
        "p50": round(_percentile(ms, 0.50), 1),
        "p90": round(_percentile(ms, 0.90), 1),
        "p99": round(_percentile(ms, 0.99), 1),
        "max": round(max(ms), 1) if ms else None,
        "mean": round(statistics.fmean(ms), 1) if ms else None,
    }


async def _one(h: JobHarness, seen: _Seen, index: int, *, delete_after: float,
               wait_limit: float) -> tuple[str, float | None]:
    name = f"cap-{index:04d}"
    launcher = f"{name}-workload-launcher-0-0-{index:05d}"
    await h.create_job(name)
    with anyio.fail_after(wait_limit * 3):
        # JobSet creates the pods after the TrainJob (earlier pods are a previous generation).
        await seen.until(name, lambda j: bool((j.get("status") or {}).get("workloadRef")))
        await h.script.create_pod(launcher, job=name, launcher=True, node="gpu-0")
        await seen.until(name, lambda j: (condition(j, "InProgress") or {}).get("reason")
                         == "WorkloadRunning")
    exited = time.monotonic()
    await h.script.terminate(launcher, exit_code=1, log=f"{MARKER}\nmpirun exited 1\n")
    await anyio.sleep(delete_after)
    await h.script.delete_pod(launcher)
    with anyio.move_on_after(wait_limit):
        while name not in seen.at:
            await seen.changed.wait()
    record = seen.record.get(name)
    if record is None or record.get("podName") != launcher or MARKER not in record.get("tail", ""):
        return name, None
    return name, seen.at[name] - exited


@contextlib.asynccontextmanager
async def _server(plane: ControlPlane | None) -> AsyncIterator[ServesLogs]:
    if plane is None:
        async with serve(crds=default_crd_sources()) as emu:
            yield emu
    else:
        async with real_logs_backend(plane, nodes=["gpu-0"]) as real:
            yield real


async def _bench(args: argparse.Namespace, plane: ControlPlane | None = None) -> dict[str, Any]:
    delays: list[float] = []
    missed: list[str] = []
    started = time.monotonic()
    settings = JobSettings(poll_interval=30.0)
    async with _server(plane) as server, running_harness(
            server, namespace="bench", settings=settings,
            max_concurrent_reconciles=args.workers) as h:
        seen = _Seen()
        watch: Informer[dict[str, Any]] = Informer(h.client, JOBS, transform=dict,
                                                   namespace="bench", name="bench-jobs")
        watch.add_handler(seen.handler)
        limiter = anyio.Semaphore(args.concurrency)

        async def run_one(i: int) -> None:
            async with limiter:
                name, delay = await _one(h, seen, i, delete_after=args.delete_after,
                                         wait_limit=args.wait_limit)
            if delay is None:
                missed.append(name)
            else:
                delays.append(delay)

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch.run)
            await watch.wait_synced()
            async with anyio.create_task_group() as jobs:
                for i in range(args.failures):
                    jobs.start_soon(run_one, i)
            tg.cancel_scope.cancel()
    return {
        "benchmark": "capture",
        "backend": "emulator" if plane is None else
                   f"real kube-apiserver {plane.binaries.versions.kubernetes}",
        "failures": args.failures,
        "captured": len(delays),
        "capture_rate": len(delays) / args.failures if args.failures else float("nan"),
        "missed": sorted(missed),
        "pod_deleted_after_s": args.delete_after,
        "concurrency": args.concurrency,
        "max_concurrent_reconciles": args.workers,
        "delay_ms": delay_summary(delays),
        "target": {"capture_rate": 1.0, "p99_ms_below": 300},
        "wall_s": round(time.monotonic() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench capture", description=__doc__)
    parser.add_argument("--failures", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=10,
                        help="Jobs in flight at a time")
    parser.add_argument("--workers", type=int, default=4, help="max_concurrent_reconciles")
    parser.add_argument("--delete-after", type=float, default=0.5,
                        help="seconds between the launcher's exit and its deletion")
    parser.add_argument("--wait-limit", type=float, default=10.0,
                        help="seconds to wait for a record before counting a miss")
    parser.add_argument("--backend", choices=("emulator", "real", "both", "allreal"),
                        default="emulator",
                        help="the API emulator (default), a real etcd + kube-apiserver, or "
                             "both one after the other; allreal: no script at all, the real "
                             "Trainer, JobSet, Job controller, scheduler and KWOK nodes "
                             "(bench/_allreal_capture.py; --failures 200 takes long there)")
    parser.add_argument("--run-seconds", type=float, default=1.0,
                        help="allreal only: how long each launcher runs before exiting 1")
    args = parser.parse_args()
    if args.backend == "allreal":
        from bench import _allreal_capture
        print(json.dumps(_allreal_capture.run(args), indent=2))
        return
    if args.backend == "emulator":
        print(json.dumps(anyio.run(_bench, args), indent=2))
        return
    emulated = anyio.run(_bench, args) if args.backend == "both" else None
    with controlplane.start(crds=controlplane.default_crds()) as plane:
        real = anyio.run(_bench, args, plane)
    if emulated is None:
        print(json.dumps(real, indent=2))
        return
    ratios = {q: round(real["delay_ms"][q] / emulated["delay_ms"][q], 2)
              if emulated["delay_ms"][q] else None for q in ("p50", "p99")}
    print(json.dumps({"benchmark": "capture", "emulator": emulated, "real": real,
                      "real_over_emulator": ratios}, indent=2))


if __name__ == "__main__":
    main()
