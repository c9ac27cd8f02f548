"""Controller behaviours the issue names that the other simulator tests do not reach.

Trainer suspend/resume and the single-pod (torch-shaped) runtime, JobSet restarts recreating
every Job with ``restart-attempt`` + 1 and InOrder start-up, the scheduler's placement filters,
podFailurePolicy Count / FailJob-on-condition, and a NotReady node failing its pods end to end.
"""

from __future__ import annotations

from typing import Any

import pytest

from cre.kube.client import BATCH_JOBS, JOBSETS, NODES, PODS, TRAINING_RUNTIMES, TRAINJOBS
from cre.testing.cluster import batchjob, jobset, scheduler
from cre.testing.cluster.clock import DEFAULT_EPOCH
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.memory import MemoryCluster
from cre.testing.cluster.model import Bind, Create, Patch, World, condition, is_true
from cre.testing.cluster.profiles import get_profile, node_manifest
from cre.testing.cluster.program import Role
from cre.testing.cluster.stubs import Behaviour, Override
from cre.testing.cluster.workloads import memory_cluster, trainjob_finished

PROFILE = get_profile("aws-h100")
CFG = SimConfig(profile=PROFILE)
TJ = "default/ar-workload"
T0 = DEFAULT_EPOCH


def _trainjob(mc: MemoryCluster) -> dict[str, Any]:
    return mc.objects[TRAINJOBS.plural][TJ]


def _jobs(mc: MemoryCluster) -> list[dict[str, Any]]:
    return sorted(mc.objects[BATCH_JOBS.plural].values(), key=lambda j: j["metadata"]["name"])


def test_suspended_trainjob_runs_no_pods_until_resumed() -> None:
    """A suspended TrainJob suspends its JobSet and Jobs (no pods); resuming lets it complete."""
    mc = memory_cluster(entry="communication/nccl-all-reduce", profile=PROFILE)
    _trainjob(mc)["spec"]["suspend"] = True
    now = mc.run(CFG, start=T0, until=lambda m: TJ in m.objects[JOBSETS.plural]
                 and is_true(_trainjob(m), "Suspended") and bool(_jobs(m)))
    suspended = condition(_trainjob(mc), "Suspended") or {}
    assert (suspended.get("reason"), suspended.get("message")) == ("Suspended",
                                                                   "TrainJob is suspended")
    assert mc.objects[JOBSETS.plural][TJ]["spec"]["suspend"] is True
    assert all(j["spec"].get("suspend") for j in _jobs(mc))
    assert mc.objects[PODS.plural] == {}
    _trainjob(mc)["spec"]["suspend"] = False
    mc.run(CFG, start=now, until=trainjob_finished(TJ))
    tj = _trainjob(mc)
    resumed = condition(tj, "Suspended") or {}
    assert (resumed.get("status"), resumed.get("reason")) == ("False", "Resumed")
    assert is_true(tj, "Complete") and not any(c["type"] == "Created"
                                                for c in tj["status"]["conditions"])


def test_single_pod_runtime_runs_the_trainer_job_only() -> None:
    """The loopback (torch-shaped, no launcher) runtime gets one trainer Job, one pod per node."""
    mc = memory_cluster(entry="communication/nccl-loopback", profile=PROFILE)
    mc.run(CFG, start=T0, until=trainjob_finished(TJ))
    js = mc.objects[JOBSETS.plural][TJ]
    assert [rj["name"] for rj in js["spec"]["replicatedJobs"]] == ["node"]
    spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert spec["parallelism"] == spec["completions"] == 2
    assert is_true(_trainjob(mc), "Complete")
    nodes = sorted(p["spec"]["nodeName"] for p in mc.objects[PODS.plural].values())
    assert nodes == ["aws-h100-node-0", "aws-h100-node-1"]


def test_jobset_restart_recreates_every_job_with_the_next_attempt() -> None:
    """failurePolicy maxRestarts 1: a failed launcher Job restarts the JobSet at attempt 1."""
    mc = memory_cluster(entry="communication/nccl-all-reduce", profile=PROFILE)
    (runtime,) = mc.objects[TRAINING_RUNTIMES.plural].values()
    runtime["spec"]["template"]["spec"]["failurePolicy"] = {"maxRestarts": 1}
    launcher_backoff = next(
        rj["template"]["spec"].get("backoffLimit", 6)
        for rj in runtime["spec"]["template"]["spec"]["replicatedJobs"]
        if rj["name"] == "launcher")
    cfg = SimConfig(profile=PROFILE, overrides=(Override(
        behaviour=Behaviour.FAIL, role=Role.LAUNCHER, after=3, times=launcher_backoff + 1),))
    mc.run(cfg, start=T0, until=trainjob_finished(TJ), limit=7200)
    js = mc.objects[JOBSETS.plural][TJ]
    assert js["status"]["restarts"] == 1
    assert is_true(_trainjob(mc), "Complete")
    attempts = {j["metadata"]["name"]: j["metadata"]["labels"][jobset.RESTART_ATTEMPT]
                for j in _jobs(mc)}
    assert attempts == {"ar-workload-launcher-0": "1"} or attempts == {
        "ar-workload-launcher-0": "1", "ar-workload-node-0": "1"}


