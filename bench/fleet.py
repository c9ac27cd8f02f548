"""``python -m bench fleet``: a CertificationSchedule keeping a large simulated fleet certified.

The simulated cluster of ``--nodes`` GPU nodes, the API emulator and ``cre-manager`` each run in
their own process (as ``bench certify``); one ``CertificationSchedule`` of
``diagnostics/dcgm-level1`` (labels on) due every ``--interval`` with ``maxNodesPerRun``
``--per-run`` is applied, and the bench waits for *steady state*: every node holds a Passed
NodeCertification (the schedule went round the fleet once, stalest first). It reports:

* ``wall_seconds_to_steady_state`` and the schedule's ``runs`` / ``skippedRuns`` /
  ``missedRuns`` then;
* ``api_writes_per_node_per_run``: the manager's writes (every verb but get, list, watch) from
  the apply to steady state, over the node certifications the runs made (the sum of the
  history's node counts);
* ``event_to_reconcile_seconds``: p50/p99 of ``workqueue_queue_duration_seconds`` per queue and
  over all (as ``bench certify``);
* ``manager_peak_rss_mib`` (``VmHWM``) and the RSS at the end, and the informer object counts
  (the schedule's pod cache among them).

Usage: ``python -m bench fleet [--nodes 5000] [--per-run 500] [--interval 5m]``. A run that does
not reach steady state within ``--timeout`` reports how far it got.

The defaults (``--time-scale 20 --interval 5m --per-run 500``) are sized for a shared 2-core
machine at 5,000 nodes: the simulated kubelet, JobSet and Trainer share the CPU with the
manager, and the faster the shared clock, the more simulated time their lag costs. At 60x a
run of 250 groups at 1,000 nodes already saw TrainJobs start later than
``startupStallTimeoutSeconds`` (20 wall seconds there), re-run as infrastructure; at 20x that
budget is a wall minute and ``timeoutPerJob`` (1h) three. The interval only has to be short
enough that the next run is due soon after the last one ends (Forbid skips the due times in
between: ``skipped_runs``); 5m is 15 wall seconds at 20x.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bench.certify import Emulator, cpu_seconds, latency, proc_status, wait_nodes_ready
from cre.testing.procs import ManagerProc, Stack, StackError

NS = "default"
NAME = "fleet"
READS = ("get", "list", "watch")


def schedule(*, per_run: int, interval: str) -> str:
    return (f"apiVersion: cre.dev/v1alpha1\nkind: CertificationSchedule\n"
            f"metadata: {{name: {NAME}, namespace: {NS}}}\n"
            f"spec:\n  interval: {interval}\n  maxNodesPerRun: {per_run}\n"
            f"  certificationTemplate:\n    spec:\n"
            f"      nodeState: {{labels: true, validFor: 168h}}\n"
            f"      categories:\n      - {{domain: diagnostics, variant: dcgm-level1}}\n")


def state(stack: Stack) -> dict[str, Any]:
    """The schedule's counters and the NodeCertifications by state."""
    got = stack.kubectl_json("get", "certificationschedules", NAME, "-n", NS)
    status = got.get("status") or {}
    records = stack.kubectl_json("get", "nodecertifications")["items"]
    by_state: dict[str, int] = {}
    for rec in records:
        key = str((rec.get("status") or {}).get("state"))
        by_state[key] = by_state.get(key, 0) + 1
    history = status.get("history") or []
    return {"runs": status.get("runs", 0), "skipped_runs": status.get("skippedRuns", 0),
            "missed_runs": status.get("missedRuns", 0),
            "node_runs_in_history": sum(int(h.get("nodes", 0)) for h in history),
            "history_entries": len(history), "records_by_state": dict(sorted(by_state.items()))}


