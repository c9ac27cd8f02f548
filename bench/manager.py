"""Manager benchmark: start-to-ready time and resident memory, idle and with full caches.

The manager must fit a modest pod (the Deployment requests 256 MiB, limits 512 MiB) while
caching every CRE pod of a large cluster, and become ready quickly after a restart or a
leader hand-over. Measured on the real process (``python -m cre_manager``) against the API
emulator (its CLI), both separate processes:

* idle: an empty cluster; time from spawn to ``/readyz`` 200, then RSS (``/proc/PID/status``);
* loaded: 500 CRE Jobs, each with 19 worker pods (``cre.dev/job``) and one launcher pod
  (``cre.dev/launcher``) shaped like real JobSet pods (10,000 pods), and 64 GPU nodes; time
  from spawn to ready (every cache listed), RSS when ready, and RSS once the first reconcile of
  every Job has run (the workqueue is empty; each pass creates the Job's TrainJob), and the
  garbage-collector pauses (``cre_gc_pause_seconds``: count, total, mean, longest) until ready
  and from ready until then.

Targets (issue 7): ready < 5 s and RSS < 200 MiB with 10,000 pods.
Usage: ``python -m bench manager [--jobs 500] [--pods-per-job 20] [--nodes 64]``
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.informer import realistic_pod
from cre.api import labels as L
from cre.kube.client import NAMESPACES, NODES, PODS, KubeClient, Resource
from cre.testing.procs import ManagerProc, Stack, wait_until

NS = "bench"
JOBS = Resource(L.GROUP, L.VERSION, "jobs", kind="Job")
READY_TARGET_S = 5.0
RSS_TARGET_MIB = 200.0


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def job_template() -> dict[str, Any]:
    """A rendered NCCL all-reduce Job (through the renderer's CLI, as a user would)."""
    out = subprocess.run(
        [sys.executable, "-m", "cre.render", "--entry", "communication/nccl-all-reduce",
         "--platform", "aws", "--arch", "h100", "--nodes",
         ",".join(f"gpu-node-{i:04d}" for i in range(19)), "--job-name", "tmpl",
         "--namespace", NS], capture_output=True, text=True, check=True).stdout
    from ruamel.yaml import YAML

    docs = [d for d in YAML(typ="safe").load_all(out) if d]
    job: dict[str, Any] = next(d for d in docs if d["kind"] == "Job")
    return job


def job_body(template: dict[str, Any], name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(json.dumps(template).replace('"tmpl', f'"{name}'))
    body["metadata"] = {"name": name, "namespace": NS}
    return body


def pod_body(job: str, slot: int, per_job: int, seq: int) -> dict[str, Any]:
    """A JobSet-shaped pod: the last slot is the launcher, the others workers."""
    base = copy.deepcopy(realistic_pod(16 if slot == per_job - 1 else slot % 16))
    launcher = slot == per_job - 1
    meta = base["metadata"]
    for key in ("uid", "resourceVersion", "creationTimestamp", "generateName", "managedFields"):
        meta.pop(key, None)
    meta["namespace"] = NS
    meta["name"] = f"{job}-workload-{'launcher' if launcher else 'node'}-0-{slot}"
    labels = meta["labels"]
    labels.pop(L.JOB, None)
    labels.pop(L.LAUNCHER, None)
    labels[L.LAUNCHER if launcher else L.JOB] = job
    labels[L.JOBSET_NAME] = f"{job}-workload"
    base["spec"]["nodeName"] = f"gpu-node-{seq % 64:04d}"
    return base


def node_body(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"gpu-node-{i:04d}",
                         "labels": {L.GPU_PRESENT: "true",
                                    L.GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3"}}}


async def populate(kubeconfig: str, *, jobs: int, per_job: int, nodes: int) -> float:
    """Create the Jobs, pods and nodes with 32 concurrent requests; returns seconds taken."""
    started = time.monotonic()
    client = await KubeClient.from_kubeconfig(kubeconfig)
    try:
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": NS}})
        template = job_template()
        work: list[tuple[Resource, dict[str, Any]]] = [(NODES, node_body(i))
                                                        for i in range(nodes)]
        for j in range(jobs):
            name = f"bench-{j:04d}"
            work.append((JOBS, job_body(template, name)))
            work += [(PODS, pod_body(name, s, per_job, j * per_job + s))
                     for s in range(per_job)]
        queue: asyncio.Queue[tuple[Resource, dict[str, Any]]] = asyncio.Queue()
        for item in work:
            queue.put_nowait(item)

        async def worker() -> None:
            while not queue.empty():
                res, body = queue.get_nowait()
                await client.create(res, body)

        await asyncio.gather(*(worker() for _ in range(32)))
    finally:
        await client.close()
    return time.monotonic() - started


def start_and_measure(stack: Stack, name: str) -> tuple[ManagerProc, float, float]:
    """(process, seconds from spawn to ready, RSS MiB when ready)."""
    started = time.monotonic()
    proc = stack.start_manager(name=name, timeout=120)
    ready = time.monotonic() - started
    return proc, ready, rss_mib(proc.pid)


def _metric(text: str, prefix: str) -> float:
    return sum(float(line.rpartition(" ")[2]) for line in text.splitlines()
               if line.startswith(prefix))


def _gc_histogram(text: str) -> dict[str, dict[str, Any]]:
    """``cre_gc_pause_seconds`` per generation: count, sum (s) and cumulative buckets."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict[str, Any]] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "cre_gc_pause_seconds":
            continue
        for sample in family.samples:
            gen = out.setdefault(sample.labels["generation"], {"count": 0.0, "sum": 0.0,
                                                               "buckets": {}})
            if sample.name.endswith("_count"):
                gen["count"] = sample.value
            elif sample.name.endswith("_sum"):
                gen["sum"] = sample.value
            elif sample.name.endswith("_bucket"):
                gen["buckets"][float(sample.labels["le"])] = sample.value
    return out


def gc_pauses(text: str, since: str | None = None) -> dict[str, Any]:
    """Per generation: collections, total and mean pause (ms), and the bucket bound holding the
    longest pause, from ``cre_gc_pause_seconds`` (minus an earlier scrape ``since``)."""
    now, before = _gc_histogram(text), _gc_histogram(since or "")
    out: dict[str, Any] = {}
    for generation, gen in sorted(now.items()):
        base = before.get(generation, {"count": 0.0, "sum": 0.0, "buckets": {}})
        count = int(gen["count"] - base["count"])
        if not count:
            continue
        total_ms = (gen["sum"] - base["sum"]) * 1000
        longest = min(le for le, v in gen["buckets"].items()
                      if v - base["buckets"].get(le, 0.0) >= count)
        out[f"gen{generation}"] = {"count": count, "sum_ms": round(total_ms, 1),
                                   "mean_ms": round(total_ms / count, 2),
                                   "max_ms_le": longest * 1000}
    return out


def settled(proc: ManagerProc, jobs: int) -> bool:
    status, text = proc.get("metrics", "/metrics")
    if status != 200:
        return False
    created = _metric(text, "cre_job_workload_created_total")
    depth = _metric(text, 'workqueue_depth{name="job"}')
    return created >= jobs and depth == 0


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench manager")
    p.add_argument("--jobs", type=int, default=500)
    p.add_argument("--pods-per-job", type=int, default=20)
    p.add_argument("--nodes", type=int, default=64)
    args = p.parse_args()
    result: dict[str, Any] = {"benchmark": "manager", "jobs": args.jobs,
                              "pods": args.jobs * args.pods_per_job, "nodes": args.nodes}
    with Stack() as stack:
        stack.start_emulator()
        idle, ready_s, rss = start_and_measure(stack, "idle")
        result["idle"] = {"ready_seconds": round(ready_s, 3), "rss_mib": round(rss, 1)}
        idle.stop()
        result["populate_seconds"] = round(asyncio.run(populate(
            str(stack.kubeconfig), jobs=args.jobs, per_job=args.pods_per_job,
            nodes=args.nodes)), 2)
        loaded, ready_s, rss = start_and_measure(stack, "loaded")
        at_ready = loaded.get("metrics", "/metrics")[1]
        started = time.monotonic()
        wait_until(lambda: settled(loaded, args.jobs), timeout=600, interval=0.5,
                   what="every Job's first reconcile", alive=loaded.check_alive)
        result["loaded"] = {
            "ready_seconds": round(ready_s, 3), "rss_mib_at_ready": round(rss, 1),
            "first_reconcile_of_all_jobs_seconds": round(time.monotonic() - started, 2),
            "rss_mib_after_reconciles": round(rss_mib(loaded.pid), 1),
            "gc_pauses_to_ready": gc_pauses(at_ready),
            "gc_pauses_ready_to_settled": gc_pauses(loaded.get("metrics", "/metrics")[1],
                                                    since=at_ready)}
        loaded.stop()
    loaded_fig = result["loaded"]
    result["targets"] = {"ready_seconds": READY_TARGET_S, "rss_mib": RSS_TARGET_MIB}
    result["meets_targets"] = (
        loaded_fig["ready_seconds"] < READY_TARGET_S
        and max(loaded_fig["rss_mib_at_ready"],
                loaded_fig["rss_mib_after_reconciles"]) < RSS_TARGET_MIB)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
