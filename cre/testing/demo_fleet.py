"""``make demo SCENARIO=fleet``: a CertificationSchedule keeping an emulated 8-node aws-h100
fleet certified, with node state on, through the real command lines.

The API emulator, the simulated cluster and ``cre-manager`` run as separate processes on one
scaled clock (the schedule's interval passes at the cluster's pace). The simulator starts with
node 2's GPU failing the DCGM diagnostic (``--dcgm-fail-node``). The driver applies a
``CertificationSchedule`` of ``diagnostics/dcgm-level1`` due every 5 simulated minutes,
``maxNodesPerRun: 8`` and ``nodeState`` labels and taint on, and follows the schedule's runs and
the nodes' ``cre.dev/certification`` labels and taints:

1. run 1 (due at creation) certifies the 8 nodes: node 2 fails, its NodeCertification is
   Failed, it is labelled ``failed`` and tainted ``cre.dev/certification-failed:NoSchedule``;
   the 7 others are Passed and labelled ``passed``. The node table is printed.
2. the node is repaired: SIGUSR1 to the simulator drops its DCGM fault.
3. run 2 (the next due time) certifies the 8 nodes again, node 2 (failed, so the stalest)
   first: every node Passed and labelled ``passed``, node 2's taint released. The node table
   is printed again.

The node table is ``kubectl get nodecertifications`` (state, categories passed, valid until,
the Certification that judged the node last) beside the node's label and taint.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import attrs
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from cre.api.labels import CERTIFICATION, GPU_PRESENT
from cre.testing.demokit import DemoSteps, demo_console, drive
from cre.testing.procs import Proc, Stack, StackError, wait_until

SCHEDULE = "fleet"
NAMESPACE = "default"
PROFILE = "aws-h100"
NODES = 8
FAULTY_NODE = f"{PROFILE}-node-2"  # its GPU fails the DCGM diagnostic until it is repaired
INTERVAL = "5m"
TAINT = "cre.dev/certification-failed"

CERTIFICATION_SCHEDULE = f"""apiVersion: cre.dev/v1alpha1
kind: CertificationSchedule
metadata: {{name: {SCHEDULE}, namespace: {NAMESPACE}}}
spec:
  interval: {INTERVAL}
  maxNodesPerRun: {NODES}
  concurrencyPolicy: Forbid
  certificationTemplate:
    spec:
      target: {{nodeSelector: {{{GPU_PRESENT}: "true"}}}}
      nodeState: {{labels: true, taint: true, validFor: 168h}}
      categories:
      - {{domain: diagnostics, variant: dcgm-level1}}
"""


@attrs.frozen(slots=True, kw_only=True)
class NodeRow:
    """One line of the node table: the node's record beside its label and taint."""

    node: str
    state: str
    passed: str
    valid_until: str
    judged_by: str
    label: str
    tainted: bool


def node_rows(nodes: list[dict[str, Any]], records: list[dict[str, Any]]) -> list[NodeRow]:
    """The table's rows, by node name, from the GPU nodes and the NodeCertifications."""
    by_node = {str(r["spec"]["nodeName"]): r.get("status") or {} for r in records}
    rows = []
    for node in sorted(nodes, key=lambda n: str(n["metadata"]["name"])):
        name = str(node["metadata"]["name"])
        status = by_node.get(name, {})
        rows.append(NodeRow(
            node=name, state=str(status.get("state") or "-"),
            passed=str(status.get("categoriesPassed") or "-"),
            valid_until=str(status.get("validUntil") or "-"),
            judged_by=str((status.get("lastCertification") or {}).get("name") or "-"),
            label=str((node["metadata"].get("labels") or {}).get(CERTIFICATION) or "-"),
            tainted=any(t.get("key") == TAINT for t in (node.get("spec") or {}).get("taints")
                        or [])))
    return rows


def settled(rows: list[NodeRow], *, run: str, failed: set[str]) -> bool:
    """Every node judged last by ``run`` and labelled as it left them: the ``failed`` nodes
    Failed, labelled ``failed`` and tainted, every other node Passed, labelled ``passed`` and
    untainted."""
    return len(rows) == NODES and all(
        (r.judged_by, r.state, r.label, r.tainted) == (
            (run, "Failed", "failed", True) if r.node in failed
            else (run, "Passed", "passed", False)) for r in rows)


def _style(state: str) -> str:
    return {"Passed": "bold green", "passed": "bold green", "Failed": "bold red",
            "failed": "bold red"}.get(state, "cyan")


