"""``python -m bench simulator``: how much CPU the cluster simulator spends running a fleet.

The simulator (``cre.testing.cluster``) must not be the first wall of a scale benchmark. This
applies ``--jobs`` TrainJobs of ``--group`` nodes each (one nccl all-reduce per group, rendered
by CRE's renderer, no CRE manager) on ``--nodes`` simulated nodes and runs them to completion:

* ``--backend memory``: the pure controller steps over the in-memory cluster (no HTTP), which
  isolates the simulator's own algorithms;
* ``--backend http``: the simulator in this process against the API emulator in its own
  process, as ``make demo`` and the manager benchmarks run it.

Prints JSON: wall seconds to completion, the simulator process's CPU seconds and its share of
one core, simulated seconds, ticks. ``--profile FILE`` writes a cProfile of the run.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cre.kube.client import TRAINING_RUNTIMES, TRAINJOBS, KubeClient
from cre.testing.cluster.clock import DEFAULT_EPOCH
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.memory import MemoryCluster
from cre.testing.cluster.model import is_true
from cre.testing.cluster.profiles import get_profile, node_manifest, node_name
from cre.testing.cluster.workloads import trainjob_objects

ENTRY = "communication/nccl-all-reduce"


def workload(profile: str, nodes: int, jobs: int, group: int) -> list[dict[str, Any]]:
    """The runtimes and TrainJobs of ``jobs`` groups of ``group`` distinct nodes each."""
    prof = get_profile(profile)
    if jobs * group > nodes:
        raise SystemExit(f"--jobs {jobs} x --group {group} needs {jobs * group} nodes, "
                         f"--nodes is {nodes}")
    out: list[dict[str, Any]] = []
    for j in range(jobs):
        names = [node_name(prof, j * group + i) for i in range(group)]
        out += trainjob_objects(entry=ENTRY, job_name=f"g{j:04d}", namespace="default",
                                profile=prof, nodes=names)
    return out


def _finished(tj: dict[str, Any]) -> bool:
    return is_true(tj, "Complete") or is_true(tj, "Failed")


def run_memory(args: argparse.Namespace, prof: cProfile.Profile | None) -> dict[str, Any]:
    cluster_profile = get_profile(args.profile)
    mc = MemoryCluster()
    for i in range(args.nodes):
        mc.add(node_manifest(cluster_profile, i), DEFAULT_EPOCH)
    for obj in workload(args.profile, args.nodes, args.jobs, args.group):
        mc.add(obj, DEFAULT_EPOCH)
    cfg = SimConfig(profile=cluster_profile)

    def done(m: MemoryCluster) -> bool:
        tjs = m.objects[TRAINJOBS.plural]
        return len(tjs) == args.jobs and all(_finished(t) for t in tjs.values())
    wall, cpu = time.perf_counter(), time.process_time()
    if prof is not None:
        prof.enable()
    end = mc.run(cfg, start=DEFAULT_EPOCH, until=done, limit=3600)
    if prof is not None:
        prof.disable()
    return {"simulated_seconds": round(end - DEFAULT_EPOCH, 1),
            "wall_seconds": round(time.perf_counter() - wall, 2),
            "cpu_seconds": round(time.process_time() - cpu, 2)}


async def run_http(args: argparse.Namespace, prof: cProfile.Profile | None) -> dict[str, Any]:
    from cre.testing.cluster.runtime import simulate

    folder = Path(tempfile.mkdtemp(prefix="cre-bench-sim-"))
    kubeconfig = folder / "kubeconfig"
    from cre.testing.apiserver.pytest_fixtures import default_crd_sources

    crds = [arg for src in default_crd_sources() for arg in ("--crds", str(src))]
    emu = subprocess.Popen([sys.executable, "-m", "cre.testing.apiserver", "--port", "0",  # noqa: ASYNC220
                            "--write-kubeconfig", str(kubeconfig), *crds],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not kubeconfig.exists():
            if emu.poll() is not None:
                raise SystemExit("the API emulator exited at start-up")
            await asyncio.sleep(0.05)
        docs = workload(args.profile, args.nodes, args.jobs, args.group)
        config = SimConfig(profile=get_profile(args.profile),
                           write_concurrency=args.write_concurrency)
        async with simulate(kubeconfig=str(kubeconfig), profile=args.profile, nodes=args.nodes,
                            scale=args.time_scale, config=config) as cluster:
            client = await KubeClient.from_kubeconfig(str(kubeconfig))
            wall, cpu = time.perf_counter(), time.process_time()
            sim_start = cluster.clock.now()
            if prof is not None:
                prof.enable()
            try:
                for doc in docs:
                    res = TRAINJOBS if doc["kind"] == "TrainJob" else TRAINING_RUNTIMES
                    await client.create(res, doc, namespace="default")
            finally:
                await client.close()
            await cluster.wait_for(lambda w: len(w.all(TRAINJOBS)) == args.jobs and all(
                _finished(t) for t in w.all(TRAINJOBS)))
            took, used = time.perf_counter() - wall, time.process_time() - cpu
            if prof is not None:
                prof.disable()
            return {"simulated_seconds": round(cluster.clock.now() - sim_start, 1),
                    "wall_seconds": round(took, 2), "cpu_seconds": round(used, 2),
                    "cpu_share_of_one_core": round(used / took, 2) if took else None,
                    "emulator_rss_mib": _rss_mib(emu.pid)}
    finally:
        emu.terminate()
        emu.wait(timeout=10)


def _rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench simulator", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=("memory", "http"), default="memory")
    p.add_argument("--cluster-profile", dest="profile", default="aws-h100")
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=125)
    p.add_argument("--group", type=int, default=8, help="nodes per TrainJob")
    p.add_argument("--time-scale", type=float, default=20.0,
                   help="simulated seconds per wall second (http backend)")
    p.add_argument("--write-concurrency", type=int, default=8,
                   help="simulator writes in flight per step (http backend; 1: in order)")
    p.add_argument("--cprofile", metavar="FILE", help="write a cProfile of the run to FILE")
    args = p.parse_args()
    prof = cProfile.Profile() if args.cprofile else None
    if args.backend == "memory":
        result = run_memory(args, prof)
    else:
        result = asyncio.run(run_http(args, prof))
    if prof is not None:
        prof.dump_stats(args.cprofile)
    print(json.dumps({"benchmark": "simulator", "backend": args.backend, "nodes": args.nodes,
                      "jobs": args.jobs, "group": args.group,
                      "write_concurrency": args.write_concurrency, "pid": os.getpid(), **result}))


if __name__ == "__main__":
    main()
