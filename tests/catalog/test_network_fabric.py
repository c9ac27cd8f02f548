"""``fabric: network``: an entry that brings its own image (training) takes the platform's
network from the same fabric blocks the NCCL entries take (env, NIC resources, annotations,
capabilities, volumes, init containers, DRA claims, ComputeDomain), never the blocks' image or
mpirun, and keeps its own volumes and init containers; the shipped training entries render
each platform's fabric (validated against the vendored Trainer/JobSet CRDs)."""

from __future__ import annotations

from typing import Any

import pytest

from cre.catalog import CatalogError, Fabric, load_catalog, parse_catalog
from cre.catalog.merge import network_merge
from cre.render import render_job_manifest
from cre.testing.schemas import validate_job_documents

from .texts import PLATFORM, files

NETWORK_PLATFORM = PLATFORM.replace("""\
    env: {FABRIC: efa, SHARED: fabric}
""", """\
    image: nccl-tests:efa
    mpirun: {path: /opt/amazon/openmpi/bin/mpirun}
    claims: [{name: roce, deviceClassName: roce.example.com, count: 8}]
    env: {FABRIC: efa, SHARED: fabric}
    worker:
      resources: {vpc.amazonaws.com/efa: 32}
      capabilities: [IPC_LOCK]
      annotations: {fabric.example.com/nics: "8"}
      volumes: [{name: efa, hostPath: {path: /opt/amazon/efa}}, {name: work, emptyDir: {}}]
      volumeMounts: [{name: efa, mountPath: /opt/amazon/efa}]
      initContainers: [{name: fabric-daemon, image: daemon:1, restartPolicy: Always}]
""")
TRAIN = """\
description: a training entry
runtime: torch
fabric: network
spec:
  image: trainer:1
  command: [torchrun, train.py]
  env: {SHARED: entry}
  worker:
    resources: {cpu: "64"}
    capabilities: [IPC_LOCK]
    volumes: [{name: work, emptyDir: {medium: Memory}}]
    volumeMounts: [{name: work, mountPath: /work}]
    initContainers: [{name: clone, image: trainer:1}]
"""


def _resolved(entry: str = TRAIN, arch: str = "h100") -> dict[str, Any]:
    catalog = parse_catalog(files(platform=NETWORK_PLATFORM, entry=entry))
    return dict(catalog.resolve("comm/test", platform="aws", arch=arch, num_nodes=2).spec)


def test_a_network_entry_keeps_its_image_and_takes_the_fabric_network() -> None:
    """The entry's image stays and no mpirun appears; the fabric's env, NIC resources,
    annotations, claims and its volumes, mounts and sidecar are added after the entry's own;
    a name both have (the ``work`` volume, IPC_LOCK) stays the entry's."""
    spec = _resolved()
    assert spec["image"] == "trainer:1" and "mpirun" not in spec
    assert spec["env"] == {"SHARED": "fabric", "FABRIC": "efa"}
    worker = spec["worker"]
    assert worker["resources"] == {"cpu": "64", "vpc.amazonaws.com/efa": 32}
    assert worker["annotations"] == {"fabric.example.com/nics": "8"}
    assert worker["capabilities"] == ["IPC_LOCK"]
    assert worker["volumes"] == [{"name": "work", "emptyDir": {"medium": "Memory"}},
                                 {"name": "efa", "hostPath": {"path": "/opt/amazon/efa"}}]
    assert [m["name"] for m in worker["volumeMounts"]] == ["work", "efa"]
    assert [c["name"] for c in worker["initContainers"]] == ["clone", "fabric-daemon"]
    assert spec["claims"] == [{"name": "roce", "deviceClassName": "roce.example.com",
                               "count": 8}]


def test_an_architecture_without_fabric_blocks_gets_nothing() -> None:
    """gb200 has no block in the test platform: the entry resolves as written."""
    spec = _resolved(arch="gb200")
    assert spec["env"] == {"SHARED": "entry"} and "claims" not in spec
    assert [v["name"] for v in spec["worker"]["volumes"]] == ["work"]


def test_fabric_all_still_swaps_the_image_and_replaces_lists() -> None:
    """``fabric: true`` keeps its meaning: the block's image wins and its lists replace."""
    spec = _resolved(TRAIN.replace("runtime: torch\nfabric: network", "runtime: mpi\n"
                                   "fabric: true").replace("  command:", "  mpirun: {path: "
                                                           "/bin/mpirun}\n  command:"))
    assert spec["image"] == "nccl-tests:efa"
    assert [v["name"] for v in spec["worker"]["volumes"]] == ["efa", "work"]
    assert [c["name"] for c in spec["worker"]["initContainers"]] == ["fabric-daemon"]


@pytest.mark.parametrize("value", ["yes", 1, "all"])
def test_an_unknown_fabric_value_fails_at_load(value: object) -> None:
    """Only true, false and network are fabric values; the error names file and key."""
    with pytest.raises(CatalogError) as info:
        parse_catalog(files(entry=TRAIN.replace("fabric: network", f"fabric: {value}")))
    assert (info.value.file, info.value.path) == ("comm/test.yaml", "fabric")
    assert "expected true, false or network" in info.value.problem


