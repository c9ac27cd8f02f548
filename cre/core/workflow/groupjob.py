"""The CRE Job one Workflow group runs: its name and its manifest, derived without I/O.

The Workflow's ``jobTemplate.spec`` is the spec ``cre.render`` produced for the category (a
TrainJob spec whose runtime patches pin the replicated jobs to nodes and label their pods).
For each group and iteration this module:

* names the Job ``<workflow>-job`` (one group, one iteration) or
  ``<workflow>-<group>-iter-<n>``, shortened with a hash to fit Trainer's limit on
  ``<job>-workload``;
* rewrites the spec to the group: ``trainer.numNodes``, the required node affinity
  ``kubernetes.io/hostname In <nodes>`` on every replicated job (launcher included), the pod
  labels ``cre.dev/job`` / ``cre.dev/launcher`` and the spread anti-affinity to the Job's name,
  references to the group's own copies of job-scoped dependencies (the TrainJob spec and
  ``checkpoint.pvcName``);
* tolerates exactly the target's ``taintSelectors`` when they are set;
* sets ``workloadRetention: Release`` unless the template sets it (the finished group's
  workload is deleted once nothing needs its pods, cre.core.job.release);
* copies ``timeoutPerJob`` (the Job tier enforces it and captures the timeout log, launcher
  first), the thresholds and ``measurementTimeout``;
* sets the Workflow's ``nodeHealthMonitor`` when it has one; else keeps the default node-health
  CEL (a node cordoned mid-run fails the Job as hardware) unless the target deliberately
  selects cordoned nodes;
* labels the Job (managed-by, workflow, group), annotates ``cre.dev/group-nodes`` (and
  ``cre.dev/group-gpus``, each node's allocatable GPUs at launch: the monitor's baseline) and
  makes the Workflow its controller.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from cre.api import labels as L
from cre.api.common import RelativeScope
from cre.api.converter import unstructure
from cre.api.job import WorkloadRetention
from cre.api.workflow import Workflow
from cre.core.job.health import GROUP_GPUS
from cre.core.workflow.deps import rewrite
from cre.core.workflow.discovery import admits_cordoned
from cre.core.workflow.usable import tolerations_in
from cre.render.job import NODE_HEALTH_CEL
from cre.render.workload import HOSTNAME_KEY, MAX_JOB_NAME, NODE_JOB

JOB_KIND: Final = "Job"


def job_name(workflow: str, *, group: str, iteration: int, single: bool,
             attempt: int = 0) -> str:
    """The group's Job name for this iteration and attempt (a retry gets a new name), at
    most ``MAX_JOB_NAME`` characters."""
    name = f"{workflow}-job" if single else f"{workflow}-{group}-iter-{iteration}"
    if attempt:
        name += f"-retry-{attempt}"
    if len(name) <= MAX_JOB_NAME:
        return name
    # Shorten the Workflow part and keep the group/iteration/retry tail readable.
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    tail = name[len(workflow):]
    room = MAX_JOB_NAME - len(tail) - len(digest) - 1
    if room < 8:
        return f"{name[:MAX_JOB_NAME - 9].rstrip('-')}-{digest}"
    return f"{shorten_words(workflow, room)}-{digest}{tail}"


def shorten_words(name: str, room: int) -> str:
    """``name`` in at most ``room`` characters, dropping whole words from the middle: as many
    words from the end as fit (a Certification's Workflow ends with the variant, the part
    that tells two Jobs apart), then from the start (its Certification). A name with no
    such cut falls back to its first ``room`` characters."""
    words = name.split("-")
    for end in range(len(words) - 1, 0, -1):
        for start in range(len(words) - end, 0, -1):
            kept = "-".join(words[:start] + words[len(words) - end:])
            if len(kept) <= room:
                return kept
    return name[:room].rstrip("-")


def _affinity(job: str, nodes: Sequence[str], old: Mapping[str, Any] | None) -> dict[str, Any]:
    affinity: dict[str, Any] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": HOSTNAME_KEY, "operator": "In", "values": sorted(nodes)}]}]}}}
    if old and "podAntiAffinity" in old:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {L.JOB: job}}, "topologyKey": HOSTNAME_KEY}]}
    return affinity


def workload_tolerations(workflow: Workflow) -> tuple[Mapping[str, Any], ...]:
    """Every toleration a group's pods may carry: the target's (set on every replicated job),
    the template's and the dependencies' pod templates (e.g. the TrainingRuntime's)."""
    return (*(_tolerations(workflow) or ()),
            *tolerations_in(workflow.spec.job_template.spec.workload.train_job or {}),
            *tolerations_in(list(workflow.spec.dependencies)))


def _tolerations(workflow: Workflow) -> list[dict[str, Any]] | None:
    target = workflow.spec.orchestration.target
    if target is None or not target.taint_selectors:
        return None
    out = []
    for sel in target.taint_selectors:
        tol: dict[str, Any] = {"key": sel.key}
        if sel.value is not None:
            tol.update(operator="Equal", value=sel.value)
        else:
            tol["operator"] = "Exists"
        if sel.effect is not None:
            tol["effect"] = str(sel.effect)
        out.append(tol)
    return out


def _pin_patch(rj: dict[str, Any], job: str, nodes: Sequence[str],
               tolerations: list[dict[str, Any]] | None) -> None:
    pod = rj.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
    meta = pod.setdefault("metadata", {})
    labels = meta.setdefault("labels", {})
    if L.LAUNCHER in labels:
        labels[L.LAUNCHER] = job
    else:
        labels[L.JOB] = job
    spec = pod.setdefault("spec", {})
    spec["affinity"] = _affinity(job, nodes, spec.get("affinity"))
    if tolerations is not None:
        spec["tolerations"] = [dict(t) for t in tolerations]


def pinned_train_job(train_job: Mapping[str, Any], *, job: str, nodes: Sequence[str],
                     renames: Mapping[str, str],
                     tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The TrainJob spec rewritten for one group (see the module docstring)."""
    spec: dict[str, Any] = rewrite(train_job, renames)
    trainer = spec.get("trainer")
    if isinstance(trainer, dict):
        trainer["numNodes"] = len(nodes)
    patches = spec.setdefault("runtimePatches", [])
    pinned = 0
    for patch in patches:
        rjs = (patch.get("trainingRuntimeSpec", {}).get("template", {}).get("spec", {})
               .get("replicatedJobs", []))
        for rj in rjs:
            _pin_patch(rj, job, nodes, tolerations)
            pinned += 1
    if not pinned:
        node_job: dict[str, Any] = {"name": NODE_JOB}
        _pin_patch(node_job, job, nodes, tolerations)
        patches.append({"manager": "cre.dev/controller", "trainingRuntimeSpec": {
            "template": {"spec": {"replicatedJobs": [node_job]}}}})
    return spec


def group_job(
    workflow: Workflow, *, name: str, group: str, nodes: Sequence[str],
    renames: Mapping[str, str], group_gpus: str = "",
) -> dict[str, Any]:
    """The full ``cre.dev/v1alpha1`` Job manifest of one group run."""
    wf_name = workflow.metadata.name or ""
    template = workflow.spec.job_template
    spec: dict[str, Any] = unstructure(template.spec)
    workload = dict(spec.get("workload") or {})
    if workload.get("trainJob") is not None:
        workload["trainJob"] = pinned_train_job(workload["trainJob"], job=name, nodes=nodes,
                                                renames=renames,
                                                tolerations=_tolerations(workflow))
    spec["workload"] = workload
    if spec.get("checkpoint") is not None:  # the group's own copy of a job-scoped PVC
        spec["checkpoint"] = rewrite(spec["checkpoint"], renames)
    # The verdict is the Workflow's; once a group's Job is finished and its logs and
    # measurements are read, its workload goes (cre.core.job.release), unless the template says.
    spec.setdefault("workloadRetention", WorkloadRetention.RELEASE.value)
    execution = workflow.spec.orchestration.execution
    if execution is not None and execution.timeout_per_job:
        spec["timeoutPerJob"] = execution.timeout_per_job
    perf = workflow.spec.validation.performance if workflow.spec.validation else None
    if perf is not None:
        if perf.thresholds is not None and perf.thresholds.thresholds:
            spec["thresholds"] = dict(perf.thresholds.thresholds)
        if (perf.relative_threshold is not None
                and perf.relative_threshold.scope == RelativeScope.NODE):
            # A Group rule is the Workflow's own (cre.core.workflow.groupfleet).
            spec["relativeThreshold"] = unstructure(perf.relative_threshold)
        if perf.measurement_timeout:
            spec["measurementTimeout"] = perf.measurement_timeout
    target = workflow.spec.orchestration.target
    if workflow.spec.node_health_monitor is not None:
        spec["nodeHealthMonitor"] = unstructure(workflow.spec.node_health_monitor)
    elif target is not None and admits_cordoned(target):
        spec.pop("nodeHealthMonitor", None)
    elif "nodeHealthMonitor" not in spec:
        spec["nodeHealthMonitor"] = {"cel": {"expression": NODE_HEALTH_CEL}}
    meta = template.metadata
    labels = {**(dict(meta.labels) if meta else {}), L.MANAGED_BY: L.MANAGED_BY_VALUE,
              L.WORKFLOW: wf_name, L.GROUP_LABEL: group}
    annotations = {**(dict(meta.annotations) if meta else {}),
                   L.GROUP_NODES: ",".join(sorted(nodes))}
    if group_gpus:
        annotations[GROUP_GPUS] = group_gpus
    return {
        "apiVersion": L.API_VERSION,
        "kind": JOB_KIND,
        "metadata": {
            "name": name,
            "namespace": workflow.status.namespace or workflow.spec.namespace
            or workflow.metadata.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": L.API_VERSION, "kind": "Workflow", "name": wf_name,
                "uid": workflow.metadata.uid or "", "controller": True,
                "blockOwnerDeletion": True}],
        },
        "spec": spec,
    }
