"""The ``render`` golden runner: one catalog entry rendered for one platform and node set.

input.yaml keys: ``entry``, ``platform``, ``arch``, and either ``nodes`` (names) or
``nodeCount`` (names ``node-01``..); optional ``jobName`` (default: the case folder name),
``namespace``, ``kai`` (true, or ``{queue, schedulerName, queueLabelKey}``), ``image``,
``workerBackoffLimit``, ``launcherBackoffLimit``, ``nicResourceName``, ``parameters``.
Output: the rendered documents keyed ``<Kind>/<name>`` plus the override blocks applied, and
the schema problems found (expected to be an empty list; a golden with problems is visible).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cre.catalog import load_catalog
from cre.render import GangScheduler, RenderOptions, render_job_manifest
from cre.testing.schemas import validate_job_documents

KEYS = frozenset(
    {
        "type",
        "entry",
        "platform",
        "arch",
        "nodes",
        "nodeCount",
        "jobName",
        "namespace",
        "kai",
        "image",
        "workerBackoffLimit",
        "launcherBackoffLimit",
        "nicResourceName",
        "parameters",
    }
)


def case_options(data: dict[str, Any]) -> RenderOptions:
    """RenderOptions from a render case's input."""
    kai = data.get("kai")
    gang = None
    if kai is True:
        gang = GangScheduler()
    elif isinstance(kai, dict):
        gang = GangScheduler(
            **{
                {
                    "queue": "queue",
                    "schedulerName": "scheduler_name",
                    "queueLabelKey": "queue_label_key",
                }[k]: v
                for k, v in kai.items()
            }
        )
    return RenderOptions(
        image=data.get("image"),
        gang_scheduler=gang,
        worker_backoff_limit=data.get("workerBackoffLimit", 3),
        launcher_backoff_limit=data.get("launcherBackoffLimit"),
        nic_resource_name=data.get("nicResourceName"),
        parameters=data.get("parameters", {}),
    )


def case_nodes(data: dict[str, Any]) -> list[str]:
    """Target node names from ``nodes`` or ``nodeCount``."""
    if "nodes" in data:
        return [str(n) for n in data["nodes"]]
    return [f"node-{i:02d}" for i in range(1, int(data.get("nodeCount", 2)) + 1)]


def run(case_dir: Path, data: dict[str, Any]) -> Any:
    """Render the case and return ``{"objects": {...}, "applied": [...], "schemaProblems": []}``."""
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise ValueError(f"{case_dir}/input.yaml: unknown keys {unknown} (known: {sorted(KEYS)})")
    catalog = load_catalog()
    nodes = case_nodes(data)
    options = case_options(data)
    docs = render_job_manifest(
        job_name=data.get("jobName", case_dir.name),
        namespace=data.get("namespace", "default"),
        catalog=catalog,
        entry=data["entry"],
        platform=data["platform"],
        arch=data["arch"],
        nodes=nodes,
        options=options,
    )
    resolved = catalog.resolve(
        data["entry"],
        platform=data["platform"],
        arch=data["arch"],
        num_nodes=len(nodes),
        parameters=options.parameters,
    )
    return {
        "objects": {f"{d['kind']}/{d['metadata']['name']}": d for d in docs},
        "applied": list(resolved.applied),
        "schemaProblems": [str(p) for p in validate_job_documents(docs)],
    }
