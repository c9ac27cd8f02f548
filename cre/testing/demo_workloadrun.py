"""``make demo SCENARIO=workloadrun``: a user's MPI WorkloadRun on an emulated 4-node aws-h100
cluster, through the real command lines.

The API emulator, the simulated cluster and ``cre-manager`` run as separate processes; the
driver installs CRE's LogProfiles (``kubectl apply -k deploy/logprofiles``), applies the
reference's example WorkloadRun (nccl-tests all_reduce in the user's image, 2 nodes per group,
a bandwidth measurement) with ``kubectl apply`` and follows it: the run -> the Workflow it
built -> the groups -> their Jobs. It ends with the run's verdict, the generated runtime's
launcher fields, and per group the measured bus bandwidth (the Jobs' ``busBandwidthGBps`` and
the BandwidthMeasurements' per-size results). Goodput is not measured by this demo (an MPI
bandwidth test has no training steps).
"""

from __future__ import annotations

import json
import time
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from cre.api.labels import GPU_PRESENT
from cre.testing.demokit import DemoSteps, demo_console, drive
from cre.testing.procs import Stack, StackError, wait_until

RUN = "nccl-all-reduce"
NAMESPACE = "default"
PROFILE = "aws-h100"
NODES = 4

# The reference's example (nvcre-api §6.1), with nccl-tests' sizes kept small enough for a demo.
WORKLOAD_RUN = f"""apiVersion: cre.dev/v1alpha1
kind: WorkloadRun
metadata: {{name: {RUN}, namespace: {NAMESPACE}}}
spec:
  image: nvcr.io/nvidia/pytorch:26.01-py3
  numNodes: 2
  framework:
    mpi: {{binary: /usr/local/bin/all_reduce_perf_mpi, mpirunPath: /usr/local/mpi/bin/mpirun,
          args: ["-b", "8", "-e", "8G", "-f", "2", "-n", "100"]}}
  bandwidthMeasurement: {{logProfileRef: nccl-bandwidth, testType: all_reduce}}
"""


def _true(obj: dict[str, Any]) -> tuple[str, str, str]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in ("InProgress", "Succeeded", "Failed"):
            return str(c["type"]), str(c.get("reason") or ""), str(c.get("message") or "")
    return "Pending", "", ""


