"""The WorkloadRun platform table's rows that share the catalog: the ComputeDomain and claim
builders, the platform files' fabric values, the AWS MPI plugin argument and the GB200/GB300
topology keys."""

from __future__ import annotations

from typing import Any

import pytest

from cre.api.converter import structure, unstructure
from cre.api.workflow import Workflow
from cre.api.workloadrun import WorkloadRun
from cre.catalog import load_catalog
from cre.core.workflow.overrides import apply_overrides
from cre.render import RenderOptions, render_workload
from cre.render.workload import claim_template, compute_domain
from cre.render.workloadrun import CLIQUE_KEY, RunEnvironment, build_run

MPI = {"binary": "/opt/nccl-tests/build/all_reduce_perf", "mpirunPath": "/usr/local/mpi/bin/mpirun"}
TORCH = {"module": "train"}
NODES = ("n1", "n2", "n3", "n4")
CATALOG = load_catalog()


def run_of(framework: dict[str, Any], **spec: Any) -> WorkloadRun:
    body = {"image": "img:1", "numNodes": 2, "framework": framework, **spec}
    return structure({"apiVersion": "cre.dev/v1alpha1", "kind": "WorkloadRun",
                      "metadata": {"name": "wr", "namespace": "ns", "uid": "u-1"},
                      "spec": body}, WorkloadRun)


def build(run: WorkloadRun, platform: str, arch: str) -> dict[str, Any]:
    fabric = CATALOG.fabric_spec(platform=platform, arch=arch, num_nodes=run.spec.num_nodes,
                                 entry="wr")
    built = build_run(run, env=RunEnvironment(platform=platform, architecture=arch,
                                              nodes=NODES, gpus_per_node=4, mlnx_per_node=4,
                                              fabric=fabric))
    return built.workflow


def effective(wf: dict[str, Any], platform: str, arch: str) -> dict[str, Any]:
    resolved, _ = apply_overrides(structure(wf, Workflow), platform=platform, arch=arch)
    out = unstructure(resolved.spec)
    assert isinstance(out, dict)
    return out


