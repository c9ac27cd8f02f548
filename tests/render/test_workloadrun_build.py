"""The WorkloadRun builder: shapes, the shared launcher fail-fast fields, the env merge rule and
the errors that name the field."""

from __future__ import annotations

from typing import Any

import pytest

from cre.api.converter import structure
from cre.api.workloadrun import WorkloadRun
from cre.catalog import load_catalog
from cre.render import RenderOptions, render_workload
from cre.render.runplatform import drop_exported, merge_env
from cre.render.workload import launcher_fail_fast
from cre.render.workloadrun import (
    RunBuildError,
    RunEnvironment,
    build_run,
    k8s_literal,
)

MPI = {"binary": "/opt/nccl-tests/build/all_reduce_perf", "mpirunPath": "/usr/local/mpi/bin/mpirun",
       "args": ["-b", "8"]}
NODES = ("n1", "n2", "n3", "n4")


def run_of(spec: dict[str, Any], name: str = "wr") -> WorkloadRun:
    body = {"image": "img:1", "numNodes": 2, "framework": {"mpi": MPI}, **spec}
    return structure({"apiVersion": "cre.dev/v1alpha1", "kind": "WorkloadRun",
                      "metadata": {"name": name, "namespace": "ns", "uid": "u-1"},
                      "spec": body}, WorkloadRun)


def env(platform: str = "aws", arch: str = "h100", nodes: tuple[str, ...] = NODES,
        nic: str | None = None) -> RunEnvironment:
    return RunEnvironment(platform=platform, architecture=arch, nodes=nodes, gpus_per_node=8,
                          mlnx_per_node=8, nic_resource_name=nic)


def jobs(built: Any) -> dict[str, Any]:
    rt = built.training_runtime
    return {j["name"]: j for j in rt["spec"]["template"]["spec"]["replicatedJobs"]}