def informer_objects(text: str) -> dict[str, float]:
    """``informer_objects`` of the manager's informers, by name (when it exports them)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if "informer" in sample.labels and sample.name.endswith("objects"):
                out[sample.labels["informer"]] = sample.value
    return dict(sorted(out.items()))


def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"nodes": args.nodes, "per_run": args.per_run,
                              "interval": args.interval}
    # One simulated clock for the emulator, the cluster and the manager: the schedule's interval
    # passes at the cluster's pace.
    with Stack(keep=args.keep, shared_time_scale=args.time_scale) as stack:
        stack.start_emulator()
        emu_proc = stack.procs[-1]
        sim = stack.start_cluster(profile=args.cluster_profile, nodes=args.nodes,
                                  time_scale=args.time_scale,
                                  extra_args=["--write-concurrency", str(args.write_concurrency)])
        result["nodes_ready_seconds"] = wait_nodes_ready(stack, sim, args.nodes)
        manager: ManagerProc = stack.start_manager(
            "--log-format", "json", "--max-concurrent-reconciles",
            str(args.max_concurrent_reconciles), timeout=300)
        emulator = Emulator(stack.kubeconfig)
        emulator.reset_requests()
        cpu0 = {p.name: cpu_seconds(p.pid) for p in (emu_proc, sim, manager)}
        peak_rss = 0.0
        started = time.monotonic()
        stack.kubectl("apply", "-f", "-", stdin=schedule(per_run=args.per_run,
                                                         interval=args.interval))
        now: dict[str, Any] = {}
        steady = False
        while time.monotonic() - started < args.timeout:
            for proc in (emu_proc, sim, manager):
                proc.check_alive()
            peak_rss = max(peak_rss, proc_status(manager.pid, "VmRSS"))
            now = state(stack)
            if now["records_by_state"].get("Passed", 0) >= args.nodes:
                steady = True
                break
            time.sleep(args.poll)
        wall = time.monotonic() - started
        cpu = {name: round(cpu_seconds(p.pid) - cpu0[name], 1)
               for name, p in (("apiserver", emu_proc), ("cluster", sim), ("manager", manager))}
        metrics = manager.get("metrics", "/metrics")[1]
        rows = [r for r in emulator.requests() if "cre-manager" in str(r["userAgent"])]
        by_verb: dict[str, int] = {}
        for r in rows:
            by_verb[r["verb"]] = by_verb.get(r["verb"], 0) + int(r["count"])
        writes = sum(v for k, v in by_verb.items() if k not in READS)
        node_runs = now.get("node_runs_in_history", 0)
        exact = now.get("runs", 0) == now.get("history_entries", 0)
        result.update({
            "reached_steady_state": steady,
            "wall_seconds_to_steady_state": round(wall, 1) if steady else None,
            "wall_seconds_run": round(wall, 1),
            "schedule": now,
            "manager_writes": writes,
            "manager_requests_by_verb": dict(sorted(by_verb.items())),
            "api_writes_per_node_per_run": round(writes / node_runs, 2) if node_runs else None,
            # The history keeps the last 10 runs: beyond, the node count is a lower bound.
            "node_runs_exact": exact,
            "event_to_reconcile_seconds": latency(metrics),
            "manager_peak_rss_mib": round(max(peak_rss, proc_status(manager.pid, "VmHWM")), 1),
            "manager_rss_mib_at_end": round(proc_status(manager.pid, "VmRSS"), 1),
            "informer_objects": informer_objects(metrics),
            "cpu_seconds": cpu,
        })
        if args.keep:
            result["logs"] = str(stack.workdir)
    return result


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench fleet", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--per-run", type=int, default=500, help="maxNodesPerRun")
    p.add_argument("--interval", default="5m", help="the schedule's interval (simulated)")
    p.add_argument("--cluster-profile", default="aws-h100")
    p.add_argument("--time-scale", type=float, default=20.0,
                   help="simulated seconds per wall second")
    p.add_argument("--write-concurrency", type=int, default=16)
    p.add_argument("--timeout", type=float, default=3600.0,
                   help="wall seconds to wait for steady state; then report progress")
    p.add_argument("--poll", type=float, default=5.0)
    p.add_argument("--max-concurrent-reconciles", type=int, default=50)
    p.add_argument("--keep", action="store_true", help="keep the process logs")
    args = p.parse_args()
    try:
        result = run(args)
    except (StackError, OSError) as exc:
        result = {"nodes": args.nodes, "error": str(exc).splitlines()[0]}
    print(json.dumps({"benchmark": "fleet", "entry": "diagnostics/dcgm-level1",
                      "time_scale": args.time_scale, **result}, indent=2))


if __name__ == "__main__":
    main()
