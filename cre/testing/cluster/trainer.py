"""The Kubeflow Trainer v2 TrainJob controller, as a pure step over the simulated cluster.

Follows ``kubeflow/trainer`` v2.2.0 (``pkg/controller/trainjob_controller.go``,
``pkg/runtime/core/trainingruntime.go``, plugins ``jobset``, ``mpi``, ``torch``, ``plainml``):
the runtime is looked up as ``TrainingRuntime`` (same namespace) or ``ClusterTrainingRuntime``;
the JobSet is named after the TrainJob, owned by it, labelled from the runtime template
metadata and the runtimePatches (in list order); ``runtimePatches`` are merged per replicated
job by name (containers/volumes/env by name, tolerations replaced); pod counts become
``parallelism`` = ``completions`` (MPI: the ``node`` job gets ``numNodes``, or ``numNodes-1``
with ``runLauncherAsNode``; torch/plain: the ``trainer``-ancestor job); the trainer's image,
command, args, env and resources go to container ``node`` of the ``trainer``-ancestor job
(the launcher for MPI); MPI adds the ``<tj>-mpi-hostfile`` ConfigMap, the ``<tj>-mpi-ssh-auth``
Secret, their volumes and the ``OMPI_MCA_*`` launcher env; torch adds the ``PET_*`` env.
``suspend`` is passed to the JobSet. Conditions: ``Suspended`` (True ``Suspended`` / False
``Resumed``), and ``Complete`` / ``Failed`` copied from the JobSet's True ``Completed`` /
``Failed`` conditions with their reason, message and transition time; ``jobsStatus`` mirrors
``replicatedJobsStatus``. There is no ``Created`` condition (removed before v2.0).

Left out: activeDeadlineSeconds, initializers, podGroupPolicy objects, the runtime-snapshot
ConfigMap of v2.3, re-applying a changed runtime on resume (only ``suspend`` is flipped), a
real SSH key pair (the Secret holds placeholder key material), Events.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cre.api import labels
from cre.kube.client import (
    CLUSTER_TRAINING_RUNTIMES,
    CONFIGMAPS,
    JOBSETS,
    SECRETS,
    TRAINING_RUNTIMES,
    TRAINJOBS,
)
from cre.testing.cluster.clock import fmt_time
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.model import (
    Create,
    Mark,
    Obj,
    Patch,
    Step,
    StepBuilder,
    World,
    condition,
    deep,
    deleting,
    is_true,
    meta,
    name_of,
    ns_of,
    owner_ref,
    set_condition,
    uid_of,
)

ANCESTOR = labels.TRAINJOB_ANCESTOR_STEP
NODE = "node"
LAUNCHER = "launcher"
TORCH_PORT = 29500  # the torch rendezvous port (PET_MASTER_PORT) Trainer sets and exposes


def step(world: World, now: float, cfg: SimConfig) -> Step:
    """One pass of the Trainer controller over every TrainJob."""
    del cfg
    b = StepBuilder()
    for tj in world.all(TRAINJOBS):
        managed = (tj.get("spec") or {}).get("managedBy")
        if deleting(tj) or (managed and managed != "trainer.kubeflow.org/trainjob-controller"):
            continue
        _sync(world, tj, now, b)
    return b.build()


def find_runtime(world: World, tj: Mapping[str, Any]) -> tuple[Obj | None, str]:
    """The referenced runtime, or (None, reason) where reason is '' for "not created yet"."""
    ref = (tj.get("spec") or {}).get("runtimeRef") or {}
    kind = ref.get("kind", "ClusterTrainingRuntime")
    group = ref.get("apiGroup", "trainer.kubeflow.org")
    if group != "trainer.kubeflow.org" or kind not in ("ClusterTrainingRuntime",
                                                       "TrainingRuntime"):
        return None, f"unsupported runtime: {kind}.{group}"
    if kind == "TrainingRuntime":
        return world.get(TRAINING_RUNTIMES, f"{ns_of(tj)}/{ref.get('name')}"), ""
    return world.get(CLUSTER_TRAINING_RUNTIMES, str(ref.get("name"))), ""


def _finished(tj: Mapping[str, Any]) -> bool:
    return is_true(tj, "Complete") or is_true(tj, "Failed")


def _sync(world: World, tj: Obj, now: float, b: StepBuilder) -> None:
    status: Obj = deep(tj.get("status") or {})
    before = deep(status)
    conds = list(status.get("conditions") or [])
    suspend = bool((tj.get("spec") or {}).get("suspend"))
    runtime, problem = find_runtime(world, tj)
    if problem:
        if not is_true(tj, "Failed"):
            conds = set_condition(conds, _cond("Failed", "TrainingRuntimeNotSupported",
                                               problem, now))
        status["conditions"] = conds
        _write(b, tj, before, status)
        return
    js = world.get(JOBSETS, f"{ns_of(tj)}/{name_of(tj)}")
    if not _finished(tj) and runtime is not None:
        if js is None:
            built = build_jobset(tj, runtime)
            b.add(Create(JOBSETS, built))
            if _is_mpi(runtime) and f"mpi/{uid_of(tj)}" not in world.marks:
                b.add(Create(SECRETS, ssh_secret(tj)),
                      Create(CONFIGMAPS, hostfile_configmap(tj, runtime, built)),
                      Mark(f"mpi/{uid_of(tj)}", 1))
        elif bool((js.get("spec") or {}).get("suspend")) != suspend:
            b.add(Patch(JOBSETS, ns_of(js), name_of(js), {"spec": {"suspend": suspend}}))
    if suspend:
        conds = set_condition(conds, _cond("Suspended", "Suspended", "TrainJob is suspended", now))
    elif is_true(tj, "Suspended"):
        conds = set_condition(conds, _cond("Suspended", "Resumed", "TrainJob is resumed", now,
                                           status="False"))
    if js is not None:
        for src, dst in (("Completed", "Complete"), ("Failed", "Failed")):
            c = condition(js, src)
            if c and c.get("status") == "True" and not is_true(tj, dst):
                conds = set_condition(conds, {"type": dst, "status": "True",
                                              "reason": c.get("reason", ""),
                                              "message": c.get("message", ""),
                                              "lastTransitionTime": c.get("lastTransitionTime")
                                              or fmt_time(now)})
        jobs_status = [{k: e.get(k, 0) for k in ("name", "ready", "succeeded", "failed",
                                                  "active", "suspended")}
                       for e in (js.get("status") or {}).get("replicatedJobsStatus") or []]
        if jobs_status:
            status["jobsStatus"] = jobs_status
    if conds:
        status["conditions"] = conds
    _write(b, tj, before, status)


def _cond(ctype: str, reason: str, message: str, now: float, status: str = "True") -> Obj:
    return {"type": ctype, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": fmt_time(now)}


def _write(b: StepBuilder, tj: Obj, before: Obj, status: Obj) -> None:
    if status != before:
        b.add(Patch(TRAINJOBS, ns_of(tj), name_of(tj), {"status": status}, subresource="status"))


def _is_mpi(runtime: Mapping[str, Any]) -> bool:
    return "mpi" in (((runtime.get("spec") or {}).get("mlPolicy")) or {})


def strategic_merge(base: Any, patch: Any, *, key: str = "") -> Any:
    """A small strategic merge: maps recursively, named lists by ``name``, others replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = strategic_merge(base[k], v, key=k) if k in base else deep(v)
        return out
    if (isinstance(base, list) and isinstance(patch, list) and key != "tolerations"
            and all(isinstance(x, dict) and "name" in x for x in (*base, *patch))):
        merged = [dict(x) for x in base]
        for item in patch:
            idx = next((i for i, x in enumerate(merged) if x["name"] == item["name"]), None)
            if idx is None:
                merged.append(deep(item))
            else:
                merged[idx] = strategic_merge(merged[idx], item)
        return merged
    return deep(patch)


