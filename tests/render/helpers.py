"""Small accessors over rendered dicts, shared by the render tests."""

from __future__ import annotations

from typing import Any

from cre.catalog import load_catalog
from cre.render import RenderOptions, render_job_manifest

CATALOG = load_catalog()


def render(
    entry: str,
    platform: str = "aws",
    arch: str = "h100",
    *,
    nodes: int = 2,
    options: RenderOptions | None = None,
) -> list[dict[str, Any]]:
    """Render the shipped entry for ``nodes`` nodes with job name ``j``."""
    return render_job_manifest(
        job_name="j",
        namespace="ns",
        catalog=CATALOG,
        entry=entry,
        platform=platform,
        arch=arch,
        nodes=[f"n{i}" for i in range(nodes)],
        options=options,
    )


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The single document of ``kind``."""
    (doc,) = [d for d in docs if d["kind"] == kind]
    return doc


def rjob(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """A replicated job of the rendered TrainingRuntime."""
    runtime = by_kind(docs, "TrainingRuntime")
    jobs: list[dict[str, Any]] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    (job,) = [j for j in jobs if j["name"] == name]
    return job


def patches(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The controller runtime patch's replicated jobs, by name."""
    spec = by_kind(docs, "Job")["spec"]["workload"]["trainJob"]
    (patch,) = spec["runtimePatches"]
    jobs = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    return {j["name"]: j for j in jobs}
