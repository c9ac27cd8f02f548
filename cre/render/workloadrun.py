"""Build a WorkloadRun into its generated TrainingRuntime, ConfigMap, PVC and Workflow, purely.

Input: the run, the platform and GPU architecture detection found, the eligible node names and
the hardware defaults (GPUs and NICs per node, the NIC resource name when detected). Output:
the Workflow the run owns (named like the run, labelled ``cre.dev/workload-run``), whose
``dependencies`` are the generated ``<run>-runtime`` TrainingRuntime, the ``<run>-config``
ConfigMap (inline config) and the ``<run>-checkpoint-pvc`` PVC (checkpointing), and whose
``overrides`` are the platform's patches (``cre.render.runplatform``, built into overrides by
``cre.render.runoverrides``), kept unresolved with
their ``when`` so the Workflow resolves them and records ``appliedOverrides`` (rows that can
never match the detected platform are left out), followed by the run's own overrides.

Frameworks (one replicated job ``node``; MPI adds ``launcher``):

* torch: ``torchrun [-m module | script] args``; exec: ``command`` + ``args``. The pod never
  restarts in place (the Job tier restarts the whole workload from a checkpoint).
* mpi: sshd workers (``OnFailure``, bounded backoff), a launcher that runs ``mpirun`` with the
  catalog's fail-fast fields through :func:`cre.render.workload.launcher_fail_fast`, and under
  KAI the catalog's ``wait-for-workers`` init container instead of ``dependsOn``
  (:func:`cre.render.workload.apply_gang_scheduler`). The TrainJob's runtime patch names the
  launcher explicitly, so the Workflow's pinning and tolerations reach it.

Every user string (binary, args, mpiArgs, command, env values) reaches the container as one
literal argv element or an EnvVar value, never through a shell; user env travels to MPI ranks
as a bare ``-x NAME``. Where a platform pre-command forces ``/bin/bash -c``, the script ends in
``exec`` of the argv with each element ``shlex.quote``-d (:func:`wrap_script`).
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from cre.api import labels as L
from cre.api.common import TargetSpec
from cre.api.converter import unstructure
from cre.api.durations import duration_seconds
from cre.api.job import WorkloadRetention
from cre.api.workloadrun import RunTestScale, WorkloadRun
from cre.render import runplatform as RP
from cre.render import scripts
from cre.render.options import DEFAULT_WORKER_BACKOFF_LIMIT, GangScheduler
from cre.render.runoverrides import platform_overrides
from cre.render.workload import (
    ANCESTOR_LABEL,
    CONTAINER,
    FAIL_FAST_RULE,
    FRAMEWORK_LABEL,
    LAUNCHER_JOB,
    MAX_JOB_NAME,
    NODE_JOB,
    PATCH_MANAGER,
    TRAINER_API,
    TRAINER_GROUP,
    apply_gang_scheduler,
    launcher_fail_fast,
    patch_job,
    pinning,
)

WORKLOAD_RUN_LABEL: Final = "cre.dev/workload-run"
CLIQUE_KEY: Final = "nvidia.com/gpu.clique"
NODE_HEALTH_CEL: Final = "node.spec.unschedulable == true"
DEFAULT_TIMEOUT: Final = "24h"
CONFIG_DIR: Final = "/config"
CHECKPOINT_DIR: Final = "/checkpoint"
BASH_C: Final = ("/bin/bash", "-c")
ENV_NAME: Final = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
NAME: Final = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
RSH_ARGS: Final = "-o StrictHostKeyChecking=no -o ConnectionAttempts=10"


class RunBuildError(ValueError):
    """The run cannot be built; the message names the field path and what is wrong."""


@attrs.frozen(kw_only=True)
class RunEnvironment:
    """What the cluster told the builder: platform, architecture, nodes and defaults."""

    platform: str
    architecture: str
    nodes: tuple[str, ...]
    gpus_per_node: int
    mlnx_per_node: int
    nic_resource_name: str | None = None
    fabric: Mapping[str, Any] = attrs.field(factory=dict)
    """The catalog platform file's fabric spec for this platform and architecture
    (``Catalog.fabric_spec``); the rows of ``cre.render.runplatform`` that share it read it."""


@attrs.frozen(kw_only=True)
class BuiltRun:
    """The generated objects; ``workflow`` carries the others as its dependencies."""

    workflow: dict[str, Any]
    training_runtime: dict[str, Any]
    config_map: dict[str, Any] | None
    pvc: dict[str, Any] | None
    gpus_per_node: int
    nodes_per_job: int


def framework_of(run: WorkloadRun) -> str:
    """``torch``, ``mpi`` or ``exec`` (RunBuildError unless exactly one is set)."""
    fw = run.spec.framework
    set_ = [n for n in ("torch", "mpi", "exec") if getattr(fw, n) is not None]
    if len(set_) != 1:
        raise RunBuildError(f"spec.framework: set exactly one of torch, mpi, exec (got "
                            f"{', '.join(set_) or 'none'})")
    return set_[0]


def wrap_script(pre_command: Sequence[str], argv: Sequence[str]) -> str:
    """A ``bash -c`` script: the pre-command lines, then ``exec`` of ``argv``, every element
    ``shlex.quote``-d so it reaches the program as exactly one literal argument."""
    return "\n".join([*pre_command, "exec " + " ".join(shlex.quote(a) for a in argv)]) + "\n"


def k8s_literal(text: str) -> str:
    """``text`` escaped for the kubelet, which expands ``$(NAME)`` in a container's command,
    args and env values (``$$`` is its escape for one literal ``$``)."""
    return text.replace("$", "$$")


def _user_env(run: WorkloadRun) -> list[dict[str, Any]]:
    out = []
    for i, entry in enumerate(run.spec.env):
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            raise RunBuildError(f"spec.env[{i}].name: {name!r} is not a valid environment "
                                "variable name (letters, digits, '_', '-', '.'; not starting "
                                "with a digit)")
        value = entry.get("value")
        if value is not None and not isinstance(value, str):
            raise RunBuildError(f"spec.env[{i}].value: expected a string, got "
                                f"{type(value).__name__}")
        item = dict(entry)
        if value is not None:
            item["value"] = k8s_literal(value)
        out.append(item)
    return out


def _resources(run: WorkloadRun, gpus: int) -> dict[str, Any]:
    given = copy.deepcopy(dict(run.spec.resources or {}))
    for side in ("limits", "requests"):
        values = dict(given.get(side) or {})
        values.setdefault("nvidia.com/gpu", str(gpus))
        given[side] = {k: str(v) for k, v in values.items()}
    return given


def _volumes(run: WorkloadRun) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    name = run.metadata.name or ""
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    config = run.spec.config
    if config is not None and (config.inline or config.config_map_ref is not None):
        cm = f"{name}-config" if config.inline else config.config_map_ref.name  # type: ignore[union-attr]
        volumes.append({"name": "config", "configMap": {"name": cm}})
        mounts.append({"name": "config", "mountPath": CONFIG_DIR, "readOnly": True})
    if run.spec.checkpoint is not None:
        volumes.append({"name": "checkpoint",
                        "persistentVolumeClaim": {"claimName": f"{name}-checkpoint-pvc"}})
        mounts.append({"name": "checkpoint", "mountPath": CHECKPOINT_DIR})
    volumes += [dict(v) for v in run.spec.volumes]
    mounts += [dict(m) for m in run.spec.volume_mounts]
    return volumes, mounts


def _node_container(run: WorkloadRun, *, gpus: int, env: list[dict[str, Any]],
                    mounts: list[dict[str, Any]], mpi: bool) -> dict[str, Any]:
    container: dict[str, Any] = {"name": CONTAINER, "image": run.spec.image}
    if mpi:
        container["command"] = ["sh", "-c", scripts.WORKER_SSHD]
        container["ports"] = [{"name": "ssh", "containerPort": 22, "protocol": "TCP"}]
        container["readinessProbe"] = {
            "exec": {"command": ["sh", "-c", scripts.WORKER_READY]},
            "initialDelaySeconds": 5, "periodSeconds": 30, "timeoutSeconds": 10}
        container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK", "SYS_CHROOT"]}}
    if env:
        container["env"] = env
    container["resources"] = _resources(run, gpus)
    container["volumeMounts"] = mounts
    return container


def _runtime(run: WorkloadRun, *, framework: str, gpus: int, nodes_per_job: int,
             env: list[dict[str, Any]], gang: GangScheduler | None) -> dict[str, Any]:
    name = run.metadata.name or ""
    mpi = framework == "mpi"
    volumes, mounts = _volumes(run)
    container = _node_container(run, gpus=gpus, env=env, mounts=mounts, mpi=mpi)
    pod: dict[str, Any] = {"containers": [container], "volumes": volumes}
    if run.spec.init_containers:
        pod["initContainers"] = [dict(c) for c in run.spec.init_containers]
    if run.spec.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": s.name} for s in run.spec.image_pull_secrets]
    if run.spec.priority_class_name:
        pod["priorityClassName"] = run.spec.priority_class_name
    worker_meta: dict[str, Any] = {"labels": {"app": name}}
    if mpi:
        pod = {"restartPolicy": "OnFailure", "tolerations": [{"operator": "Exists"}], **pod}
        worker_spec: dict[str, Any] = {"backoffLimit": DEFAULT_WORKER_BACKOFF_LIMIT,
                                       "template": {"spec": pod}}
    else:
        worker_meta["labels"][ANCESTOR_LABEL] = "trainer"
        pod = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 30,
               "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}, **pod}
        worker_spec = {"backoffLimit": 0,
                       "podFailurePolicy": {"rules": [copy.deepcopy(FAIL_FAST_RULE)]},
                       "template": {"spec": pod}}
    jobs = [{"name": NODE_JOB, "template": {"metadata": worker_meta, "spec": worker_spec}}]
    if mpi:
        jobs.append(_launcher(run, env=env))
    jobset: dict[str, Any] = {
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "replicatedJobs": jobs}
    if mpi:
        jobset["successPolicy"] = {"operator": "All", "targetReplicatedJobs": [LAUNCHER_JOB]}
    if gang is not None:
        apply_gang_scheduler(jobset, gang, mpi=mpi, image=run.spec.image,
                             explicit_launcher_limit=None)
    if mpi:
        policy: dict[str, Any] = {"numNodes": 1, "mpi": {
            "mpiImplementation": run.spec.framework.mpi.mpi_implementation,  # type: ignore[union-attr]
            "numProcPerNode": gpus, "sshAuthMountPath": scripts.SSH_RAW_DIR,
            "runLauncherAsNode": False}}
    else:
        policy = {"numNodes": nodes_per_job, "torch": {}}
    return {
        "apiVersion": TRAINER_API, "kind": "TrainingRuntime",
        "metadata": {"name": f"{name}-runtime", "namespace": run.metadata.namespace or "",
                     "labels": {L.MANAGED_BY: L.MANAGED_BY_VALUE, "app": name,
                                FRAMEWORK_LABEL: "mpi" if mpi else "torch"}},
        "spec": {"mlPolicy": policy, "template": {"spec": jobset}},
    }


def _launcher(run: WorkloadRun, *, env: list[dict[str, Any]]) -> dict[str, Any]:
    name = run.metadata.name or ""
    container: dict[str, Any] = {"name": CONTAINER, "image": run.spec.image}
    if env:
        container["env"] = env
    container["resources"] = {"limits": {"cpu": "2", "memory": "1Gi"},
                              "requests": {"cpu": "2", "memory": "1Gi"}}
    container["volumeMounts"] = [{"name": "ssh-keys", "mountPath": "/root/.ssh"}]
    fix = {"name": "fix-ssh-permissions", "image": run.spec.image,
           "command": ["sh", "-c", scripts.FIX_SSH_PERMISSIONS],
           "volumeMounts": [
               {"name": scripts.SSH_AUTH_VOLUME, "mountPath": scripts.SSH_RAW_DIR,
                "readOnly": True},
               {"name": "ssh-keys", "mountPath": "/root/.ssh"}]}
    pod: dict[str, Any] = {"tolerations": [{"operator": "Exists"}], "initContainers": [fix],
                           "containers": [container],
                           "volumes": [{"name": "ssh-keys", "emptyDir": {}}]}
    if run.spec.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": s.name} for s in run.spec.image_pull_secrets]
    if run.spec.priority_class_name:
        pod["priorityClassName"] = run.spec.priority_class_name
    return {"name": LAUNCHER_JOB, "dependsOn": [{"name": NODE_JOB, "status": "Ready"}],
            "template": {"metadata": {"labels": {"app": name, ANCESTOR_LABEL: "trainer"}},
                         "spec": launcher_fail_fast({"template": {"spec": pod}}, kai=False,
                                                    explicit=None)}}


def _timeout(run: WorkloadRun) -> str:
    orch = run.spec.orchestration
    return orch.timeout_per_job if orch is not None and orch.timeout_per_job else DEFAULT_TIMEOUT


def _mnnvl(run: WorkloadRun, arch: str) -> bool:
    return run.spec.enable_mnnvl if run.spec.enable_mnnvl is not None else arch in RP.MNNVL_ARCHS


def _argv(run: WorkloadRun, *, framework: str, gpus: int, mnnvl: bool,
          blocks: Sequence[RP.RunPlatformBlock], user_env: Sequence[Mapping[str, Any]]
          ) -> list[str]:
    """The trainer's whole argv (command then args), user strings as literal elements."""
    fw = run.spec.framework
    if fw.torch is not None:
        head = ["-m", fw.torch.module] if fw.torch.module else [fw.torch.script or ""]
        return ["torchrun", *head, *fw.torch.args]
    if fw.exec is not None:
        return [*fw.exec.command, *fw.exec.args]
    mpi = fw.mpi
    assert mpi is not None and framework == "mpi"
    args = ["-N", str(gpus), "--allow-run-as-root", "--mca", "plm_rsh_args", RSH_ARGS,
            "-x", "NCCL_DEBUG=INFO", "-x", f"NCCL_MNNVL_ENABLE={int(mnnvl)}"]
    for block in blocks:
        for key, value in block.env.items():
            args += ["-x", f"{key}={value}"]
        args += block.mpi_args
    args += mpi.mpi_args
    names = [str(e["name"]) for e in user_env]
    args = RP.drop_exported(args, frozenset(names))
    for env_name in names:
        args += ["-x", env_name]
    seconds = int(duration_seconds(_timeout(run)))
    return ["timeout", str(seconds), mpi.mpirun_path, *args, mpi.binary, *mpi.args]


