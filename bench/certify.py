"""``python -m bench certify``: one Certification on a large simulated cluster, to a verdict.

The product's main job at scale: a simulated cluster of ``--nodes`` GPU nodes (the simulator's
CLI, ``python -m cre.testing.cluster``), the API emulator and ``cre-manager`` each in their own
process, and one ``Certification`` of ``communication/nccl-all-reduce`` with ``nodesPerJob``
8 and ``maxConcurrent`` 0 (every group at once) applied with kubectl. Per cluster size it
reports:

* ``wall_seconds_to_verdict``: from ``kubectl apply`` to ``status.verdict`` being set;
* ``event_to_reconcile_seconds``: p50/p99 of the manager's ``workqueue_queue_duration_seconds``
  (time from an event's enqueue to the worker taking it, i.e. the reconcile start), per queue
  and over all queues; quantiles interpolated inside the histogram's buckets as Prometheus'
  ``histogram_quantile`` does, with the bucket bound that holds them;
* ``manager_peak_rss_mib``: the manager's ``VmHWM`` (peak resident set) at the verdict;
* ``api_requests``: what the emulator served to ``cre-manager`` (its User-Agent) from the apply
  to the verdict, in total, per verb, per verb and resource, and per group; the simulator's for
  comparison;
* the simulator's and emulator's CPU share, so a run says which process was the wall.

Sizes: ``--nodes 128 1000`` (16 and 125 groups) by default, each on a fresh stack; ``growth``
compares the largest with the smallest (wall time per group should not grow with groups at a
fixed ``--time-scale``). Targets at 1,000 nodes: p99 event-to-reconcile < 1 s, manager RSS <
300 MiB. A run that does not reach its verdict within ``--timeout`` reports how far it got
(groups by phase) instead of failing.

Usage: ``python -m bench certify [--nodes 128 1000] [--time-scale 20]``
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from cre.testing.procs import ManagerProc, Proc, Stack, StackError, wait_until

NS = "default"
NAME = "scale"
P99_TARGET_S = 1.0
RSS_TARGET_MIB = 300.0
QUEUE_HISTOGRAM = "workqueue_queue_duration_seconds"
RECONCILE_HISTOGRAM = "controller_runtime_reconcile_time_seconds"


def certification(nodes_per_job: int) -> str:
    return (f"apiVersion: cre.dev/v1alpha1\nkind: Certification\n"
            f"metadata: {{name: {NAME}, namespace: {NS}}}\n"
            f"spec:\n  nodesPerJob: {nodes_per_job}\n  maxConcurrent: 0\n"
            f"  categories:\n  - {{domain: communication, variant: nccl-all-reduce}}\n")


def proc_status(pid: int, field: str) -> float:
    """A ``/proc/PID/status`` field in MiB (VmRSS, VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0  # utime, stime in clock ticks (100 Hz)


def histograms(text: str, name: str, label: str) -> dict[str, dict[float, float]]:
    """Cumulative buckets of histogram ``name`` per value of ``label``."""
    out: dict[str, dict[float, float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name != name:
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                out.setdefault(sample.labels[label], {})[float(sample.labels["le"])] = \
                    sample.value
    return out


def quantile(buckets: dict[float, float], q: float) -> dict[str, float | None]:
    """``histogram_quantile``: linear interpolation inside the bucket holding rank q*count,
    plus that bucket's upper bound (what the histogram can prove)."""
    bounds = sorted(buckets)
    total = buckets[bounds[-1]] if bounds else 0.0
    if not total:
        return {"estimate": None, "le": None}
    rank = q * total
    lower, below = 0.0, 0.0
    for le in bounds:
        count = buckets[le]
        if count >= rank:
            if le == float("inf"):
                return {"estimate": lower, "le": le}
            inside = count - below
            est = lower + (le - lower) * ((rank - below) / inside if inside else 1.0)
            return {"estimate": round(est, 4), "le": le}
        lower, below = le, count
    return {"estimate": None, "le": None}


def latency(text: str, name: str = QUEUE_HISTOGRAM, label: str = "name") -> dict[str, Any]:
    """p50/p99 per workqueue (controller) and over all of them, with the observation count."""
    per_queue = histograms(text, name, label)
    merged: dict[float, float] = {}
    for buckets in per_queue.values():
        for le, v in buckets.items():
            merged[le] = merged.get(le, 0.0) + v

    def summary(b: dict[float, float]) -> dict[str, Any]:
        return {"count": int(max(b.values(), default=0)), "p50": quantile(b, 0.5),
                "p99": quantile(b, 0.99)}
    return {"all": summary(merged), **{name: summary(b) for name, b in sorted(per_queue.items())}}


class Emulator:
    """The emulator's control API (``/_emulator/requests``), at the kubeconfig's server."""

    def __init__(self, kubeconfig: Path) -> None:
        from ruamel.yaml import YAML

        doc = YAML(typ="safe").load(kubeconfig.read_text())
        self.base = str(doc["clusters"][0]["cluster"]["server"]).rstrip("/")

    def _call(self, method: str, path: str) -> Any:
        req = urllib.request.Request(self.base + path, method=method)
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def reset_requests(self) -> None:
        self._call("DELETE", "/_emulator/requests")

    def requests(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self._call("GET", "/_emulator/requests")
        return rows


def request_summary(rows: list[dict[str, Any]], groups: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for agent in sorted({r["userAgent"] for r in rows}):
        mine = [r for r in rows if r["userAgent"] == agent]
        by_verb: dict[str, int] = {}
        by_request: dict[str, int] = {}
        for r in mine:
            by_verb[r["verb"]] = by_verb.get(r["verb"], 0) + int(r["count"])
            what = f"{r['verb']} {r.get('resource', '')}"
            by_request[what] = by_request.get(what, 0) + int(r["count"])
        total = sum(by_verb.values())
        writes = total - sum(by_verb.get(v, 0) for v in ("get", "list", "watch"))
        out[agent] = {"total": total, "per_group": round(total / groups, 1),
                      "writes_per_group": round(writes / groups, 1),
                      "by_verb": dict(sorted(by_verb.items())),
                      "by_request": dict(sorted(by_request.items()))}
    return out


def progress(stack: Stack) -> dict[str, Any]:
    """The Certification's phase and verdict and the Workflow's groups by phase."""
    cert = stack.kubectl_json("get", "certifications", NAME, "-n", NS)
    status = cert.get("status") or {}
    phases: dict[str, int] = {}
    wf = stack.kubectl("get", "workflows", "-n", NS, "-o", "json", check=False)
    if wf.returncode == 0:
        for item in json.loads(wf.stdout)["items"]:
            for g in (item.get("status") or {}).get("groups") or []:
                phases[g.get("phase")] = phases.get(g.get("phase"), 0) + 1
    return {"phase": status.get("phase"), "verdict": status.get("verdict"),
            "groups_by_phase": dict(sorted(phases.items()))}


def wait_nodes_ready(stack: Stack, sim: Proc, nodes: int) -> float:
    """Wait until ``nodes`` GPU nodes are Ready (not just registered: discovery leaves NotReady
    nodes out); the seconds it took."""
    started = time.monotonic()

    def ready() -> bool:
        out = stack.kubectl("get", "nodes", "-l", "nvidia.com/gpu.present=true",
                            "--no-headers", timeout=120).stdout
        return sum(1 for line in out.splitlines() if line.split()[1:2] == ["Ready"]) >= nodes
    wait_until(ready, timeout=900, what=f"{nodes} Ready GPU nodes", interval=2.0,
               alive=sim.check_alive)
    return round(time.monotonic() - started, 1)


def run_size(args: argparse.Namespace, nodes: int) -> dict[str, Any]:
    groups = nodes // args.nodes_per_job
    result: dict[str, Any] = {"nodes": nodes, "groups": groups}
    with Stack(keep=args.keep) as stack:
        stack.start_emulator()
        emu_proc = stack.procs[-1]
        sim = stack.start_cluster(profile=args.cluster_profile, nodes=nodes,
                                  time_scale=args.time_scale,
                                  extra_args=["--write-concurrency", str(args.write_concurrency)])
        result["nodes_ready_seconds"] = wait_nodes_ready(stack, sim, nodes)
        manager: ManagerProc = stack.start_manager(
            "--log-format", "json", "--max-concurrent-reconciles",
            str(args.max_concurrent_reconciles), timeout=300)
        emulator = Emulator(stack.kubeconfig)
        emulator.reset_requests()
        cpu0 = {p.name: cpu_seconds(p.pid) for p in (emu_proc, sim, manager)}
        peak_rss = 0.0
        started = time.monotonic()
        stack.kubectl("apply", "-f", "-", stdin=certification(args.nodes_per_job))
        spy = None
        if args.profile_manager:
            out = Path(f"{args.profile_manager}-{nodes}.txt").resolve()
            spy = subprocess.Popen(["py-spy", "record", "--pid", str(manager.pid), "--rate",
                                    "50", "--format", "raw", "--nonblocking", "-o", str(out)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            result["manager_profile"] = str(out)
        state: dict[str, Any] = {}
        reached = False
        while time.monotonic() - started < args.timeout:
            for proc in (emu_proc, sim, manager):
                proc.check_alive()
            peak_rss = max(peak_rss, proc_status(manager.pid, "VmRSS"))
            state = progress(stack)
            if state.get("verdict"):
                reached = True
                break
            time.sleep(args.poll)
        wall = time.monotonic() - started
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        cpu = {name: round(cpu_seconds(p.pid) - cpu0[name], 1)
               for name, p in (("apiserver", emu_proc), ("cluster", sim), ("manager", manager))}
        metrics = manager.get("metrics", "/metrics")[1]
        result.update({
            "reached_verdict": reached,
            "wall_seconds_to_verdict": round(wall, 1) if reached else None,
            "wall_seconds_run": round(wall, 1),
            "wall_seconds_per_group": round(wall / groups, 3) if reached else None,
            "final_state": state,
            "event_to_reconcile_seconds": latency(metrics),
            "reconcile_seconds": latency(metrics, RECONCILE_HISTOGRAM, "controller"),
            "manager_peak_rss_mib": round(max(peak_rss, proc_status(manager.pid, "VmHWM")), 1),
            "manager_rss_mib_at_end": round(proc_status(manager.pid, "VmRSS"), 1),
            "emulator_rss_mib_at_end": round(proc_status(emu_proc.pid, "VmRSS"), 1),
            "api_requests": request_summary(emulator.requests(), groups),
            "cpu_seconds": cpu,
            "cpu_share_of_one_core": {k: round(v / wall, 2) for k, v in cpu.items()},
        })
        if args.keep:
            result["logs"] = str(stack.workdir)
    return result


def _p99(run: dict[str, Any]) -> float | None:
    p99: dict[str, Any] = run["event_to_reconcile_seconds"]["all"]["p99"]
    value = p99["estimate"]
    return None if value is None else float(value)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench certify", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, nargs="+", default=[128, 1000],
                   help="cluster sizes to run, each on a fresh stack (default: 128 1000)")
    p.add_argument("--nodes-per-job", type=int, default=8)
    p.add_argument("--cluster-profile", default="aws-h100")
    p.add_argument("--time-scale", type=float, default=20.0,
                   help="simulated seconds per wall second (fixed across sizes)")
    p.add_argument("--write-concurrency", type=int, default=16,
                   help="the simulator's writes in flight per step")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="seconds to wait for the verdict per size; then report progress")
    p.add_argument("--poll", type=float, default=1.0, help="seconds between progress polls")
    p.add_argument("--max-concurrent-reconciles", type=int, default=50,
                   help="the manager's workers per controller (default 50, the manager's)")
    p.add_argument("--keep", action="store_true", help="keep the process logs")
    p.add_argument("--profile-manager", metavar="PREFIX",
                   help="py-spy the manager from apply to verdict (collapsed stacks in "
                        "PREFIX-<nodes>.txt; py-spy on PATH, from PyPI)")
    args = p.parse_args()
    runs = []
    for nodes in args.nodes:
        try:
            runs.append(run_size(args, nodes))
        except (StackError, OSError) as exc:
            runs.append({"nodes": nodes, "groups": nodes // args.nodes_per_job,
                         "error": str(exc).splitlines()[0]})
    result: dict[str, Any] = {"benchmark": "certify", "entry": "communication/nccl-all-reduce",
                              "nodes_per_job": args.nodes_per_job, "max_concurrent": 0,
                              "time_scale": args.time_scale,
                              "simulator_write_concurrency": args.write_concurrency,
                              "max_concurrent_reconciles": args.max_concurrent_reconciles,
                              "runs": runs}
    done = [r for r in runs if r.get("reached_verdict")]
    if len(done) >= 2:
        small, large = done[0], done[-1]
        result["growth"] = {
            "groups": f"{small['groups']} -> {large['groups']}",
            "groups_ratio": round(large["groups"] / small["groups"], 2),
            "wall_ratio": round(large["wall_seconds_to_verdict"]
                                / small["wall_seconds_to_verdict"], 2),
            "no_worse_than_linear": large["wall_seconds_per_group"]
            <= small["wall_seconds_per_group"] * 1.05,
        }
    at = next((r for r in runs if r["nodes"] == 1000 and r.get("reached_verdict")), None)
    result["targets"] = {"p99_event_to_reconcile_s": P99_TARGET_S,
                         "manager_rss_mib": RSS_TARGET_MIB, "at_nodes": 1000}
    if at is not None:
        p99 = _p99(at)
        result["meets_targets"] = (p99 is not None and p99 < P99_TARGET_S
                                   and at["manager_peak_rss_mib"] < RSS_TARGET_MIB)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