class RunDemo(DemoSteps):
    """One WorkloadRun demo over a :class:`Stack`."""

    def __init__(self, stack: Stack, console: Console, *, time_scale: float,
                 timeout: float) -> None:
        super().__init__(stack, console)
        self.time_scale = time_scale
        self.timeout = timeout

    def start(self) -> None:
        self.step("starting the Kubernetes API emulator (Trainer, JobSet and CRE CRDs)")
        self.stack.start_emulator()
        self.step(f"starting a simulated {NODES}-node {PROFILE} cluster")
        cluster = self.stack.start_cluster(profile=PROFILE, nodes=NODES,
                                           time_scale=self.time_scale)

        def gpu_nodes() -> list[str]:
            items = self.stack.kubectl_json("get", "nodes", "-l", f"{GPU_PRESENT}=true")["items"]
            return [n["metadata"]["name"] for n in items] if len(items) >= NODES else []

        wait_until(gpu_nodes, timeout=60, what=f"{NODES} GPU nodes", interval=0.2,
                   alive=cluster.check_alive)
        self.apply_logprofiles()
        self.step("starting cre-manager (separate process) and waiting for /readyz")
        self.stack.start_manager("--log-format", "json")

    def apply(self) -> None:
        self.apply_manifest(WORKLOAD_RUN)

    def follow(self) -> dict[str, Any]:
        """Print each transition of the run, its Workflow's groups and Jobs until the run ends."""
        self.step(f"following WorkloadRun {RUN} -> Workflow -> groups -> Jobs")
        started = time.monotonic()
        seen: dict[str, str] = {}
        while True:
            elapsed = time.monotonic() - started
            run = self.stack.kubectl_json("get", "workloadruns", RUN, "-n", NAMESPACE)
            lines = {f"workloadrun {RUN}": " ".join(_true(run)[:2])}
            wf = self.stack.kubectl("get", "workflows", RUN, "-n", NAMESPACE, "-o", "json",
                                    check=False)
            if wf.returncode == 0:
                for g in (json.loads(wf.stdout).get("status") or {}).get("groups") or []:
                    lines[f"  group {g.get('name')} ({','.join(g.get('nodes') or [])})"] = \
                        str(g.get("phase"))
            for job in self.stack.kubectl_json("get", "jobs.cre.dev", "-n", NAMESPACE)["items"]:
                js = job.get("status") or {}
                lines[f"    job {job['metadata']['name']}"] = str(js.get("phase") or "Pending")
            for key, value in lines.items():
                if seen.get(key) != value:
                    seen[key] = value
                    self.console.print(f"  [{elapsed:5.1f}s] {key}: [bold]{value}[/]")
            if _true(run)[0] in ("Succeeded", "Failed"):
                return run
            if elapsed > self.timeout:
                raise StackError(f"WorkloadRun {RUN} had no verdict within {self.timeout:g}s")
            time.sleep(0.3)

    def report(self, run: dict[str, Any]) -> bool:
        member, reason, message = _true(run)
        status = run.get("status") or {}
        style = "green" if member == "Succeeded" else "red"
        self.console.print(Panel(
            f"WorkloadRun [bold]{RUN}[/]: [bold {style}]{member}[/] ({reason}) - {message}\n"
            f"platform {status.get('detectedPlatform')}, GPU "
            f"{status.get('detectedGPUArchitecture')}, {status.get('resolvedGpusPerNode')} GPUs "
            f"per node, Workflow {(status.get('workflowRef') or {}).get('name')}",
            title="verdict", expand=False))
        wf = self.stack.kubectl_json("get", "workflows", RUN, "-n", NAMESPACE)
        runtime = next(d for d in wf["spec"]["dependencies"] if d["kind"] == "TrainingRuntime")
        for rj in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
            spec = rj["template"]["spec"]
            self.console.print(
                f"  generated runtime {runtime['metadata']['name']}, {rj['name']}: restartPolicy "
                f"{spec['template']['spec']['restartPolicy']}, backoffLimit "
                f"{spec.get('backoffLimit')}, podFailurePolicy "
                f"{json.dumps(spec.get('podFailurePolicy'))}")
        table = Table(title="bus bandwidth per group", header_style="bold", title_justify="left")
        for col in ("job", "nodes", "busBW GB/s (Job)", "sizes measured", "busBW at max size"):
            table.add_column(col)
        measured = {m["spec"]["jobRef"]["name"]: m for m in self.stack.kubectl_json(
            "get", "bandwidthmeasurements", "-n", NAMESPACE)["items"]}
        rows = 0
        for job in sorted(self.stack.kubectl_json("get", "jobs.cre.dev", "-n", NAMESPACE)["items"],
                          key=lambda j: str(j["metadata"]["name"])):
            name = str(job["metadata"]["name"])
            results = ((measured.get(name) or {}).get("status") or {}).get("results") or []
            table.add_row(name, (job["metadata"].get("annotations") or {}).get(
                "cre.dev/group-nodes", "-"), str((job.get("status") or {}).get(
                    "busBandwidthGBps") or "-"), str(len(results)),
                str(results[-1]["busBW"]) if results else "-")
            rows += 1
        self.console.print(table)
        return member == "Succeeded" and rows == NODES // 2


def run_demo(*, time_scale: float, timeout: float, keep: bool) -> int:
    """The demo; 0 when the run Succeeded with every group measured."""
    console = demo_console()
    console.print(Panel(f"CRE demo: an MPI WorkloadRun ({RUN}) on a simulated {NODES}-node "
                        f"{PROFILE} cluster, 2 nodes per group", expand=False))

    def body(stack: Stack) -> bool:
        demo = RunDemo(stack, console, time_scale=time_scale, timeout=timeout)
        demo.start()
        demo.apply()
        return demo.report(demo.follow())

    return drive(Stack(keep=keep), console, body, scenario="workloadrun")