def _trainer(run: WorkloadRun, *, argv: Sequence[str], pre_command: Sequence[str],
             split: int, nodes_per_job: int, gpus: int, mpi: bool,
             user_env: list[dict[str, Any]]) -> dict[str, Any]:
    trainer: dict[str, Any] = {"image": run.spec.image, "numNodes": nodes_per_job}
    if pre_command:
        trainer["command"] = list(BASH_C)
        trainer["args"] = [k8s_literal(wrap_script(pre_command, argv))]
    else:
        trainer["command"] = [k8s_literal(a) for a in argv[:split]]
        trainer["args"] = [k8s_literal(a) for a in argv[split:]]
    if user_env:
        trainer["env"] = user_env
    if mpi or run.spec.framework.torch is not None:  # torchrun --nproc-per-node
        trainer["numProcPerNode"] = gpus
    return trainer


def _config_map(run: WorkloadRun) -> dict[str, Any] | None:
    config = run.spec.config
    if config is None or not config.inline:
        return None
    name = run.metadata.name or ""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{name}-config", "namespace": run.metadata.namespace or "",
                         "labels": {L.MANAGED_BY: L.MANAGED_BY_VALUE, "app": name}},
            "data": {k: config.inline[k] for k in sorted(config.inline)}}


def _pvc(run: WorkloadRun) -> dict[str, Any] | None:
    ckpt = run.spec.checkpoint
    if ckpt is None:
        return None
    name = run.metadata.name or ""
    spec: dict[str, Any] = {"accessModes": ["ReadWriteMany"],
                            "resources": {"requests": {"storage": ckpt.storage_size}}}
    if ckpt.storage_class_name:
        spec["storageClassName"] = ckpt.storage_class_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": f"{name}-checkpoint-pvc",
                         "namespace": run.metadata.namespace or "",
                         "labels": {L.MANAGED_BY: L.MANAGED_BY_VALUE, "app": name}},
            "spec": spec}


