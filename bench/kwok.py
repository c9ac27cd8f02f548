"""``python -m bench kwok``: a Job of many GPU pods on KWOK's fake nodes, real controllers.

Starts etcd + kube-apiserver + kube-controller-manager (Job, GC, pod GC, node lifecycle) +
kube-scheduler + KWOK (:mod:`cre.testing.controlplane.kwok`), registers ``--nodes`` fake
``aws-h100`` nodes (8 GPUs each) and runs one Job of ``--pods`` pods, one GPU each, all in
parallel, each exiting 0 after ``--run-seconds``. Prints the set-up times, the time from the
Job's creation until every pod ran and until the Job is Complete, and KWOK's CPU seconds and
resident memory, as JSON. Needs Go (or a built cache); says why when it cannot run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from cre.testing.controlplane import build, kwok
from cre.testing.controlplane.plane import ControlPlane, start


def _proc(pid: int) -> tuple[float, int]:
    """(CPU seconds, resident bytes) of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    return cpu, int(fields[21]) * os.sysconf("SC_PAGE_SIZE")


def _job(pods: int, run_seconds: float) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bench"},
            "spec": {"completions": pods, "parallelism": pods, "backoffLimit": 0, "template": {
                "metadata": {"annotations": kwok.pod_annotations(exit_code=0,
                                                                 run_seconds=run_seconds)},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "cre/bench:kwok",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}


def _run(plane: ControlPlane, *, pods: int, run_seconds: float, timeout: float) -> dict[str, Any]:
    t0 = time.monotonic()
    status, body = plane.request("POST", "/apis/batch/v1/namespaces/default/jobs",
                                 _job(pods, run_seconds))
    if status != 201:
        raise SystemExit(f"bench kwok: the Job was rejected ({status}): {body}")
    all_ran = complete = None
    ran: set[str] = set()
    while time.monotonic() - t0 < timeout and complete is None:
        _, listing = plane.request("GET", "/api/v1/namespaces/default/pods"
                                   "?labelSelector=job-name%3Dbench")
        ran |= {p["metadata"]["name"] for p in listing["items"]
                if p["status"].get("phase") in ("Running", "Succeeded")}
        if all_ran is None and len(ran) >= pods:
            all_ran = time.monotonic() - t0
        _, job = plane.request("GET", "/apis/batch/v1/namespaces/default/jobs/bench")
        if any(c["type"] == "Complete" and c["status"] == "True"
               for c in job.get("status", {}).get("conditions") or []):
            complete = time.monotonic() - t0
        time.sleep(0.2)
    return {"job_to_all_pods_running_s": None if all_ran is None else round(all_ran, 2),
            "job_to_complete_s": None if complete is None else round(complete, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench kwok")
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--pods", type=int, default=64)
    parser.add_argument("--run-seconds", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    if args.pods > 8 * args.nodes:
        parser.error(f"--pods {args.pods} exceeds the {8 * args.nodes} GPUs of {args.nodes} nodes")
    try:
        kwok_bin = build.ensure_kwok_built().kwok
        t = time.monotonic()
        plane = start()
    except build.Unavailable as exc:
        print(f"bench kwok: cannot run here: {exc}", file=sys.stderr)
        raise SystemExit(3) from exc
    out: dict[str, Any] = {"nodes": args.nodes, "pods": args.pods,
                           "run_seconds": args.run_seconds,
                           "plane_start_s": round(time.monotonic() - t, 2)}
    try:
        t = time.monotonic()
        plane.start_controller_manager(
            controllers="job,garbagecollector,namespace,podgc,nodelifecycle")
        plane.start_scheduler()
        comp = kwok.start_kwok(plane, kwok=kwok_bin)
        kwok.register_gpu_nodes(plane, count=args.nodes, timeout=args.timeout)
        out["controllers_kwok_nodes_ready_s"] = round(time.monotonic() - t, 2)
        out.update(_run(plane, pods=args.pods, run_seconds=args.run_seconds,
                        timeout=args.timeout))
        cpu, rss = _proc(comp.popen.pid)
        out["kwok_cpu_s"] = round(cpu, 2)
        out["kwok_rss_mb"] = round(rss / 2**20, 1)
    finally:
        plane.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
