"""A WorkloadRun's platform rows as Workflow overrides, kept unresolved with their ``when``.

``cre.render.runplatform`` says what each platform adds; this module turns the rows that apply
into the Workflow's ``overrides`` (the Workflow resolves them once it has detected the platform
and records ``appliedOverrides``):

* worker resources (``{nic}`` / ``{mlnx}`` filled in; a zero count is omitted), capabilities,
  runtime env (the user's names win), tolerations (trainer pods; MPI pods tolerate everything),
  pod annotations and DRA claims (the claim's ResourceClaimTemplate is a dependency) become a
  patch of the generated runtime's ``node`` job;
* a row's topology key becomes ``orchestration.topology`` (strict under ``intra-rack``; left
  out under ``intra-node``, where there is nothing to pack);
* non-MPI fabric env becomes the trainer's env, the rows' env so far merged under the user's
  (the env merge rule); MPI runs get it as ``-x`` arguments instead (``workloadrun._argv``);
* GB200/GB300 with MNNVL: the catalog's IMEX ComputeDomain over one group and its channel claim
  (the reference's block 1).

Pure: dicts in, dicts out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from cre.api.workloadrun import RunTestScale, WorkloadRun
from cre.render import runplatform as RP
from cre.render.workload import (
    CONTAINER,
    NODE_JOB,
    TRAINER_API,
    claim_template,
    compute_domain,
    pod_claim,
)

CD_CLAIM: Final = "compute-domain"  # the reference's WorkloadRun ("torch variant") claim name


def _when(block: RP.RunPlatformBlock, platform: str) -> dict[str, Any]:
    when: dict[str, Any] = {"platform": {"equals": platform}}
    if block.archs or block.not_archs:
        arch: dict[str, Any] = {}
        if block.archs:
            arch["in"] = list(block.archs)
        if block.not_archs:
            arch["notIn"] = list(block.not_archs)
        when["gpuArchitecture"] = arch
    return when


def _runtime_patch(runtime: str, *, job: str, container: Mapping[str, Any] | None = None,
                   pod: Mapping[str, Any] | None = None,
                   annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    pod_spec: dict[str, Any] = dict(pod or {})
    if container:
        pod_spec["containers"] = [{"name": CONTAINER, **container}]
    template: dict[str, Any] = {"spec": pod_spec}
    if annotations:
        template = {"metadata": {"annotations": dict(annotations)}, **template}
    return {"apiVersion": TRAINER_API, "kind": "TrainingRuntime",
            "metadata": {"name": runtime},
            "spec": {"template": {"spec": {"replicatedJobs": [
                {"name": job, "template": {"spec": {"template": template}}}]}}}}


def platform_overrides(run: WorkloadRun, *, platform: str, architecture: str,
                       nic_resource_name: str | None, framework: str,
                       blocks: Sequence[RP.RunPlatformBlock], mnnvl: bool,
                       user_env: list[dict[str, Any]], mlnx: int, per_job: int
                       ) -> list[dict[str, Any]]:
    """The platform's Workflow overrides (see the module docstring), in table order."""
    name = run.metadata.name or ""
    namespace = run.metadata.namespace or ""
    orch = run.spec.orchestration
    scale = orch.test_scale if orch is not None else None
    runtime = f"{name}-runtime"
    mpi = framework == "mpi"
    out: list[dict[str, Any]] = []
    trainer_env: dict[str, str] = {}
    for block in blocks:
        container: dict[str, Any] = {}
        resources: dict[str, str] = {}
        for key, value in block.worker_resources.items():
            key = key.replace("{nic}", nic_resource_name or "")
            value = value.replace("{mlnx}", str(mlnx))
            if key and value != "0":
                resources[key] = value
        if resources:
            container["resources"] = {"limits": resources, "requests": dict(resources)}
        if block.capabilities:
            base = ["IPC_LOCK", "SYS_CHROOT"] if mpi else []
            caps = [*base, *(c for c in block.capabilities if c not in base)]
            container["securityContext"] = {"capabilities": {"add": caps}}
        runtime_env = RP.env_list(block.runtime_env)
        mine = {str(e["name"]) for e in user_env}
        runtime_env = [e for e in runtime_env if e["name"] not in mine]
        if runtime_env:
            container["env"] = runtime_env
        pod: dict[str, Any] = {}
        if block.tolerations and not mpi:
            pod["tolerations"] = [dict(t) for t in block.tolerations]
        templates = [claim_template(name, namespace=namespace, app=name, claim=c)
                     for c in block.claims]
        if block.claims:
            container.setdefault("resources", {})["claims"] = [
                {"name": c["name"]} for c in block.claims]
            pod["resourceClaims"] = [pod_claim(c["name"], f"{name}-{c['name']}")
                                     for c in block.claims]
        deps = [*templates, _runtime_patch(runtime, job=NODE_JOB, container=container, pod=pod,
                                           annotations=block.annotations)] \
            if container or pod or block.annotations else []
        override: dict[str, Any] = {"when": _when(block, platform)}
        if deps:
            override["dependencies"] = deps
        if block.topology_key and scale != RunTestScale.INTRA_NODE:
            override["orchestration"] = {"topology": {
                "topologyKey": block.topology_key,
                "strictDomain": scale == RunTestScale.INTRA_RACK}}
        if block.env and not mpi:
            trainer_env.update(block.env)
            merged = RP.merge_env(RP.env_list(trainer_env), user_env)
            override["jobTemplate"] = {"spec": {"workload": {"trainJob": {"trainer": {
                "env": merged}}}}}
        if len(override) > 1:
            out.append(override)
    if mnnvl and architecture in RP.MNNVL_ARCHS:
        out.append(_compute_domain_override(run, platform=platform, framework=framework,
                                            user_env=user_env, per_job=per_job))
    return out


def _compute_domain_override(run: WorkloadRun, *, platform: str, framework: str,
                             user_env: list[dict[str, Any]], per_job: int) -> dict[str, Any]:
    """GB200/GB300 with MNNVL (the reference's block 1, "torch variant" for every framework):
    the catalog's IMEX ComputeDomain over one group and its channel claim on the workers."""
    name = run.metadata.name or ""
    container: dict[str, Any] = {"resources": {"claims": [{"name": CD_CLAIM}]}}
    if framework != "mpi" and "NCCL_MNNVL_ENABLE" not in {e["name"] for e in user_env}:
        container["env"] = [{"name": "NCCL_MNNVL_ENABLE", "value": "1"}]
    pod = {"resourceClaims": [pod_claim(CD_CLAIM, f"{name}-channel")]}
    domain = compute_domain(name, namespace=run.metadata.namespace or "", app=name,
                            num_nodes=per_job)
    return {"when": {"platform": {"equals": platform},
                     "gpuArchitecture": {"in": list(RP.MNNVL_ARCHS)}},
            "dependencies": [domain, _runtime_patch(f"{name}-runtime", job=NODE_JOB,
                                                    container=container, pod=pod)]}
