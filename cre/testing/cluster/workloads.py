"""Catalog workloads as the simulator receives them: a TrainingRuntime and a TrainJob.

CRE's Job controller creates the TrainJob ``<job>-workload`` from ``spec.workload.trainJob`` of a
rendered Job. Scenarios and tests that exercise the simulator without that controller use this
helper to get the same two objects straight from the real renderer (:mod:`cre.render`), so the
simulator always meets the images, commands, labels and policies CRE really produces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cre.catalog.loader import load_catalog
from cre.kube.client import TRAINJOBS
from cre.render.job import render_job_manifest
from cre.render.options import GangScheduler, RenderOptions
from cre.testing.cluster.clock import DEFAULT_EPOCH
from cre.testing.cluster.memory import MemoryCluster
from cre.testing.cluster.model import is_true
from cre.testing.cluster.profiles import Profile, node_manifest, node_name

PLATFORM_ARCH = {"aws-h100": ("aws", "h100"), "aws-gb200": ("aws", "gb200"),
                 "gcp-h100": ("gcp", "h100"), "onprem-gb200": ("onprem", "gb200"),
                 "oci-gb300": ("oci", "gb300")}


def render_documents(*, entry: str, job_name: str, namespace: str, profile: Profile,
                     nodes: Sequence[str], kai: bool = False,
                     worker_backoff_limit: int | None = None) -> list[dict[str, Any]]:
    """The CRE Job and its dependencies for ``entry`` on ``profile`` pinned to ``nodes``."""
    platform, arch = PLATFORM_ARCH[profile.name]
    extra: dict[str, Any] = {}
    if worker_backoff_limit is not None:
        extra["worker_backoff_limit"] = worker_backoff_limit
    options = RenderOptions(gang_scheduler=GangScheduler() if kai else None, **extra)
    return render_job_manifest(job_name=job_name, namespace=namespace, catalog=load_catalog(),
                               entry=entry, platform=platform, arch=arch, nodes=list(nodes),
                               options=options)


def trainjob_objects(*, entry: str, job_name: str, namespace: str, profile: Profile,
                     nodes: Sequence[str], kai: bool = False,
                     worker_backoff_limit: int | None = None) -> list[dict[str, Any]]:
    """The rendered dependencies followed by the TrainJob ``<job>-workload`` (no CRE Job)."""
    docs = render_documents(entry=entry, job_name=job_name, namespace=namespace, profile=profile,
                            nodes=nodes, kai=kai, worker_backoff_limit=worker_backoff_limit)
    job, deps = docs[0], docs[1:]
    spec = dict(job["spec"]["workload"]["trainJob"])
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                "metadata": {"name": f"{job_name}-workload", "namespace": namespace,
                             "labels": dict((job["spec"].get("workloadMetadata") or {})
                                            .get("labels") or {})},
                "spec": spec}
    return [*deps, trainjob]


def memory_cluster(*, entry: str, job_name: str = "ar", namespace: str = "default",
                   profile: Profile, nodes: int = 2, kai: bool = False,
                   start: float = DEFAULT_EPOCH) -> MemoryCluster:
    """An in-memory cluster of ``nodes`` profile nodes holding ``entry``'s runtime and TrainJob.

    Run it with :meth:`MemoryCluster.run` and :func:`trainjob_finished` as the stop condition.
    """
    mc = MemoryCluster()
    for i in range(nodes):
        mc.add(node_manifest(profile, i), start)
    names = [node_name(profile, i) for i in range(nodes)]
    for obj in trainjob_objects(entry=entry, job_name=job_name, namespace=namespace,
                                profile=profile, nodes=names, kai=kai):
        mc.add(obj, start)
    return mc


def trainjob_finished(key: str) -> Callable[[MemoryCluster], bool]:
    """Stop condition: the TrainJob ``namespace/name`` is Complete or Failed."""
    def done(mc: MemoryCluster) -> bool:
        tj = mc.objects[TRAINJOBS.plural].get(key)
        return tj is not None and (is_true(tj, "Complete") or is_true(tj, "Failed"))
    return done