def _container(pod_spec: Obj, name: str) -> Obj | None:
    return next((c for c in pod_spec.get("containers") or [] if c.get("name") == name), None)


def _upsert_env(container: Obj, env: list[Obj]) -> None:
    current = [e for e in container.get("env") or [] if e["name"] not in {x["name"] for x in env}]
    container["env"] = current + [dict(e) for e in env]


def build_jobset(tj: Mapping[str, Any], runtime: Mapping[str, Any]) -> Obj:
    """The JobSet Trainer applies for ``tj`` with ``runtime`` (patches merged, counts set)."""
    rspec = runtime.get("spec") or {}
    template: Obj = deep(rspec.get("template") or {})
    js_labels = dict((template.get("metadata") or {}).get("labels") or {})
    js_annotations = dict((template.get("metadata") or {}).get("annotations") or {})
    js_spec: Obj = template.get("spec") or {}
    tspec = tj.get("spec") or {}
    trainer: Mapping[str, Any] = tspec.get("trainer") or {}
    for patch in tspec.get("runtimePatches") or []:
        pt = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        js_labels.update((pt.get("metadata") or {}).get("labels") or {})
        js_annotations.update((pt.get("metadata") or {}).get("annotations") or {})
        for rp in (pt.get("spec") or {}).get("replicatedJobs") or []:
            for rj in js_spec.get("replicatedJobs") or []:
                if rj["name"] == rp["name"] and "template" in rp:
                    rj["template"] = strategic_merge(rj.get("template") or {}, rp["template"])
    policy = rspec.get("mlPolicy") or {}
    mpi = policy.get("mpi")
    num_nodes = int(trainer.get("numNodes") or policy.get("numNodes") or 1)
    slots = _slots(tj, runtime)
    for rj in js_spec.get("replicatedJobs") or []:
        jt: Obj = rj.setdefault("template", {})
        jspec: Obj = jt.setdefault("spec", {})
        ancestor = ((jt.get("metadata") or {}).get("labels") or {}).get(ANCESTOR)
        count = int(jspec.get("parallelism", 1))
        if ancestor == "trainer" and policy:
            count = int(policy.get("numNodes", 1))
        if mpi is not None and rj["name"] == NODE:
            count = max(num_nodes - 1, 1) if mpi.get("runLauncherAsNode") else num_nodes
        elif mpi is None and ancestor == "trainer" and trainer.get("numNodes"):
            count = num_nodes
        jspec["parallelism"] = jspec["completions"] = count
        if ancestor in ("trainer", "dataset-initializer", "model-initializer"):
            rj["replicas"] = 1
        pod_spec: Obj = jspec.setdefault("template", {}).setdefault("spec", {})
        node = _container(pod_spec, NODE)
        if node is None:
            continue
        if ancestor == "trainer":
            for field in ("image", "command", "args"):
                if trainer.get(field):
                    node[field] = deep(trainer[field])
            if trainer.get("env"):
                _upsert_env(node, list(trainer["env"]))
            if trainer.get("resourcesPerNode"):
                node["resources"] = deep(trainer["resourcesPerNode"])
            if mpi is None:
                _upsert_env(node, _torch_env(tj, count, trainer))
                # Trainer's torch plugin exposes the rendezvous port on the trainer container.
                ports = [p for p in node.get("ports") or [] if p.get("containerPort") != TORCH_PORT]
                node["ports"] = [*ports, {"containerPort": TORCH_PORT, "protocol": "TCP"}]
        if mpi is not None and rj["name"] in (NODE, LAUNCHER):
            _mpi_volumes(tj, pod_spec, node, launcher=rj["name"] == LAUNCHER,
                         mount=str(mpi.get("sshAuthMountPath", "/root/.ssh")))
            if rj["name"] == LAUNCHER:
                _upsert_env(node, [
                    {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
                    {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
                    {"name": "OMPI_MCA_orte_set_default_slots", "value": str(slots)},
                    {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"}])
    js_spec["suspend"] = bool(tspec.get("suspend"))
    js_meta: Obj = {"name": name_of(tj), "namespace": ns_of(tj),
                    "ownerReferences": _owned_by(tj)}
    if js_labels:
        js_meta["labels"] = js_labels
    if js_annotations:
        js_meta["annotations"] = js_annotations
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": js_meta,
            "spec": js_spec}


def _torch_env(tj: Mapping[str, Any], count: int, trainer: Mapping[str, Any]) -> list[Obj]:
    name = name_of(tj)
    return [{"name": "PET_NNODES", "value": str(count)},
            {"name": "PET_NPROC_PER_NODE", "value": str(trainer.get("numProcPerNode", "auto"))},
            {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {
                "fieldPath": f"metadata.annotations['{labels.COMPLETION_INDEX}']"}}},
            {"name": "PET_MASTER_ADDR", "value": f"{name}-node-0-0.{name}"},
            {"name": "PET_MASTER_PORT", "value": str(TORCH_PORT)}]


def _slots(tj: Mapping[str, Any], runtime: Mapping[str, Any]) -> int:
    trainer = (tj.get("spec") or {}).get("trainer") or {}
    if trainer.get("numProcPerNode"):
        return int(trainer["numProcPerNode"])
    mpi = ((runtime.get("spec") or {}).get("mlPolicy") or {}).get("mpi") or {}
    per = int(mpi.get("numProcPerNode", 1))
    gpus = 0
    for res in ("limits", "requests"):
        for k, v in ((trainer.get("resourcesPerNode") or {}).get(res) or {}).items():
            if "gpu" in k:
                gpus = max(gpus, int(v))
    return gpus if per == 1 and gpus > 1 else per


def _mpi_volumes(tj: Mapping[str, Any], pod_spec: Obj, node: Obj, *, launcher: bool,
                 mount: str) -> None:
    name = name_of(tj)
    vols = [{"name": "mpi-ssh-auth", "secret": {"secretName": f"{name}-mpi-ssh-auth", "items": [
        {"key": "ssh-privatekey", "path": "id_rsa"}, {"key": "ssh-publickey", "path": "id_rsa.pub"},
        {"key": "ssh-publickey", "path": "authorized_keys"}]}}]
    mounts = [{"name": "mpi-ssh-auth", "mountPath": mount}]
    if launcher:
        vols.append({"name": "mpi-hostfile", "configMap": {
            "name": f"{name}-mpi-hostfile", "items": [{"key": "hostfile", "path": "hostfile",
                                                       "mode": 0o444}]}})
        mounts.append({"name": "mpi-hostfile", "mountPath": "/etc/mpi"})
    pod_spec["volumes"] = strategic_merge(pod_spec.get("volumes") or [], vols)
    node["volumeMounts"] = strategic_merge(node.get("volumeMounts") or [], mounts)


def _owned_by(tj: Mapping[str, Any]) -> list[Obj]:
    """``ownerReferences`` naming the TrainJob as controller (JobSet, hostfile, SSH Secret)."""
    return [owner_ref({"apiVersion": TRAINJOBS.api_version, "kind": TRAINJOBS.kind,
                       "metadata": meta(tj)})]


def ssh_secret(tj: Mapping[str, Any]) -> Obj:
    """The MPI SSH Secret (placeholder key material; nothing in the simulator uses SSH)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/ssh-auth",
            "immutable": True,
            "metadata": {"name": f"{name_of(tj)}-mpi-ssh-auth", "namespace": ns_of(tj),
                         "ownerReferences": _owned_by(tj)},
            "stringData": {"ssh-privatekey": "-----BEGIN EC PRIVATE KEY-----\nsimulated\n"
                           "-----END EC PRIVATE KEY-----\n",
                           "ssh-publickey": f"ecdsa-sha2-nistp521 c2ltdWxhdGVk {name_of(tj)}\n"}}


def hostfile_configmap(tj: Mapping[str, Any], runtime: Mapping[str, Any], js: Obj) -> Obj:
    """``<tj>-mpi-hostfile``: one ``<endpoint> slots=<N>`` line per worker (launcher first)."""
    mpi = ((runtime.get("spec") or {}).get("mlPolicy") or {}).get("mpi") or {}
    slots = _slots(tj, runtime)
    subdomain = ((js.get("spec") or {}).get("network") or {}).get("subdomain") or name_of(tj)
    lines: list[str] = []
    for rj in (js.get("spec") or {}).get("replicatedJobs") or []:
        if rj["name"] == NODE or (rj["name"] == LAUNCHER and mpi.get("runLauncherAsNode")):
            count = int(((rj.get("template") or {}).get("spec") or {}).get("parallelism", 1))
            lines += [f"{name_of(tj)}-{rj['name']}-0-{i}.{subdomain} slots={slots}"
                      for i in range(count)]
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{name_of(tj)}-mpi-hostfile", "namespace": ns_of(tj),
                         "ownerReferences": _owned_by(tj)},
            "data": {"hostfile": "\n".join(lines) + "\n"}}
