"""``cre`` in scripts and CI: ``status --watch`` off a terminal prints one line per change,
``--exit-code`` exits by verdict, ``report -o table|wide|json|yaml`` never cuts a name, and
``cre --help`` / TAB completion load only click (the commands import what they need)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO

import anyio
import pytest
from ruamel.yaml import YAML

from cre.cli import root
from cre.cli.cluster import CERTIFICATIONS, DEFAULT_TIMEOUT
from cre.cli.exitcodes import ExitCode
from cre.kube.client import KubeClient
from cre.testing.apiserver import Emulator

from .conftest import ROOT, Run, RunCli, in_thread

pytestmark = pytest.mark.anyio
TREE_HEAD = [
    "Certification team-a/gpu-cert (1/2 categories passed)  Failed  verdict Failed  "
    "WorkflowFailed",
    "  communication/nccl-all-reduce  Failed  verdict Failed  2 of 3 groups failed",
    "    Workflow gpu-cert-communication-nccl-all-reduce  Failed  verdict Failed  "
    "IterationsFailed",
    "      group group-0 (gpu-01,gpu-02)  Succeeded",
    "        Job gpu-cert-communication-nccl-all-reduce-group-0  Succeeded  WorkloadCompleted  "
    "busBW 352.17 GB/s",
]


async def _set_status(emu: Emulator, **changes: object) -> dict[str, object]:
    """Patch the fixture Certification's status; returns the status it had."""
    client = await KubeClient.from_kubeconfig(str(emu.kubeconfig_path))
    try:
        cert = await client.get(CERTIFICATIONS, "gpu-cert", namespace="team-a")
        before: dict[str, object] = cert["status"]
        await client.patch(CERTIFICATIONS, "gpu-cert", {"status": {**before, **changes}},
                           namespace="team-a", subresource="status")
        return before
    finally:
        await client.close()


async def test_watch_off_a_terminal_prints_the_tree_then_one_line_per_change(
        gpu_cert: Emulator, cre: RunCli) -> None:
    """Piped, ``--watch`` prints the tree once (no ages), then only the lines that changed,
    and with ``--exit-code`` exits 9 once the verdict is Failed."""
    finished = await _set_status(gpu_cert, phase="Running", verdict=None)
    result: list[Run] = []
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            result.append(await in_thread(
                cre, "status", "gpu-cert", "-n", "team-a", "--watch", "--exit-code",
                "--interval", "0.05", "--kubeconfig", str(gpu_cert.kubeconfig_path)))

        tg.start_soon(watch)
        await anyio.sleep(1.0)
        assert not result, "watch returned while the Certification was running"
        await _set_status(gpu_cert, **finished)
    lines = result[0].out.splitlines()
    assert result[0].code == ExitCode.VERDICT_FAILED, result[0].err
    assert lines[0] == "Certification team-a/gpu-cert (1/2 categories passed)  Running  " \
                      "WorkflowFailed"
    assert lines[1:5] == TREE_HEAD[1:]
    # The tree has 15 objects; after it only the Certification's line changed.
    assert len(lines) == 16
    assert lines[-1] == TREE_HEAD[0]


@pytest.mark.parametrize(("changes", "watch", "code"), [
    ({}, False, ExitCode.VERDICT_FAILED),
    ({"verdict": "Passed", "phase": "Succeeded"}, False, ExitCode.OK),
    ({"verdict": "Incomplete", "phase": "Failed"}, True, ExitCode.NOT_CERTIFIED),
    ({"verdict": None, "phase": "Running"}, False, ExitCode.NOT_CERTIFIED),
], ids=["failed", "passed", "incomplete", "running"])
async def test_exit_code_follows_the_verdict(gpu_cert: Emulator, cre: RunCli,
                                             changes: dict[str, object], watch: bool,
                                             code: ExitCode) -> None:
    """``--exit-code``: 0 Passed, 9 Failed, 10 Incomplete or not finished; without it, 0."""
    if changes:
        await _set_status(gpu_cert, **changes)
    args = ("status", "gpu-cert", "-n", "team-a", "--kubeconfig",
            str(gpu_cert.kubeconfig_path), *(("--watch",) if watch else ()))
    assert (await in_thread(cre, *args, "--exit-code")).code == code
    assert (await in_thread(cre, *args)).code == ExitCode.OK


