"""Platform and GPU architecture detection from plain node facts."""

from __future__ import annotations

import pytest

from cre.catalog import (
    UNKNOWN_ARCH,
    Platform,
    architecture_from_product,
    detect_architecture,
    detect_platform,
)


@pytest.mark.parametrize(
    ("provider_id", "labels", "allocatable", "expected"),
    [
        ("aws://us-east-1a/i-0abc", {}, {}, Platform.AWS),
        ("gce://proj/zone/vm", {}, {}, Platform.GCP),
        ("azure:///subscriptions/x", {}, {}, Platform.AZURE),
        ("ocid1.instance.oc1.iad.x", {}, {}, Platform.OCI),
        ("openstack:///abc", {}, {"nscale.com/rdmashare": "8"}, Platform.NSCALE),
        ("openstack:///abc", {}, {}, Platform.ONPREM),
        ("kubevirt://vm", {"node-role.together.ai/worker": ""}, {}, Platform.TOGETHERAI),
        ("kubevirt://vm", {}, {}, Platform.ONPREM),
        ("metal3://ns/host", {}, {}, Platform.MISTRAL),
        ("", {"kubernetes.io/hostname": "forge-gpu-01"}, {}, Platform.FORGE),
        ("", {"nke.nvidia.com/site-name": "x"}, {}, Platform.FORGE),
        ("", {"kubernetes.io/hostname": "gpu-01"}, {}, Platform.ONPREM),
        ("kind://docker/kind/node", {}, {}, Platform.ONPREM),
    ],
)
def test_platform_from_provider_id(
    provider_id: str, labels: dict[str, str], allocatable: dict[str, str], expected: Platform
) -> None:
    """Each providerID scheme of the reference table maps to its platform."""
    assert detect_platform(provider_id, labels, allocatable=allocatable) is expected


@pytest.mark.parametrize(
    ("product", "arch"),
    [
        ("NVIDIA-H100-80GB-HBM3", "h100"),
        ("NVIDIA-GB200-NVL72", "gb200"),
        ("NVIDIA-GB300", "gb300"),
        ("NVIDIA-B300-SXM6-AC", "b300"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "rtxpro6000"),
        ("NVIDIA-A100-SXM4-80GB", "a100"),
    ],
)
def test_architecture_from_product(product: str, arch: str) -> None:
    """The product label is stripped of NVIDIA- and cut at the first dash."""
    assert architecture_from_product(product) == arch


def test_majority_vote() -> None:
    """The most common architecture wins over a mislabelled minority."""
    key = "nvidia.com/gpu.product"
    nodes = [{key: "NVIDIA-H100-80GB-HBM3"}, {key: "NVIDIA-H100-80GB-HBM3"}, {key: "NVIDIA-A100"}]
    assert detect_architecture(nodes) == "h100"


def test_tie_breaks_alphabetically_and_unlabelled_nodes_do_not_vote() -> None:
    """A tie resolves the same way whatever the node order."""
    key = "nvidia.com/gpu.product"
    nodes = [{key: "NVIDIA-H100"}, {}, {key: "NVIDIA-A100"}]
    assert detect_architecture(nodes) == detect_architecture(nodes[::-1]) == "a100"


def test_no_labels_is_unknown() -> None:
    """Without any product label the architecture is unknown."""
    assert detect_architecture([{}, {"x": "y"}]) == UNKNOWN_ARCH
