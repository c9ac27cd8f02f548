"""The Job's workload: the Kubeflow TrainJob it creates, owns, and reads the state of.

Naming follows the reference (``<job>-workload``, truncated with an FNV-32a suffix so pod names
stay within the 63-character hostname limit). The pod labels that scope CRE's two pod caches are
injected through the TrainJob's ``runtimePatches``: worker pods get ``cre.dev/job`` and launcher
pods ``cre.dev/launcher``, never both (launchers must stay out of node discovery, the drain
barrier and attribution, which key on ``cre.dev/job``). A launcher patch is added only when the
spec already patches a ``launcher`` replicated job, because Trainer's webhook rejects a patch for a
replicated job the runtime lacks.
"""

from __future__ import annotations

import copy
import enum
import hashlib
from collections.abc import Mapping
from typing import Any, Final

from cre.api.job import Job
from cre.api.labels import API_VERSION, JOB, LAUNCHER, MANAGED_BY, MANAGED_BY_VALUE
from cre.api.meta import ObjectReference
from cre.core.common.observed import TrainJobView

TRAINJOB_API_VERSION: Final = "trainer.kubeflow.org/v1alpha1"
TRAINJOB_KIND: Final = "TrainJob"
WORKLOAD_NAME_MAX: Final = 44
PATCH_MANAGER: Final = "cre.dev/job-controller"
LAUNCHER_REPLICATED_JOB: Final = "launcher"
DEFAULT_WORKER_REPLICATED_JOB: Final = "node"


class WorkloadState(enum.StrEnum):
    """The TrainJob's state as the Job tier reads it."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


def truncate(name: str, limit: int) -> str:
    """``name`` if short enough, else its head, ``-`` and 10 hex digits of SHA-256 of the whole.

    The groups of one Workflow share the head (their names differ only in the tail the cut
    drops), so the digest alone keeps their TrainJobs apart: 40 bits make two of 10,000 groups
    meet with a chance of about 5e-5 (20 bits, as before, gave 17 % at 625 groups: a 5,000-node
    certification failed two groups ``WorkloadNameCollision``)."""
    if len(name) <= limit:
        return name
    head = name[: limit - 11].rstrip("-")
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{head}-{digest}"


def workload_name(job_name: str) -> str:
    """The TrainJob name of a Job."""
    return truncate(f"{job_name}-workload", WORKLOAD_NAME_MAX)


def owned_by(view: TrainJobView, job: Job) -> bool:
    """Whether the Job is the controller owner of the TrainJob (by UID)."""
    uid = job.metadata.uid
    return any(ref.controller and ref.uid == uid and ref.kind == "Job" for ref in view.owner_refs)


def state_of(view: TrainJobView) -> tuple[WorkloadState, str]:
    """The TrainJob's state and the message of the condition that decided it."""
    failed = view.condition("Failed")
    if failed is not None and failed.status == "True":
        return WorkloadState.FAILED, failed.message or failed.reason or ""
    complete = view.condition("Complete")
    if complete is not None and complete.status == "True":
        return WorkloadState.SUCCEEDED, complete.message or ""
    if view.suspended:
        return WorkloadState.PENDING, "workload is suspended"
    return WorkloadState.RUNNING, ""


def reference(view: TrainJobView) -> ObjectReference:
    """``status.workloadRef`` for a TrainJob instance."""
    return ObjectReference(api_version=TRAINJOB_API_VERSION, kind=TRAINJOB_KIND, name=view.name,
                           namespace=view.namespace, uid=view.uid)


def _pod_label_patch(replicated_job: str, key: str, value: str) -> dict[str, Any]:
    return {"name": replicated_job, "template": {"spec": {"template": {
        "metadata": {"labels": {key: value}}}}}}


def _patched_replicated_jobs(spec: Mapping[str, Any]) -> list[str]:
    names: list[str] = []
    for patch in spec.get("runtimePatches") or ():
        runtime = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        for rj in (runtime.get("spec") or {}).get("replicatedJobs") or ():
            name = rj.get("name")
            if isinstance(name, str) and name not in names:
                names.append(name)
    return names


def has_launcher(job: Job) -> bool:
    """Whether the Job's workload runs a ``launcher`` replicated job CRE labels (the rendered
    spec patches one). Without one (loopback, DCGM), the workers' own exits decide the run."""
    names = _patched_replicated_jobs(job.spec.workload.train_job or {})
    return LAUNCHER_REPLICATED_JOB in names


def inject_pod_labels(spec: Mapping[str, Any], job_name: str) -> dict[str, Any]:
    """A copy of the TrainJob spec with CRE's own runtime patch labelling worker and launcher
    pods. Workers are every patched replicated job but ``launcher`` (``node`` when none is)."""
    out = copy.deepcopy(dict(spec))
    names = _patched_replicated_jobs(out)
    workers = [n for n in names if n != LAUNCHER_REPLICATED_JOB] or [DEFAULT_WORKER_REPLICATED_JOB]
    replicated = [_pod_label_patch(n, JOB, job_name) for n in workers]
    if LAUNCHER_REPLICATED_JOB in names:
        replicated.append(_pod_label_patch(LAUNCHER_REPLICATED_JOB, LAUNCHER, job_name))
    patches = [p for p in out.get("runtimePatches") or () if p.get("manager") != PATCH_MANAGER]
    patches.append({"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": replicated}}}})
    out["runtimePatches"] = patches
    return out


def manifest(job: Job) -> dict[str, Any]:
    """The TrainJob a Job creates: named ``<job>-workload``, controlled by the Job."""
    name = job.metadata.name or ""
    labels: dict[str, str] = {}
    if job.spec.workload_metadata is not None:
        labels.update(job.spec.workload_metadata.labels)
    labels[MANAGED_BY] = MANAGED_BY_VALUE
    labels[JOB] = name
    spec = inject_pod_labels(job.spec.workload.train_job or {}, name)
    return {
        "apiVersion": TRAINJOB_API_VERSION,
        "kind": TRAINJOB_KIND,
        "metadata": {
            "name": workload_name(name),
            "namespace": job.metadata.namespace,
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": API_VERSION, "kind": "Job", "name": name,
                "uid": job.metadata.uid, "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "spec": spec,
    }
