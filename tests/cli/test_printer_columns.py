"""``kubectl get certifications -o wide`` shows every category in VARIANTS: the core writes
``status.variants`` (a column's JSONPath over a list shows only its first value) and the CRD's
printer column reads it. The status comes from the pure core, the table from kubectl talking
to the API emulator."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import anyio
import pytest

from cre.api.converter import to_dict
from cre.cli.cluster import CERTIFICATIONS
from cre.kube.client import NAMESPACES, KubeClient
from cre.testing.apiserver import Emulator
from tests.core.tierworld import NS, CertificationWorld, at, certification, nodes

pytestmark = pytest.mark.anyio
CATEGORIES = (("communication", "nccl-all-reduce"), ("communication", "nccl-loopback"),
              ("diagnostics", "dcgm-level1"))


def core_status() -> dict[str, Any]:
    """The status the Certification core writes on its first pass over three categories."""
    world = CertificationWorld(cert=certification(*CATEGORIES), nodes=nodes(2))
    world.step(at(0))
    status: dict[str, Any] = to_dict(world.cert)["status"]
    return status


def test_the_core_lists_every_variant_in_spec_order() -> None:
    """``status.variants`` names all three categories, in spec order, from the first pass."""
    assert core_status()["variants"] == "nccl-all-reduce,nccl-loopback,dcgm-level1"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs kubectl")
async def test_kubectl_wide_shows_every_variant(kube_emulator: Emulator) -> None:
    """kubectl's VARIANTS column holds every category, not only the first."""
    body = to_dict(certification(*CATEGORIES))
    body["metadata"] = {"name": "cert", "namespace": NS}
    client = await KubeClient.from_kubeconfig(str(kube_emulator.kubeconfig_path))
    try:
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": NS}})
        await client.create(CERTIFICATIONS, body, namespace=NS)
        await client.patch(CERTIFICATIONS, "cert", {"status": core_status()}, namespace=NS,
                           subresource="status")
    finally:
        await client.close()
    result = await anyio.to_thread.run_sync(lambda: subprocess.run(
        ["kubectl", "--kubeconfig", str(kube_emulator.kubeconfig_path), "get",
         "certifications", "-n", NS, "-o", "wide"], capture_output=True, text=True,
        timeout=60, check=False))
    assert result.returncode == 0, result.stderr
    header, row = result.stdout.splitlines()
    assert header.split()[-1] == "VARIANTS"
    assert row.split()[-1] == "nccl-all-reduce,nccl-loopback,dcgm-level1"
