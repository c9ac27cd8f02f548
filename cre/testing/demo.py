"""``make demo``: CRE's main job on an emulated 8-node aws-h100 cluster, as a person would run it.

Everything runs as separate processes through the real command lines: the API emulator (with the
vendored Trainer/JobSet CRDs and CRE's own), the simulated cluster, ``cre-manager``, the renderer
(``python -m cre.render``) and ``kubectl``. The driver only orchestrates and shows progress: the
Job's phase and condition as they change, a live table of the workload's pods, then the verdict,
the per-node result, and either the measured bandwidth table (per message size, from the Job's
BandwidthMeasurement: the manager parsed the launcher's log) or, on the failure path, the
``failureLog`` the manager captured. Everything is shut down whatever happens; the exit code is 0
when the scenario ended the way it should (``success``: Succeeded with its threshold met;
``launcher-failure``: Failed with a captured failure log; ``threshold``: Succeeded with
``ValidationFailed=True / ThresholdViolation`` naming the measured value and the expression).

Until the Certification tier exists, the demo applies a ``Job`` (with its TrainingRuntime)
directly, with a ``busBandwidthGBps`` threshold added, and installs the shipped LogProfiles.
"""

from __future__ import annotations

import argparse
import enum
import json
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import attrs
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from ruamel.yaml import YAML

from cre.api.converter import to_dict
from cre.api.labels import GPU_PRESENT, JOB, LAUNCHER
from cre.core.logprofile import shipped_profiles
from cre.testing.cluster.profiles import get_profile
from cre.testing.procs import Stack, StackError, wait_until

ENTRY = "communication/nccl-all-reduce"
JOB_NAME = "nccl-all-reduce-demo"
NAMESPACE = "default"
PROFILE = "aws-h100"
NODES = 8


class Scenario(enum.StrEnum):
    SUCCESS = "success"
    LAUNCHER_FAILURE = "launcher-failure"
    THRESHOLD = "threshold"


def threshold_for(scenario: Scenario) -> str:
    """The ``busBandwidthGBps`` expression the demo's Job carries: half the profile's healthy
    bus bandwidth (met), or a figure no cluster reaches (the threshold scenario)."""
    if scenario is Scenario.THRESHOLD:
        return "value >= 1000000"
    return f"value >= {get_profile(PROFILE).busbw_gbps / 2:g}"


@attrs.frozen(slots=True)
class Snapshot:
    """What the live view shows at one poll."""

    phase: str
    condition: str  # "Type=Reason: message" of the True condition(s)
    pods: tuple[tuple[str, str, str, str], ...]  # (role, name, node, status)

    @property
    def terminal(self) -> bool:
        # A Succeeded Job with thresholds is done once its verdict (ValidationFailed) is in.
        if self.phase == "Succeeded":
            return "ValidationFailed" in self.judged
        return self.phase == "Failed"

    judged: str = ""  # the ValidationFailed condition, "status/reason: message"


def _true_conditions(status: dict[str, Any]) -> str:
    parts = []
    for cond in status.get("conditions") or []:
        if cond.get("status") == "True":
            msg = f": {cond['message']}" if cond.get("message") else ""
            parts.append(f"{cond.get('type')}={cond.get('reason')}{msg}")
    return "; ".join(parts) or "-"


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


