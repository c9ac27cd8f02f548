"""``make demo``: CRE's main job on an emulated 8-node aws-h100 cluster, as a person would run it.

Everything runs as separate processes through the real command lines: the API emulator (with the
vendored Trainer/JobSet CRDs and CRE's own), the simulated cluster, ``cre-manager``, ``kubectl``
and the ``cre`` command. The driver applies a ``Certification`` of two categories
(``communication/nccl-all-reduce`` in groups of two nodes, then ``communication/nccl-loopback``
on every node, both with ``busBandwidthGBps: "value >= 300"``) with ``kubectl apply`` (after
``kubectl apply -k deploy/logprofiles``, the LogProfiles the measurements parse logs with) and
follows it live: Certification -> the current
category's Workflow and its groups -> their Jobs -> the workload pods. It ends with the verdict,
the per-category and per-node table (``cre report --json``), the measured bandwidth per message
size (busBW / algBW, from each BandwidthMeasurement's final read) with each Job's threshold
verdict, the ``cre status`` tree, and the
self-contained HTML report (``write_html_report``), whose path it prints.

Scenarios (the exit code is 0 when the run ended the way the scenario should):

* ``success``: both categories pass, verdict Passed.
* ``launcher-failure``: every MPI launcher exits 1 with an NCCL error: all-reduce fails with its
  captured failure log, loopback still runs and passes, verdict Failed.
* ``threshold``: node 3's links run at 0.4 of their bandwidth (the simulator's ``--bad-node``).
  All-reduce group-1 (nodes 2 and 3) measures about 192 GB/s, below the Certification's
  ``busBandwidthGBps: "value >= 300"``: the Job stays Succeeded with ``ValidationFailed=True /
  ThresholdViolated``, the group fails and both its nodes are blamed (one figure for the ring).
  The loopback runs on every node on its own and is judged per node: only node 3 is blamed.
  Verdict Failed; the message names the measured value and the expression.
* ``infra-abort``: while group-1 runs under ``FailFast``, one of its nodes is lost (its kubelet
  reports NotReady, ``kubectl patch node --subresource=status``) and its launcher dies (the
  simulator's ``--fail-launcher-pod-prefix``, as the tiers golden
  ``integration/cases/tiers/infra-retry-after-node-loss`` does). The Job tier classifies it
  ``Node`` scope; the Workflow defers it: the siblings keep running (never Cancelled), the node
  comes back, group-1 re-runs on its infra retry and the verdict is Passed (or Incomplete with
  the group's nodes Uncertified if the retry aborts too), with no node Failed.
* ``hardware``: a broken GPU found by a single-node test: a Certification of
  ``diagnostics/dcgm-level1`` on a 4-node cluster whose node 2 has a GPU the DCGM diagnostic
  fails (the simulator's ``--dcgm-fail-node``). A single-node entry runs one Job per node, so
  each node is judged on its own run: verdict Failed, node 2 Failed (its failure log shows the
  diagnostic), the three other nodes Passed.
* ``diagnose``: the broken node, not only the broken group: a Certification of
  ``communication/nccl-all-reduce`` with ``testScale: diagnose`` on a 16-node cluster whose node
  13 breaks every group that holds it (the simulator's ``--broken-node``). Screening runs 4
  groups of 4; the failed one is bisected with known-good peers and its suspects confirmed one
  by one: verdict Failed, node 13 alone Failed, the bisection tree printed with the Jobs spent.
* ``workloadrun``: not a Certification: an MPI WorkloadRun on 4 nodes, 2 per group, and its
  measured bus bandwidth (:mod:`cre.testing.demo_workloadrun`).
* ``fleet``: not one Certification: a CertificationSchedule of ``diagnostics/dcgm-level1`` on 8
  nodes with node labels and taint on; run 1 fails node 2 (the simulator's ``--dcgm-fail-node``)
  and taints it, the node is repaired, run 2 passes it and releases the taint; the node table is
  printed after each run (:mod:`cre.testing.demo_fleet`).
"""

from __future__ import annotations

import argparse
import enum
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from cre.api.labels import GPU_PRESENT
from cre.core.job.workload import workload_name
from cre.testing.demokit import DemoSteps, demo_console, drive
from cre.testing.procs import Stack, StackError, wait_until

