"""Least privilege proved by the calls made: the deployed manager, under its own service
account's token with RBAC enforced, runs Jobs end to end; the emulator's audit of its requests
must need every grant of ``deploy/`` (nothing unused, secrets above all) and get no 403.

Jobs (passing, failing, stalled, their TrainJob deleted), a Certification (two groups in turn,
failing, one conflicting status write), a user Workflow with a ConfigMap dependency and a
WorkloadRun with a bandwidth and a goodput measurement (leftover measurements of an earlier Job
deleted, conflicting measurement status writes) run here, so the Job, Workflow, Certification,
WorkloadRun, NodeCertification and both measurement controllers' grants are each used by a real
call, a CertificationSchedule makes a run and prunes it (the schedule controller's), and a
ReportExportPolicy exports the Certification's report (to a closed port: one failed attempt, the
token read through the per-Secret Role of deploy/report-export, the export pruned once the
Certification is gone). What is still excused is named with the reason: the DRA objects only
MNNVL/RoCE fabrics use (``LATER_VERBS``: the simulated cluster is H100 over EFA and the emulator
serves no DRA kinds) and the reads only a race reaches (``RACE_VERBS``). An excused grant this
run uses fails the test too (the excuse is stale).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from e2e_helpers import (
    NODES,
    SIM_TIME_SCALE,
    apply_job,
    create_namespace,
    gpu_nodes,
    job_phase,
    wait_phase,
)
from ruamel.yaml import YAML

from cre.api.labels import JOB
from cre.core.job.bandwidth import JOB_UID_ANNOTATION, bandwidth_name
from cre.core.job.goodput import goodput_name
from cre.testing.procs import REPO, Stack, wait_until

SA = "system:serviceaccount:cre-system:cre-manager"
# The Workflow controller's DRA dependencies: created, read and deleted only for fabrics that
# need them (a ComputeDomain for MNNVL, ResourceClaimTemplates for RoCE).
LATER_VERBS = {
    ("resource.nvidia.com", "computedomains", "create"): "MNNVL fabrics (GB200/GB300) only",
    ("resource.nvidia.com", "computedomains", "delete"): "MNNVL fabrics (GB200/GB300) only",
    ("resource.nvidia.com", "computedomains", "get"): "MNNVL fabrics (GB200/GB300) only",
    ("resource.nvidia.com", "computedomains", "list"): "MNNVL fabrics (GB200/GB300) only",
    ("resource.k8s.io", "resourceclaimtemplates", "create"): "RoCE fabrics only",
    ("resource.k8s.io", "resourceclaimtemplates", "delete"): "RoCE fabrics only",
    ("resource.k8s.io", "resourceclaimtemplates", "get"): "RoCE fabrics only",
    ("resource.k8s.io", "resourceclaimtemplates", "list"): "RoCE fabrics only",
}

# Reached only when two writers race, which this run provokes but cannot force every time: the
# Workflow controller reads the holder of a name when a dependency create answers AlreadyExists
# (its own create from a pass whose status write conflicted, or a foreign object). Since a
# create is preceded by a live read of the Workflow (no create from a stale copy), the status
# conflict this run injects is usually seen before the create, and the holder read is not made.
# Likewise a Job reads its TrainJob live only when it asks whether the TrainJob is gone before the
# TrainJob watch delivered the deletion; this run's deletions usually arrive first.
RACE_VERBS = {
    ("trainer.kubeflow.org", "trainingruntimes", "get"):
        "the holder read after AlreadyExists on a TrainingRuntime dependency create",
    ("trainer.kubeflow.org", "trainjobs", "get"):
        "a Job asking whether its TrainJob is gone before the TrainJob watch delivered the "
        "deletion (once the cache saw it deleted, the answer needs no read)",
}


@pytest.fixture
def rbac_stack() -> Iterator[Stack]:
    """Emulator with RBAC enforced (HTTPS: client-go sends tokens over TLS only) + cluster."""
    with Stack() as stack:
        stack.start_emulator(args=["--rbac", "--tls"])
        sim = stack.start_cluster(nodes=NODES, time_scale=SIM_TIME_SCALE,
                                  extra_args=["--fail-launcher", "--fail-launcher-pod-prefix",
                                              FAIL_PREFIX])
        wait_until(lambda: len(gpu_nodes(stack)) >= NODES, timeout=60, what="GPU nodes",
                   interval=0.2, alive=sim.check_alive)
        yield stack


def _deployed(stack: Stack) -> list[dict[str, Any]]:
    out = stack.kubectl("kustomize", str(REPO / "deploy" / "default")).stdout
    return [d for d in YAML(typ="safe").load_all(out) if d]


def _grants(docs: list[dict[str, Any]]) -> dict[tuple[str, str, str], str]:
    """Every (group, resource, verb) granted, with its scope (``""``: cluster-wide)."""
    out: dict[tuple[str, str, str], str] = {}
    for doc in docs:
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        scope = doc["metadata"].get("namespace", "") if doc["kind"] == "Role" else ""
        for rule in doc["rules"]:
            assert not rule.get("resourceNames"), "resourceNames: extend this test"
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        out[(group, resource, verb)] = scope
    return out


def _manager_args(docs: list[dict[str, Any]]) -> list[str]:
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return [a for a in container["args"] if not a.startswith(("--metrics-bind-address",
                                                                 "--health-probe-bind-address"))]


CERTIFICATION = """\
apiVersion: cre.dev/v1alpha1
kind: Certification
metadata: {name: rbacfail-cert, namespace: rbac-cert}
spec:
  nodesPerJob: 4
  maxConcurrent: 1
  nodeState: {labels: true, taint: true}
  categories:
  - {domain: communication, variant: nccl-all-reduce}
