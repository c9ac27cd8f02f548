"""Platform profiles: the GPU nodes a simulated cluster is made of.

A profile is what CRE's platform detection and the NCCL stub need to know about a node type:
the cloud ``providerID`` scheme, the GPU Feature Discovery labels (``nvidia.com/gpu.product``,
``nvidia.com/gpu.present``, ``nvidia.com/gpu.count``, the GB200/GB300 NVLink clique label),
topology labels (zone, rack; on AWS GB200/GB300 the EKS network-node label a WorkloadRun
packs by), allocatable GPUs and RDMA NICs, and the bus bandwidth the
NCCL stubs report on a healthy node. The figures are of the right order for each platform; they
are simulator inputs, not measurements.

Left out: CPU/memory topology, MIG, DRA ComputeDomains and IMEX channels.
"""

from __future__ import annotations

from typing import Any

import attrs

from cre.api import labels


@attrs.frozen(slots=True)
class Profile:
    """One node type of one platform."""

    name: str
    provider: str  # aws | gcp | oci | onprem
    gpu_product: str
    gpus: int
    nics: int
    nic_resource: str  # extended resource name of the RDMA NICs ("" = none advertised)
    instance_type: str
    busbw_gbps: float  # all_reduce bus bandwidth between healthy nodes of this profile
    loopback_gbps: float  # single-node (NVLink) bandwidth
    clique_size: int = 0  # NVLink domain size for GB200/GB300 (0 = no clique label)
    region: str = "us-east-1"  # "" = no cloud region/zone labels (on premises)
    arch: str = "amd64"  # kubernetes.io/arch: Grace-based GB200/GB300 nodes are arm64

    def zone(self) -> str:
        """``topology.kubernetes.io/zone`` as the platform writes it ("" on premises)."""
        if self.provider == "aws":
            return f"{self.region}a"
        if self.provider == "gcp":
            return f"{self.region}-a"
        if self.provider == "oci":  # OKE: the availability domain (Ashburn's short form)
            return "US-ASHBURN-AD-1"
        return ""

    def provider_id(self, index: int) -> str:
        """The ``spec.providerID`` of node ``index``, in the platform's own scheme."""
        if self.provider == "aws":
            return f"aws:///{self.region}a/i-0{index:016x}"
        if self.provider == "gcp":
            return f"gce://cre-sim/{self.region}-a/{self.name}-{index}"
        if self.provider == "oci":
            return f"oci://ocid1.instance.oc1.iad.sim{index:08d}"
        return f"onprem://{self.name}-{index}"


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(name="aws-h100", provider="aws", gpu_product="NVIDIA-H100-80GB-HBM3", gpus=8,
                nics=32, nic_resource="vpc.amazonaws.com/efa", instance_type="p5.48xlarge",
                busbw_gbps=480.0, loopback_gbps=480.0),
        Profile(name="aws-gb200", provider="aws", gpu_product="NVIDIA-GB200", gpus=4, nics=4,
                nic_resource="vpc.amazonaws.com/efa", instance_type="p6e-gb200.36xlarge",
                busbw_gbps=720.0, loopback_gbps=760.0, clique_size=18, arch="arm64"),
        # GB300 on EKS talks RoCE through a DRA claim: no EFA device plugin resource.
        Profile(name="aws-gb300", provider="aws", gpu_product="NVIDIA-GB300", gpus=4, nics=0,
                nic_resource="", instance_type="p6e-gb300.36xlarge", busbw_gbps=800.0,
                loopback_gbps=860.0, clique_size=18, arch="arm64"),
        Profile(name="gcp-h100", provider="gcp", gpu_product="NVIDIA-H100-80GB-HBM3", gpus=8,
                nics=8, nic_resource="networking.gke.io/rdma", instance_type="a3-megagpu-8g",
                busbw_gbps=190.0, loopback_gbps=480.0, region="us-central1"),
        Profile(name="onprem-gb200", provider="onprem", gpu_product="NVIDIA-GB200", gpus=4,
                nics=4, nic_resource="rdma/rdma_shared_device_a", instance_type="gb200-nvl72",
                busbw_gbps=760.0, loopback_gbps=760.0, clique_size=18, region="",
                arch="arm64"),
        Profile(name="oci-gb300", provider="oci", gpu_product="NVIDIA-GB300", gpus=4, nics=4,
                nic_resource="rdma/rdma_shared_device_a", instance_type="BM.GPU.GB300.4",
                busbw_gbps=820.0, loopback_gbps=860.0, clique_size=18, region="us-ashburn-1",
                arch="arm64"),
    )
}


def get_profile(name: str) -> Profile:
    """The profile called ``name``; a clear error listing the known ones otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown cluster profile {name!r}; known: {sorted(PROFILES)}") from None


def node_name(profile: Profile, index: int) -> str:
    return f"{profile.name}-node-{index}"


def node_manifest(profile: Profile, index: int) -> dict[str, Any]:
    """The Node object for node ``index`` of ``profile`` (status Ready)."""
    name = node_name(profile, index)
    node_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": profile.arch,
        "node.kubernetes.io/instance-type": profile.instance_type,
        labels.GPU_PRESENT: "true",
        labels.GPU_PRODUCT: profile.gpu_product,
        "nvidia.com/gpu.count": str(profile.gpus),
        "cre.dev/sim-rack": f"rack-{index // 4}",
    }
    if profile.region:  # cloud nodes only; on-premises nodes carry no cloud topology labels
        node_labels["topology.kubernetes.io/region"] = profile.region
        node_labels["topology.kubernetes.io/zone"] = profile.zone()
    if profile.clique_size:
        clique = index // profile.clique_size
        node_labels["nvidia.com/gpu.clique"] = f"cluster-{profile.name}.{clique}"
        if profile.provider == "aws":  # EKS's network topology label, one node per clique
            node_labels["topology.k8s.aws/network-node-layer-1"] = f"nn-{clique:04d}"
    allocatable = {"cpu": "192", "memory": "2000Gi", "pods": "110",
                   "nvidia.com/gpu": str(profile.gpus)}
    if profile.nic_resource:
        allocatable[profile.nic_resource] = str(profile.nics)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "spec": {"providerID": profile.provider_id(index)},
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [],
            "nodeInfo": {"kubeletVersion": "v1.33.0", "kubeProxyVersion": "v1.33.0",
                         "architecture": node_labels["kubernetes.io/arch"],
                         "operatingSystem": "linux", "machineID": f"{index:032x}",
                         "systemUUID": f"00000000-0000-0000-0000-{index:012x}",
                         "bootID": f"b0000000-0000-0000-0000-{index:012x}",
                         "kernelVersion": "6.8.0-1021-nvidia", "osImage": "Ubuntu 24.04.2 LTS",
                         "containerRuntimeVersion": "containerd://2.0.5"},
        },
    }
