"""``cre cluster up|info|down`` as a user types them: a detached emulated cluster whose nodes
are Ready, what CRE finds on it, and a clean stop; ``cluster_facts`` on nodes that are not
eligible."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cre.catalog import load_catalog
from cre.cli.clusterup import cluster_facts

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD_RUN = """\
apiVersion: cre.dev/v1alpha1
kind: WorkloadRun
metadata: {name: wr}
spec:
  image: nvcr.io/nvidia/pytorch:26.01-py3
  numNodes: 2
  framework:
    mpi: {binary: /usr/local/bin/all_reduce_perf_mpi, mpirunPath: /usr/local/mpi/bin/mpirun,
          args: ["-b", "8", "-e", "8G", "-f", "2", "-n", "100"]}
  bandwidthMeasurement: {logProfileRef: nccl-bandwidth, testType: all_reduce}
"""
CERT = """\
apiVersion: cre.dev/v1alpha1
kind: Certification
metadata: {name: c}
spec:
  target: {nodeSelector: {nvidia.com/gpu.present: "true"}}
  thresholds: {busBandwidthGBps: "value >= 300"}
  categories:
  - {domain: communication, variant: nccl-all-reduce}
"""


def _cre(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "COLUMNS": "200",
           "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "cre.cli", *args], capture_output=True,
                          text=True, env=env, timeout=300, check=False)


@pytest.mark.slow
def test_cluster_up_info_run_down(tmp_path: Path) -> None:
    """`up` returns with every node Ready and prints the kubeconfig and how to use it; `info`
    reads that cluster; `cre run --wait` takes a Certification and a WorkloadRun to Passed
    through the manager `up` started and `cre report workloadrun/NAME` reports the run's
    nodes; `down` stops every process it started and a second `down` exits 6."""
    up = _cre("cluster", "up", "--name", "t", "--nodes", "2", "--manager", "--time-scale", "50",
              cache=tmp_path)
    try:
        assert up.returncode == 0, up.stderr
        kubeconfig = tmp_path / "cre" / "cluster" / "t" / "kubeconfig"
        assert up.stderr == 'Creating cluster "t" (2 aws-h100 nodes, cre-manager) ...\n'
        assert up.stdout.splitlines() == [
            'Cluster "t" is up: 2 aws-h100 nodes Ready, API emulator (cre.testing.apiserver), '
            "cre-manager.",
            f"kubeconfig: {kubeconfig}",
            "",
            "Use it:",
            f"  export KUBECONFIG={kubeconfig}",
            "  kubectl get nodes",
            "  cre cluster info",
            "  cre run certification.yaml --wait",
            "Stop it:",
            "  cre cluster down --name t",
        ]
        again = _cre("cluster", "up", "--name", "t", cache=tmp_path)
        assert again.returncode == 2 and "is already up" in again.stderr
        info = _cre("cluster", "info", "--kubeconfig", str(kubeconfig), cache=tmp_path)
        assert info.returncode == 0, info.stderr
        rows = dict(line.split(":", 1) for line in info.stdout.splitlines())
        assert rows["Nodes"].strip() == "2 (2 with nvidia.com/gpu.present=true)"
        assert rows["GPU nodes"].strip() == "2 Ready, 0 not Ready, 0 cordoned"
        assert rows["Platform"].strip() == "aws" and rows["Architecture"].strip() == "h100"
        assert rows["Eligible nodes"].strip() == "2"
        assert "topology.kubernetes.io/zone: us-east-1a (2)" in rows["Topology"]
        assert "communication/nccl-all-reduce" in rows["CRE would run"]
        cert = tmp_path / "cert.yaml"
        cert.write_text(CERT)
        run = _cre("run", str(cert), "--kubeconfig", str(kubeconfig), "--timeout", "240",
                   "--interval", "0.5", "--cleanup", cache=tmp_path)
        assert run.returncode == 0, run.stdout + run.stderr
        assert run.stdout.splitlines()[-3:] == [
            "Certification default/c: Passed",
            "  communication/nccl-all-reduce: Passed (1 iteration completed successfully)",
            "certification.cre.dev/c deleted (--cleanup)"]
        wr = tmp_path / "wr.yaml"
        wr.write_text(WORKLOAD_RUN)
        run = _cre("run", str(wr), "--kubeconfig", str(kubeconfig), "--timeout", "240",
                   "--interval", "0.5", cache=tmp_path)
        assert run.returncode == 0, run.stdout + run.stderr
        assert run.stdout.splitlines()[-1] == "WorkloadRun default/wr: Passed"
        report = _cre("report", "workloadrun/wr", "--kubeconfig", str(kubeconfig), "--json",
                      cache=tmp_path)
        assert report.returncode == 0, report.stderr
        doc = json.loads(report.stdout)
        assert doc["summary"]["result"] == "PASSED" and doc["summary"]["nodes"] == 2
        assert [n["verdict"] for n in doc["categories"][0]["nodes"]] == ["Passed", "Passed"]
    finally:
        down = _cre("cluster", "down", "--name", "t", cache=tmp_path)
    assert down.returncode == 0, down.stderr
    assert down.stdout == 'Cluster "t" deleted (apiserver, cluster, manager).\n'
    assert not (tmp_path / "cre" / "cluster" / "t").exists()
    gone = _cre("cluster", "down", "--name", "t", cache=tmp_path)
    assert gone.returncode == 6 and gone.stderr == 'cre: no cluster "t" (known: none)\n'


def test_cluster_up_with_an_unknown_profile_is_a_usage_error(tmp_path: Path) -> None:
    """An unknown --profile: exit 2 and one line listing the known profiles."""
    up = _cre("cluster", "up", "--name", "bad", "--profile", "nope", cache=tmp_path)
    assert up.returncode == 2
    assert up.stderr.splitlines()[-1].startswith(
        "cre: argument --profile: invalid choice: 'nope' (choose from 'aws-gb200'")


def _node(name: str, *, ready: str = "True", cordoned: bool = False) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true",
                                                  "nvidia.com/gpu.product":
                                                  "NVIDIA-H100-80GB-HBM3"}},
            "spec": {"providerID": f"aws:///us-east-1a/i-{name}", "unschedulable": cordoned},
            "status": {"allocatable": {"nvidia.com/gpu": "8"},
                       "conditions": [{"type": "Ready", "status": ready}]}}


def test_cluster_facts_say_why_no_node_is_eligible() -> None:
    """GPU nodes that are NotReady or cordoned: info counts them and says CRE would run nothing
    yet, naming each node under its reason."""
    rows = dict(cluster_facts(host="https://h", catalog=load_catalog(), nodes=[
        _node("a", ready="Unknown"), _node("b", cordoned=True)]))
    assert rows["GPU nodes"] == "1 Ready, 1 not Ready, 1 cordoned"
    assert rows["Topology"] == "no topology labels"
    assert rows["CRE would run"] == ("nothing yet: 2 GPU node(s) match but none is eligible: "
                                     "1 Cordoned (b), 1 NotReady (a)")


def test_cluster_facts_on_nodes_of_two_platforms() -> None:
    """GPU nodes of two platforms: info says CRE would run nothing and names both."""
    gcp = _node("g")
    gcp["spec"]["providerID"] = "gce://p/z/g"
    rows = dict(cluster_facts(host="https://h", catalog=load_catalog(), nodes=[_node("a"), gcp]))
    assert rows["CRE would run"] == ("nothing: Target nodes span 2 platforms: aws (e.g. a), "
                                     "gcp (e.g. g); select nodes of one platform per Workflow")


def test_cluster_facts_without_gpu_nodes() -> None:
    """A cluster without GPU Feature Discovery labels: info says CRE has nothing to certify."""
    rows = dict(cluster_facts(host="https://h", catalog=load_catalog(), nodes=[]))
    assert rows["Nodes"] == "0 (0 with nvidia.com/gpu.present=true)"
    assert rows["CRE would run"].startswith("nothing: no GPU node")
