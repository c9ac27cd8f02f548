"""Fixtures of the ``cre`` command's tests: run the command in-process, and an API emulator
holding the golden Certification fixture (``fixtures/gpu-cert.yaml``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from ruamel.yaml import YAML

from cre.cli.app import main
from cre.cli.cluster import BANDWIDTH, CERTIFICATIONS, JOBS, WORKFLOWS
from cre.kube.client import NAMESPACES, KubeClient, Resource
from cre.testing.apiserver import Emulator

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GPU_CERT = HERE / "fixtures" / "gpu-cert.yaml"
RESOURCES: dict[str, Resource] = {
    "Namespace": NAMESPACES, "Certification": CERTIFICATIONS, "Workflow": WORKFLOWS,
    "Job": JOBS, "BandwidthMeasurement": BANDWIDTH,
}


@attrs.frozen
class Run:
    """What one ``cre`` invocation printed and exited with."""

    code: int
    out: str
    err: str


RunCli = Callable[..., Run]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def cre(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> RunCli:
    """Run ``cre ARGS...`` in this process (a 200-column terminal); returns exit code and
    captured output."""
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args: str) -> Run:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return Run(int(code), captured.out, captured.err)

    return run


def fixture_documents(path: Path = GPU_CERT) -> list[dict[str, Any]]:
    """The fixture's objects (with the statuses the controllers would have written)."""
    yaml = YAML(typ="safe", pure=True)
    return [d for d in yaml.load_all(path.read_text(encoding="utf-8")) if d]


async def apply_fixture(client: KubeClient, docs: list[dict[str, Any]]) -> None:
    """Create every object, then write its status through the status subresource."""
    for doc in docs:
        res = RESOURCES[doc["kind"]]
        body = {k: v for k, v in doc.items() if k != "status"}
        ns = doc["metadata"].get("namespace")
        await client.create(res, body, namespace=ns)
        if "status" in doc:
            await client.patch(res, doc["metadata"]["name"], {"status": doc["status"]},
                               namespace=ns, subresource="status")


@pytest.fixture
async def gpu_cert(kube_emulator: Emulator) -> AsyncIterator[Emulator]:
    """The emulator with the golden Certification fixture applied."""
    client = await KubeClient.from_kubeconfig(str(kube_emulator.kubeconfig_path))
    try:
        await apply_fixture(client, fixture_documents())
    finally:
        await client.close()
    yield kube_emulator


async def in_thread(run: RunCli, *args: str) -> Run:
    """Run the command off the event loop, so the in-process emulator keeps answering."""
    return await anyio.to_thread.run_sync(lambda: run(*args))