"""
WORKFLOW = "rbacfail-cert-communication-nccl-all-reduce"
# The simulator fails the launchers of this Certification's Jobs (their pods' names start so).
FAIL_PREFIX = "rbacfail-"
# Exports the Certification's report to a port nothing listens on: one attempt, then Failed;
# kept 1s once the Certification is gone.
EXPORT_POLICY = """\
apiVersion: cre.dev/v1alpha1
kind: ReportExportPolicy
metadata: {name: rbac-export, namespace: rbac-cert}
spec:
  webhook:
    url: http://127.0.0.1:9/reports
    tokenSecretRef: {name: report-token, key: token}
  retry: {maxAttempts: 1}
  retention: {failed: 1s}
"""
# The one grant the manager gets on Secrets: the Role a policy's owner binds in its namespace.
TOKEN_ROLE = REPO / "deploy" / "report-export" / "token-role.yaml"


def _certify(stack: Stack) -> None:
    """A Certification in two groups run one after the other (``maxConcurrent: 1``) whose
    launchers fail: each group's failed nodes are merged into the same result ConfigMap (a
    create, then a read and a replace), and a status write that conflicts once is re-read.
    Once it ended, the NodeCertification controller creates the nodes' records, writes their
    status and labels and taints the failed nodes (``nodeState``)."""
    create_namespace(stack, "rbac-cert")
    stack.kubectl("create", "secret", "generic", "report-token", "-n", "rbac-cert",
                  "--from-literal=token=rbac-token-value")
    stack.kubectl("apply", "-f", "-",
                  stdin=TOKEN_ROLE.read_text().replace("namespace: team-a", "namespace: rbac-cert"))
    stack.kubectl("apply", "-f", "-", stdin=EXPORT_POLICY)
    since = stack.emulator_control("GET", "audit?since=999999999")["seq"]
    stack.emulator_control("POST", "faults", {"errors": [
        {"code": 409, "rate": 1.0, "verb": "update", "resource": "certifications"}]})
    stack.kubectl("apply", "-f", "-", stdin=CERTIFICATION)

    def conflicted() -> bool:
        records = stack.emulator_control("GET", f"audit?since={since}")["records"]
        return any(r["user"] == SA and r["resource"] == "certifications" and r["code"] == 409
                   for r in records)

    wait_until(conflicted, timeout=120, what="a conflicting Certification status write",
               interval=0.2)
    stack.emulator_control("DELETE", "faults")

    def status() -> dict[str, Any]:
        got = stack.kubectl_json("get", "certifications", "-n", "rbac-cert", "rbacfail-cert")
        return dict(got.get("status") or {})

    wait_until(lambda: status().get("verdict"), timeout=240, what="the Certification's verdict",
               interval=0.5)
    assert (status()["phase"], status()["verdict"]) == ("Failed", "Failed"), status()

    def tainted() -> bool:
        return any(t.get("key") == "cre.dev/certification-failed"
                   for n in stack.kubectl_json("get", "nodes")["items"]
                   for t in (n.get("spec") or {}).get("taints") or [])

    wait_until(tainted, timeout=60, what="a failed node tainted", interval=0.5)

    def exports() -> list[dict[str, Any]]:
        return list(stack.kubectl_json("get", "reportexports", "-n", "rbac-cert")["items"])

    wait_until(lambda: [x.get("status", {}).get("phase") for x in exports()] == ["Failed"],
               timeout=60, what="the report export to fail", interval=0.5)
    assert exports()[0]["status"]["reason"] == "RetriesExhausted", exports()
    _user_workflow(stack)
    stack.kubectl("delete", "certifications", "-n", "rbac-cert", "rbacfail-cert", "--wait=true",
                  "--timeout=120s")
    wait_until(lambda: not exports() and not stack.kubectl_json(
        "get", "configmaps", "-n", "rbac-cert", "-l", "cre.dev/report-export")["items"],
        timeout=60, what="the export and its snapshot pruned", interval=0.5)
    for kind in ("workflows.cre.dev", "jobs.cre.dev", "trainingruntimes.trainer.kubeflow.org",
                 "configmaps"):
        left = stack.kubectl_json("get", kind, "-n", "rbac-cert")["items"]
        assert not left, f"{kind} left after the Certification was deleted: {left}"


def _user_workflow(stack: Stack) -> None:
    """A Workflow a user writes (the Certification's own, renamed) with two more dependencies,
    a ConfigMap and a PersistentVolumeClaim (what a WorkloadRun with a checkpoint generates):
    the controller creates them for the Workflow and deletes them with the Workflow."""
    spec = stack.kubectl_json("get", "workflows", "-n", "rbac-cert", WORKFLOW)["spec"]
    spec["dependencies"] = [*spec.get("dependencies", []), {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rbac-wf-settings"},
        "data": {"mode": "rbac"}}, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "rbac-wf-checkpoint"},
        "spec": {"accessModes": ["ReadWriteMany"],
                 "resources": {"requests": {"storage": "1Gi"}}}}]
    body = {"apiVersion": "cre.dev/v1alpha1", "kind": "Workflow",
            "metadata": {"name": "rbac-wf", "namespace": "rbac-cert"}, "spec": spec}
    stack.kubectl("apply", "-f", "-", stdin=json.dumps(body))

    def verdict() -> object:
        got = stack.kubectl_json("get", "workflows", "-n", "rbac-cert", "rbac-wf")
        return (got.get("status") or {}).get("verdict")

    wait_until(verdict, timeout=240, what="the user Workflow's verdict", interval=0.5)
    assert verdict() == "Passed"
    made = (("configmap", "rbac-wf-settings"), ("persistentvolumeclaim", "rbac-wf-checkpoint"))
    for kind, name in made:
        assert stack.kubectl("get", kind, "-n", "rbac-cert", name,
                             check=False).returncode == 0, f"the {kind} dependency was not made"
    stack.kubectl("delete", "workflows", "-n", "rbac-cert", "rbac-wf", "--wait=true",
                  "--timeout=120s")
    for kind, name in made:
        gone = stack.kubectl("get", kind, "-n", "rbac-cert", name, check=False)
        assert gone.returncode != 0 and "NotFound" in gone.stderr, gone.stdout


WORKLOAD_RUN = """\
apiVersion: cre.dev/v1alpha1
kind: WorkloadRun
metadata: {name: rbac-run, namespace: rbac-run}
spec:
  image: nvcr.io/nvidia/pytorch:26.01-py3
  numNodes: 4
  framework:
    mpi: {binary: /usr/local/bin/all_reduce_perf_mpi, mpirunPath: /usr/local/mpi/bin/mpirun,
          args: ["-b", "8", "-e", "1G", "-f", "2", "-n", "20"]}
  bandwidthMeasurement: {logProfileRef: nccl-bandwidth, testType: all_reduce}
  goodputMeasurement: {logProfileRef: megatron-training}
"""
# The first group's Job of the run (named by cre.render.workloadrun).
RUN_JOB = "rbac-run-group-0-iter-1"


def _leftover(kind: str, name: str) -> str:
    """A measurement an earlier Job of the same name left (another Job uid): the new Job's
    controller deletes it before it creates its own."""
    return json.dumps({
        "apiVersion": "cre.dev/v1alpha1", "kind": kind,
        "metadata": {"name": name, "namespace": "rbac-run", "labels": {JOB: RUN_JOB},
                     "annotations": {JOB_UID_ANNOTATION: "an-earlier-job"}},
        "spec": {"jobRef": {"apiGroup": "cre.dev", "kind": "Job", "name": RUN_JOB},
                 "logProfileRef": "nccl-bandwidth"}})


def _workload_run(stack: Stack) -> None:
    """The reference's example WorkloadRun with a bandwidth and a goodput measurement: the
    WorkloadRun controller builds its Workflow, each group's Job its BandwidthMeasurement (read
    through the nccl-bandwidth LogProfile) and GoodputMeasurement, after deleting the
    measurements an earlier Job of the first group's name left; the measurement controllers'
    first status writes conflict (each re-reads its object); deleting the run removes
    everything it made."""
    create_namespace(stack, "rbac-run")
    stack.kubectl("apply", "-k", str(REPO / "deploy" / "logprofiles"))
    stack.kubectl("apply", "-f", "-", stdin=_leftover("BandwidthMeasurement",
                                                       bandwidth_name(RUN_JOB)))
    stack.kubectl("apply", "-f", "-", stdin=_leftover("GoodputMeasurement",
                                                       goodput_name(RUN_JOB)))
    since = stack.emulator_control("GET", "audit?since=999999999")["seq"]
    kinds = ("bandwidthmeasurements", "goodputmeasurements")
    stack.emulator_control("POST", "faults", {"errors": [
        {"code": 409, "rate": 1.0, "verb": "update", "resource": kind} for kind in kinds]})
    stack.kubectl("apply", "-f", "-", stdin=WORKLOAD_RUN)

    def conflicted() -> bool:
        records = stack.emulator_control("GET", f"audit?since={since}")["records"]
        return {r["resource"] for r in records if r["user"] == SA and r["code"] == 409
                and r["resource"] in kinds} == set(kinds)

    wait_until(conflicted, timeout=120, what="conflicting measurement status writes",
               interval=0.2)
    stack.emulator_control("DELETE", "faults")

    def phase() -> object:
        got = stack.kubectl_json("get", "workloadruns", "-n", "rbac-run", "rbac-run")
        return (got.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    wait_until(phase, timeout=240, what="the WorkloadRun's verdict", interval=0.5)
    status = stack.kubectl_json("get", "workloadruns", "-n", "rbac-run", "rbac-run")["status"]
    assert status["phase"] == "Succeeded", status
    measured = stack.kubectl_json("get", "bandwidthmeasurements", "-n", "rbac-run")["items"]
    assert len(measured) == NODES // 4, measured
    stack.kubectl("delete", "workloadruns", "-n", "rbac-run", "rbac-run", "--wait=true",
                  "--timeout=120s")
    for kind in ("workflows.cre.dev", "jobs.cre.dev", "bandwidthmeasurements.cre.dev",
                 "goodputmeasurements.cre.dev", "trainjobs.trainer.kubeflow.org",
                 "trainingruntimes.trainer.kubeflow.org"):
        wait_until(lambda kind=kind: not stack.kubectl_json("get", kind, "-n",
                                                            "rbac-run")["items"],
                   timeout=120, what=f"{kind} to go with the WorkloadRun", interval=0.5)


SCHEDULE = """\
apiVersion: cre.dev/v1alpha1
kind: CertificationSchedule
metadata: {name: rbac-sched, namespace: rbac-sched}
spec:
  interval: 12h
  maxNodesPerRun: 1
  successfulRunsHistoryLimit: 0
  failedRunsHistoryLimit: 0
  certificationTemplate:
    spec:
      categories:
      - {domain: diagnostics, variant: dcgm-level1}