class Demo:
    """One demo run over a :class:`Stack`."""

    def __init__(self, stack: Stack, console: Console, *, scenario: Scenario,
                 time_scale: float, timeout: float) -> None:
        self.stack = stack
        self.console = console
        self.scenario = scenario
        self.time_scale = time_scale
        self.timeout = timeout
        self.nodes: list[str] = []

    def step(self, text: str) -> None:
        self.console.print(f"[bold cyan]>[/] {text}")

    # -- setup -----------------------------------------------------------------------------------

    def start(self) -> None:
        self.step("starting the Kubernetes API emulator (Trainer, JobSet and CRE CRDs)")
        self.stack.start_emulator()
        fail = self.scenario is Scenario.LAUNCHER_FAILURE
        self.step(f"starting a simulated {NODES}-node {PROFILE} cluster"
                  + (" whose MPI launchers fail with an NCCL error" if fail else ""))
        cluster = self.stack.start_cluster(profile=PROFILE, nodes=NODES,
                                           time_scale=self.time_scale, fail_launcher=fail)

        def gpu_nodes() -> list[str]:
            items = self.stack.kubectl_json("get", "nodes", "-l", f"{GPU_PRESENT}=true")["items"]
            names = sorted(n["metadata"]["name"] for n in items)
            return names if len(names) >= NODES else []

        self.nodes = wait_until(gpu_nodes, timeout=60, what=f"{NODES} GPU nodes",
                                interval=0.2, alive=cluster.check_alive)
        self.step("installing the shipped LogProfiles (nccl-bandwidth, nccl-loopback)")
        docs = "".join("---\n" + json.dumps(to_dict(p)) + "\n" for p in shipped_profiles())
        for line in self.stack.kubectl("apply", "-f", "-", stdin=docs).stdout.splitlines():
            self.console.print(f"  {line}")
        self.step("starting cre-manager (separate process) and waiting for /readyz")
        started = time.monotonic()
        manager = self.stack.start_manager("--log-format", "json")
        self.console.print(f"  cre-manager ready in {time.monotonic() - started:.1f}s; "
                           f"probes {manager.health_url}, metrics {manager.metrics_url}/metrics")

    def apply(self) -> None:
        self.step(f"rendering {ENTRY} for aws/h100 on {len(self.nodes)} nodes "
                  "(python -m cre.render)")
        rendered = subprocess.run(
            [sys.executable, "-m", "cre.render", "--entry", ENTRY, "--platform", "aws",
             "--arch", "h100", "--nodes", ",".join(self.nodes), "--job-name", JOB_NAME,
             "--namespace", NAMESPACE], capture_output=True, text=True, check=False)
        if rendered.returncode != 0:
            raise StackError(f"render failed: {rendered.stderr.strip()}")
        self.console.print("  [yellow]note:[/] the Certification tier comes later; this demo "
                           "applies the CRE Job and its TrainingRuntime directly.")
        docs = [d for d in YAML(typ="safe").load_all(rendered.stdout) if d]
        expr = threshold_for(self.scenario)
        for doc in docs:
            if doc.get("kind") == "Job":
                doc["spec"]["thresholds"] = {"busBandwidthGBps": expr}
        self.step(f"kubectl apply -f - (Job with threshold busBandwidthGBps: {expr!r} + "
                  "TrainingRuntime)")
        body = "".join("---\n" + json.dumps(d) + "\n" for d in docs)
        out = self.stack.kubectl("apply", "-f", "-", stdin=body).stdout
        for line in out.splitlines():
            self.console.print(f"  {line}")

    # -- progress --------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        job = self.stack.kubectl_json("get", "jobs.cre.dev", JOB_NAME, "-n", NAMESPACE)
        status = job.get("status") or {}
        pods: list[tuple[str, str, str, str]] = []
        for role, label in (("launcher", LAUNCHER), ("worker", JOB)):
            items = self.stack.kubectl_json("get", "pods", "-n", NAMESPACE, "-l",
                                            f"{label}={JOB_NAME}")["items"]
            for pod in sorted(items, key=lambda p: p["metadata"]["name"]):
                pods.append((role, pod["metadata"]["name"],
                             (pod.get("spec") or {}).get("nodeName") or "-", _pod_status(pod)))
        verdict = next((c for c in status.get("conditions") or []
                        if c.get("type") == "ValidationFailed"), None)
        judged = (f"ValidationFailed={verdict.get('status')}/{verdict.get('reason')}: "
                  f"{verdict.get('message')}" if verdict else "")
        return Snapshot(phase=str(status.get("phase") or "Pending"),
                        condition=_true_conditions(status), pods=tuple(pods), judged=judged)

    def view(self, snap: Snapshot, elapsed: float) -> Group:
        head = Text.assemble(("Job ", "bold"), (f"{NAMESPACE}/{JOB_NAME}", "bold magenta"),
                             "  phase ", (snap.phase, "bold green" if snap.phase == "Succeeded"
                                          else "bold red" if snap.phase == "Failed"
                                          else "bold yellow"),
                             f"  [{elapsed:4.1f}s]")
        table = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("role", "pod", "node", "status"):
            table.add_column(col)
        for role, name, node, status in snap.pods:
            table.add_row(role, name, node, status)
        if not snap.pods:
            table.add_row("-", "(no workload pods yet)", "-", "-")
        return Group(head, Text(f"  {snap.condition}", style="dim"), table)

    def follow(self) -> Snapshot:
        """Live view until the Job is terminal; transitions are printed as they happen."""
        self.step("following the Job (phase and conditions as the manager writes them)")
        started = time.monotonic()
        last: tuple[str, str] | None = None
        snap = self.snapshot()
        with Live(self.view(snap, 0.0), console=self.console, refresh_per_second=8,
                  transient=True) as live:
            while True:
                elapsed = time.monotonic() - started
                snap = self.snapshot()
                if (snap.phase, snap.condition + snap.judged) != last:
                    last = (snap.phase, snap.condition + snap.judged)
                    live.console.print(f"  [{elapsed:5.1f}s] phase [bold]{snap.phase}[/]  "
                                       f"{snap.condition}"
                                       + (f"  {snap.judged}" if snap.judged else ""))
                live.update(self.view(snap, elapsed))
                if snap.terminal:
                    return snap
                if elapsed > self.timeout:
                    raise StackError(f"the Job did not finish within {self.timeout:g}s "
                                     f"(phase {snap.phase})")
                time.sleep(0.25)

    # -- results ---------------------------------------------------------------------------------

    def report(self, snap: Snapshot) -> bool:
        job = self.stack.kubectl_json("get", "jobs.cre.dev", JOB_NAME, "-n", NAMESPACE)
        status = job.get("status") or {}
        violated = snap.judged.startswith("ValidationFailed=True")
        ok = snap.phase == "Succeeded" and not violated
        why = snap.judged if violated else snap.condition
        self.console.print(Panel(Text(f"Verdict: {'PASSED' if ok else 'FAILED'} ({why})",
                                      style="bold green" if ok else "bold red"),
                                 title="CRE Job result", expand=False))
        failed = {f.get("name"): f for f in status.get("failedNodes") or []}
        table = Table(title="Per-node result", header_style="bold")
        for col in ("node", "result", "reason"):
            table.add_column(col)
        for node in self.nodes:
            entry = failed.get(node)
            if entry:
                table.add_row(node, Text("FAILED", style="red"), str(entry.get("reason")))
            else:
                table.add_row(node, Text("passed" if ok else "not blamed", style="green"), "")
        self.console.print(table)
        flog = status.get("failureLog")
        if flog:
            where = (f"pod {flog.get('podName')} container {flog.get('containerName')} on "
                     f"{flog.get('nodeName')}: exit {flog.get('exitCode')} "
                     f"({flog.get('reason')})")
            tail = "\n".join(str(flog.get("tail") or "").splitlines()[-25:])
            self.console.print(Panel(Text(tail), title=f"status.failureLog - {where}",
                                     border_style="red"))
            cls = status.get("failureClass") or {}
            if cls:
                self.console.print(f"  failure class: scope [bold]{cls.get('scope')}[/], "
                                   f"reason {cls.get('reason')}")
        measured = self.measured_table()
        if snap.phase == "Succeeded":
            self.console.print(measured if measured is not None else
                               Text("(no BandwidthMeasurement results)", style="red"))
            if status.get("busBandwidthGBps"):
                self.console.print(f"  busBandwidthGBps (max over sizes): "
                                   f"[bold]{status['busBandwidthGBps']}[/] GB/s")
        if self.scenario is Scenario.SUCCESS:
            return ok and measured is not None
        if self.scenario is Scenario.THRESHOLD:
            return (snap.phase == "Succeeded" and violated and "ThresholdViolation" in snap.judged
                    and threshold_for(self.scenario) in snap.judged)
        return snap.phase == "Failed" and bool(flog)

    def measured_table(self) -> Table | None:
        """The Job's BandwidthMeasurement results: per message size, algBW and busBW."""
        bm = self.stack.kubectl_json("get", "bandwidthmeasurements.cre.dev",
                                     f"{JOB_NAME}-bandwidth", "-n", NAMESPACE)
        status = bm.get("status") or {}
        results = status.get("results") or []
        if not results:
            return None
        done: dict[str, Any] = next((c for c in status.get("conditions") or []
                                     if c.get("type") == "Complete"), {})
        table = Table(title=f"Measured bandwidth ({bm['metadata']['name']}: "
                      f"{done.get('reason', 'in progress')}; transports "
                      f"{', '.join(status.get('transports') or []) or '-'})",
                      header_style="bold")
        for col in ("size (B)", "algBW (GB/s)", "busBW (GB/s)", "samples"):
            table.add_column(col, justify="right")
        for r in results:
            table.add_row(str(r.get("sizeBytes")), str(r.get("algBW")), str(r.get("busBW")),
                          str(r.get("samples")))
        return table

    def stop_manager(self) -> None:
        self.step("shutting down: SIGTERM to cre-manager (drains, releases, exits 0)")
        for proc in self.stack.procs:
            if proc.name == "manager":
                proc.send(signal.SIGTERM)
                code = proc.wait(60)
                self.console.print(f"  cre-manager exited with code {code}")
                if code != 0:
                    raise StackError(f"cre-manager exited {code}:\n{proc.tail()}")


