"""Report export benchmark: the payload a ReportExport sends, by Certification size.

For a Certification of one nccl-all-reduce category over ``--nodes`` nodes (groups of 8, every
group Succeeded with a BandwidthMeasurement of 12 message sizes), builds the payload
(:func:`cre.core.export.payload.build_payload`: the ``cre report --json`` facts in the export
envelope) and its snapshot (gzip), best of ``--rounds``, with every content switch on and with
``perNode`` off. Reported per size: payload and gzip bytes, build and compress milliseconds, and
whether the snapshot fits the 512 KiB bound (:data:`cre.core.export.delivery.MAX_SNAPSHOT_BYTES`).

Usage: ``python -m bench export [--nodes 64,512,5000] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from cre.api.certification import Certification
from cre.api.converter import structure
from cre.api.job import Job
from cre.api.measurement import BandwidthMeasurement
from cre.api.reportexport import ExportContent, ExportSourceRef
from cre.api.workflow import Workflow
from cre.core.certification.report import Snapshot
from cre.core.export.delivery import MAX_SNAPSHOT_BYTES
from cre.core.export.payload import build_payload, compress

NS = "bench"
T = "2026-12-06T08:00:00Z"
SIZES = [8 << i for i in range(0, 36, 3)]  # 12 sizes, 8 B .. 256 GiB


def snapshot(nodes: int) -> Snapshot:
    """The Certification, its Workflow, Jobs and measurements for ``nodes`` nodes."""
    names = [f"gpu-node-{i:05d}" for i in range(nodes)]
    groups = [names[i:i + 8] for i in range(0, nodes, 8)]
    cert = structure({
        "metadata": {"name": "fleet", "namespace": NS, "uid": "cert-uid"},
        "spec": {"target": {}, "categories": [{"domain": "communication",
                                               "variant": "nccl-all-reduce"}]},
        "status": {"phase": "Succeeded", "verdict": "Passed",
                   "conditions": [{"type": "Succeeded", "status": "True", "reason": "Passed",
                                   "message": "every category passed", "lastTransitionTime": T}],
                   "categoryStatuses": [{"domain": "communication", "variant": "nccl-all-reduce",
                                         "status": "Succeeded", "verdict": "Passed",
                                         "workflowRef": {"name": "wf"}}]}}, Certification)
    wf = structure({
        "metadata": {"name": "wf", "namespace": NS},
        "spec": {"jobTemplate": {"spec": {"workload": {"trainJob": {}}}}, "orchestration": {}},
        "status": {"groups": [{"name": f"g{i}", "nodes": g, "phase": "Succeeded",
                               "jobRef": {"name": f"job-{i}"}} for i, g in enumerate(groups)]}},
        Workflow)
    jobs, bms = {}, {}
    for i in range(len(groups)):
        name = f"job-{i}"
        jobs[name] = structure({"metadata": {"name": name, "namespace": NS},
                                "spec": {"workload": {"trainJob": {}}},
                                "status": {"phase": "Succeeded"}}, Job)
        bms[name] = structure({
            "metadata": {"name": f"{name}-bw", "namespace": NS},
            "spec": {"jobRef": {"kind": "Job", "name": name}, "logProfileRef": "nccl-bandwidth"},
            "status": {"results": [{"sizeBytes": s, "algBW": f"{100 + i % 7}.25",
                                    "busBW": f"{180 + i % 11}.50", "samples": 20}
                                   for s in SIZES]}}, BandwidthMeasurement)
    return Snapshot(certification=cert, workflows={"wf": wf}, jobs=jobs, bandwidth=bms)


def measure(snap: Snapshot, content: ExportContent, rounds: int) -> dict[str, Any]:
    source = ExportSourceRef(name="fleet", uid="cert-uid")
    build, pack = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        payload = build_payload(snap, source=source, content=content)
        t1 = time.perf_counter()
        blob = compress(payload)
        pack.append(time.perf_counter() - t1)
        build.append(t1 - t0)
    return {"payload_bytes": len(payload), "gzip_bytes": len(blob),
            "build_ms": round(min(build) * 1e3, 1), "gzip_ms": round(min(pack) * 1e3, 1),
            "fits": len(blob) <= MAX_SNAPSHOT_BYTES}


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench export", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="64,512,5000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    out = []
    for nodes in (int(n) for n in args.nodes.split(",")):
        snap = snapshot(nodes)
        out.append({"nodes": nodes, "all": measure(snap, ExportContent(), args.rounds),
                    "no_per_node": measure(snap, ExportContent(per_node=False), args.rounds)})
    print(json.dumps({"bench": "export", "max_snapshot_bytes": MAX_SNAPSHOT_BYTES,
                      "sizes": out}, indent=2))


if __name__ == "__main__":
    main()
