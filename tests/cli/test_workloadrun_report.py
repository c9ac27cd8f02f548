"""``cre status|report workloadrun/NAME`` and ``cre report CERT1 CERT2`` as a user types them,
against the API emulator holding the golden Certification fixture plus a WorkloadRun whose
Workflow is the fixture's all-reduce Workflow."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cre.cli.cluster import CERTIFICATIONS
from cre.cli.workloadrunview import WORKLOADRUNS
from cre.kube.client import KubeClient
from cre.testing.apiserver import Emulator

from .conftest import RunCli, fixture_documents, in_thread

pytestmark = pytest.mark.anyio
WF = "gpu-cert-communication-nccl-all-reduce"
RUN: dict[str, Any] = {
    "apiVersion": "cre.dev/v1alpha1", "kind": "WorkloadRun",
    "metadata": {"name": "wr", "namespace": "team-a"},
    "spec": {"image": "nvcr.io/nvidia/pytorch:26.01-py3", "numNodes": 2,
             "framework": {"mpi": {"binary": "/usr/local/bin/all_reduce_perf_mpi",
                                   "mpirunPath": "/usr/local/mpi/bin/mpirun"}}},
}
RUN_STATUS: dict[str, Any] = {
    "phase": "Failed", "workflowRef": {"name": WF, "namespace": "team-a"},
    "detectedPlatform": "aws", "detectedGPUArchitecture": "h100", "resolvedGpusPerNode": 8,
    "conditions": [{"type": "Failed", "status": "True", "reason": "WorkflowFailed",
                    "message": "Workflow failed", "lastTransitionTime": "2026-01-01T12:00:00Z"}],
}


@pytest.fixture
async def with_run(gpu_cert: Emulator) -> AsyncIterator[Emulator]:
    """The fixture, a WorkloadRun pointing at its all-reduce Workflow, and a second
    Certification (a copy of gpu-cert named gpu-cert-2)."""
    client = await KubeClient.from_kubeconfig(str(gpu_cert.kubeconfig_path))
    try:
        await client.create(WORKLOADRUNS, RUN, namespace="team-a")
        await client.patch(WORKLOADRUNS, "wr", {"status": RUN_STATUS}, namespace="team-a",
                           subresource="status")
        cert = next(d for d in fixture_documents() if d["kind"] == "Certification")
        copy = {**{k: v for k, v in cert.items() if k != "status"},
                "metadata": {"name": "gpu-cert-2", "namespace": "team-a"}}
        await client.create(CERTIFICATIONS, copy, namespace="team-a")
        await client.patch(CERTIFICATIONS, "gpu-cert-2", {"status": cert["status"]},
                           namespace="team-a", subresource="status")
    finally:
        await client.close()
    yield gpu_cert


async def test_status_workloadrun_draws_its_workflow_groups_and_jobs(
        with_run: Emulator, cre: RunCli) -> None:
    """The tree: the run with phase, verdict, reason and where it ran, then its Workflow,
    each group with its nodes and each group's Job."""
    run = await in_thread(cre, "status", "workloadrun/wr", "-n", "team-a", "--kubeconfig",
                          str(with_run.kubeconfig_path))
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0] == ("WorkloadRun team-a/wr  Failed  Failed  WorkflowFailed  on aws/h100, "
                        "8 GPU(s)/node")
    assert lines[1].startswith(f"└── Workflow {WF}  Failed  Failed")
    assert any(f"Job {WF}-group-1" in line for line in lines)
    assert any("group group-1 (gpu-03,gpu-04)" in line for line in lines)


async def test_status_workloadrun_watch_stops_at_a_terminal_run(with_run: Emulator,
                                                                cre: RunCli) -> None:
    """--watch on a finished WorkloadRun prints the tree once and returns; -A is refused."""
    kubeconfig = str(with_run.kubeconfig_path)
    run = await in_thread(cre, "status", "workloadrun/wr", "-n", "team-a", "--kubeconfig",
                          kubeconfig, "--watch", "--interval", "0.1")
    assert run.code == 0, run.err
    assert run.out.count("WorkloadRun team-a/wr") == 1
    every = await in_thread(cre, "status", "workloadrun/wr", "-A", "--kubeconfig", kubeconfig)
    assert (every.code, every.err) == (2, "cre: -A: not with workloadrun/NAME\n")