"""


def _schedule(stack: Stack) -> None:
    """A CertificationSchedule due at creation: the schedule controller reads it (informer,
    then live before the create), creates its run (owned, blocking the owner's deletion),
    writes its status, and deletes the ended run beyond the history limits (0)."""
    create_namespace(stack, "rbac-sched")
    stack.kubectl("apply", "-f", "-", stdin=SCHEDULE)

    def status() -> dict[str, Any]:
        got = stack.kubectl_json("get", "certificationschedules", "-n", "rbac-sched",
                                 "rbac-sched")
        return dict(got.get("status") or {})

    wait_until(lambda: status().get("history"), timeout=240, what="the scheduled run to end",
               interval=0.5)
    assert status()["runs"] == 1, status()
    wait_until(lambda: not stack.kubectl_json("get", "certifications", "-n",
                                              "rbac-sched")["items"],
               timeout=120, what="the ended run pruned", interval=0.5)
    stack.kubectl("delete", "certificationschedules", "-n", "rbac-sched", "rbac-sched",
                  "--wait=true", "--timeout=60s")


def test_deployed_rbac_is_exactly_what_the_manager_uses(rbac_stack: Stack) -> None:
    stack = rbac_stack
    stack.apply_kustomization(REPO / "deploy" / "default")
    docs = _deployed(stack)
    minted = json.loads(stack.kubectl(
        "create", "--raw", "/api/v1/namespaces/cre-system/serviceaccounts/cre-manager/token",
        "-f", "-", stdin=json.dumps({"apiVersion": "authentication.k8s.io/v1",
                                     "kind": "TokenRequest", "spec": {}})).stdout)
    kubeconfig = stack.kubeconfig_with_token(minted["status"]["token"], "sa-kubeconfig")
    manager = stack.start_manager(
        *_manager_args(docs), kubeconfig=kubeconfig,
        env={"POD_NAMESPACE": "cre-system", "CRE_LEADER_ELECT_IDENTITY": "cre-manager-0"})

    nodes = gpu_nodes(stack)
    apply_job(stack, "rbac-ok", nodes=nodes)
    wait_phase(stack, "rbac-ok", "Succeeded")
    apply_job(stack, "rbac-fail", nodes=nodes, fail=True)
    wait_phase(stack, "rbac-fail", "Failed")
    failed = stack.kubectl_json("get", "jobs.cre.dev", "rbac-fail")
    assert failed["status"]["failureLog"]["podName"], failed["status"]
    # A TrainJob deleted under a running Job: the controller confirms the absence live.
    apply_job(stack, "rbac-gone", nodes=nodes)
    wait_phase(stack, "rbac-gone", "Running")
    stack.kubectl("delete", "trainjobs.trainer.kubeflow.org", "rbac-gone-workload",
                  "--wait=false")
    wait_until(lambda: job_phase(stack, "rbac-gone") in ("Failed", "Succeeded"), timeout=120,
               what="rbac-gone to end", interval=0.2)
    stack.kubectl("delete", "jobs.cre.dev", "rbac-ok", "--wait=true", "--timeout=60s")
    # A Job whose TrainJob never starts (its runtime is missing): failed after
    # startupStallTimeoutSeconds with the TrainJob's Events, which the controller lists.
    stack.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "cre.dev/v1alpha1", "kind": "Job",
        "metadata": {"name": "rbac-stalled", "namespace": "default"},
        "spec": {"startupStallTimeoutSeconds": 3,
                 "workload": {"trainJob": {"runtimeRef": {"name": "missing-runtime"}}}}}))
    wait_phase(stack, "rbac-stalled", "Failed")
    stalled = stack.kubectl_json("get", "jobs.cre.dev", "rbac-stalled")["status"]
    reasons = {c["type"]: c.get("reason") for c in stalled.get("conditions") or []}
    assert reasons.get("Failed") == "WorkloadStalled", stalled
    # A Certification in two groups: the Certification and Workflow controllers create, update
    # and delete their Workflow, Jobs, per-group TrainingRuntime copies and node-result
    # ConfigMaps, and deleting it removes them all.
    _certify(stack)
    # A WorkloadRun with a bandwidth measurement: the WorkloadRun and measurement controllers.
    _workload_run(stack)
    # A CertificationSchedule: its run created from the template, then pruned.
    _schedule(stack)
    manager.stop()

    records = [r for r in stack.emulator_control("GET", "audit")["records"]
               if r["user"] == SA]
    assert records, "the manager's requests were not made with its service-account token"
    denied = sorted({(r["verb"], r["group"], r["resource"], r["subresource"], r["namespace"])
                     for r in records if r["code"] in (401, 403)})
    assert not denied, f"deploy/ grants less than the manager uses: {denied}"

    grants = _grants(docs)
    # Not in deploy/: the per-Secret Role the policy's owner binds (deploy/report-export).
    token_grant = {("", "secrets", "get"): "rbac-cert"}
    used: set[tuple[str, str, str]] = set()
    for r in records:
        if not r["resource"]:
            continue  # non-resource URLs: discovery, /version (every user may)
        resource = f'{r["resource"]}/{r["subresource"]}' if r["subresource"] else r["resource"]
        key = (r["group"], resource, r["verb"])
        scope = grants.get(key, token_grant.get(key))
        assert scope is not None, f"used without a grant (the 403 check missed it): {key}"
        if key in token_grant:
            assert r["name"] == "report-token", r
        assert not scope or r["namespace"] == scope, f"{key} used outside {scope}: {r}"
        used.add(key)
    assert {("", "pods/log", "get"), ("trainer.kubeflow.org", "trainjobs", "create"),
            ("cre.dev", "jobs/finalizers", "update")} <= used  # the run did the real work
    assert not any(resource.startswith("secrets") for _, resource, _ in grants)
    assert set(token_grant) <= used  # the export read its token, through that Role only
    later = dict(LATER_VERBS)
    unused = sorted(set(grants) - used - set(later) - set(RACE_VERBS))
    assert not unused, f"deploy/ grants what no call uses: {unused}"
    stale = sorted(set(later) & used)
    assert not stale, f"excused, yet used by this run: {stale}"