def test_inorder_startup_creates_replicated_jobs_one_after_another() -> None:
    """startupPolicy InOrder: the second replicated job waits until the first has started."""
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
          "metadata": {"name": "s", "namespace": "ns", "uid": "js"},
          "spec": {"startupPolicy": {"startupPolicyOrder": "InOrder"}, "replicatedJobs": [
              {"name": name, "replicas": 1, "template": {"spec": {
                  "parallelism": 1, "completions": 1,
                  "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}}
              for name in ("a", "b")]}}
    first = jobset.step(World.of([js]), T0, CFG)
    created = [a.body for a in first.actions if isinstance(a, Create)
               and a.body["kind"] == "Job"]
    assert [j["metadata"]["name"] for j in created] == ["s-a-0"]
    status = next(a.patch["status"] for a in first.actions
                  if isinstance(a, Patch) and a.resource == JOBSETS)
    assert status["conditions"][-1]["reason"] == "InOrderStartupPolicyInProgress"
    started = {**created[0], "metadata": {**created[0]["metadata"], "uid": "a0"},
               "status": {"ready": 1, "active": 1}}
    second = jobset.step(World.of([js, started]), T0, CFG)
    assert [a.body["metadata"]["name"] for a in second.actions
            if isinstance(a, Create) and a.body["kind"] == "Job"] == ["s-b-0"]
    js["status"] = status
    b_started = {**started, "metadata": {**started["metadata"], "name": "s-b-0", "uid": "b0",
                                         "labels": {**started["metadata"]["labels"],
                                                    jobset.RJOB_NAME: "b"}}}
    third = jobset.step(World.of([js, started, b_started]), T0 + 5, CFG)
    final = next(a.patch["status"] for a in third.actions
                 if isinstance(a, Patch) and a.resource == JOBSETS)
    assert [(c["type"], c["status"]) for c in final["conditions"]] == [
        ("StartupPolicyInProgress", "False"), ("StartupPolicyCompleted", "True")]


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"containers": [{"name": "c", "resources": {
                "limits": {"nvidia.com/gpu": "1"}}}], **spec},
            "status": {"phase": "Pending"}}


def _placement(world_objs: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    out = scheduler.step(World.of(world_objs), T0, CFG)
    binds = {a.pod: a.node for a in out.actions if isinstance(a, Bind)}
    pending = {a.name: a.patch["status"]["conditions"][-1]["message"] for a in out.actions
               if isinstance(a, Patch) and a.resource == PODS and a.name not in binds}
    return binds, pending


def test_scheduler_filters_hostname_affinity_selector_and_taints() -> None:
    """Hostname affinity and nodeSelector pin pods; an untolerated taint keeps one Pending."""
    n0, n1 = node_manifest(PROFILE, 0), node_manifest(PROFILE, 1)
    n1["spec"]["taints"] = [{"key": "gpu-maintenance", "value": "x", "effect": "NoSchedule"}]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname",
                                                     "operator": "In",
                                                     "values": ["aws-h100-node-1"]}]}]}}}
    tolerate = [{"key": "gpu-maintenance", "operator": "Exists"}]
    pods = [_pod("pinned", affinity=affinity, tolerations=tolerate),
            _pod("selected", nodeSelector={"kubernetes.io/hostname": "aws-h100-node-0"}),
            _pod("untolerated", affinity=affinity)]
    binds, pending = _placement([n0, n1, *pods])
    assert binds == {"pinned": "aws-h100-node-1", "selected": "aws-h100-node-0"}
    assert pending == {"untolerated": (
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {gpu-maintenance: x}. preemption: 0/2 nodes are "
        "available: 2 Preemption is not helpful for scheduling.")}


def test_scheduler_leaves_pods_with_a_node_name_alone() -> None:
    """A pod created with spec.nodeName skips scheduling (no bind, no condition write)."""
    out = scheduler.step(World.of([node_manifest(PROFILE, 0),
                                   _pod("direct", nodeName="aws-h100-node-0")]), T0, CFG)
    assert not [a for a in out.actions if isinstance(a, (Bind, Patch))]


def _job_with(rules: list[dict[str, Any]], backoff: int = 0) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "uid": "job-uid"},
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": backoff,
                     "completionMode": "Indexed", "podFailurePolicy": {"rules": rules},
                     "template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "node", "image": "i"}]}}},
            "status": {}}