async def test_report_at_40_columns_keeps_every_name_whole(gpu_cert: Emulator) -> None:
    """A narrow terminal does not cut names: ``-o wide`` rows hold the whole Job name and
    the columns line up under their header."""
    env = {**os.environ, "COLUMNS": "40"}
    result = await anyio.to_thread.run_sync(lambda: subprocess.run(
        [sys.executable, "-m", "cre.cli", "report", "gpu-cert", "-n", "team-a", "-o", "wide",
         "--kubeconfig", str(gpu_cert.kubeconfig_path)], capture_output=True, text=True,
        env=env, timeout=120, check=False))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "…" not in result.stdout
    header = lines.index("communication/nccl-all-reduce: Failed (2 of 3 groups failed)") + 1
    assert lines[header].split() == ["NODE", "GROUP", "VERDICT", "REASON", "FAILURE", "CLASS",
                                     "BUSBW(GB/s)", "THRESHOLD(GB/s)", "JOB"]
    row = lines[header + 5]
    assert row.split("  ")[0] == "gpu-05"
    assert row.endswith("gpu-cert-communication-nccl-all-reduce-group-2")
    assert row[lines[header].index("REASON"):].startswith("ThresholdViolation")
    assert row[lines[header].index("THRESHOLD"):].startswith("300.00")


async def test_report_yaml_is_the_json_report(gpu_cert: Emulator, cre: RunCli) -> None:
    """``-o yaml`` and ``-o json`` (and ``--json``) carry the same report."""
    kubeconfig = ("--kubeconfig", str(gpu_cert.kubeconfig_path))
    as_json = await in_thread(cre, "report", "gpu-cert", "-n", "team-a", "-o", "json",
                              *kubeconfig)
    as_yaml = await in_thread(cre, "report", "gpu-cert", "-n", "team-a", "-o", "yaml",
                              *kubeconfig)
    legacy = await in_thread(cre, "report", "gpu-cert", "-n", "team-a", "--json", *kubeconfig)
    assert as_json.code == as_yaml.code == 0, as_yaml.err
    assert legacy.out == as_json.out
    assert YAML(typ="safe", pure=True).load(StringIO(as_yaml.out)) == json.loads(as_json.out)
    assert as_yaml.out.startswith("apiVersion: cre.dev/v1alpha1\n")


def test_help_and_completion_load_only_click() -> None:
    """``cre --help`` and TAB completion import neither kubernetes_asyncio, aiohttp, rich,
    jsonschema nor the API models."""
    heavy = ("kubernetes_asyncio", "aiohttp", "rich", "jsonschema", "cre.api", "cre.core",
             "cre.catalog", "cre.kube", "anyio")
    code = ("import atexit, sys; atexit.register(lambda: print([m for m in sys.modules if "
            f"m.split('.')[0] in {heavy!r} or m in {heavy!r}], file=sys.stderr)); "
            "from cre.cli.entry import main; sys.exit(main())")
    for extra in ({}, {"_CRE_COMPLETE": "bash_complete", "COMP_WORDS": "cre render comm",
                       "COMP_CWORD": "2"}):
        env = {**os.environ, **extra}
        result = subprocess.run([sys.executable, "-c", code, "--help"], env=env,
                                capture_output=True, text=True, timeout=60, check=False)
        assert result.stderr.strip().splitlines()[-1] == "[]", (extra, result.stderr)
        assert result.stdout


def test_lazy_constants_agree_with_their_modules() -> None:
    """The defaults ``cre.cli.root`` spells out equal the values of the modules they mirror,
    and completion's catalog names equal the parsed catalog's."""
    from cre.catalog import default_catalog_dir, load_catalog
    from cre.render.options import DEFAULT_WORKER_BACKOFF_LIMIT, KAI_SCHEDULER

    assert root.DEFAULT_TIMEOUT == DEFAULT_TIMEOUT
    assert root.KAI_SCHEDULER == KAI_SCHEDULER
    assert root.DEFAULT_WORKER_BACKOFF_LIMIT == DEFAULT_WORKER_BACKOFF_LIMIT
    assert root.catalog_dir() == default_catalog_dir()
    catalog = load_catalog()
    assert root.entry_names() == sorted(catalog.entries)
    assert root.platform_architectures() == {
        name: sorted(p.architectures) for name, p in catalog.platforms.items()}


def test_bench_cli_prints_json() -> None:
    """``python -m bench cli --runs 1`` prints its JSON with every case."""
    result = subprocess.run([sys.executable, "-m", "bench", "cli", "--runs", "1"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300, check=True)
    report = json.loads(result.stdout)
    assert set(report["cases"]) == {"python", "help", "completion_command",
                                    "completion_entry", "eager_imports"}
    assert report["help_modules"] > 0 and report["import_ms"]["cre.cli.app"] > 0
