"""Shared set-up for simulator tests: a 2-node aws-h100 in-memory cluster with a rendered job."""

from __future__ import annotations

from typing import Any

from cre.testing.cluster.clock import DEFAULT_EPOCH
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.memory import MemoryCluster
from cre.testing.cluster.model import is_true
from cre.testing.cluster.profiles import get_profile, node_manifest
from cre.testing.cluster.stubs import Override
from cre.testing.cluster.workloads import trainjob_objects

PROFILE = get_profile("aws-h100")
NODES = ["aws-h100-node-0", "aws-h100-node-1"]
TJ = "default/ar-workload"


def cluster(entry: str = "communication/nccl-all-reduce", *, kai: bool = False,
            nodes: int = 2) -> MemoryCluster:
    mc = MemoryCluster()
    for i in range(nodes):
        mc.add(node_manifest(PROFILE, i), DEFAULT_EPOCH)
    for obj in trainjob_objects(entry=entry, job_name="ar", namespace="default",
                                profile=PROFILE, nodes=NODES[:nodes], kai=kai):
        mc.add(obj, DEFAULT_EPOCH)
    return mc


def config(*overrides: Override, **kw: Any) -> SimConfig:
    return SimConfig(profile=PROFILE, overrides=overrides, **kw)


def finished(mc: MemoryCluster) -> bool:
    tj = mc.objects["trainjobs"].get(TJ)
    return tj is not None and (is_true(tj, "Complete") or is_true(tj, "Failed"))


def run(mc: MemoryCluster, cfg: SimConfig, limit: float = 3600.0) -> float:
    return mc.run(cfg, start=DEFAULT_EPOCH, until=finished, limit=limit) - DEFAULT_EPOCH
