"""``python -m bench capture --backend allreal``: launcher-failure capture with no simulator.

The emulator and ``real`` backends of ``bench capture`` script the pods and JobSet's deletion
themselves. Here everything below CRE is upstream code (:mod:`cre.testing.controlplane.allreal`):
the rendered MPI all-reduce Job (``goldens/render/all-reduce-aws-h100.json``, node pinning
removed) runs N times on KWOK GPU nodes through the real Trainer, JobSet, Job controller and
scheduler; each launcher pod is annotated to exit 1 after ``--run-seconds`` and its log (a
marker line) is written into the kubelet log server when the pod appears. A pod watch records
when each Job's first launcher pod is seen ``Failed`` (the exit as the API shows it: KWOK's
``finishedAt`` has whole seconds only), a CRE Job watch when ``status.failureLog`` appears.

Prints JSON: capture rate (the record names that first failed launcher and carries the
marker), exit-to-failureLog delay (p50/p90/p99/max), whether the real JobSet deleted any
launcher pod during the run, and the wall time. Each Job needs two whole 8-GPU nodes, so
``--concurrency`` Jobs in flight get ``2 x concurrency`` nodes.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import anyio

from bench.capture import delay_summary
from cre._vendor.crds import JOBSET_OLDEST, TRAINER_OLDEST
from cre.api.labels import LAUNCHER
from cre.core.common.plan import JobSettings
from cre.kube.client import JOBS, PODS, TRAINING_RUNTIMES
from cre.kube.informer import Informer
from cre.testing.controlplane.allreal import (
    JOBSET_LABEL,
    LauncherLogs,
    logging_nodes,
    start_stack,
)
from cre.testing.controlplane.allreal_run import Rendered
from cre.testing.controlplane.build import REPO
from cre.testing.controlplane.kwok import pod_annotations
from cre.testing.controlplane.plane import CRE_CRDS
from cre.testing.jobharness import running_harness

GOLDEN = REPO / "goldens" / "render" / "all-reduce-aws-h100.json"
MARKER = "NCCL WARN NET/OFI [allreal capture marker]"
NS = "bench-allreal"


class _Watch:
    """First launcher failure per CRE Job, failureLog first seen, launcher pod deletions."""

    def __init__(self) -> None:
        self.exited: dict[str, tuple[float, str]] = {}
        self.logged: dict[str, tuple[float, dict[str, Any]]] = {}
        self.failed_jobs: set[str] = set()
        self.deleted_launchers: set[str] = set()
        self.changed = anyio.Event()

    def _poke(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    def pod(self, etype: Any, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        del etype
        obj = new if new is not None else old
        if obj is None:
            return
        job = (obj["metadata"].get("labels") or {}).get(LAUNCHER)
        if job is None:
            return
        if new is None or new["metadata"].get("deletionTimestamp"):
            self.deleted_launchers.add(obj["metadata"]["name"])
        elif (new.get("status") or {}).get("phase") == "Failed" and job not in self.exited:
            self.exited[job] = (time.monotonic(), new["metadata"]["name"])
        self._poke()

    def job(self, etype: Any, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        del etype, old
        if new is None:
            return
        name, status = new["metadata"]["name"], new.get("status") or {}
        if status.get("failureLog") and name not in self.logged:
            self.logged[name] = (time.monotonic(), dict(status["failureLog"]))
        if any(c.get("type") == "Failed" and c.get("status") == "True"
               for c in status.get("conditions") or []):
            self.failed_jobs.add(name)
        self._poke()

    async def until(self, check: Any) -> None:
        while not check():
            await self.changed.wait()


async def _bench(args: argparse.Namespace, stack: Any) -> dict[str, Any]:
    rendered = Rendered.load(GOLDEN).unpinned()
    nodes = [f"gpu-{i:02d}" for i in range(2 * args.concurrency)]
    delays: list[float] = []
    missed: list[str] = []
    started = time.monotonic()
    async with logging_nodes(stack.plane, nodes) as backend, running_harness(
            backend, namespace=NS, settings=JobSettings(poll_interval=30.0),
            max_concurrent_reconciles=args.workers) as h:
        seen = _Watch()
        writer = LauncherLogs(logs=backend.logs, text_for=lambda pod: f"{MARKER}\n"
                              "mpirun exited 1\n")
        pods: Informer[dict[str, Any]] = Informer(h.client, PODS, transform=dict,
                                                  namespace=NS, label_selector=JOBSET_LABEL,
                                                  name="bench-pods", caller=__name__)
        pods.add_handler(writer.handler)
        pods.add_handler(seen.pod)
        jobs: Informer[dict[str, Any]] = Informer(h.client, JOBS, transform=dict,
                                                  namespace=NS, name="bench-jobs")
        jobs.add_handler(seen.job)
        template, runtime = rendered.scripted(NS, launcher=pod_annotations(
            exit_code=1, run_seconds=args.run_seconds))
        await h.client.create(TRAINING_RUNTIMES, runtime, namespace=NS)
        limiter = anyio.Semaphore(args.concurrency)

        async def one(i: int) -> None:
            name = f"cap-{i:03d}"
            body = dict(template, metadata={**template["metadata"], "name": name})
            async with limiter:
                await h.client.create(JOBS, body, namespace=NS)
                with anyio.move_on_after(max(args.wait_limit, 180.0)):
                    await seen.until(lambda: name in seen.failed_jobs and name in seen.logged)
            exit_seen = seen.exited.get(name)
            logged = seen.logged.get(name)
            if exit_seen is None or logged is None or logged[1].get("podName") != exit_seen[1] \
                    or MARKER not in logged[1].get("tail", ""):
                missed.append(name)
            else:
                delays.append(logged[0] - exit_seen[0])

        async with anyio.create_task_group() as tg:
            tg.start_soon(pods.run)
            tg.start_soon(jobs.run)
            await pods.wait_synced()
            await jobs.wait_synced()
            async with anyio.create_task_group() as runs:
                for i in range(args.failures):
                    runs.start_soon(one, i)
            tg.cancel_scope.cancel()
    versions = stack.plane.binaries.versions
    return {
        "benchmark": "capture",
        "backend": f"allreal: kube-apiserver {versions.kubernetes}, kube-controller-manager, "
                   "kube-scheduler, KWOK v0.8.0, JobSet v0.11.1, Trainer v2.2.0",
        "failures": args.failures,
        "captured": len(delays),
        "capture_rate": len(delays) / args.failures if args.failures else float("nan"),
        "missed": sorted(missed),
        "launcher_run_s": args.run_seconds,
        "launcher_pods_deleted_by_the_stack": len(seen.deleted_launchers),
        "concurrency": args.concurrency,
        "nodes": len(nodes),
        "max_concurrent_reconciles": args.workers,
        "exit_seen_to_failure_log_ms": delay_summary(delays),
        "wall_s": round(time.monotonic() - started, 1),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the stack, run the benchmark, stop the stack."""
    stack = start_stack(crds=[JOBSET_OLDEST, TRAINER_OLDEST, CRE_CRDS])
    try:
        result: dict[str, Any] = anyio.run(_bench, args, stack)
        return result
    finally:
        stack.stop()