def _failed_pod(*, code: int, conditions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "p", "namespace": "ns", "uid": "p", "finalizers": [batchjob.TRACKING_FINALIZER],
        "annotations": {"batch.kubernetes.io/job-completion-index": "0"},
        "ownerReferences": [{"kind": "Job", "uid": "job-uid", "controller": True}]},
        "spec": {"nodeName": "n"}, "status": {"phase": "Failed", "conditions": conditions,
                                              "containerStatuses": [{"name": "node", "state": {
                                                  "terminated": {"exitCode": code}}}]}}


@pytest.mark.parametrize(("rules", "expect"), [
    ([{"action": "Count", "onExitCodes": {"operator": "In", "values": [3]}}],
     ("Failed", "BackoffLimitExceeded")),
    ([{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}],
     ("Failed", "PodFailurePolicy")),
    ([{"action": "Ignore", "onExitCodes": {"operator": "NotIn", "values": [1]}}], None),
])
def test_pod_failure_policy_count_and_condition_rules(
        rules: list[dict[str, Any]], expect: tuple[str, str] | None) -> None:
    """Count counts toward backoffLimit 0, FailJob matches a condition, Ignore does not count;
    the terminal condition comes in the sync after the one that wrote FailureTarget, as
    upstream's (which the real Job controller showed: tests/controlplane/test_sequences.py)."""
    disrupted = [{"type": "DisruptionTarget", "status": "True", "reason": "x"}]
    job = _job_with(rules)
    out = batchjob.step(World.of([job, _failed_pod(code=3, conditions=disrupted)]), T0, CFG)
    status = next(a.patch["status"] for a in out.actions if isinstance(a, Patch)
                  and a.resource == BATCH_JOBS)
    target = [(c["type"], c["reason"]) for c in status.get("conditions") or []]
    if expect is None:
        assert target == [] and status["failed"] == 0
    else:
        assert target == [("FailureTarget", expect[1])]
        synced = {**job, "status": {k: v for k, v in status.items() if v is not None}}
        again = batchjob.step(World.of([synced]), T0 + 1, CFG)
        final = next(a.patch["status"] for a in again.actions if isinstance(a, Patch)
                     and a.resource == BATCH_JOBS)
        assert [(c["type"], c["reason"]) for c in final["conditions"]] == [
            ("FailureTarget", expect[1]), expect]
    if expect and expect[1] == "PodFailurePolicy":
        assert status["conditions"][0]["message"] == (
            "Pod ns/p has condition DisruptionTarget matching FailJob rule at index 0")


def test_node_not_ready_fails_its_pods_with_disruption_target_first() -> None:
    """A NotReady node's pods get DisruptionTarget (taint manager), then end Failed."""
    mc = memory_cluster(entry="communication/nccl-loopback", profile=PROFILE)
    (runtime,) = mc.objects[TRAINING_RUNTIMES.plural].values()
    for rj in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        # CRE's pods tolerate every taint; drop that so the 300 s default tolerations apply.
        rj["template"]["spec"]["template"]["spec"].pop("tolerations", None)
    cfg = SimConfig(profile=PROFILE, overrides=(Override(behaviour=Behaviour.HANG),))
    now = mc.run(cfg, start=T0, until=lambda m: len([
        p for p in m.objects[PODS.plural].values()
        if (p.get("status") or {}).get("phase") == "Running"]) == 2)
    node = mc.objects[NODES.plural]["aws-h100-node-1"]
    node["status"]["conditions"] = [{"type": "Ready", "status": "False",
                                     "reason": "KubeletNotReady"}]
    victims = {p["metadata"]["name"] for p in mc.objects[PODS.plural].values()
               if p["spec"]["nodeName"] == "aws-h100-node-1"}
    history: dict[str, list[dict[str, Any]]] = {v: [] for v in victims}
    apply = mc.apply

    def recording(action: Any, at: float) -> None:
        if isinstance(action, Patch) and action.resource == PODS and action.name in victims:
            history[action.name].append(action.patch.get("status") or {})
        apply(action, at)
    mc.apply = recording  # type: ignore[method-assign,assignment]
    mc.run(cfg, start=now, until=lambda m: not victims & {
        p["metadata"]["name"] for p in m.objects[PODS.plural].values()}, limit=7200)
    for name, patches in history.items():
        disrupted = next(i for i, st in enumerate(patches) if any(
            c.get("type") == "DisruptionTarget" and c.get("status") == "True"
            and c.get("reason") == "DeletionByTaintManager" for c in st.get("conditions") or []))
        failed = next(i for i, st in enumerate(patches) if st.get("phase") == "Failed")
        assert disrupted < failed, name
    (job,) = _jobs(mc)
    # CRE's rendered Job ignores DisruptionTarget failures, so a node loss is not counted.
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert any(r["action"] == "Ignore" and r.get("onPodConditions") for r in rules)
    assert len(victims) == 1 and job["status"]["failed"] == 0