def args(wf: dict[str, Any]) -> list[str]:
    trainer = wf["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]
    return [*trainer["command"], *trainer["args"]]


def deps(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in spec["dependencies"]}


def node_pod(spec: dict[str, Any]) -> dict[str, Any]:
    rt = deps(spec)["TrainingRuntime/wr-runtime"]
    job = next(j for j in rt["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "node")
    pod = job["template"]["spec"]["template"]
    assert isinstance(pod, dict)
    return pod


@pytest.mark.parametrize("arch", ["h100", "gb200", "gb300"])
def test_every_aws_mpi_run_disables_the_net_plugin(arch: str) -> None:
    """Block 4 has no architecture selector: every AWS MPI run exports NCCL_NET_PLUGIN=none
    (as a pair, once); torch runs and other platforms do not."""
    argv = args(build(run_of({"mpi": MPI}), "aws", arch))
    pairs = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-x"]
    if arch == "gb300":  # the pre-command wraps the argv into a bash -c script
        assert argv[:2] == ["/bin/bash", "-c"] and "-x NCCL_NET_PLUGIN=none " in argv[2]
    else:
        assert pairs.count("NCCL_NET_PLUGIN=none") == 1
    assert "NCCL_NET_PLUGIN=none" not in " ".join(args(build(run_of({"torch": TORCH}), "aws",
                                                             arch)))
    assert "NCCL_NET_PLUGIN=none" not in args(build(run_of({"mpi": MPI}), "gcp", "h100"))


def test_user_env_replaces_the_aws_net_plugin_pair() -> None:
    """The user's NCCL_NET_PLUGIN wins over block 4: the pair goes, a bare -x forwards theirs."""
    run = run_of({"mpi": MPI}, env=[{"name": "NCCL_NET_PLUGIN", "value": "ofi"}])
    argv = args(build(run, "aws", "h100"))
    assert "NCCL_NET_PLUGIN=none" not in argv
    assert argv[argv.index(MPI["binary"]) - 2:argv.index(MPI["binary"])] == \
        ["-x", "NCCL_NET_PLUGIN"]


@pytest.mark.parametrize(("platform", "key"), [
    ("aws", "topology.k8s.aws/network-node-layer-1"),
    ("gcp", "cloud.google.com/gce-topology-block"),
])
@pytest.mark.parametrize(("scale", "strict"), [(None, False), ("full-scale", False),
                                               ("intra-rack", True)])
def test_gb_topology_key_per_platform(platform: str, key: str, scale: str | None,
                                      strict: bool) -> None:
    """Block 2: on GB200/GB300 the platform's key replaces the base topology (the catalog's
    clique key under intra-rack), strict only under intra-rack."""
    spec: dict[str, Any] = {"orchestration": {"testScale": scale}} if scale else {}
    wf = build(run_of({"torch": TORCH}, **spec), platform, "gb200")
    base = wf["spec"]["orchestration"].get("topology")
    assert base == ({"topologyKey": CLIQUE_KEY, "strictDomain": True} if strict else None)
    topo = effective(wf, platform, "gb200")["orchestration"]["topology"]
    assert topo == {"topologyKey": key, "strictDomain": strict}


def test_no_topology_override_intra_node_or_without_a_platform_key() -> None:
    """One node per Job has nothing to pack; on-prem and OCI keep the catalog's clique key."""
    intra_node = build(run_of({"torch": TORCH}, orchestration={"testScale": "intra-node"}),
                       "aws", "gb200")
    assert "topology" not in effective(intra_node, "aws", "gb200")["orchestration"]
    for platform in ("onprem", "oci"):
        wf = build(run_of({"torch": TORCH}, orchestration={"testScale": "intra-rack"}),
                   platform, "gb300")
        assert effective(wf, platform, "gb300")["orchestration"]["topology"] == {
            "topologyKey": CLIQUE_KEY, "strictDomain": True}
    h100 = build(run_of({"torch": TORCH}), "aws", "h100")
    assert "topology" not in effective(h100, "aws", "h100")["orchestration"]


def test_compute_domain_is_the_catalogs() -> None:
    """Block 1 builds its ComputeDomain with the catalog renderer's function: the same object
    a catalog entry gets, named after the run, spanning one group."""
    spec = effective(build(run_of({"torch": TORCH}), "onprem", "gb200"), "onprem", "gb200")
    assert deps(spec)["ComputeDomain/wr-compute-domain"] == compute_domain(
        "wr", namespace="ns", app="wr", num_nodes=2)
    rendered = render_workload(
        job_name="j", namespace="ns", nodes=("a", "b"), options=RenderOptions(),
        resolved=CATALOG.resolve("communication/nccl-all-reduce", platform="onprem",
                                 arch="gb200", num_nodes=2))
    catalog_cd = next(o for o in rendered.extra_objects if o["kind"] == "ComputeDomain")
    assert catalog_cd == compute_domain("j", namespace="ns", app="nccl-all-reduce", num_nodes=2)
    pod = node_pod(spec)["spec"]
    assert pod["resourceClaims"] == [{"name": "compute-domain",
                                      "resourceClaimTemplateName": "wr-channel"}]


def test_mnnvl_off_means_no_compute_domain_but_the_roce_claim_stays() -> None:
    """enableMNNVL false drops block 1; the AWS GB300 RoCE claim (block 7) does not depend
    on it: the platform file's claim, by the catalog's claim_template."""
    spec = effective(build(run_of({"torch": TORCH}, enableMNNVL=False), "aws", "gb300"),
                     "aws", "gb300")
    objects = deps(spec)
    assert "ComputeDomain/wr-compute-domain" not in objects
    (claim,) = CATALOG.fabric_spec(platform="aws", arch="gb300", num_nodes=2,
                                   entry="wr")["claims"]
    assert objects["ResourceClaimTemplate/wr-roce-channel"] == claim_template(
        "wr", namespace="ns", app="wr", claim=claim)
    pod = node_pod(spec)["spec"]
    assert pod["resourceClaims"] == [{"name": "roce-channel",
                                      "resourceClaimTemplateName": "wr-roce-channel"}]
    assert pod["containers"][0]["resources"]["claims"] == [{"name": "roce-channel"}]


def test_gcp_h100_fastrak_env_is_the_platform_files() -> None:
    """Block 9 takes the gcp file's FastRak env (less the TCPXO mount's LD_LIBRARY_PATH the
    run does not get): as trainer env for torch, as -x pairs for MPI."""
    fabric_env = dict(CATALOG.fabric_spec(platform="gcp", arch="h100", num_nodes=2,
                                          entry="wr")["env"])
    assert fabric_env.pop("LD_LIBRARY_PATH")
    spec = effective(build(run_of({"torch": TORCH}), "gcp", "h100"), "gcp", "h100")
    trainer = spec["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]
    assert trainer["env"] == [{"name": k, "value": v} for k, v in fabric_env.items()]
    argv = args(build(run_of({"mpi": MPI}), "gcp", "h100"))
    pairs = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-x"]
    assert all(f"{k}={v}" in pairs for k, v in fabric_env.items())
    assert not any(p.startswith("LD_LIBRARY_PATH") for p in pairs)


@pytest.mark.parametrize("arch", ["gb200", "gb300"])
def test_gcp_gb_roce_patch_is_the_platform_files(arch: str) -> None:
    """Block 10: the gcp file's RDMA network annotations, resources and env, with the arm64
    and gpu=present tolerations for the trainer pods."""
    fabric = CATALOG.fabric_spec(platform="gcp", arch=arch, num_nodes=2, entry="wr")
    spec = effective(build(run_of({"exec": {"command": ["/bin/true"]}}), "gcp", arch),
                     "gcp", arch)
    pod = node_pod(spec)
    assert pod["metadata"]["annotations"] == fabric["worker"]["annotations"]
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert {k: limits[k] for k in fabric["worker"]["resources"]} == {
        k: str(v) for k, v in fabric["worker"]["resources"].items()}
    assert {t["key"] for t in pod["spec"]["tolerations"]} == {"kubernetes.io/arch",
                                                              "nvidia.com/gpu"}
    trainer = spec["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]
    env = {e["name"]: e["value"] for e in trainer["env"]}
    assert {k: env[k] for k in fabric["env"]} == dict(fabric["env"])


def test_fabric_spec_is_empty_where_the_catalog_has_no_data() -> None:
    """Detected platforms without a platform file (togetherai, mistral) and architectures a
    file does not list give no fabric values."""
    assert CATALOG.fabric_spec(platform="togetherai", arch="h100", num_nodes=2, entry="x") == {}
    assert CATALOG.fabric_spec(platform="gcp", arch="a100", num_nodes=2, entry="x") == {}
    azure = CATALOG.fabric_spec(platform="azure", arch="h100", num_nodes=2, entry="x")
    assert azure["worker"]["resources"]["nvidia.com/mlnxnics"] == \
        CATALOG.platforms["azure"].architectures["h100"].mlnx_per_node


def test_aws_gb300_mpi_exports_the_platform_files_env_once() -> None:
    """Block 5 exports the aws file's GB300 env; its NCCL_NET_PLUGIN is block 4's, once."""
    script = args(build(run_of({"mpi": MPI}), "aws", "gb300"))[2]
    env = CATALOG.fabric_spec(platform="aws", arch="gb300", num_nodes=2, entry="wr")["env"]
    for key, value in env.items():
        assert script.count(f"-x {key}={value} ") == 1
