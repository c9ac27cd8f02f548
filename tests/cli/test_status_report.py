"""``cre status`` and ``cre report`` read a Certification's tree from a cluster (the API
emulator holding the golden fixture) and show it; the report's JSON is a reviewed golden."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from cre.cli.cluster import CERTIFICATIONS
from cre.cli.session import write_html_report
from cre.kube.client import KubeClient
from cre.testing.apiserver import Emulator

from .conftest import Run, RunCli, in_thread

GOLDEN = Path(__file__).parent / "goldens" / "report-gpu-cert.json"
pytestmark = pytest.mark.anyio


async def test_status_draws_the_tree_down_to_jobs_with_busbw(gpu_cert: Emulator,
                                                             cre: RunCli) -> None:
    """Every level shows up with its phase, verdict, reason and measured busBW."""
    run = await in_thread(cre, "status", "gpu-cert", "-n", "team-a",
                          "--kubeconfig", str(gpu_cert.kubeconfig_path))
    assert run.code == 0, run.err
    out = run.out
    assert "Certification team-a/gpu-cert (1/2 categories passed)" in out
    assert "Failed" in out and "verdict Failed" in out and "WorkflowFailed" in out
    assert "communication/nccl-all-reduce" in out and "diagnostics/dcgm-level1" in out
    assert "Workflow gpu-cert-communication-nccl-all-reduce" in out
    assert "group group-1 (gpu-03,gpu-04)" in out and "JobFailed [Workload]" in out
    assert "Job gpu-cert-communication-nccl-all-reduce-group-0" in out
    assert "busBW 352.17 GB/s" in out and "busBW 210.40 GB/s" in out
    assert "ThresholdViolation" in out


async def test_status_without_a_name_lists_every_certification(gpu_cert: Emulator,
                                                               cre: RunCli) -> None:
    """``cre status -A`` finds the fixture's Certification in its namespace."""
    run = await in_thread(cre, "status", "-A", "--kubeconfig", str(gpu_cert.kubeconfig_path))
    assert run.code == 0, run.err
    assert "Certification team-a/gpu-cert" in run.out


async def test_status_watch_returns_once_terminal(gpu_cert: Emulator, cre: RunCli) -> None:
    """``--watch`` on a finished Certification draws once and returns 0."""
    run = await in_thread(cre, "status", "gpu-cert", "-n", "team-a", "--watch",
                          "--interval", "0.05", "--kubeconfig", str(gpu_cert.kubeconfig_path))
    assert run.code == 0, run.err
    assert "Certification team-a/gpu-cert" in run.out


async def test_report_tables_name_verdict_reason_class_and_busbw(gpu_cert: Emulator,
                                                                 cre: RunCli) -> None:
    """The terminal report has one row per node and category with its outcome."""
    run = await in_thread(cre, "report", "gpu-cert", "-n", "team-a",
                          "--kubeconfig", str(gpu_cert.kubeconfig_path))
    assert run.code == 0, run.err
    assert "result FAILED" in run.out and "categories passed 1/2" in run.out
    assert "failed nodes 4" in run.out
    rows = [line for line in run.out.splitlines() if line.startswith("gpu-0")]
    assert len(rows) == 12  # 6 nodes x 2 categories
    assert any("gpu-05" in r and "ThresholdViolation" in r and "210.40" in r for r in rows)
    assert any("gpu-03" in r and "WorkloadFailed" in r and "Workload: LauncherExitedNonZero"
               in r for r in rows)


async def test_report_opens_with_the_headline_and_the_log_lines_that_matter(
        gpu_cert: Emulator, cre: RunCli) -> None:
    """The first lines after the summary are the headline and the failure log's NCCL WARN and
    error lines, never the NCCL INFO rank chatter."""
    run = await in_thread(cre, "report", "gpu-cert", "-n", "team-a",
                          "--kubeconfig", str(gpu_cert.kubeconfig_path))
    lines = run.out.splitlines()
    assert lines[1].startswith("WorkflowFailed: Category communication/nccl-all-reduce failed")
    assert lines[2].startswith("failure log (communication/nccl-all-reduce group-1")
    assert "NCCL WARN Net : Connection closed by remote peer" in lines[3]
    assert "Test NCCL failure all_reduce.cu:58" in lines[4]
    assert not any("NCCL INFO" in line for line in lines[:8])


async def test_report_json_matches_its_golden(gpu_cert: Emulator, cre: RunCli,
                                              request: pytest.FixtureRequest) -> None:
    """``cre report --json`` for the fixture is the reviewed golden (``--update-goldens``)."""
    run = await in_thread(cre, "report", "gpu-cert", "-n", "team-a", "--json",
                          "--kubeconfig", str(gpu_cert.kubeconfig_path))
    assert run.code == 0, run.err
    json.loads(run.out)
    if request.config.getoption("--update-goldens"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(run.out, encoding="utf-8")
    assert GOLDEN.is_file(), f"{GOLDEN} missing: run pytest {__file__} --update-goldens"
    assert run.out == GOLDEN.read_text(encoding="utf-8")


async def test_watch_redraws_until_the_certification_finishes(gpu_cert: Emulator,
                                                              cre: RunCli) -> None:
    """``--watch`` keeps polling a running Certification and returns once it is terminal,
    showing the final state."""
    client = await KubeClient.from_kubeconfig(str(gpu_cert.kubeconfig_path))
    try:
        cert = await client.get(CERTIFICATIONS, "gpu-cert", namespace="team-a")
        finished = cert["status"]
        running = {**finished, "phase": "Running", "verdict": None}
        await client.patch(CERTIFICATIONS, "gpu-cert", {"status": running}, namespace="team-a",
                           subresource="status")
        result: list[Run] = []
        returned = anyio.Event()
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                result.append(await in_thread(
                    cre, "status", "gpu-cert", "-n", "team-a", "--watch", "--interval", "0.05",
                    "--kubeconfig", str(gpu_cert.kubeconfig_path)))
                returned.set()

            tg.start_soon(watch)
            await anyio.sleep(1.0)
            assert not result, "watch returned while the Certification was running"
            await client.patch(CERTIFICATIONS, "gpu-cert", {"status": finished},
                               namespace="team-a", subresource="status")
            with anyio.fail_after(60):
                await returned.wait()
    finally:
        await client.close()
    assert result[0].code == 0, result[0].err
    assert "verdict Failed" in result[0].out


async def test_write_html_report_for_programs(gpu_cert: Emulator, tmp_path: Path) -> None:
    """The function the demo calls writes the same page ``cre report --html`` writes."""
    target = tmp_path / "report.html"
    path = await anyio.to_thread.run_sync(lambda: write_html_report(
        "gpu-cert", path=target, namespace="team-a",
        kubeconfig=str(gpu_cert.kubeconfig_path)))
    assert path == target
    text = target.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "CRE report: team-a/gpu-cert" in text
