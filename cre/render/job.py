"""The CRE ``Job`` object for one rendered workload, plus the objects it depends on.

The Job carries the TrainJob spec at ``spec.workload.trainJob`` (the Job controller creates the
TrainJob ``<job>-workload`` from it), the node pinning annotation ``cre.dev/group-nodes`` used
for failed-node attribution, the gang queue label through ``workloadMetadata``, the node health
CEL and the entry's own Job fields (:func:`entry_job_fields`: its bandwidth or goodput
measurement; a training entry's stall detection and, with a checkpoint PVC, its checkpoint
restarts). The demo applies exactly these documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cre.api import labels as L
from cre.catalog.model import Catalog, CatalogEntry
from cre.render.options import RenderOptions
from cre.render.workload import RenderedWorkload, render_workload

NODE_HEALTH_CEL = "node.spec.unschedulable == true"


def entry_job_fields(entry: CatalogEntry, *, checkpoint_claim: str | None = None,
                     max_restarts: int | None = None) -> dict[str, Any]:
    """The Job spec fields ``entry`` asks for: its measurement request; for a training entry
    ``stallMultiplier`` and ``startupStallTimeoutSeconds``, and with ``checkpoint_claim`` (the
    PVC the workload mounts) ``checkpoint {pvcName, maxRestarts}``, ``max_restarts``
    defaulting to the entry's."""
    fields: dict[str, Any] = entry.measurement.job_fields() if entry.measurement else {}
    training = entry.training
    if training is not None:
        fields["stallMultiplier"] = training.stall_multiplier
        fields["startupStallTimeoutSeconds"] = training.startup_stall_timeout_seconds
        if checkpoint_claim is not None and training.checkpoint is not None:
            restarts = (training.checkpoint.max_restarts if max_restarts is None
                        else max_restarts)
            fields["checkpoint"] = {"pvcName": checkpoint_claim, "maxRestarts": restarts}
    return fields


def job_object(
    *,
    job_name: str,
    namespace: str,
    rendered: RenderedWorkload,
    nodes: Sequence[str],
    fields: Mapping[str, Any],
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``cre.dev/v1alpha1`` Job dict around an already rendered workload, with the
    entry's ``fields`` (:func:`entry_job_fields`)."""
    spec: dict[str, Any] = {
        "workload": {"trainJob": rendered.train_job_spec},
        "nodeHealthMonitor": {"cel": {"expression": NODE_HEALTH_CEL}},
    }
    if rendered.workload_labels:
        spec["workloadMetadata"] = {"labels": dict(rendered.workload_labels)}
    spec.update(fields)
    return {
        "apiVersion": L.API_VERSION,
        "kind": "Job",
        "metadata": {
            "name": job_name,
            "namespace": namespace,
            "labels": {L.MANAGED_BY: L.MANAGED_BY_VALUE, **(labels or {})},
            "annotations": {L.GROUP_NODES: ",".join(sorted(nodes))},
        },
        "spec": spec,
    }


def render_job_manifest(
    *,
    job_name: str,
    namespace: str,
    catalog: Catalog,
    entry: str,
    platform: str,
    arch: str,
    nodes: Sequence[str],
    options: RenderOptions | None = None,
    labels: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The Job dict first, then its dependencies (TrainingRuntime, ComputeDomain, claims)."""
    opts = options or RenderOptions()
    resolved = catalog.resolve(
        entry, platform=platform, arch=arch, num_nodes=len(nodes), parameters=opts.parameters
    )
    rendered = render_workload(
        job_name=job_name, namespace=namespace, resolved=resolved, nodes=nodes, options=opts
    )
    job = job_object(
        job_name=job_name,
        namespace=namespace,
        rendered=rendered,
        nodes=nodes,
        fields=entry_job_fields(resolved.entry, checkpoint_claim=opts.checkpoint_claim),
        labels=labels,
    )
    return [job, *rendered.dependencies()]
