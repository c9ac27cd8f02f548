"""``cre render FILE`` as a user types it: every Workflow, dependency copy, Job and TrainJob a
Certification or Workflow would create on the given nodes, offline, decided by the pure cores;
``--nodes-file`` reads real Nodes; ``--dry-run server`` sends them to a cluster, storing none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from cre.cli.cluster import WORKFLOWS
from cre.kube.client import KubeClient
from cre.testing.apiserver import Emulator

from .conftest import RunCli, in_thread

CERT = """\
apiVersion: cre.dev/v1alpha1
kind: Certification
metadata: {name: gpu-cert, namespace: team-a}
spec:
  target: {nodeSelector: {nvidia.com/gpu.present: "true"}}
  thresholds: {busBandwidthGBps: "value >= 300"}
  categories:
  - {domain: communication, variant: nccl-all-reduce, options: {nodesPerJob: 2}}
  - {domain: communication, variant: nccl-loopback}
"""
AR = "gpu-cert-communication-nccl-all-reduce"
LB = "gpu-cert-communication-nccl-loopback"


def _docs(text: str) -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe", pure=True).load_all(text) if d]


def _kinds(docs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(d["kind"], d["metadata"]["name"]) for d in docs]


def test_render_certification_file_lists_everything_it_would_create(
        cre: RunCli, tmp_path: Path) -> None:
    """Both categories' Workflows, each group's runtime copy, Job and TrainJob, in creation
    order, every Job pinned to its group's nodes (the single-node loopback runs one Job per
    node); the partition is noted on stderr."""
    path = tmp_path / "cert.yaml"
    path.write_text(CERT)
    run = cre("render", str(path), "--platform", "aws", "--arch", "h100", "--node-count", "4")
    assert run.code == 0, run.err
    docs = _docs(run.out)
    kinds = _kinds(docs)
    assert [k for k, _ in kinds] == [
        "Workflow", "TrainingRuntime", "Job", "TrainJob", "TrainingRuntime", "Job", "TrainJob",
        "Workflow", *["TrainingRuntime", "Job", "TrainJob"] * 4]
    assert kinds[0] == ("Workflow", AR) and kinds[7] == ("Workflow", LB)
    assert kinds[2] == ("Job", f"{AR}-group-0-iter-1")
    assert kinds[5] == ("Job", f"{AR}-group-1-iter-1")
    assert docs[2]["metadata"]["annotations"]["cre.dev/group-nodes"] == "node-01,node-02"
    assert docs[5]["metadata"]["annotations"]["cre.dev/group-nodes"] == "node-03,node-04"
    assert all(d["metadata"]["namespace"] == "team-a" for d in docs)
    assert docs[3]["metadata"]["ownerReferences"][0]["name"] == f"{AR}-group-0-iter-1"
    assert run.err.splitlines() == [
        f"Workflow team-a/{AR}: 4 nodes on aws/h100, 2 group(s) of 2",
        f"Workflow team-a/{LB}: 4 nodes on aws/h100, 4 group(s) of 1"]


def test_render_workflow_file_gives_the_same_jobs(cre: RunCli, tmp_path: Path) -> None:
    """The Workflow a Certification renders, rendered on its own, creates the same Jobs and
    TrainJobs (one code path decides both)."""
    path = tmp_path / "cert.yaml"
    path.write_text(CERT)
    whole = _docs(cre("render", str(path), "--platform", "aws", "--arch", "h100",
                      "--node-count", "4").out)
    wf = tmp_path / "workflow.yaml"
    YAML(typ="safe", pure=True).dump(whole[0], wf.open("w"))
    alone = cre("render", str(wf), "--platform", "aws", "--arch", "h100", "--node-count", "4",
                "-o", "json")
    assert alone.code == 0, alone.err
    items = json.loads(alone.out)["items"]
    assert [(d["kind"], d["metadata"]["name"]) for d in items] == _kinds(whole[1:7])
    assert [d["spec"] for d in items if d["kind"] == "Job"] == [
        d["spec"] for d in whole[1:7] if d["kind"] == "Job"]


def _node(name: str, ready: str = "True") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true",
                                                  "nvidia.com/gpu.product": "NVIDIA-GB200"}},
            "spec": {"providerID": f"aws:///us-east-1a/i-{name}"},
            "status": {"allocatable": {"nvidia.com/gpu": "4"},
                       "conditions": [{"type": "Ready", "status": ready}]}}


def test_render_with_nodes_file_reads_platform_arch_and_readiness(
        cre: RunCli, tmp_path: Path) -> None:
    """Real Nodes (kubectl get nodes -o yaml): platform and architecture come from them and a
    NotReady node is left out, as the controllers would."""
    path = tmp_path / "cert.yaml"
    path.write_text(CERT)
    nodes = tmp_path / "nodes.yaml"
    YAML(typ="safe", pure=True).dump(
        {"apiVersion": "v1", "kind": "List",
         "items": [_node("n1"), _node("n2"), _node("n3", ready="False")]}, nodes.open("w"))
    run = cre("render", str(path), "--nodes-file", str(nodes))
    assert run.code == 0, run.err
    assert f"Workflow team-a/{AR}: 2 nodes on aws/gb200, 1 group(s) of 2" in run.err
    assert "1 NotReady node(s) excluded (n3)" in run.err


@pytest.mark.parametrize(("args", "message"), [
    (["--option", "iterations=2"], "--options: only for a catalog ENTRY"),
    (["--node-count", "2"], "--platform and --arch are needed with --nodes or --node-count"),
])
def test_render_file_usage_errors(cre: RunCli, tmp_path: Path, args: list[str],
                                  message: str) -> None:
    """Entry-only flags with a FILE, or nodes without a platform: exit 2 naming the fix."""
    path = tmp_path / "cert.yaml"
    path.write_text(CERT)
    run = cre("render", str(path), *args)
    assert run.code == 2 and message in run.err, run.err


def test_render_entry_rejects_file_only_flags(cre: RunCli) -> None:
    """--dry-run belongs to FILE rendering; with a catalog entry it is a usage error."""
    run = cre("render", "communication/nccl-all-reduce", "--platform", "aws", "--arch", "h100",
              "--node-count", "2", "--dry-run", "server")
    assert run.code == 2
    assert run.err == ("cre: --dry-run: only when rendering a Certification or Workflow "
                       "FILE\n")


@pytest.mark.anyio
async def test_render_dry_run_server_stores_nothing(kube_emulator: Emulator, cre: RunCli,
                                                    tmp_path: Path) -> None:
    """--dry-run server: one 'created (server dry run)' line per object, and the cluster
    holds no Workflow afterwards."""
    path = tmp_path / "cert.yaml"
    path.write_text(CERT.replace("team-a", "default"))
    run = await in_thread(cre, "render", str(path), "--platform", "aws", "--arch", "h100",
                          "--node-count", "2", "--dry-run", "server", "--kubeconfig",
                          str(kube_emulator.kubeconfig_path))
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0] == f"workflow.cre.dev/{AR} created (server dry run)"
    assert f"job.cre.dev/{AR}-job created (server dry run)" in lines
    assert all(line.endswith(" created (server dry run)") for line in lines)
    client = await KubeClient.from_kubeconfig(str(kube_emulator.kubeconfig_path))
    try:
        assert (await client.list(WORKFLOWS, namespace="default"))["items"] == []
    finally:
        await client.close()