def test_network_merge_leaves_its_inputs_alone() -> None:
    """The merge builds a new mapping: the entry's and the block's specs are not changed."""
    base = {"worker": {"volumes": [{"name": "a"}]}}
    block = {"image": "x", "worker": {"volumes": [{"name": "b"}]}}
    out = network_merge(base, block)
    out["worker"]["volumes"][0]["name"] = "changed"
    assert base == {"worker": {"volumes": [{"name": "a"}]}}
    assert block == {"image": "x", "worker": {"volumes": [{"name": "b"}]}}


CATALOG = load_catalog()
# What each platform's network looks like on a rendered training worker: an env name, a
# resource, an annotation, a volume or init container, a DRA object (platform file values).
WIRING: dict[tuple[str, str], dict[str, str]] = {
    ("aws", "h100"): {"env": "FI_EFA_USE_DEVICE_RDMA", "resource": "vpc.amazonaws.com/efa"},
    ("aws", "gb200"): {"env": "FI_PROVIDER", "resource": "hugepages-2Mi",
                       "volume": "amazon-efa", "object": "ComputeDomain"},
    ("aws", "gb300"): {"env": "NCCL_IB_GID_INDEX", "object": "ResourceClaimTemplate"},
    ("gcp", "h100"): {"env": "NCCL_FASTRAK_IFNAME", "init": "tcpxo-daemon",
                      "annotation": "networking.gke.io/interfaces"},
    ("gcp", "gb200"): {"env": "NCCL_IB_TC", "resource": "networking.gke.io.networks/rdma-0",
                       "annotation": "networking.gke.io/interfaces", "object": "ComputeDomain"},
    ("azure", "h100"): {"env": "NCCL_IB_PCI_RELAXED_ORDERING", "resource": "nvidia.com/mlnxnics"},
    ("azure", "a100"): {"env": "NCCL_IB_HCA", "resource": "nvidia.com/mlnxnics"},
    ("oci", "l40s"): {"env": "NCCL_IB_TC", "resource": "nvidia.com/mlnxnics",
                      "annotation": "k8s.v1.cni.cncf.io/networks"},
    ("nscale", "b200"): {"env": "NCCL_IB_HCA", "resource": "nscale.com/rdmashare"},
    ("onprem", "gb300"): {"env": "SHARP_COLL_ENABLE_PCI_RELAXED_ORDERING",
                          "object": "ComputeDomain"},
}


@pytest.mark.parametrize("entry", ["training/nemotron5-8b", "training/nemotron5-56b"])
@pytest.mark.parametrize(("platform", "arch"), sorted(WIRING))
def test_shipped_training_entries_render_each_platforms_network(entry: str, platform: str,
                                                                 arch: str) -> None:
    """Each training entry on each platform gets that platform's fabric (env on the trainer,
    resources / annotations / volumes / sidecar on the worker, DRA objects as dependencies),
    keeps the PyTorch image and its Megatron clone, and passes the vendored CRD schemas."""
    assert CATALOG.entries[entry].fabric is Fabric.NETWORK
    docs = render_job_manifest(job_name="t", namespace="ns", catalog=CATALOG, entry=entry,
                               platform=platform, arch=arch, nodes=["n0", "n1", "n2", "n3",
                                                                    "n4", "n5", "n6", "n7"])
    assert [str(p) for p in validate_job_documents(docs)] == []
    job = next(d for d in docs if d["kind"] == "Job")
    trainer = job["spec"]["workload"]["trainJob"]["trainer"]
    runtime = next(d for d in docs if d["kind"] == "TrainingRuntime")
    (node,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    pod = node["template"]["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    want = WIRING[(platform, arch)]
    assert trainer["image"] == "nvcr.io/nvidia/pytorch:25.08-py3"
    assert want["env"] in {e["name"] for e in trainer["env"]}
    if "resource" in want:
        assert want["resource"] in container["resources"]["limits"]
    if "annotation" in want:
        assert want["annotation"] in pod["metadata"]["annotations"]
    inits = [c["name"] for c in pod["spec"]["initContainers"]]
    assert inits[0] == "megatron-clone"
    if "init" in want:
        assert want["init"] in inits
    if "volume" in want:
        assert want["volume"] in {v["name"] for v in pod["spec"]["volumes"]}
    if "object" in want:
        assert want["object"] in {d["kind"] for d in docs}


def test_items_without_a_name_are_appended_unless_equal() -> None:
    """Capabilities (strings) and unnamed items are kept once by value; new ones append."""
    out = network_merge({"worker": {"capabilities": ["IPC_LOCK"]}},
                        {"worker": {"capabilities": ["IPC_LOCK", "SYS_NICE"]}})
    assert out["worker"]["capabilities"] == ["IPC_LOCK", "SYS_NICE"]
