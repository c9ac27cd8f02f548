"""The CRE ``Job`` object for one rendered workload, plus the objects it depends on.

The Job carries the TrainJob spec at ``spec.workload.trainJob`` (the Job controller creates the
TrainJob ``<job>-workload`` from it), the node pinning annotation ``cre.dev/group-nodes`` used
for failed-node attribution, the gang queue label through ``workloadMetadata``, the node health
CEL and the entry's bandwidth measurement. The demo applies exactly these documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cre.api import labels as L
from cre.catalog.model import Catalog
from cre.render.options import RenderOptions
from cre.render.workload import RenderedWorkload, render_workload

NODE_HEALTH_CEL = "node.spec.unschedulable == true"


def job_object(
    *,
    job_name: str,
    namespace: str,
    rendered: RenderedWorkload,
    nodes: Sequence[str],
    measurement: Mapping[str, str] | None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``cre.dev/v1alpha1`` Job dict around an already rendered workload."""
    spec: dict[str, Any] = {
        "workload": {"trainJob": rendered.train_job_spec},
        "nodeHealthMonitor": {"cel": {"expression": NODE_HEALTH_CEL}},
    }
    if rendered.workload_labels:
        spec["workloadMetadata"] = {"labels": dict(rendered.workload_labels)}
    if measurement is not None:
        spec["bandwidthMeasurement"] = dict(measurement)
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
    m = resolved.entry.measurement
    measurement = (
        None
        if m is None
        else {
            "logProfileRef": m.log_profile,
            "sampleInterval": m.sample_interval,
            "testType": m.test_type,
        }
    )
    job = job_object(
        job_name=job_name,
        namespace=namespace,
        rendered=rendered,
        nodes=nodes,
        measurement=measurement,
        labels=labels,
    )
    return [job, *rendered.dependencies()]
