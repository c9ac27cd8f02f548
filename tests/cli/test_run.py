"""``cre run FILE`` as a user types it, against the API emulator: the object is created, each
change prints one line, the verdict decides the exit code (0 / 9 / 10), the report goes to
``--results-file`` and ``--cleanup`` deletes the object; bad files, name clashes and
``--dry-run=server`` each say what happened."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from cre.cli.cluster import CERTIFICATIONS
from cre.kube.client import ApiError, KubeClient
from cre.testing.apiserver import Emulator

from .conftest import Run, RunCli, in_thread

pytestmark = pytest.mark.anyio
CERT = """\
apiVersion: cre.dev/v1alpha1
kind: Certification
metadata: {name: run-cert}
spec:
  target: {nodeSelector: {nvidia.com/gpu.present: "true"}}
  categories:
  - {domain: communication, variant: nccl-all-reduce}
"""
TRUE = {"status": "True", "lastTransitionTime": "2026-01-01T12:00:00Z"}


def _status(phase: str, verdict: str | None, reason: str, message: str) -> dict[str, Any]:
    kind = {"Running": "InProgress", "Succeeded": "Succeeded", "Failed": "Failed"}[phase]
    category: dict[str, Any] = {"domain": "communication", "variant": "nccl-all-reduce",
                                "status": "InProgress" if verdict is None else phase}
    if verdict:
        category |= {"verdict": verdict, "message": message}
    status: dict[str, Any] = {
        "phase": phase, "categories": "0/1", "categoryStatuses": [category],
        "conditions": [{"type": kind, "reason": reason, "message": message, **TRUE}]}
    if verdict:
        status["verdict"] = verdict
    return status


async def _drive(kubeconfig: str, *statuses: dict[str, Any]) -> None:
    """Play the manager: wait for the Certification, then write each status in turn."""
    client = await KubeClient.from_kubeconfig(kubeconfig)
    try:
        with anyio.fail_after(30):
            while True:
                try:
                    await client.get(CERTIFICATIONS, "run-cert", namespace="default")
                    break
                except ApiError:
                    await anyio.sleep(0.05)
            for status in statuses:
                await anyio.sleep(0.3)
                await client.patch(CERTIFICATIONS, "run-cert", {"status": status},
                                   namespace="default", subresource="status")
    finally:
        await client.close()


async def _run_driven(cre: RunCli, emulator: Emulator, args: list[str],
                      *statuses: dict[str, Any]) -> Run:
    result: list[Run] = []
    kubeconfig = str(emulator.kubeconfig_path)

    async def command() -> None:
        result.append(await in_thread(cre, "run", *args, "--kubeconfig", kubeconfig,
                                      "--interval", "0.1"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(command)
        await _drive(kubeconfig, *statuses)
    return result[0]


async def test_run_wait_follows_to_failed_exits_9_and_writes_the_report(
        kube_emulator: Emulator, cre: RunCli, tmp_path: Path) -> None:
    """Each change is one line; a Failed verdict exits 9; the report lands in the results
    file and --cleanup deletes the Certification."""
    path = tmp_path / "cert.yaml"
    path.write_text(CERT)
    results = tmp_path / "results.json"
    run = await _run_driven(
        cre, kube_emulator, [str(path), "--wait", "--results-file", str(results), "--cleanup"],
        _status("Running", None, "WorkflowRunning", "Certification in progress"),
        _status("Failed", "Failed", "WorkflowFailed", "1 of 1 groups failed"))
    assert run.code == 9, run.err
    ref = "Certification default/run-cert"
    assert run.out.splitlines() == [
        "certification.cre.dev/run-cert created",
        f"{ref}: Pending",
        f"{ref}: Running (InProgress/WorkflowRunning: Certification in progress)",
        f"{ref}: category communication/nccl-all-reduce: InProgress",
        f"{ref}: Failed (Failed/WorkflowFailed: 1 of 1 groups failed)",
        f"{ref}: category communication/nccl-all-reduce: Failed, verdict Failed: 1 of 1 "
        "groups failed",
        f"{ref}: Failed",
        "  communication/nccl-all-reduce: Failed (1 of 1 groups failed)",
        f"results written to {results}",
        "certification.cre.dev/run-cert deleted (--cleanup)",
    ]
    report = json.loads(results.read_text())
    assert report["kind"] == "CertificationReport"
    assert report["certification"]["name"] == "run-cert"
    assert report["summary"]["result"] == "FAILED"
    client = await KubeClient.from_kubeconfig(str(kube_emulator.kubeconfig_path))
    try:
        with pytest.raises(ApiError) as gone:
            await client.get(CERTIFICATIONS, "run-cert", namespace="default")
        assert gone.value.not_found
    finally:
        await client.close()


async def test_run_passed_exits_0(kube_emulator: Emulator, cre: RunCli, tmp_path: Path) -> None:
    """A Passed verdict exits 0 and prints the verdict and the category."""
    path = tmp_path / "cert.yaml"
    path.write_text(CERT)
    run = await _run_driven(cre, kube_emulator, [str(path), "--wait"],
                            _status("Succeeded", "Passed", "AllWorkflowsSucceeded", "ok"))
    assert run.code == 0, run.err
    assert run.out.splitlines()[-2:] == ["Certification default/run-cert: Passed",
                                         "  communication/nccl-all-reduce: Passed (ok)"]


async def test_run_timeout_exits_10_and_a_second_run_names_the_clash(
        kube_emulator: Emulator, cre: RunCli, tmp_path: Path) -> None:
    """No verdict before --timeout: 'not finished', exit 10; running the same file again
    refuses (exit 7) and says how to delete the earlier run."""
    path = tmp_path / "cert.yaml"
    path.write_text(CERT)
    kubeconfig = str(kube_emulator.kubeconfig_path)
    run = await in_thread(cre, "run", str(path), "--kubeconfig", kubeconfig, "--timeout",
                          "0.3", "--interval", "0.1")
    assert run.code == 10, run.err
    assert ("Certification default/run-cert: not finished after 0.3s (--timeout)"
            in run.out.splitlines())
    again = await in_thread(cre, "run", str(path), "--kubeconfig", kubeconfig)
    assert again.code == 7
    assert again.err == ("cre: Certification default/run-cert already exists: delete it "
                         "(kubectl delete certification.cre.dev/run-cert -n default) or give "
                         "the run another name\n")


async def test_run_without_wait_and_dry_run(kube_emulator: Emulator, cre: RunCli,
                                            tmp_path: Path) -> None:
    """--dry-run=server stores nothing; without --wait the command says how to follow it."""
    path = tmp_path / "cert.yaml"
    path.write_text(CERT)
    kubeconfig = str(kube_emulator.kubeconfig_path)
    dry = await in_thread(cre, "run", str(path), "--kubeconfig", kubeconfig,
                          "--dry-run", "server")
    assert (dry.code, dry.out) == (0, "certification.cre.dev/run-cert created (server dry "
                                      "run)\n")
    real = await in_thread(cre, "run", str(path), "--kubeconfig", kubeconfig, "-n", "default")
    assert (real.code, real.out) == (0, "certification.cre.dev/run-cert created\nfollow it: "
                                        "cre status run-cert -n default --watch\n")


@pytest.mark.parametrize(("text", "message"), [
    ("kind: ConfigMap\napiVersion: v1\nmetadata: {name: x}\n",
     "expected exactly one Certification, Workflow, WorkloadRun, Job of cre.dev, found "
     "ConfigMap"),
    ("apiVersion: cre.dev/v1alpha1\nkind: Certification\nmetadata: {}\nspec: {}\n",
     "Certification: metadata.name: required"),
    ("a: [\n", "not valid YAML"),
])
def test_run_rejects_a_bad_file_with_exit_3(cre: RunCli, tmp_path: Path, text: str,
                                            message: str) -> None:
    """A file without exactly one runnable CRE object, or broken YAML: exit 3 naming it."""
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    run = cre("run", str(path), "--kubeconfig", str(tmp_path / "unused"))
    assert run.code == 3, run.err
    assert run.err.startswith(f"cre: {path}: ") and message in run.err