def trainer(built: Any) -> dict[str, Any]:
    spec = built.workflow["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]
    assert isinstance(spec, dict)
    return spec


def launcher_fields(job: dict[str, Any]) -> dict[str, Any]:
    spec = job["template"]["spec"]
    return {"backoffLimit": spec["backoffLimit"], "podFailurePolicy": spec["podFailurePolicy"],
            "restartPolicy": spec["template"]["spec"]["restartPolicy"]}


def test_launcher_fail_fast_fields_are_the_catalogs() -> None:
    """A WorkloadRun's MPI launcher carries exactly the fields the catalog's NCCL launcher
    gets, with and without KAI, because both come from launcher_fail_fast."""
    catalog = load_catalog()
    resolved = catalog.resolve("communication/nccl-all-reduce", platform="aws", arch="h100",
                               num_nodes=2)
    for kai in (False, True):
        gang = {"gangScheduler": {"schedulerName": "kai-scheduler"}} if kai else {}
        built = build_run(run_of(gang), env=env())
        from cre.render import GangScheduler
        rendered = render_workload(
            job_name="cat", namespace="ns", resolved=resolved, nodes=["n1", "n2"],
            options=RenderOptions(gang_scheduler=GangScheduler() if kai else None))
        cat = {j["name"]: j for j in
               rendered.training_runtime["spec"]["template"]["spec"]["replicatedJobs"]}
        mine = jobs(built)
        assert launcher_fields(mine["launcher"]) == launcher_fields(cat["launcher"])
        expected = launcher_fail_fast({}, kai=kai, explicit=None)
        assert launcher_fields(mine["launcher"]) == {
            "backoffLimit": expected["backoffLimit"],
            "podFailurePolicy": expected["podFailurePolicy"],
            "restartPolicy": "Never"}
        assert mine["launcher"]["template"]["spec"]["backoffLimit"] == (0 if kai else 1)
        assert ("dependsOn" in mine["launcher"]) is (not kai)
        inits = [c["name"] for c in
                 mine["launcher"]["template"]["spec"]["template"]["spec"]["initContainers"]]
        assert ("wait-for-workers" in inits) is kai
        worker = mine["node"]["template"]["spec"]
        assert worker["template"]["spec"]["restartPolicy"] == "OnFailure"
        assert 0 < worker["backoffLimit"] < 6


def test_explicit_launcher_target_in_the_runtime_patch() -> None:
    """The TrainJob's runtime patch names the launcher, so the Workflow's pinning and
    tolerations reach it."""
    built = build_run(run_of({}), env=env())
    tj = built.workflow["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]
    names = [rj["name"] for rj in tj["runtimePatches"][0]["trainingRuntimeSpec"]["template"]
             ["spec"]["replicatedJobs"]]
    assert names == ["node", "launcher"]


def test_mpi_argv_is_a_list_with_user_strings_as_single_elements() -> None:
    """mpirun's command line is an argv list: the binary and each user arg are one element."""
    args = ["a b", "$(x)", "`y`", "it's", "two\nlines"]
    built = build_run(run_of({"framework": {"mpi": {**MPI, "args": args}}}), env=env())
    t = trainer(built)
    assert t["command"] == ["timeout", "86400", "/usr/local/mpi/bin/mpirun"]
    assert t["args"][-6:] == [MPI["binary"], *[k8s_literal(a) for a in args]]


@pytest.mark.parametrize(
    ("base", "user", "expected"),
    [
        ([], [], []),
        ([("A", "1")], [], [("A", "1")]),
        ([], [("A", "u")], [("A", "u")]),
        ([("A", "1"), ("B", "2")], [("B", "u")], [("A", "1"), ("B", "u")]),
        ([("A", "1")], [("C", "u"), ("A", "v")], [("A", "v"), ("C", "u")]),
        ([("A", "1"), ("A", "2")], [], [("A", "1")]),
    ],
)
def test_merge_env_user_wins_by_name(base: list[tuple[str, str]], user: list[tuple[str, str]],
                                     expected: list[tuple[str, str]]) -> None:
    """User env replaces a base entry of the same name in place; new names follow."""
    as_env = lambda pairs: [{"name": n, "value": v} for n, v in pairs]  # noqa: E731
    assert merge_env(as_env(base), as_env(user)) == as_env(expected)


@pytest.mark.parametrize(
    ("args", "names", "expected"),
    [
        (["-x", "A=1", "-x", "B=2"], {"A"}, ["-x", "B=2"]),
        (["-x", "A", "--mca", "x", "y"], {"A"}, ["--mca", "x", "y"]),
        (["-x", "AB=1"], {"A"}, ["-x", "AB=1"]),
        (["-N", "8", "-x"], {"A"}, ["-N", "8", "-x"]),
    ],
)
def test_drop_exported(args: list[str], names: set[str], expected: list[str]) -> None:
    """``-x NAME[=VALUE]`` pairs of a user-set name go; everything else stays in order."""
    assert drop_exported(args, frozenset(names)) == expected


@pytest.mark.parametrize(
    ("spec", "platform", "arch", "sources"),
    [
        # user env beats the default -x NCCL_DEBUG=INFO
        ({"env": [{"name": "NCCL_DEBUG", "value": "WARN"}]}, "aws", "h100",
         {"NCCL_DEBUG": "WARN"}),
        # user env beats the platform env (FI_PROVIDER=efa on AWS H100)
        ({"env": [{"name": "FI_PROVIDER", "value": "tcp"}]}, "aws", "h100",
         {"FI_PROVIDER": "tcp"}),
        # user env beats a -x pair in the user's own mpiArgs
        ({"env": [{"name": "X", "value": "env"}],
          "framework": {"mpi": {**MPI, "mpiArgs": ["-x", "X=args"]}}}, "aws", "h100",
         {"X": "env"}),
        # and the platform's mpiArgs (aws gb300: -x NCCL_NET_PLUGIN=none)
        ({"env": [{"name": "NCCL_NET_PLUGIN", "value": "ofi"}]}, "aws", "gb300",
         {"NCCL_NET_PLUGIN": "ofi"}),
    ],
)
def test_mpi_user_env_wins(spec: dict[str, Any], platform: str, arch: str,
                           sources: dict[str, str]) -> None:
    """For MPI, a user-set name is forwarded with a bare -x and no -x NAME=... remains; the
    value is on the launcher and on the workers."""
    built = build_run(run_of(spec), env=env(platform, arch))
    t = trainer(built)
    argv = t["args"] if t["command"][0] != "/bin/bash" else t["args"][0].split()
    for name, value in sources.items():
        assert not any(a.startswith(f"{name}=") for a in argv), argv
        assert name in argv
        assert {"name": name, "value": value} in t["env"]
        worker = jobs(built)["node"]["template"]["spec"]["template"]["spec"]["containers"][0]
        assert {"name": name, "value": value} in worker["env"]


def test_torch_platform_env_override_keeps_user_values() -> None:
    """For torch, the platform's trainer env is a Workflow override whose list already has the
    user's values (a merge patch replaces lists)."""
    built = build_run(run_of({"framework": {"torch": {"script": "t.py"}},
                              "env": [{"name": "FI_PROVIDER", "value": "tcp"}]}), env=env())
    envs = [o["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]["env"]
            for o in built.workflow["spec"]["overrides"] if "jobTemplate" in o]
    assert envs == [[{"name": "FI_PROVIDER", "value": "tcp"},
                     {"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"},
                     {"name": "FI_EFA_FORK_SAFE", "value": "1"}]]


def test_orchestration_from_the_run() -> None:
    """testScale -> nodes per group and topology, repeatCount -> iterations, timeoutPerJob
    defaulted to 24h."""
    built = build_run(run_of({"orchestration": {"testScale": "intra-node", "repeatCount": 3}}),
                      env=env())
    orch = built.workflow["spec"]["orchestration"]
    assert trainer(built)["numNodes"] == 1 and built.nodes_per_job == 1
    assert orch["iterations"] == 3 and orch["execution"] == {"timeoutPerJob": "24h"}
    rack = build_run(run_of({"orchestration": {"testScale": "intra-rack"}}), env=env())
    assert rack.workflow["spec"]["orchestration"]["topology"] == {
        "topologyKey": "nvidia.com/gpu.clique", "strictDomain": True}
    assert trainer(rack)["numNodes"] == 2


def test_failure_policy_is_copied_to_the_workflow() -> None:
    """A WorkloadRun's failurePolicy becomes its Workflow's (so its groups get that NotReady
    grace); without one the Workflow has none and runs on the Workflow defaults."""
    policy = {"nodeNotReadyGraceSeconds": 30, "mode": "FailFast"}
    built = build_run(run_of({"failurePolicy": policy}), env=env())
    assert built.workflow["spec"]["failurePolicy"] == {
        "mode": "FailFast", "infraRetries": 1, "nodeNotReadyGraceSeconds": 30,
        "outageThresholdPercent": 50}
    assert "failurePolicy" not in build_run(run_of({}), env=env()).workflow["spec"]


def test_resources_default_and_explicit_gpu() -> None:
    """Without resources only the GPUs; resources without nvidia.com/gpu get it; an explicit
    0 is kept."""
    def worker_resources(spec: dict[str, Any]) -> Any:
        built = build_run(run_of(spec), env=env())
        return jobs(built)["node"]["template"]["spec"]["template"]["spec"]["containers"][0][
            "resources"]
    assert worker_resources({}) == {"limits": {"nvidia.com/gpu": "8"},
                                    "requests": {"nvidia.com/gpu": "8"}}
    assert worker_resources({"resources": {"limits": {"memory": "1Gi"}}})["limits"] == {
        "memory": "1Gi", "nvidia.com/gpu": "8"}
    assert worker_resources({"resources": {"limits": {"nvidia.com/gpu": 0}}})["limits"] == {
        "nvidia.com/gpu": "0"}


@pytest.mark.parametrize(
    ("spec", "name", "nodes", "field"),
    [
        ({"numNodes": 5}, "wr", NODES, "spec.numNodes"),
        ({"env": [{"name": "1BAD", "value": "x"}]}, "wr", NODES, "spec.env[0].name"),
        ({"env": [{"name": "A=B", "value": "x"}]}, "wr", NODES, "spec.env[0].name"),
        ({"env": [{"name": "A", "value": 3}]}, "wr", NODES, "spec.env[0].value"),
        ({}, "9starts-with-digit", NODES, "metadata.name"),
        ({}, "x" * 60, NODES, "metadata.name"),
    ],
)
def test_build_errors_name_the_field(spec: dict[str, Any], name: str, nodes: tuple[str, ...],
                                     field: str) -> None:
    """A run the builder cannot build raises RunBuildError starting with the field path."""
    with pytest.raises(RunBuildError) as info:
        build_run(run_of(spec, name=name), env=env(nodes=nodes))
    assert str(info.value).startswith(f"{field}:")


def test_config_and_checkpoint_are_dependencies() -> None:
    """Inline config becomes <run>-config mounted at /config; a checkpoint becomes the RWX
    <run>-checkpoint-pvc and the Job's checkpoint spec."""
    built = build_run(run_of({"config": {"inline": {"a.yaml": "x: 1\n"}},
                              "checkpoint": {"storageSize": "10Gi", "maxRestarts": 2}}),
                      env=env())
    kinds = [(d["kind"], d["metadata"]["name"]) for d in built.workflow["spec"]["dependencies"]]
    assert kinds == [("TrainingRuntime", "wr-runtime"), ("ConfigMap", "wr-config"),
                     ("PersistentVolumeClaim", "wr-checkpoint-pvc")]
    assert built.pvc is not None and built.pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    job = built.workflow["spec"]["jobTemplate"]["spec"]
    assert job["checkpoint"] == {"pvcName": "wr-checkpoint-pvc", "maxRestarts": 2}
