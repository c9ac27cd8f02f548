"""Render a resolved catalog entry into the objects a CRE Job needs.

Output: a namespaced TrainingRuntime (``<job>-runtime``), the TrainJob spec the Job controller
embeds as ``spec.workload.trainJob`` (and later creates as ``<job>-workload``), and the DRA
objects some fabrics need (a ComputeDomain for MNNVL, ResourceClaimTemplates for RoCE).

The launcher fail-fast rules of the upstream PR are applied here and nowhere else:
* MPI launcher: ``restartPolicy: Never``, ``backoffLimit`` 1 (0 under KAI, where the launcher
  already waited for every worker; an explicit value wins), and a podFailurePolicy rule that
  Ignores ``DisruptionTarget`` with ``status: "True"`` spelled out (batch/v1 requires it up to
  Kubernetes 1.34), so an evicted launcher is replaced without counting as a failure.
* single-pod entries: the same, with ``backoffLimit: 0`` (the pod is the test).
* MPI workers: ``OnFailure`` with a bounded ``backoffLimit`` (default 3, at most 5).
* ``cre.dev/job`` goes on the worker pod template and ``cre.dev/launcher`` on the launcher pod
  template, both through the controller's TrainJob runtime patch; the launcher entry exists
  only when the runtime has a launcher (Trainer rejects a patch for a missing replicated job).
Pure: no I/O; the same inputs give the same dicts.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from cre.api import labels as L
from cre.catalog.model import Fabric, ResolvedWorkload, RuntimeShape
from cre.render import scripts
from cre.render.options import GangScheduler, RenderError, RenderOptions
from cre.render.parallelism import check_parallelism

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
TRAINER_GROUP = "trainer.kubeflow.org"
COMPUTE_DOMAIN_API = "resource.nvidia.com/v1beta1"
RESOURCE_API = "resource.k8s.io/v1"
PATCH_MANAGER = "cre.dev/controller"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
HOSTNAME_KEY = "kubernetes.io/hostname"
NODE_JOB = "node"
LAUNCHER_JOB = "launcher"
CONTAINER = "node"
CD_CLAIM = "compute-domain-channel"
JOB_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
MAX_JOB_NAME = 63 - len("-workload")
FAIL_FAST_RULE: dict[str, Any] = {
    "action": "Ignore",
    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
}


@attrs.frozen
class RenderedWorkload:
    """Everything one Job needs, as plain JSON-able dicts."""

    training_runtime: dict[str, Any]
    train_job_spec: dict[str, Any]
    extra_objects: tuple[dict[str, Any], ...]
    workload_labels: Mapping[str, str]

    def dependencies(self) -> list[dict[str, Any]]:
        """Objects to create before the TrainJob: the runtime, then DRA objects."""
        return [self.training_runtime, *self.extra_objects]


def render_workload(
    *,
    job_name: str,
    namespace: str,
    resolved: ResolvedWorkload,
    nodes: Sequence[str],
    options: RenderOptions | None = None,
) -> RenderedWorkload:
    """Render ``resolved`` for ``nodes`` into a runtime, a TrainJob spec and DRA objects."""
    opts = options or RenderOptions()
    if not JOB_NAME.fullmatch(job_name) or len(job_name) > MAX_JOB_NAME:
        raise RenderError(
            f"job name {job_name!r}: must be a DNS-1035 label of at most {MAX_JOB_NAME} "
            f"characters (Trainer limits the TrainJob name {job_name}-workload to 63)"
        )
    if not nodes:
        raise RenderError(f"{job_name}: at least one target node is required")
    if len(set(nodes)) != len(nodes):
        raise RenderError(f"{job_name}: target nodes repeat: {list(nodes)}")
    if len(nodes) != resolved.num_nodes:
        raise RenderError(
            f"{job_name}: resolved for {resolved.num_nodes} nodes, got {len(nodes)} target nodes"
        )
    check_parallelism(resolved)
    spec = resolved.spec
    mpi = resolved.entry.runtime is RuntimeShape.MPI
    primary = str(spec["image"])
    image = opts.image or primary
    extra: list[dict[str, Any]] = []
    claims: list[dict[str, str]] = []
    if spec.get("computeDomain"):
        extra.append(
            compute_domain(
                job_name, namespace=namespace, app=resolved.entry.variant,
                num_nodes=resolved.num_nodes,
            )
        )
        claims.append(pod_claim(CD_CLAIM, f"{job_name}-channel"))
    for claim in spec.get("claims", []):
        extra.append(
            claim_template(job_name, namespace=namespace, app=resolved.entry.variant, claim=claim)
        )
        claims.append(pod_claim(claim["name"], f"{job_name}-{claim['name']}"))
    worker_job = _worker_job(resolved, opts, image=image, primary=primary, claims=claims, mpi=mpi)
    jobs = [worker_job]
    if mpi:
        jobs.append(_launcher_job(resolved, opts, image=image, primary=primary))
    for job in jobs:
        pod = job["template"]["spec"]["template"]["spec"]
        if opts.image_pull_secrets:
            pod["imagePullSecrets"] = [{"name": n} for n in opts.image_pull_secrets]
        if opts.priority_class_name:
            pod["priorityClassName"] = opts.priority_class_name
    jobset: dict[str, Any] = {
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "replicatedJobs": jobs,
    }
    if mpi:
        jobset["successPolicy"] = {"operator": "All", "targetReplicatedJobs": [LAUNCHER_JOB]}
    if opts.gang_scheduler is not None:
        apply_gang_scheduler(
            jobset,
            opts.gang_scheduler,
            mpi=mpi,
            image=image,
            explicit_launcher_limit=_explicit_launcher_limit(resolved, opts),
        )
    runtime = {
        "apiVersion": TRAINER_API,
        "kind": "TrainingRuntime",
        "metadata": {
            "name": f"{job_name}-runtime",
            "namespace": namespace,
            "labels": {
                L.MANAGED_BY: L.MANAGED_BY_VALUE,
                "app": resolved.entry.variant,
                FRAMEWORK_LABEL: "mpi" if mpi else "torch",
            },
        },
        "spec": {
            "mlPolicy": _ml_policy(resolved, mpi=mpi),
            "template": {"spec": jobset},
        },
    }
    workload_labels: dict[str, str] = {}
    if opts.gang_scheduler is not None:
        workload_labels[opts.gang_scheduler.queue_label_key] = opts.gang_scheduler.queue
    return RenderedWorkload(
        training_runtime=runtime,
        train_job_spec=_train_job_spec(job_name, resolved, image=image, nodes=nodes, mpi=mpi,
                                       checkpoint=opts.checkpoint_claim is not None),
        extra_objects=tuple(extra),
        workload_labels=workload_labels,
    )


def _ml_policy(resolved: ResolvedWorkload, *, mpi: bool) -> dict[str, Any]:
    if mpi:
        # Trainer sizes the `trainer`-ancestor job (the MPI launcher) from mlPolicy.numNodes and
        # the job named `node` from trainer.numNodes: one launcher, num_nodes sshd workers.
        return {
            "numNodes": 1,
            "mpi": {
                "mpiImplementation": "OpenMPI",
                "numProcPerNode": resolved.gpus_per_node,
                "sshAuthMountPath": scripts.SSH_RAW_DIR,
                "runLauncherAsNode": False,
            },
        }
    return {"numNodes": resolved.num_nodes, "torch": {}}


def _quantities(values: Mapping[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in values.items()}


def _env_list(env: Mapping[str, Any]) -> list[dict[str, str]]:
    return [{"name": k, "value": str(env[k])} for k in sorted(env)]


def _worker_job(
    resolved: ResolvedWorkload,
    opts: RenderOptions,
    *,
    image: str,
    primary: str,
    claims: list[dict[str, str]],
    mpi: bool,
) -> dict[str, Any]:
    spec = resolved.spec
    part: Mapping[str, Any] = spec.get("worker", {})
    resources = {"nvidia.com/gpu": resolved.gpus_per_node, **part.get("resources", {})}
    if opts.nic_resource_name and resolved.mlnx_per_node > 0:
        resources[opts.nic_resource_name] = resolved.mlnx_per_node
    caps = list(part.get("capabilities", []))
    if mpi and "SYS_CHROOT" not in caps:
        caps.append("SYS_CHROOT")
    container: dict[str, Any] = {"name": CONTAINER, "image": image}
    if mpi:
        container["command"] = ["sh", "-c", scripts.WORKER_SSHD]
        container["ports"] = [{"name": "ssh", "containerPort": 22, "protocol": "TCP"}]
        container["readinessProbe"] = {
            "exec": {"command": ["sh", "-c", scripts.WORKER_READY]},
            "initialDelaySeconds": 5,
            "periodSeconds": 30,
            "timeoutSeconds": 10,
        }
    quantities = _quantities(resources)
    container["resources"] = {"limits": quantities, "requests": dict(quantities)}
    for kind in ("limits", "requests"):
        container["resources"][kind].update(opts.resources.get(kind, {}))
    if claims:
        container["resources"]["claims"] = [{"name": c["name"]} for c in claims]
    security: dict[str, Any] = {}
    if caps:
        security["capabilities"] = {"add": caps}
    if "privileged" in part:
        security["privileged"] = part["privileged"]
    if security:
        container["securityContext"] = security
    mounts = list(part.get("volumeMounts", []))
    volumes = list(part.get("volumes", []))
    checkpoint = _checkpoint_path(resolved, opts)
    if checkpoint is not None:
        mounts.append({"name": "checkpoint", "mountPath": checkpoint})
        volumes.append({"name": "checkpoint",
                        "persistentVolumeClaim": {"claimName": opts.checkpoint_claim}})
    if resolved.entry.fabric is Fabric.ALL:
        mounts.insert(0, {"name": "dshm", "mountPath": "/dev/shm"})
        volumes.insert(0, {"name": "dshm", "emptyDir": {"medium": "Memory"}})
    if mounts:
        container["volumeMounts"] = mounts
    pod: dict[str, Any] = {
        "restartPolicy": "OnFailure" if mpi else "Never",
        "tolerations": [{"operator": "Exists"}],
        "containers": [container],
    }
    inits = [
        _retag(c, primary=primary, image=image)
        for c in copy.deepcopy(part.get("initContainers", []))
    ]
    if inits:
        pod["initContainers"] = inits
    if volumes:
        pod["volumes"] = volumes
    if claims:
        pod["resourceClaims"] = claims
    for key in ("hostNetwork", "dnsPolicy"):
        if key in part:
            pod[key] = part[key]
    pod_meta: dict[str, Any] = {}
    if part.get("annotations"):
        pod_meta["annotations"] = dict(part["annotations"])
    job_spec: dict[str, Any] = {
        "template": {"metadata": pod_meta, "spec": pod} if pod_meta else {"spec": pod}
    }
    if mpi:
        job_spec["backoffLimit"] = opts.worker_backoff_limit
    else:
        job_spec["backoffLimit"] = 0
        job_spec["podFailurePolicy"] = {"rules": [copy.deepcopy(FAIL_FAST_RULE)]}
    meta: dict[str, Any] = {"labels": {"app": resolved.entry.variant}}
    if not mpi:
        meta["labels"][ANCESTOR_LABEL] = "trainer"
    return {"name": NODE_JOB, "template": {"metadata": meta, "spec": job_spec}}


def _checkpoint_path(resolved: ResolvedWorkload, opts: RenderOptions) -> str | None:
    """Where the checkpoint PVC is mounted: the entry's path when the options name a claim
    (``RenderError`` for an entry that does not checkpoint), else ``None``."""
    if opts.checkpoint_claim is None:
        return None
    training = resolved.entry.training
    if training is None or training.checkpoint is None:
        raise RenderError(f"{resolved.entry.name}: the entry does not checkpoint (no "
                          "training.checkpoint)")
    return training.checkpoint.mount_path


def _retag(container: dict[str, Any], *, primary: str, image: str) -> dict[str, Any]:
    """Image override reaches init containers that shared the primary image, and no others."""
    if container.get("image") == primary:
        container["image"] = image
    return container


def _explicit_launcher_limit(resolved: ResolvedWorkload, opts: RenderOptions) -> int | None:
    if opts.launcher_backoff_limit is not None:
        return opts.launcher_backoff_limit
    value = resolved.spec.get("launcher", {}).get("backoffLimit")
    return int(value) if value is not None else None


def _launcher_job(
    resolved: ResolvedWorkload, opts: RenderOptions, *, image: str, primary: str
) -> dict[str, Any]:
    part: Mapping[str, Any] = resolved.spec.get("launcher", {})
    container: dict[str, Any] = {"name": CONTAINER, "image": image}
    if part.get("env"):
        container["env"] = _env_list(part["env"])
    if part.get("resources"):
        quantities = _quantities(part["resources"])
        container["resources"] = {"limits": quantities, "requests": dict(quantities)}
    container["volumeMounts"] = [{"name": "ssh-keys", "mountPath": "/root/.ssh"}]
    fix = {
        "name": "fix-ssh-permissions",
        "image": image,
        "command": ["sh", "-c", scripts.FIX_SSH_PERMISSIONS],
        "volumeMounts": [
            {"name": scripts.SSH_AUTH_VOLUME, "mountPath": scripts.SSH_RAW_DIR, "readOnly": True},
            {"name": "ssh-keys", "mountPath": "/root/.ssh"},
        ],
    }
    explicit = _explicit_launcher_limit(resolved, opts)
    return {
        "name": LAUNCHER_JOB,
        "dependsOn": [{"name": NODE_JOB, "status": "Ready"}],
        "template": {
            "metadata": {"labels": {"app": resolved.entry.variant, ANCESTOR_LABEL: "trainer"}},
            "spec": launcher_fail_fast(
                {
                    "template": {
                        "spec": {
                            "tolerations": [{"operator": "Exists"}],
                            "initContainers": [fix],
                            "containers": [container],
                            "volumes": [{"name": "ssh-keys", "emptyDir": {}}],
                        }
                    },
                },
                kai=False,
                explicit=explicit,
            ),
        },
    }


def launcher_fail_fast(
    job_spec: dict[str, Any], *, kai: bool, explicit: int | None
) -> dict[str, Any]:
    """Put the MPI launcher's fail-fast fields on a launcher batch Job spec (in place; returned).

    The one place these fields are decided, for catalog entries and WorkloadRuns alike: once
    the workers are up, a failing mpirun fails the same way again, so the launcher does not
    restart in place (``restartPolicy: Never``; retryFailedGroups re-creates the whole Job if
    wanted); ``backoffLimit`` is ``explicit`` when set, else 0 under KAI (the launcher already
    waited for every worker) and 1 elsewhere (one new pod covers the start-up reachability
    race); an evicted or preempted launcher is replaced without counting as a failure.
    """
    job_spec["backoffLimit"] = explicit if explicit is not None else 0 if kai else 1
    job_spec["podFailurePolicy"] = {"rules": [copy.deepcopy(FAIL_FAST_RULE)]}
    pod = job_spec.setdefault("template", {}).setdefault("spec", {})
    pod["restartPolicy"] = "Never"
    return job_spec


def apply_gang_scheduler(
    jobset: dict[str, Any],
    gang: GangScheduler,
    *,
    mpi: bool,
    image: str,
    explicit_launcher_limit: int | None,
) -> None:
    for job in jobset["replicatedJobs"]:
        template = job["template"]
        template.setdefault("metadata", {}).setdefault("labels", {})[gang.queue_label_key] = (
            gang.queue
        )
        pod = template["spec"]["template"]
        pod.setdefault("metadata", {}).setdefault("labels", {})[gang.queue_label_key] = gang.queue
        pod["spec"]["schedulerName"] = gang.scheduler_name
    if not (mpi and gang.is_kai):
        return
    jobset.pop("startupPolicy", None)
    launcher = next(j for j in jobset["replicatedJobs"] if j["name"] == LAUNCHER_JOB)
    if launcher.get("dependsOn") == [{"name": NODE_JOB, "status": "Ready"}]:
        del launcher["dependsOn"]
    job_spec = launcher["template"]["spec"]
    launcher_fail_fast(job_spec, kai=True, explicit=explicit_launcher_limit)
    job_spec["template"]["spec"]["initContainers"].append(
        {
            "name": "wait-for-workers",
            "image": image,
            "command": ["sh", "-c", scripts.WAIT_FOR_WORKERS],
            "volumeMounts": [
                {"name": scripts.HOSTFILE_VOLUME, "mountPath": "/etc/mpi", "readOnly": True},
                {
                    "name": scripts.SSH_AUTH_VOLUME,
                    "mountPath": scripts.SSH_RAW_DIR,
                    "readOnly": True,
                },
                {"name": "ssh-keys", "mountPath": "/root/.ssh"},
            ],
        }
    )


def pod_claim(name: str, template: str) -> dict[str, str]:
    """A pod ``resourceClaims`` entry: the claim ``name`` made from ``template``."""
    return {"name": name, "resourceClaimTemplateName": template}


def compute_domain(owner: str, *, namespace: str, app: str, num_nodes: int) -> dict[str, Any]:
    """The IMEX ComputeDomain ``<owner>-compute-domain`` whose channel claims come from the
    ResourceClaimTemplate ``<owner>-channel`` (a fabric's ``computeDomain: true``; shared by
    catalog entries and WorkloadRuns)."""
    return {
        "apiVersion": COMPUTE_DOMAIN_API,
        "kind": "ComputeDomain",
        "metadata": {
            "name": f"{owner}-compute-domain",
            "namespace": namespace,
            "labels": {L.MANAGED_BY: L.MANAGED_BY_VALUE, "app": app},
        },
        "spec": {
            "numNodes": num_nodes,
            "channel": {
                "allocationMode": "Single",
                "resourceClaimTemplate": {"name": f"{owner}-channel"},
            },
        },
    }


def claim_template(
    owner: str, *, namespace: str, app: str, claim: Mapping[str, Any]
) -> dict[str, Any]:
    """The ResourceClaimTemplate ``<owner>-<claim name>`` of a fabric's ``claims`` item
    (``count`` devices of ``deviceClassName``; shared by catalog entries and WorkloadRuns)."""
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": f"{owner}-{claim['name']}",
            "namespace": namespace,
            "labels": {L.MANAGED_BY: L.MANAGED_BY_VALUE, "app": app},
        },
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": claim["name"],
                            "exactly": {
                                "deviceClassName": claim["deviceClassName"],
                                "allocationMode": "ExactCount",
                                "count": claim["count"],
                            },
                        }
                    ]
                }
            }
        },
    }


def pinning(job: str, nodes: Sequence[str], *, spread: bool) -> dict[str, Any]:
    affinity: dict[str, Any] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": HOSTNAME_KEY, "operator": "In", "values": sorted(nodes)},
                        ]
                    }
                ],
            }
        }
    }
    if spread:
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {L.JOB: job}},
                    "topologyKey": HOSTNAME_KEY,
                }
            ]
        }
    return affinity


def patch_job(name: str, labels: Mapping[str, str], affinity: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "template": {
            "spec": {
                "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": {"affinity": affinity},
                }
            }
        },
    }


def _train_job_spec(
    job: str, resolved: ResolvedWorkload, *, image: str, nodes: Sequence[str], mpi: bool,
    checkpoint: bool = False,
) -> dict[str, Any]:
    spec = resolved.spec
    timeout = int(spec.get("timeoutSeconds", 0))
    wrap = ["timeout", str(timeout)] if timeout > 0 else []
    env = spec.get("env", {})
    trainer: dict[str, Any] = {"image": image, "numNodes": resolved.num_nodes}
    if mpi:
        mpirun = spec["mpirun"]
        args = ["-N", str(resolved.gpus_per_node), *mpirun.get("args", [])]
        for key in sorted(env):
            args += ["-x", f"{key}={env[key]}"]
        trainer["command"] = [*wrap, mpirun["path"]]
        trainer["args"] = [*args, *spec["command"]]
        trainer["numProcPerNode"] = resolved.gpus_per_node
    else:
        trainer["command"] = [*wrap, *spec["command"][:1]]
        trainer["args"] = [*spec["command"][1:],
                           *(resolved.checkpoint_args if checkpoint else ())]
        if resolved.entry.runtime is RuntimeShape.TORCH:
            trainer["numProcPerNode"] = resolved.gpus_per_node
        if env:
            trainer["env"] = _env_list(env)
    replicated = [patch_job(NODE_JOB, {L.JOB: job}, pinning(job, nodes, spread=not mpi))]
    if mpi:
        replicated.append(
            patch_job(LAUNCHER_JOB, {L.LAUNCHER: job}, pinning(job, nodes, spread=False))
        )
    return {
        "runtimeRef": {
            "apiGroup": TRAINER_GROUP,
            "kind": "TrainingRuntime",
            "name": f"{job}-runtime",
        },
        "trainer": trainer,
        "runtimePatches": [
            {
                "manager": PATCH_MANAGER,
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": replicated}}},
            }
        ],
    }
