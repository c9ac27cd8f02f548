"""The ``run-render`` golden runner: one WorkloadRun built for one platform and node set.

input.yaml keys: ``platform``, ``arch``, ``nodeCount`` (names ``node-01``..), optional
``nicResourceName`` (what NIC detection found) and ``run`` (the WorkloadRun manifest; its
namespace defaults to ``default`` and its uid to a fixed value). The GPU and NIC defaults and
the platform file's fabric spec come from the shipped catalog, as the controller takes them.

Output: the built Workflow (its platform overrides unresolved), the dependencies as the
Workflow resolves them for the platform (``resolvedDependencies``, ``Kind/name``), which
overrides applied, and the schema problems of what the cluster would receive (expected empty):
the resolved TrainingRuntime and DRA objects, the ConfigMap and PVC, and the TrainJob of the
first group's Job, against the vendored Trainer, JobSet and Kubernetes schemas.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cre.api.converter import structure, unstructure
from cre.api.workflow import Workflow
from cre.api.workloadrun import WorkloadRun
from cre.catalog import load_catalog
from cre.core.workflow.groupjob import group_job
from cre.core.workflow.overrides import apply_overrides
from cre.core.workloadrun.reconcile import hardware_defaults
from cre.render.workloadrun import RunEnvironment, build_run
from cre.testing.schemas import validate_job_documents

KEYS = frozenset({"type", "platform", "arch", "nodeCount", "nicResourceName", "run"})


def run(case_dir: Path, data: dict[str, Any]) -> Any:
    """Build the case's WorkloadRun and return the Workflow, resolved objects and problems."""
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise ValueError(f"{case_dir}/input.yaml: unknown keys {unknown} (known: {sorted(KEYS)})")
    manifest = dict(data["run"])
    meta = {"namespace": "default", "uid": "00000000-0000-0000-0000-000000000001",
            **dict(manifest.get("metadata") or {})}
    manifest = {"apiVersion": "cre.dev/v1alpha1", "kind": "WorkloadRun", **manifest,
                "metadata": meta}
    wr = structure(manifest, WorkloadRun)
    platform, arch = str(data["platform"]), str(data["arch"])
    catalog = load_catalog()
    defaults = hardware_defaults(catalog, platform=platform, arch=arch) or (8, 0)
    nodes = tuple(f"node-{i:02d}" for i in range(1, int(data.get("nodeCount", 2)) + 1))
    built = build_run(wr, env=RunEnvironment(
        platform=platform, architecture=arch, nodes=nodes, gpus_per_node=defaults[0],
        mlnx_per_node=defaults[1], nic_resource_name=data.get("nicResourceName"),
        fabric=catalog.fabric_spec(platform=platform, arch=arch, num_nodes=wr.spec.num_nodes,
                                   entry=wr.metadata.name or "")))
    wf = structure(built.workflow, Workflow)
    effective, applied = apply_overrides(wf, platform=platform, arch=arch)
    deps = [dict(d) for d in effective.spec.dependencies]
    job = group_job(effective, name=f"{wr.metadata.name}-job", group="group-0",
                    nodes=nodes[:built.nodes_per_job], renames={})
    return {
        "workflow": built.workflow,
        "resolvedDependencies": {f"{d['kind']}/{d['metadata']['name']}": d for d in deps},
        "applied": [unstructure(a) for a in applied],
        "schemaProblems": [str(p) for p in validate_job_documents([job, *deps])],
    }