def run(scenario: Scenario, *, time_scale: float, timeout: float, keep: bool) -> int:
    console = Console(highlight=False)
    if not console.is_terminal:  # piped (CI, `make demo | tee`): room for the NCCL table
        console = Console(highlight=False, width=140)
    console.print(Panel(f"CRE demo: [bold]{ENTRY}[/] on a simulated {NODES}-node {PROFILE} "
                        f"cluster - scenario [bold]{scenario}[/]", expand=False))
    with Stack(keep=keep) as stack:
        demo = Demo(stack, console, scenario=scenario, time_scale=time_scale, timeout=timeout)
        try:
            demo.start()
            demo.apply()
            snap = demo.follow()
            expected = demo.report(snap)
            demo.stop_manager()
        except (StackError, subprocess.TimeoutExpired) as exc:
            console.print(f"[bold red]demo failed:[/] {exc}")
            console.print(f"  process logs: {stack.workdir}")
            stack.keep = True
            return 1
        except KeyboardInterrupt:
            console.print("[yellow]interrupted[/]")
            return 130
    if not expected:
        console.print(f"[bold red]unexpected outcome for scenario {scenario}[/]")
        return 1
    console.print("[bold green]demo finished[/]: every process stopped cleanly")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cre.testing.demo", description=__doc__)
    p.add_argument("--scenario", type=Scenario, choices=list(Scenario),
                   default=Scenario.SUCCESS)
    p.add_argument("--time-scale", type=float, default=5.0,
                   help="simulated seconds per wall second")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the Job")
    p.add_argument("--keep", action="store_true", help="keep the process logs directory")
    args = p.parse_args(argv)
    return run(args.scenario, time_scale=args.time_scale, timeout=args.timeout, keep=args.keep)


if __name__ == "__main__":
    sys.exit(main())
