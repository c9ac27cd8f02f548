"""Render options and request checks: images, node lists, bounds, DRA objects, the Job."""

from __future__ import annotations

import re

import pytest

from cre.api import labels as L
from cre.render import RenderError, RenderOptions, render_workload

from .helpers import CATALOG, by_kind, render, rjob


def test_image_override_reaches_trainer_runtime_and_matching_inits_only() -> None:
    """The override replaces trainer, containers and same-image inits; tcpxo keeps its own."""
    docs = render(
        "communication/nccl-all-reduce", "gcp", "h100", options=RenderOptions(image="x/y:z")
    )
    trainer = by_kind(docs, "Job")["spec"]["workload"]["trainJob"]["trainer"]
    assert trainer["image"] == "x/y:z"
    node_pod = rjob(docs, "node")["template"]["spec"]["template"]["spec"]
    assert node_pod["containers"][0]["image"] == "x/y:z"
    assert node_pod["initContainers"][0]["name"] == "tcpxo-daemon"
    assert "tcpgpudmarxd" in node_pod["initContainers"][0]["image"]
    launcher_pod = rjob(docs, "launcher")["template"]["spec"]["template"]["spec"]
    assert launcher_pod["initContainers"][0]["image"] == "x/y:z"


def test_worker_backoff_bound() -> None:
    """A worker backoffLimit at or above Kubernetes' default 6 is refused."""
    with pytest.raises(RenderError, match="worker_backoff_limit"):
        RenderOptions(worker_backoff_limit=6)
    with pytest.raises(RenderError, match="launcher_backoff_limit"):
        RenderOptions(launcher_backoff_limit=-1)


def test_node_list_must_match_and_be_unique() -> None:
    """Node lists that are empty, repeat, or disagree with the resolution are refused."""
    resolved = CATALOG.resolve(
        "communication/nccl-all-reduce", platform="aws", arch="h100", num_nodes=2
    )
    for nodes, message in (([], "at least one"), (["a", "a"], "repeat"), (["a"], "resolved for 2")):
        with pytest.raises(RenderError, match=message):
            render_workload(job_name="j", namespace="ns", resolved=resolved, nodes=nodes)


def test_job_object_carries_pinning_measurement_and_health() -> None:
    """The CRE Job has group-nodes, the entry's measurement and the node-health CEL."""
    job = by_kind(render("communication/nccl-all-reduce", nodes=3), "Job")
    assert job["apiVersion"] == L.API_VERSION
    assert job["metadata"]["annotations"] == {L.GROUP_NODES: "n0,n1,n2"}
    assert job["spec"]["bandwidthMeasurement"] == {
        "logProfileRef": "nccl-bandwidth",
        "sampleInterval": "30s",
        "testType": "all_reduce",
    }
    assert job["spec"]["nodeHealthMonitor"] == {
        "cel": {"expression": "node.spec.unschedulable == true"}
    }
    assert "bandwidthMeasurement" not in by_kind(render("diagnostics/dcgm-level1"), "Job")["spec"]


def test_mpi_trainer_command_wraps_mpirun_with_env_as_x_args() -> None:
    """mpirun runs under timeout with -N gpus, env as sorted -x pairs, then the test binary."""
    trainer = by_kind(render("communication/nccl-all-reduce", "onprem", "b200"), "Job")
    t = trainer["spec"]["workload"]["trainJob"]["trainer"]
    assert t["command"] == ["timeout", "3600", "/usr/local/mpi/bin/mpirun"]
    assert t["args"][:2] == ["-N", "8"]
    assert t["args"][t["args"].index("-x") + 1] == "NCCL_DEBUG=INFO"
    assert "/usr/local/bin/all_reduce_perf_mpi" in t["args"]
    assert (t["numNodes"], t["numProcPerNode"]) == (2, 8)


SHELL_REFERENCE = re.compile(r"\$(?!\()[A-Za-z_{]")