CERT = "gpu-cert"
NAMESPACE = "default"
PROFILE = "aws-h100"
NODES = 8
ALL_REDUCE = "communication/nccl-all-reduce"
LOOPBACK = "communication/nccl-loopback"
DCGM = "diagnostics/dcgm-level1"
HARDWARE_NODES = 4  # the hardware scenario's cluster
BROKEN_NODE = f"{PROFILE}-node-2"  # hardware: the node whose GPU fails the DCGM diagnostic
DIAGNOSE_NODES = 16  # the diagnose scenario's cluster
DIAGNOSED_NODE = f"{PROFILE}-node-13"  # diagnose: the node that breaks every group holding it
LOST_GROUP = "group-1"  # infra-abort: the group whose node is lost
LOST_JOB = f"{CERT}-communication-nccl-all-reduce-{LOST_GROUP}-iter-1"
# Its launcher pods: <TrainJob>-launcher-<index>-<pod> (the TrainJob name is cut + hashed).
LOST_LAUNCHER = f"{workload_name(LOST_JOB)}-launcher"


class Scenario(enum.StrEnum):
    SUCCESS = "success"
    LAUNCHER_FAILURE = "launcher-failure"
    INFRA_ABORT = "infra-abort"
    THRESHOLD = "threshold"
    HARDWARE = "hardware"
    DIAGNOSE = "diagnose"
    WORKLOADRUN = "workloadrun"
    FLEET = "fleet"


THRESHOLD = "value >= 300"
BAD_NODE = f"{PROFILE}-node-3"
#: Sizes below this are latency-bound (~0 GB/s); the bandwidth table starts here.
TABLE_FROM_BYTES = 1 << 20


def certification(scenario: Scenario) -> str:
    """The Certification the demo applies (FailFast on the infra-abort path, to show that an
    infrastructure abort never cancels a sibling even then)."""
    if scenario is Scenario.HARDWARE:
        return (f"apiVersion: cre.dev/v1alpha1\nkind: Certification\n"
                f"metadata: {{name: {CERT}, namespace: {NAMESPACE}}}\n"
                f"spec:\n  target: {{nodeSelector: {{{GPU_PRESENT}: \"true\"}}}}\n"
                f"  categories:\n  - {{domain: diagnostics, variant: dcgm-level1}}\n")
    if scenario is Scenario.DIAGNOSE:
        return (f"apiVersion: cre.dev/v1alpha1\nkind: Certification\n"
                f"metadata: {{name: {CERT}, namespace: {NAMESPACE}}}\n"
                f"spec:\n  target: {{nodeSelector: {{{GPU_PRESENT}: \"true\"}}}}\n"
                f"  testScale: diagnose\n"
                f"  categories:\n  - {{domain: communication, variant: nccl-all-reduce}}\n")
    policy = "  failurePolicy: {mode: FailFast}\n" if scenario is Scenario.INFRA_ABORT else ""
    return (f"apiVersion: cre.dev/v1alpha1\nkind: Certification\n"
            f"metadata: {{name: {CERT}, namespace: {NAMESPACE}}}\n"
            f"spec:\n  target: {{nodeSelector: {{{GPU_PRESENT}: \"true\"}}}}\n{policy}"
            f"  thresholds: {{busBandwidthGBps: \"{THRESHOLD}\"}}\n"
            f"  categories:\n"
            f"  - {{domain: communication, variant: nccl-all-reduce, "
            f"options: {{nodesPerJob: 2}}}}\n"
            f"  - {{domain: communication, variant: nccl-loopback}}\n")


def _phase_style(phase: str) -> str:
    return {"Succeeded": "bold green", "Passed": "bold green", "Failed": "bold red",
            "Incomplete": "bold yellow", "InfraAborted": "bold yellow",
            "Cancelled": "yellow"}.get(phase, "cyan")


def _true_conditions(status: dict[str, Any]) -> str:
    parts = []
    for cond in status.get("conditions") or []:
        if cond.get("status") == "True":
            msg = f": {cond['message']}" if cond.get("message") else ""
            parts.append(f"{cond.get('type')}={cond.get('reason')}{msg}")
    return "; ".join(parts) or "-"


def _class(fc: dict[str, Any] | None) -> str:
    return f"{fc.get('scope')}/{fc.get('reason')}" if fc else ""


