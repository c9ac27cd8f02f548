"""``python -m bench diagnose``: Jobs and wall time for diagnose to name one broken node.

The same three processes as ``bench certify`` (the API emulator, the simulated cluster,
``cre-manager``), with one node broken on the simulator (``--broken-node``: every group that
holds it fails with an NCCL error) and one ``Certification`` of
``communication/nccl-all-reduce`` with ``testScale: diagnose`` (screening groups of
``ceil(sqrt(N))``). Per cluster size it reports, from the Workflow's
``status.orchestration.diagnose``:

* ``found``: whether the broken node, and only it, was confirmed Failed;
* ``jobs_spent`` and ``job_budget``, ``rounds_after_screening`` against
  ``ceil(log2(group size))`` + 1 (bisection levels plus confirmation), screening groups;
* ``wall_seconds_to_verdict`` from ``kubectl apply``, and the simulated seconds it stands for.

Usage: ``python -m bench diagnose [--nodes 64 512] [--time-scale 20]``
"""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

from bench.certify import NS, progress, wait_nodes_ready
from cre.testing.procs import Stack, StackError

NAME = "scale"  # what bench.certify.progress reads
WORKFLOW = f"{NAME}-communication-nccl-all-reduce"


def certification() -> str:
    return (f"apiVersion: cre.dev/v1alpha1\nkind: Certification\n"
            f"metadata: {{name: {NAME}, namespace: {NS}}}\n"
            f"spec:\n  testScale: diagnose\n"
            f"  categories:\n  - {{domain: communication, variant: nccl-all-reduce}}\n")


def run_size(args: argparse.Namespace, nodes: int) -> dict[str, Any]:
    broken = f"{args.cluster_profile}-node-{nodes // 2 + 1}"
    result: dict[str, Any] = {"nodes": nodes, "broken_node": broken}
    with Stack(keep=args.keep) as stack:
        stack.start_emulator()
        sim = stack.start_cluster(profile=args.cluster_profile, nodes=nodes,
                                  time_scale=args.time_scale,
                                  extra_args=["--write-concurrency", "16",
                                              "--broken-node", broken])
        wait_nodes_ready(stack, sim, nodes)
        manager = stack.start_manager("--log-format", "json", timeout=300)
        started = time.monotonic()
        stack.kubectl("apply", "-f", "-", stdin=certification())
        state: dict[str, Any] = {}
        reached = False
        while time.monotonic() - started < args.timeout:
            sim.check_alive()
            manager.check_alive()
            state = progress(stack)
            if state.get("verdict"):
                reached = True
                break
            time.sleep(args.poll)
        wall = time.monotonic() - started
        wf = stack.kubectl_json("get", "workflows", WORKFLOW, "-n", NS)
        orch = (wf.get("status") or {}).get("orchestration") or {}
        diag = orch.get("diagnose") or {}
        size = int(orch.get("nodesPerJob") or 1)
        result.update({
            "reached_verdict": reached,
            "verdict": state.get("verdict"),
            "found": diag.get("failedNodes") == [broken],
            "failed_nodes": diag.get("failedNodes", []),
            "screening_groups": int(orch.get("totalGroups") or 0),
            "group_size": size,
            "jobs_spent": diag.get("jobsSpent"),
            "job_budget": diag.get("jobBudget"),
            "rounds_after_screening": diag.get("round"),
            "round_bound": math.ceil(math.log2(size)) + 1 if size > 1 else 1,
            "wall_seconds_to_verdict": round(wall, 1) if reached else None,
            "simulated_seconds_to_verdict": round(wall * args.time_scale) if reached else None,
        })
    return result


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench diagnose", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, nargs="+", default=[64, 512],
                   help="cluster sizes, each on a fresh stack (default: 64 512)")
    p.add_argument("--cluster-profile", default="aws-h100")
    p.add_argument("--time-scale", type=float, default=20.0)
    p.add_argument("--timeout", type=float, default=900.0,
                   help="seconds to wait for the verdict per size")
    p.add_argument("--poll", type=float, default=1.0)
    p.add_argument("--keep", action="store_true", help="keep the process logs")
    args = p.parse_args()
    runs = []
    for nodes in args.nodes:
        try:
            runs.append(run_size(args, nodes))
        except (StackError, OSError) as exc:
            runs.append({"nodes": nodes, "error": str(exc).splitlines()[0]})
    print(json.dumps({"benchmark": "diagnose", "entry": "communication/nccl-all-reduce",
                      "time_scale": args.time_scale, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
