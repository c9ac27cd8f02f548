"""Helpers of the end-to-end tests: render and apply a Job, wait for phases, read metrics."""

from __future__ import annotations

import subprocess
import sys

from cre.testing.procs import Stack, wait_until

NODES = 8
SIM_TIME_SCALE = 10.0


def create_namespace(stack: Stack, name: str) -> None:
    """``kubectl apply`` of a Namespace (idempotent, unlike ``kubectl create namespace``)."""
    stack.kubectl("apply", "-f", "-",
                  stdin=f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}}}\n")


def gpu_nodes(stack: Stack) -> list[str]:
    items = stack.kubectl_json("get", "nodes", "-l", "nvidia.com/gpu.present=true")["items"]
    return sorted(n["metadata"]["name"] for n in items)


def apply_job(stack: Stack, name: str, *, nodes: list[str], fail: bool = False) -> None:
    """Render the NCCL all-reduce Job (with its TrainingRuntime) and kubectl-apply it; with
    ``fail`` its launcher gets a size nccl-tests cannot parse (``-e infG``) and exits 1."""
    rendered = subprocess.run(
        [sys.executable, "-m", "cre.render", "--entry", "communication/nccl-all-reduce",
         "--platform", "aws", "--arch", "h100", "--nodes", ",".join(nodes), "--job-name", name],
        capture_output=True, text=True, check=True).stdout
    if fail:
        assert "\n        - 16G\n" in rendered
        rendered = rendered.replace("\n        - 16G\n", "\n        - infG\n")
    stack.kubectl("apply", "-f", "-", stdin=rendered)


def job_phase(stack: Stack, name: str) -> str:
    job = stack.kubectl_json("get", "jobs.cre.dev", name)
    return str((job.get("status") or {}).get("phase") or "")


def wait_phase(stack: Stack, name: str, phase: str, *, timeout: float = 120.0) -> None:
    wait_until(lambda: job_phase(stack, name) == phase, timeout=timeout,
               what=f"Job {name} to reach {phase}", interval=0.2)


def metric(text: str, metric_name: str, /, **labels: str) -> float:
    """Sum of the samples of ``metric_name`` whose labels include ``labels`` (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith((metric_name + "{", metric_name + " ")):
            continue
        series, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in series for k, v in labels.items()):
            total += float(value)
    return total


def emulator_faults(stack: Stack, spec: dict[str, object]) -> None:
    """Configure the emulator's fault injection over its control API."""
    import json
    import urllib.request

    from ruamel.yaml import YAML

    config = YAML(typ="safe").load(stack.kubeconfig.read_text())
    url = config["clusters"][0]["cluster"]["server"] + "/_emulator/faults"
    req = urllib.request.Request(url, data=json.dumps(spec).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200