def build_run(run: WorkloadRun, *, env: RunEnvironment) -> BuiltRun:
    """The Workflow and generated objects of ``run`` (``RunBuildError`` naming the field)."""
    name = run.metadata.name or ""
    namespace = run.metadata.namespace or ""
    if not NAME.fullmatch(name) or len(name) > MAX_JOB_NAME:
        raise RunBuildError(f"metadata.name: {name!r} must be a DNS-1035 label of at most "
                            f"{MAX_JOB_NAME} characters (the Workflow, its Jobs and TrainJobs "
                            "are named after it)")
    framework = framework_of(run)
    spec = run.spec
    gpus = spec.gpus_per_node or env.gpus_per_node
    mlnx = spec.mlnx_per_node if spec.mlnx_per_node is not None else env.mlnx_per_node
    orch = spec.orchestration
    scale = orch.test_scale if orch is not None else None
    per_job = 1 if scale == RunTestScale.INTRA_NODE else spec.num_nodes
    if per_job > len(env.nodes):
        raise RunBuildError(f"spec.numNodes: {per_job} is more than the {len(env.nodes)} "
                            f"eligible node(s) on {env.platform}/{env.architecture}; set "
                            f"numNodes to {len(env.nodes)} or less")
    if framework == "torch" and spec.framework.torch is not None and \
            bool(spec.framework.torch.script) == bool(spec.framework.torch.module):
        raise RunBuildError("spec.framework.torch: set exactly one of script, module")
    user_env = _user_env(run)
    mnnvl = _mnnvl(run, env.architecture)
    blocks = RP.blocks_for(platform=env.platform, arch=env.architecture, framework=framework,
                           fabric=env.fabric)
    nic = spec.nic_resource_name or env.nic_resource_name
    env = attrs.evolve(env, nic_resource_name=nic)
    gang = GangScheduler.from_spec(spec.gang_scheduler) if spec.gang_scheduler else None
    mpi = framework == "mpi"
    runtime = _runtime(run, framework=framework, gpus=gpus, nodes_per_job=per_job,
                       env=user_env, gang=gang)
    argv = _argv(run, framework=framework, gpus=gpus, mnnvl=mnnvl, blocks=blocks,
                 user_env=user_env)
    pre = [line for b in blocks for line in b.pre_command]
    fw = spec.framework
    split = 3 if mpi else len(fw.exec.command) if fw.exec is not None else 1
    trainer = _trainer(run, argv=argv, pre_command=pre, split=split, nodes_per_job=per_job,
                       gpus=gpus,
                       mpi=mpi, user_env=user_env)
    nodes = env.nodes[:per_job]
    replicated = [patch_job(NODE_JOB, {L.JOB: name}, pinning(name, nodes, spread=not mpi))]
    if mpi:  # the explicit launcher target: pinning and tolerations reach the launcher
        replicated.append(patch_job(LAUNCHER_JOB, {L.LAUNCHER: name},
                                    pinning(name, nodes, spread=False)))
    train_job = {"runtimeRef": {"apiGroup": TRAINER_GROUP, "kind": "TrainingRuntime",
                                "name": f"{name}-runtime"},
                 "trainer": trainer,
                 "runtimePatches": [{"manager": PATCH_MANAGER, "trainingRuntimeSpec": {
                     "template": {"spec": {"replicatedJobs": replicated}}}}]}
    # The user's own workload: its pods, and their logs, stay for the user to read until the
    # WorkloadRun is deleted (a Certification's runs release theirs: cre.core.job.release).
    job_spec: dict[str, Any] = {"workload": {"trainJob": train_job},
                                "nodeHealthMonitor": {"cel": {"expression": NODE_HEALTH_CEL}},
                                "workloadRetention": WorkloadRetention.RETAIN.value}
    labels = dict(spec.workload_metadata.labels) if spec.workload_metadata else {}
    if gang is not None:
        labels[gang.queue_label_key] = gang.queue
    if labels:
        job_spec["workloadMetadata"] = {"labels": labels}
    if spec.bandwidth_measurement is not None:
        job_spec["bandwidthMeasurement"] = unstructure(spec.bandwidth_measurement)
    if spec.goodput_measurement is not None:
        job_spec["goodputMeasurement"] = unstructure(spec.goodput_measurement)
    if spec.checkpoint is not None:
        job_spec["checkpoint"] = {"pvcName": f"{name}-checkpoint-pvc",
                                  "maxRestarts": spec.checkpoint.max_restarts}
    execution: dict[str, Any] = {"timeoutPerJob": _timeout(run)}
    if orch is not None and orch.max_concurrent:
        execution["maxConcurrent"] = orch.max_concurrent
    orchestration: dict[str, Any] = {
        "target": unstructure(spec.target or TargetSpec(node_selector={L.GPU_PRESENT: "true"})),
        "iterations": orch.repeat_count if orch is not None else 1,
        "execution": execution}
    if scale == RunTestScale.INTRA_RACK:
        orchestration["topology"] = {"topologyKey": CLIQUE_KEY, "strictDomain": True}
    if orch is not None and orch.placement is not None:
        orchestration["placement"] = unstructure(orch.placement)
    config_map, pvc = _config_map(run), _pvc(run)
    deps = [runtime, *(d for d in (config_map, pvc) if d is not None)]
    overrides = platform_overrides(run, platform=env.platform, architecture=env.architecture,
                                   nic_resource_name=env.nic_resource_name,
                                   framework=framework, blocks=blocks, mnnvl=mnnvl,
                                   user_env=user_env, mlnx=mlnx, per_job=per_job)
    overrides += [unstructure(o) for o in spec.overrides]
    wf_spec: dict[str, Any] = {"namespace": namespace, "jobTemplate": {"spec": job_spec},
                               "orchestration": orchestration,
                               "dependencies": copy.deepcopy(deps)}
    if overrides:
        wf_spec["overrides"] = overrides
    if spec.thresholds:
        wf_spec["validation"] = {"performance": {"enabled": True, "thresholds": {
            "thresholds": dict(spec.thresholds)}}}
    if spec.gang_scheduler is not None:
        wf_spec["gangScheduler"] = unstructure(spec.gang_scheduler)
    if spec.failure_policy is not None:
        wf_spec["failurePolicy"] = unstructure(spec.failure_policy)
    workflow = {
        "apiVersion": L.API_VERSION, "kind": "Workflow",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {L.MANAGED_BY: L.MANAGED_BY_VALUE, WORKLOAD_RUN_LABEL: name},
                     "ownerReferences": [{"apiVersion": L.API_VERSION, "kind": "WorkloadRun",
                                          "name": name, "uid": run.metadata.uid or "",
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": wf_spec}
    return BuiltRun(workflow=workflow, training_runtime=runtime, config_map=config_map,
                    pvc=pvc, gpus_per_node=gpus, nodes_per_job=per_job)