async def test_report_workloadrun_json_matches_the_certification_category(
        with_run: Emulator, cre: RunCli) -> None:
    """A WorkloadRun's JSON report has its own kind and key, and the same groups and nodes
    as the Certification category that ran the same Workflow."""
    kubeconfig = str(with_run.kubeconfig_path)
    run = await in_thread(cre, "report", "workloadrun/wr", "-n", "team-a", "--kubeconfig",
                          kubeconfig, "--json")
    assert run.code == 0, run.err
    doc = json.loads(run.out)
    assert doc["kind"] == "WorkloadRunReport" and "certification" not in doc
    assert doc["workloadRun"]["name"] == "wr" and doc["workloadRun"]["verdict"] == "Failed"
    assert doc["categories"][0]["entry"] == "workloadrun/wr"
    cert = json.loads((await in_thread(cre, "report", "gpu-cert", "-n", "team-a",
                                       "--kubeconfig", kubeconfig, "--json")).out)
    assert doc["categories"][0]["nodes"] == cert["categories"][0]["nodes"]
    assert doc["categories"][0]["groups"] == cert["categories"][0]["groups"]


async def test_report_workloadrun_tables_html_and_not_found(with_run: Emulator, cre: RunCli,
                                                            tmp_path: Path) -> None:
    """The table view heads with the run and its result; --html writes the same report as a
    page; an unknown run exits 6 naming it."""
    kubeconfig = str(with_run.kubeconfig_path)
    run = await in_thread(cre, "report", "workloadrun/wr", "-n", "team-a", "--kubeconfig",
                          kubeconfig)
    assert run.code == 0, run.err
    assert run.out.splitlines()[0] == "WorkloadRun team-a/wr  result FAILED  nodes 6  failed " \
                                      "nodes 4"
    assert f"Workflow {WF}: Failed" in run.out
    html = tmp_path / "wr.html"
    page = await in_thread(cre, "report", "workloadrun/wr", "-n", "team-a", "--kubeconfig",
                           kubeconfig, "--html", str(html))
    assert page.code == 0 and page.err == f"wrote {html}\n"
    text = html.read_text()
    assert "CRE report: team-a/wr" in text and "workloadrun/wr" in text and "gpu-03" in text
    gone = await in_thread(cre, "report", "workloadrun/nosuch", "-n", "team-a",
                           "--kubeconfig", kubeconfig)
    assert gone.code == 6
    assert gone.err == ("cre: WorkloadRun team-a/nosuch not found (kubectl get workloadruns "
                        "-n team-a lists them)\n")


async def test_report_several_certifications(with_run: Emulator, cre: RunCli) -> None:
    """Two Certifications: both reports, then one line across them; as JSON a List of both
    reports with a summary counting results and naming every failed node."""
    kubeconfig = str(with_run.kubeconfig_path)
    both = await in_thread(cre, "report", "gpu-cert", "gpu-cert-2", "-n", "team-a",
                           "--kubeconfig", kubeconfig, "--json")
    assert both.code == 0, both.err
    doc = json.loads(both.out)
    assert doc["kind"] == "List"
    assert [i["certification"]["name"] for i in doc["items"]] == ["gpu-cert", "gpu-cert-2"]
    failed = doc["items"][0]["summary"]["failedNodes"]
    assert failed
    assert doc["summary"] == {
        "certifications": 2, "results": {"FAILED": 2},
        "failedNodes": [f"team-a/gpu-cert:{n}" for n in failed]
                       + [f"team-a/gpu-cert-2:{n}" for n in failed]}
    text = await in_thread(cre, "report", "gpu-cert", "gpu-cert-2", "-n", "team-a",
                           "--kubeconfig", kubeconfig)
    assert text.code == 0, text.err
    assert text.out.count("Certification team-a/gpu-cert") == 2
    assert text.out.splitlines()[-1].startswith("2 Certifications: 2 FAILED; failed nodes: "
                                                "team-a/gpu-cert:")


async def test_report_several_with_html_or_a_workloadrun_is_a_usage_error(
        with_run: Emulator, cre: RunCli) -> None:
    """--html takes one Certification, and a WorkloadRun is reported on its own: exit 2."""
    kubeconfig = str(with_run.kubeconfig_path)
    html = await in_thread(cre, "report", "gpu-cert", "gpu-cert-2", "--html", "x.html",
                           "--kubeconfig", kubeconfig)
    assert (html.code, html.err) == (2, "cre: --html: one Certification per HTML file\n")
    mixed = await in_thread(cre, "report", "gpu-cert", "workloadrun/wr", "--kubeconfig",
                            kubeconfig)
    assert mixed.code == 2 and "one WorkloadRun at a time" in mixed.err
