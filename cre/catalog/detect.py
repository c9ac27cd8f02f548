"""Which platform and GPU architecture a cluster is, from plain node facts.

Pure functions over (providerID, labels, allocatable) so the catalog never depends on the
core's node projection. Platform detection follows the providerID scheme table of the
reference (with the on-prem fallback and its traps: ``metal3://`` is mistral, ``openstack://``
is nscale only with the ``nscale.com/rdmashare`` resource). Architecture is a majority vote
over ``nvidia.com/gpu.product`` so one mislabelled node does not flip the whole cluster.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from enum import Enum

from cre.api.labels import GPU_PRODUCT

HOSTNAME = "kubernetes.io/hostname"
FORGE_SITE = "nke.nvidia.com/site-name"
TOGETHER_WORKER = "node-role.together.ai/worker"
NSCALE_RDMA = "nscale.com/rdmashare"
UNKNOWN_ARCH = "unknown"


class Platform(Enum):
    """Every platform detection can answer; the catalog ships data for a subset."""

    AWS = "aws"
    GCP = "gcp"
    AZURE = "azure"
    OCI = "oci"
    NSCALE = "nscale"
    ONPREM = "onprem"
    TOGETHERAI = "togetherai"
    MISTRAL = "mistral"
    FORGE = "forge"


def detect_platform(
    provider_id: str,
    labels: Mapping[str, str],
    *,
    allocatable: Mapping[str, str] | None = None,
) -> Platform:
    """The platform of one node from its ``spec.providerID``, labels and allocatable."""
    if not provider_id:
        if "forge" in labels.get(HOSTNAME, "") or FORGE_SITE in labels:
            return Platform.FORGE
        return Platform.ONPREM
    prefixes = (
        ("aws://", Platform.AWS),
        ("gce://", Platform.GCP),
        ("azure://", Platform.AZURE),
        ("ocid1.", Platform.OCI),
        ("metal3://", Platform.MISTRAL),
    )
    for prefix, platform in prefixes:
        if provider_id.startswith(prefix):
            return platform
    if provider_id.startswith("openstack://"):
        return Platform.NSCALE if NSCALE_RDMA in (allocatable or {}) else Platform.ONPREM
    if provider_id.startswith("kubevirt://"):
        return Platform.TOGETHERAI if TOGETHER_WORKER in labels else Platform.ONPREM
    return Platform.ONPREM


def architecture_from_product(product: str) -> str:
    """``NVIDIA-H100-80GB-HBM3`` -> ``h100``; any RTX PRO 6000 -> ``rtxpro6000``."""
    name = product.removeprefix("NVIDIA-")
    if name.lower().startswith("rtx-pro-6000"):
        return "rtxpro6000"
    return name.split("-", 1)[0].lower()


def detect_architecture(nodes_labels: Iterable[Mapping[str, str]]) -> str:
    """Majority architecture over labelled nodes; ties go to the alphabetically first name.

    Returns ``unknown`` when no node carries ``nvidia.com/gpu.product``.
    """
    votes = Counter(
        architecture_from_product(labels[GPU_PRODUCT])
        for labels in nodes_labels
        if labels.get(GPU_PRODUCT)
    )
    if not votes:
        return UNKNOWN_ARCH
    return min(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0]