@pytest.mark.parametrize("combo", CATALOG.combinations(), ids="-".join)
def test_env_values_reference_no_shell_variables(combo: tuple[str, str, str]) -> None:
    """No env value or ``mpirun -x`` assignment says ``$NAME``: nothing expands it in a pod.

    Kubernetes expands only ``$(NAME)`` of variables defined earlier in the same env list, and
    mpirun's ``-x NAME=value`` passes the value through, so ``PATH=$PATH:...`` would set PATH
    to that literal text on every rank.
    """
    trainer = by_kind(render(*combo), "Job")["spec"]["workload"]["trainJob"]["trainer"]
    args = trainer.get("args", [])
    values = [e["value"] for e in trainer.get("env", [])]
    values += [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-x"]
    assert [v for v in values if SHELL_REFERENCE.search(v)] == []


def test_dcgm_command_is_recognisable() -> None:
    """DCGM runs ``dcgmi diag -r N --json`` from a dcgm image."""
    t = by_kind(render("diagnostics/dcgm-level3"), "Job")["spec"]["workload"]["trainJob"]["trainer"]
    assert " ".join(t["command"] + t["args"]).startswith("timeout 3600 dcgmi diag -r 3 --json")
    assert "dcgm" in t["image"]


def test_compute_domain_and_roce_claim_objects() -> None:
    """AWS GB300 needs a ComputeDomain and a RoCE ResourceClaimTemplate, both claimed by pods."""
    docs = render("communication/nccl-all-reduce", "aws", "gb300", nodes=4)
    cd = by_kind(docs, "ComputeDomain")
    assert cd["spec"] == {
        "numNodes": 4,
        "channel": {"allocationMode": "Single", "resourceClaimTemplate": {"name": "j-channel"}},
    }
    rct = by_kind(docs, "ResourceClaimTemplate")
    request = rct["spec"]["spec"]["devices"]["requests"][0]
    assert request["exactly"]["deviceClassName"] == "roce.networking.k8s.aws"
    pod = rjob(docs, "node")["template"]["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [
        {"name": "compute-domain-channel", "resourceClaimTemplateName": "j-channel"},
        {"name": "roce-channel", "resourceClaimTemplateName": "j-roce-channel"},
    ]


def test_aws_resource_markers_per_architecture() -> None:
    """The AWS oracle: GB200 hugepages + efa 4, GB300 RoCE claim only, H100 efa 32."""

    def limits(arch: str) -> dict[str, str]:
        docs = render("communication/nccl-all-reduce", "aws", arch)
        pod = rjob(docs, "node")["template"]["spec"]["template"]["spec"]
        result: dict[str, str] = pod["containers"][0]["resources"]["limits"]
        return result

    assert limits("gb200")["hugepages-2Mi"] == "10256Mi"
    assert limits("gb200")["vpc.amazonaws.com/efa"] == "4"
    assert "vpc.amazonaws.com/efa" not in limits("gb300")
    assert "hugepages-2Mi" not in limits("gb300")
    assert limits("h100")["vpc.amazonaws.com/efa"] == "32"


def test_nic_resource_name_option() -> None:
    """On-prem NIC resources are requested only when named, mlnxPerNode of them."""
    docs = render(
        "communication/nccl-all-reduce",
        "onprem",
        "gb300",
        options=RenderOptions(nic_resource_name="rdma/ib"),
    )
    pod = rjob(docs, "node")["template"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["rdma/ib"] == "8"
    plain = rjob(render("communication/nccl-all-reduce", "onprem", "gb300"), "node")
    assert "rdma/ib" not in str(plain)


def test_render_is_deterministic() -> None:
    """The same request renders the same objects twice."""
    assert render("communication/nccl-alltoall", "gcp", "gb300") == render(
        "communication/nccl-alltoall", "gcp", "gb300"
    )


@pytest.mark.parametrize("name", ["Bad", "a_b", "-a", "x" * 55])
def test_job_name_must_fit_the_train_job_name(name: str) -> None:
    """A job name that would make an invalid or too long TrainJob name is refused up front."""
    resolved = CATALOG.resolve("diagnostics/dcgm-level1", platform="aws", arch="h100", num_nodes=1)
    with pytest.raises(RenderError, match="DNS-1035"):
        render_workload(job_name=name, namespace="ns", resolved=resolved, nodes=["n"])