def _pod_status(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "terminated" in state:
            term = state["terminated"]
            return f"{term.get('reason') or 'Terminated'} (exit {term.get('exitCode')})"
        if "waiting" in state and state["waiting"].get("reason"):
            return str(state["waiting"]["reason"])
    return str(status.get("phase") or "Pending")


@attrs.frozen(slots=True)
class Snapshot:
    """What the live view shows at one poll."""

    phase: str
    verdict: str
    categories: tuple[tuple[str, str, str], ...]  # (entry, status, verdict)
    workflow: str
    # (group, phase, nodes, job, infra retries, failure class of its last failure)
    groups: tuple[tuple[str, str, str, str, int, str], ...]
    jobs: tuple[tuple[str, str, str], ...]  # (job, phase, failure class)
    pods: tuple[tuple[str, str, str], ...]  # (pod, node, status)

    @property
    def terminal(self) -> bool:
        return bool(self.verdict) and self.phase in ("Succeeded", "Failed")

    def group(self, name: str) -> tuple[str, str, str, str, int, str] | None:
        return next((g for g in self.groups if g[0] == name), None)


class Demo(DemoSteps):
    """One demo run over a :class:`Stack`."""

    def __init__(self, stack: Stack, console: Console, *, scenario: Scenario,
                 time_scale: float, timeout: float) -> None:
        super().__init__(stack, console)
        self.scenario = scenario
        self.time_scale = time_scale
        self.timeout = timeout
        self.nodes: list[str] = []
        self.lost_node = ""
        self.node_lost = False
        self.node_back = False
        self.deferred = ""  # the failure class of the deferred abort

    @property
    def node_count(self) -> int:
        """The simulated cluster's size for this scenario."""
        return {Scenario.HARDWARE: HARDWARE_NODES, Scenario.DIAGNOSE: DIAGNOSE_NODES}.get(
            self.scenario, NODES)

    # -- setup -----------------------------------------------------------------------------------

    def start(self) -> None:
        self.step("starting the Kubernetes API emulator (Trainer, JobSet and CRE CRDs)")
        self.stack.start_emulator()
        extra: list[str] = []
        note = ""
        if self.scenario is Scenario.LAUNCHER_FAILURE:
            note = " whose MPI launchers fail with an NCCL error"
        elif self.scenario is Scenario.INFRA_ABORT:
            # The launcher of group-1's first run dies after 30 simulated seconds: long enough
            # for the demo to take one of the group's nodes away first. Its infra retry (a new
            # Job name) runs normally.
            extra = ["--fail-launcher-pod-prefix", LOST_LAUNCHER,
                     "--fail-launcher-after", "30", "--fail-launcher-message",
                     "ORTE has lost communication with a remote daemon"]
            note = f" (the MPI launcher of {LOST_GROUP}'s first run will lose a node)"
        elif self.scenario is Scenario.THRESHOLD:
            extra = ["--bad-node", f"{BAD_NODE}=0.4"]
            note = f" where {BAD_NODE}'s links run at 0.4 of their bandwidth"
        elif self.scenario is Scenario.DIAGNOSE:
            extra = ["--broken-node", DIAGNOSED_NODE]
            note = f" where every group holding {DIAGNOSED_NODE} fails with an NCCL error"
        elif self.scenario is Scenario.HARDWARE:
            extra = ["--dcgm-fail-node", BROKEN_NODE]
            note = f" where a GPU of {BROKEN_NODE} fails the DCGM diagnostic"
        count = self.node_count
        self.step(f"starting a simulated {count}-node {PROFILE} cluster{note}")
        cluster = self.stack.start_cluster(
            profile=PROFILE, nodes=count, time_scale=self.time_scale,
            fail_launcher=self.scenario in (Scenario.LAUNCHER_FAILURE, Scenario.INFRA_ABORT),
            extra_args=extra)

        def gpu_nodes() -> list[str]:
            items = self.stack.kubectl_json("get", "nodes", "-l", f"{GPU_PRESENT}=true")["items"]
            names = sorted(n["metadata"]["name"] for n in items)
            return names if len(names) >= count else []

        self.nodes = wait_until(gpu_nodes, timeout=60, what=f"{count} GPU nodes",
                                interval=0.2, alive=cluster.check_alive)
        self.apply_logprofiles()
        self.step("starting cre-manager (separate process) and waiting for /readyz")
        started = time.monotonic()
        manager = self.stack.start_manager("--log-format", "json")
        self.console.print(f"  cre-manager ready in {time.monotonic() - started:.1f}s; "
                           f"probes {manager.health_url}, metrics {manager.metrics_url}/metrics")

    def apply(self) -> None:
        self.apply_manifest(certification(self.scenario))

    # -- progress --------------------------------------------------------------------------------

    def _items(self, *args: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.stack.kubectl_json(
            "get", *args, "-n", NAMESPACE)["items"]
        return sorted(items, key=lambda o: str(o["metadata"]["name"]))

    def snapshot(self) -> Snapshot:
        cert = self.stack.kubectl_json("get", "certifications", CERT, "-n", NAMESPACE)
        status = cert.get("status") or {}
        cats = tuple((f"{c.get('domain')}/{c.get('variant')}", str(c.get("status") or ""),
                      str(c.get("verdict") or "")) for c in status.get("categoryStatuses") or [])
        workflows = self._items("workflows")
        wf = workflows[-1] if workflows else {}
        current = next((c for c in status.get("categoryStatuses") or []
                        if c.get("status") not in ("Succeeded", "Failed")), None)
        if current and current.get("workflowRef"):
            wf = next((w for w in workflows
                       if w["metadata"]["name"] == current["workflowRef"]["name"]), wf)
        groups = tuple((str(g.get("name")), str(g.get("phase")), ",".join(
            n.rsplit("-", 1)[-1] for n in g.get("nodes") or []),
            str((g.get("jobRef") or {}).get("name") or "-"), int(g.get("infraRetries") or 0),
            _class(g.get("failureClass")))
            for g in (wf.get("status") or {}).get("groups") or [])
        jobs = []
        for job in self._items("jobs.cre.dev"):
            js = job.get("status") or {}
            jobs.append((str(job["metadata"]["name"]), str(js.get("phase") or "Pending"),
                         _class(js.get("failureClass"))))
        pods = tuple((str(p["metadata"]["name"]), str((p.get("spec") or {}).get("nodeName")
                                                      or "-"), _pod_status(p))
                     for p in self._items("pods"))
        return Snapshot(phase=str(status.get("phase") or "Pending"),
                        verdict=str(status.get("verdict") or ""), categories=cats,
                        workflow=str((wf.get("metadata") or {}).get("name") or "-"),
                        groups=groups, jobs=tuple(jobs), pods=pods)

    def view(self, snap: Snapshot, elapsed: float) -> Group:
        head = Text.assemble(("Certification ", "bold"), (f"{NAMESPACE}/{CERT}", "bold magenta"),
                             "  phase ", (snap.phase, _phase_style(snap.phase)),
                             f"  verdict {snap.verdict or '-'}  [{elapsed:5.1f}s]")
        cats = "  ".join(f"{e}: {s or 'Pending'}" for e, s, _ in snap.categories) or "-"
        groups = Table(title=f"Workflow {snap.workflow}", box=None, header_style="bold",
                       title_justify="left")
        for col in ("group", "phase", "nodes", "job", "infra retries"):
            groups.add_column(col)
        for name, phase, nodes, job, infra, _ in snap.groups:
            groups.add_row(name, Text(phase, style=_phase_style(phase)), nodes, job, str(infra))
        active = {g[3] for g in snap.groups}
        pods = Table(box=None, header_style="bold")
        for col in ("pod", "node", "status"):
            pods.add_column(col)
        shown = [p for p in snap.pods if any(p[0].startswith(j) for j in active)]
        for name, node, status in shown[-16:]:
            pods.add_row(name, node, status)
        return Group(head, Text(f"  categories: {cats}", style="dim"), groups, pods)

    def follow(self) -> Snapshot:
        """Live view until the Certification has a verdict; transitions printed as they happen."""
        self.step("following Certification -> Workflow -> groups -> Jobs -> pods")
        started = time.monotonic()
        seen: dict[str, str] = {}
        snap = self.snapshot()
        with Live(self.view(snap, 0.0), console=self.console, refresh_per_second=8,
                  transient=True) as live:
            while True:
                elapsed = time.monotonic() - started
                snap = self.snapshot()
                self._print_changes(live.console, snap, seen, elapsed)
                if self.scenario is Scenario.INFRA_ABORT:
                    self._node_loss(live.console, snap, elapsed)
                live.update(self.view(snap, elapsed))
                if snap.terminal:
                    return snap
                if elapsed > self.timeout:
                    raise StackError(f"the Certification had no verdict within "
                                     f"{self.timeout:g}s (phase {snap.phase})")
                time.sleep(0.25)

    def _print_changes(self, console: Console, snap: Snapshot, seen: dict[str, str],
                       elapsed: float) -> None:
        lines = [(f"certification {CERT}", f"{snap.phase} {snap.verdict}".strip())]
        lines += [(f"category {e}", f"{s} {v}".strip()) for e, s, v in snap.categories]
        lines += [(f"{snap.workflow} {g}", f"{p} job {j}" + (
            f" (infra retry {r} after a {fc} abort: deferred, siblings continue)" if r else ""))
            for g, p, _, j, r, fc in snap.groups]
        lines += [(f"job {j}", f"{p}" + (f" class {fc}" if fc else "")) for j, p, fc in snap.jobs]
        for key, value in lines:
            if seen.get(key) != value:
                seen[key] = value
                console.print(f"  [{elapsed:5.1f}s] {key}: [bold]{value}[/]")

    def _node_loss(self, console: Console, snap: Snapshot, elapsed: float) -> None:
        """Take a node of group-1 away while its launcher runs; bring it back once the Job
        failed (as a node that rebooted would)."""
        group = snap.group(LOST_GROUP)
        if not self.node_lost and group is not None and any(
                n.startswith(LOST_LAUNCHER) and s == "Running"
                for n, _, s in snap.pods):
            self.lost_node = next(n for n in self.nodes if n.endswith(f"-{group[2].split(',')[0]}"))
            console.print(f"  [{elapsed:5.1f}s] [bold red]node loss[/]: {self.lost_node}'s "
                          f"kubelet reports NotReady while {LOST_GROUP} runs")
            self.set_ready(self.lost_node, ready=False)
            self.node_lost = True
        if self.node_lost and not self.node_back and group is not None and (
                group[4] > 0 or group[1] not in ("Running", "Pending") or group[5]):
            # (group[5]: the Job failed; the Workflow waits for the node within its grace)
            self.deferred = group[5]
            console.print(f"  [{elapsed:5.1f}s] {LOST_GROUP}'s Job failed with class "
                          f"[bold]{group[5]}[/]: deferred, no sibling cancelled; "
                          f"{self.lost_node} is back (Ready) for the infra retry")
            self.set_ready(self.lost_node, ready=True)
            self.node_back = True

    def set_ready(self, node: str, *, ready: bool) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        cond = {"type": "Ready", "status": "True" if ready else "False",
                "reason": "KubeletReady" if ready else "KubeletNotReady",
                "message": "kubelet is posting ready status" if ready
                else "container runtime network not ready",
                "lastHeartbeatTime": now, "lastTransitionTime": now}
        self.stack.kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p",
                           json.dumps({"status": {"conditions": [cond]}}))

    # -- results ---------------------------------------------------------------------------------

    def cre(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The ``cre`` command against the emulator."""
        return subprocess.run([sys.executable, "-m", "cre.cli", *args, "--kubeconfig",
                               str(self.stack.kubeconfig), "-n", NAMESPACE],
                              capture_output=True, text=True, check=False, timeout=120,
                              env={**os.environ, "COLUMNS": str(self.console.width)})

    def report(self, snap: Snapshot, html: Path) -> bool:
        done = self.cre("report", CERT, "--json")
        if done.returncode != 0:
            raise StackError(f"cre report failed: {done.stderr.strip()}")
        rep: dict[str, Any] = json.loads(done.stdout)
        summary, cert = rep["summary"], rep["certification"]
        verdict = str(cert.get("verdict") or "-")
        self.console.print(Panel(Text(f"Verdict: {verdict.upper()}  ({summary['categoriesPassed']}"
                                      f"/{summary['categories']} categories passed; "
                                      f"{cert.get('message') or ''})",
                                      style=_phase_style(verdict)),
                                 title=f"Certification {CERT}", expand=False))
        cats = Table(title="Per category", header_style="bold")
        for col in ("category", "state", "verdict", "groups", "busBW peak GB/s (nodes)",
                    "message"):
            cats.add_column(col)
        for c in rep["categories"]:
            # Per node (a loopback measures every node on its own; an all-reduce node has
            # its group's figure).
            peaks = [float(n["busBWGBps"]) for n in c["nodes"] if n.get("busBWGBps")]
            cats.add_row(c["entry"], c["state"], Text(str(c["verdict"]),
                                                      style=_phase_style(str(c["verdict"]))),
                         str(len(c["groups"])), f"{min(peaks):.1f}-{max(peaks):.1f}"
                         if peaks else "-", str(c.get("message") or ""))
        self.console.print(cats)
        self.console.print(self.node_table(rep))
        self.bandwidth_tables()
        for c in rep["categories"]:
            for g in c["groups"]:
                flog = g.get("failureLog")
                if flog:
                    tail = "\n".join(str(flog.get("tail") or "").splitlines()[-12:])
                    fc = g.get("failureClass") or {}
                    self.console.print(Panel(Text(tail), border_style="red", title=(
                        f"{c['entry']} {g['name']}: failureLog of {flog.get('pod')} on "
                        f"{flog.get('node')}, exit {flog.get('exitCode')} - class "
                        f"{fc.get('scope')}/{fc.get('reason')}")))
        if self.scenario is Scenario.DIAGNOSE:
            self.diagnose_tree()
        tree = self.cre("status", CERT)
        if tree.returncode == 0:
            self.step("cre status " + CERT)
            self.console.print(Text.from_ansi(tree.stdout.rstrip()))
        self.step("kubectl get certifications")
        self.console.print(self.stack.kubectl("get", "certifications", "-n",
                                              NAMESPACE).stdout.rstrip())
        from cre.cli.session import write_html_report

        path = write_html_report(CERT, path=html, namespace=NAMESPACE,
                                 kubeconfig=str(self.stack.kubeconfig))
        self.console.print(Panel(f"HTML report: [bold]{path}[/]", expand=False))
        return self.expected(rep, snap)

    def diagnose_tree(self) -> None:
        """The bisection tree of the diagnose run (``status.orchestration.diagnose``)."""
        wf = self.stack.kubectl_json("get", "workflows", f"{CERT}-communication-nccl-all-reduce",
                                     "-n", NAMESPACE)
        diag = ((wf.get("status") or {}).get("orchestration") or {}).get("diagnose") or {}
        table = Table(title=f"Diagnose: {diag.get('jobsSpent')} of {diag.get('jobBudget')} Jobs, "
                            f"{diag.get('round')} round(s) after screening", header_style="bold")
        for col in ("step", "stage", "parent", "suspects", "peers", "outcome", "resolution"):
            table.add_column(col)
        for s in diag.get("steps") or []:
            table.add_row(s["name"], s["stage"], s.get("parent") or "-",
                          ", ".join(s.get("suspects") or []), str(len(s.get("peers") or [])),
                          Text(s["outcome"], style=_phase_style(
                              {"Passed": "Passed", "Failed": "Failed"}.get(s["outcome"], ""))),
                          s.get("resolution") or "-")
        self.console.print(table)

    def bandwidth_tables(self) -> None:
        """Each BandwidthMeasurement's final results per message size (busBW / algBW), then
        each Job's threshold verdict (the number next to it, and why)."""
        measurements = self._items("bandwidthmeasurements")
        if not measurements:
            return
        table = Table(title=f"Measured bandwidth, GB/s busBW / algBW (BandwidthMeasurement "
                            f"status.results; sizes from {TABLE_FROM_BYTES >> 20} MiB)",
                      header_style="bold")
        table.add_column("size", justify="right")
        # A single-node category (one Job per node) gets one column: its value when every
        # node measured the same, else the range over the nodes.
        per_node = [str(w["metadata"]["name"]) for w in self._items("workflows")
                    if ((w.get("status") or {}).get("orchestration") or {}).get(
                        "nodesPerJob") == 1]
        merged: dict[str, tuple[list[str], list[dict[int, tuple[str, str]]]]] = {}
        for bm in measurements:  # sorted by name: all-reduce groups, then loopback
            ref = str(bm["spec"]["jobRef"]["name"])
            wf = next((w for w in per_node if ref.startswith(f"{w}-")), None)
            label = re.sub(r"-iter-\d+$", "", (wf or ref).removeprefix(f"{CERT}-communication-"))
            status = bm.get("status") or {}
            done = next((c for c in status.get("conditions") or []
                         if c.get("type") == "Complete" and c.get("status") == "True"), None)
            reasons, values = merged.setdefault(label, ([], []))
            reasons.append(str(done.get("reason")) if done else "measuring")
            values.append({int(r["sizeBytes"]): (str(r["busBW"]), str(r["algBW"]))
                           for r in status.get("results") or []})
        columns: list[dict[int, str]] = []
        for label, (reasons, values) in merged.items():
            jobs = f" ({len(values)} jobs)" if len(values) > 1 else ""
            table.add_column(f"{label}{jobs}\n{', '.join(sorted(set(reasons)))}",
                             justify="right")
            columns.append({size: _span([v[size] for v in values if size in v])
                            for size in {k for v in values for k in v}})
        sizes = sorted({size for col in columns for size in col if size >= TABLE_FROM_BYTES})
        for size in sizes:
            table.add_row(_size(size), *(col.get(size, "-") for col in columns))
        self.console.print(table)
        verdicts = Table(title="Threshold verdicts (Job status)", header_style="bold")
        for heading in ("job", "busBW GB/s", "ValidationFailed", "message"):
            verdicts.add_column(heading)
        for job in self._items("jobs.cre.dev"):
            js = job.get("status") or {}
            cond = next((c for c in js.get("conditions") or []
                         if c.get("type") == "ValidationFailed"), None)
            if cond is None:
                continue
            verdicts.add_row(str(job["metadata"]["name"]).removeprefix(f"{CERT}-communication-"),
                             str(js.get("busBandwidthGBps") or "-"),
                             Text(f"{cond['status']} {cond['reason']}",
                                  style="red" if cond["status"] == "True" else "green"),
                             str(cond.get("message") or ""))
        self.console.print(verdicts)

    def node_table(self, rep: dict[str, Any]) -> Table:
        table = Table(title="Per node", header_style="bold")
        table.add_column("node")
        entries = [c["entry"] for c in rep["categories"]]
        for entry in entries:
            table.add_column(entry.split("/", 1)[-1])
        table.add_column("reason / class")
        rows: dict[str, dict[str, dict[str, Any]]] = {}
        for c in rep["categories"]:
            for n in c["nodes"]:
                rows.setdefault(n["node"], {})[c["entry"]] = n
        for node in sorted(rows):
            cells: list[Text | str] = [node]
            notes = []
            for entry in entries:
                n = rows[node].get(entry)
                verdict = str(n["verdict"]) if n else "-"
                bw = f" {n['busBWGBps']}" if n and n.get("busBWGBps") else ""
                cells.append(Text(verdict + bw, style=_phase_style(verdict)))
                if n and (n.get("reason") or n.get("failureClass")):
                    fc = n.get("failureClass") or {}
                    notes.append(f"{n.get('reason') or ''} {fc.get('scope') or ''}".strip())
            if self.deferred and node in self.lost_group_nodes(rep):
                notes.append(f"{LOST_GROUP}: {self.deferred} abort deferred, not blamed; "
                             "passed on its infra retry")
            cells.append("; ".join(sorted(set(notes))))
            table.add_row(*cells)
        return table

    @staticmethod
    def lost_group_nodes(rep: dict[str, Any]) -> list[str]:
        groups = rep["categories"][0]["groups"]
        return next((list(g["nodes"]) for g in groups if g["name"] == LOST_GROUP), [])

    def expected(self, rep: dict[str, Any], snap: Snapshot) -> bool:
        verdicts = [c["verdict"] for c in rep["categories"]]
        if self.scenario is Scenario.SUCCESS:
            return verdicts == ["Passed", "Passed"]
        if self.scenario is Scenario.THRESHOLD:
            message = str(rep["certification"].get("message") or "")
            failed = set(rep["summary"]["failedNodes"])
            loopback = {n["node"] for n in rep["categories"][1]["nodes"]
                        if n["verdict"] == "Failed"}
            return (verdicts == ["Failed", "Failed"] and BAD_NODE in failed
                    and loopback == {BAD_NODE} and "violated" in message
                    and f"expression: {THRESHOLD}" in message)
        if self.scenario is Scenario.LAUNCHER_FAILURE:
            logs = [g for g in rep["categories"][0]["groups"] if g.get("failureLog")]
            return verdicts == ["Failed", "Passed"] and bool(logs)
        if self.scenario is Scenario.DIAGNOSE:
            return (verdicts == ["Failed"]
                    and set(rep["summary"]["failedNodes"]) == {DIAGNOSED_NODE})
        if self.scenario is Scenario.HARDWARE:
            by_verdict: dict[str, set[str]] = {}
            for n in rep["categories"][0]["nodes"]:
                by_verdict.setdefault(str(n["verdict"]), set()).add(str(n["node"]))
            others = {n for n in self.nodes if n != BROKEN_NODE}
            return (verdicts == ["Failed"] and rep["certification"]["verdict"] == "Failed"
                    and set(rep["summary"]["failedNodes"]) == {BROKEN_NODE}
                    and by_verdict.get("Failed") == {BROKEN_NODE}
                    and by_verdict.get("Passed") == others)
        groups = rep["categories"][0]["groups"]
        lost = next((g for g in groups if g["name"] == LOST_GROUP), None)
        siblings_ok = all(g["phase"] == "Succeeded" for g in groups if g["name"] != LOST_GROUP)
        return (self.node_lost and self.node_back and lost is not None
                and not rep["summary"]["failedNodes"] and siblings_ok
                and rep["certification"]["verdict"] in ("Passed", "Incomplete")
                and lost["job"] != LOST_JOB)  # re-run on the infra retry


def _span(pairs: list[tuple[str, str]]) -> str:
    """``busBW / algBW`` when every pair agrees, else the busBW range ``lo-hi`` (GB/s)."""
    if len(set(pairs)) == 1:
        return f"{pairs[0][0]} / {pairs[0][1]}"
    bus = sorted(float(b) for b, _ in pairs)
    return f"{bus[0]:.2f}-{bus[-1]:.2f}"


def _size(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def run(scenario: Scenario, *, time_scale: float, timeout: float, keep: bool,
        html: Path) -> int:
    console = demo_console()
    what = (f"[bold]{DCGM}[/] (a single-node test) on a simulated {HARDWARE_NODES}-node"
            if scenario is Scenario.HARDWARE else
            f"[bold]{ALL_REDUCE}[/] and [bold]{LOOPBACK}[/] on a simulated {NODES}-node")
    console.print(Panel(f"CRE demo: a Certification of {what} {PROFILE} cluster - "
                        f"scenario [bold]{scenario}[/]", expand=False))

    def body(stack: Stack) -> bool:
        demo = Demo(stack, console, scenario=scenario, time_scale=time_scale, timeout=timeout)
        demo.start()
        demo.apply()
        expected = demo.report(demo.follow(), html)
        demo.stop_manager()
        return expected

    return drive(Stack(keep=keep), console, body, scenario=str(scenario))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cre.testing.demo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", type=Scenario, choices=list(Scenario),
                   default=Scenario.SUCCESS)
    p.add_argument("--time-scale", type=float, default=5.0,
                   help="simulated seconds per wall second")
    p.add_argument("--timeout", type=float, default=420.0,
                   help="seconds to wait for the verdict")
    p.add_argument("--html", type=Path, default=None,
                   help="where to write the HTML report (default: cre-demo-<scenario>.html "
                        "in the temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep the process logs directory")
    args = p.parse_args(argv)
    if args.scenario is Scenario.WORKLOADRUN:
        from cre.testing.demo_workloadrun import run_demo

        return run_demo(time_scale=args.time_scale, timeout=args.timeout, keep=args.keep)
    if args.scenario is Scenario.FLEET:
        from cre.testing.demo_fleet import run_demo as run_fleet

        return run_fleet(time_scale=args.time_scale, timeout=args.timeout, keep=args.keep)
    html = args.html or Path(tempfile.gettempdir()) / f"cre-demo-{args.scenario}.html"
    return run(args.scenario, time_scale=args.time_scale, timeout=args.timeout, keep=args.keep,
               html=html)


if __name__ == "__main__":
    sys.exit(main())