class FleetDemo(DemoSteps):
    """One fleet demo over a :class:`Stack` that shares its scaled clock."""

    def __init__(self, stack: Stack, console: Console, *, timeout: float) -> None:
        super().__init__(stack, console)
        self.timeout = timeout
        self.cluster: Proc | None = None
        self.seen: dict[str, str] = {}
        self.started = time.monotonic()

    def start(self, *, time_scale: float) -> None:
        self.step("starting the Kubernetes API emulator (Trainer, JobSet and CRE CRDs)")
        self.stack.start_emulator()
        self.step(f"starting a simulated {NODES}-node {PROFILE} cluster where a GPU of "
                  f"{FAULTY_NODE} fails the DCGM diagnostic (one clock for every process, "
                  f"{time_scale:g} simulated seconds per second)")
        self.cluster = self.stack.start_cluster(profile=PROFILE, nodes=NODES,
                                                time_scale=time_scale,
                                                extra_args=["--dcgm-fail-node", FAULTY_NODE])
        cluster = self.cluster

        def gpu_nodes() -> bool:
            items = self.stack.kubectl_json("get", "nodes", "-l", f"{GPU_PRESENT}=true")["items"]
            return len(items) >= NODES

        wait_until(gpu_nodes, timeout=60, what=f"{NODES} GPU nodes", interval=0.2,
                   alive=cluster.check_alive)
        self.step("starting cre-manager (separate process) and waiting for /readyz")
        self.stack.start_manager("--log-format", "json")

    def apply(self) -> None:
        self.apply_manifest(CERTIFICATION_SCHEDULE)
        self.started = time.monotonic()

    def rows(self) -> list[NodeRow]:
        nodes = self.stack.kubectl_json("get", "nodes", "-l", f"{GPU_PRESENT}=true")["items"]
        return node_rows(nodes, self.stack.kubectl_json("get", "nodecertifications")["items"])

    def history(self) -> list[dict[str, Any]]:
        """The schedule's ended runs, oldest first (printing what changed since the last call)."""
        sched = self.stack.kubectl_json("get", "certificationschedules", SCHEDULE,
                                        "-n", NAMESPACE)
        status = sched.get("status") or {}
        history = sorted(status.get("history") or [], key=lambda h: str(h["scheduledTime"]))
        active = ", ".join(str(a.get("name")) for a in status.get("active") or []) or "-"
        lines = {f"schedule {SCHEDULE}": f"runs {status.get('runs', 0)}, skipped "
                                         f"{status.get('skippedRuns', 0)}, active {active}"}
        for h in history:
            lines[f"run {h['name']} ({h.get('nodes', 0)} nodes)"] = str(
                h.get("verdict") or "running")
        for row in self.rows():
            lines[f"node {row.node}"] = (f"{CERTIFICATION}={row.label}"
                                         + (f", tainted {TAINT}" if row.tainted else ""))
        elapsed = time.monotonic() - self.started
        for key, value in lines.items():
            if self.seen.get(key) != value:
                self.seen[key] = value
                self.console.print(f"  [{elapsed:5.1f}s] {key}: [bold]{value}[/]")
        return [h for h in history if h.get("completionTime")]

    def wait_run(self, number: int, *, failed: set[str]) -> tuple[dict[str, Any], list[NodeRow]]:
        """Follow the schedule until its ``number``-th run ended and the nodes show its
        outcome; that run's history entry and the node table then."""
        self.step(f"following the schedule until run {number} ended and every node shows it")
        while True:
            ended = self.history()
            if len(ended) >= number:
                rows = self.rows()
                if settled(rows, run=str(ended[number - 1]["name"]), failed=failed):
                    return ended[number - 1], rows
            if time.monotonic() - self.started > self.timeout:
                raise StackError(f"run {number} of {SCHEDULE} did not end with the nodes "
                                 f"settled within {self.timeout:g}s")
            time.sleep(0.25)

    def table(self, run: dict[str, Any], rows: list[NodeRow], *, number: int) -> None:
        table = Table(title=f"Fleet after run {number}: {run['name']} ({run.get('nodes')} "
                            f"nodes, verdict {run.get('verdict')})", header_style="bold")
        for col in ("node", "state", "passed", "valid until", "judged by",
                    CERTIFICATION, "tainted"):
            table.add_column(col)
        for r in rows:
            table.add_row(r.node, Text(r.state, style=_style(r.state)), r.passed,
                          r.valid_until, r.judged_by, Text(r.label, style=_style(r.label)),
                          Text("yes", style="bold red") if r.tainted else "no")
        self.console.print(table)

    def repair(self) -> None:
        assert self.cluster is not None
        self.step(f"repairing {FAULTY_NODE}: SIGUSR1 to the simulator drops its DCGM fault "
                  f"(its node stays tainted until a run passes it)")
        self.cluster.send(signal.SIGUSR1)

    def stop_manager(self) -> None:
        self.step("kubectl get certificationschedules")
        self.console.print(self.stack.kubectl("get", "certificationschedules", "-n",
                                              NAMESPACE).stdout.rstrip())
        super().stop_manager()


def run_demo(*, time_scale: float, timeout: float, keep: bool) -> int:
    """The demo; 0 when run 1 failed and tainted the faulty node and run 2 passed and released
    it, every other node passing both."""
    console = demo_console()
    console.print(Panel(f"CRE demo: a CertificationSchedule of diagnostics/dcgm-level1 every "
                        f"{INTERVAL} on a simulated {NODES}-node {PROFILE} fleet, node labels "
                        f"and taint on - scenario [bold]fleet[/]", expand=False))

    def body(stack: Stack) -> bool:
        demo = FleetDemo(stack, console, timeout=timeout)
        demo.start(time_scale=time_scale)
        demo.apply()
        first, rows = demo.wait_run(1, failed={FAULTY_NODE})
        demo.table(first, rows, number=1)
        demo.repair()
        second, rows = demo.wait_run(2, failed=set())
        demo.table(second, rows, number=2)
        demo.stop_manager()
        return (first.get("verdict"), second.get("verdict")) == ("Failed", "Passed")

    return drive(Stack(keep=keep, shared_time_scale=time_scale), console, body,
                 scenario="fleet")
