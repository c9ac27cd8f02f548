"""Each simulated controller's pure step, on hand-built worlds (no HTTP)."""

from __future__ import annotations

from typing import Any

from cre.kube.client import BATCH_JOBS, JOBSETS, PODS
from cre.testing.cluster import batchjob, jobset, kubelet, nodelifecycle, scheduler, trainer
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.model import Bind, Create, Delete, Mark, Patch, RotateLog, World
from cre.testing.cluster.profiles import get_profile, node_manifest
from cre.testing.cluster.workloads import trainjob_objects

T0 = 1767225600.0
CFG = SimConfig()
PROF = get_profile("aws-h100")


def _meta(name: str, uid: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": "ns", "uid": uid, **extra}


def job(*, restart: str = "Never", backoff: int = 1, pfp: dict[str, Any] | None = None,
        completions: int = 1, status: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"parallelism": completions, "completions": completions,
                            "backoffLimit": backoff, "completionMode": "Indexed",
                            "template": {"metadata": {"labels": {"app": "x"}}, "spec": {
                                "restartPolicy": restart,
                                "containers": [{"name": "node", "image": "i"}]}}}
    if pfp:
        spec["podFailurePolicy"] = pfp
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta("j", "job-uid"),
            "spec": spec, "status": status or {}}


def pod(name: str, *, phase: str, index: int = 0, exit_code: int = 1, finished: str =
        "2026-01-01T00:00:05Z", conditions: list[dict[str, Any]] | None = None,
        finalizer: bool = True) -> dict[str, Any]:
    meta = _meta(name, f"uid-{name}", labels={}, annotations={
        "batch.kubernetes.io/job-completion-index": str(index)},
        ownerReferences=[{"kind": "Job", "uid": "job-uid", "controller": True}])
    if finalizer:
        meta["finalizers"] = [batchjob.TRACKING_FINALIZER]
    term = {"exitCode": exit_code, "finishedAt": finished}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"nodeName": "n0"},
            "status": {"phase": phase, "conditions": conditions or [], "containerStatuses": [
                {"name": "node", "restartCount": 0, "state": {"terminated": term}}]}}


def creates(step: Any, kind: str) -> list[dict[str, Any]]:
    return [a.body for a in step.actions if isinstance(a, Create) and a.body["kind"] == kind]


def status_patch(step: Any) -> dict[str, Any]:
    (p,) = [a for a in step.actions if isinstance(a, Patch) and a.subresource == "status"
            and a.resource == BATCH_JOBS]
    return dict(p.patch["status"])


def test_job_creates_indexed_pods_with_names_labels_and_finalizer() -> None:
    """A new Indexed Job gets one pod per index, named and labelled like the Job controller's."""
    out = batchjob.step(World.of([job(completions=2)]), T0, CFG)
    pods = creates(out, "Pod")
    assert [p["metadata"]["generateName"] for p in pods] == ["j-0-", "j-1-"]
    first = pods[0]
    assert first["spec"]["hostname"] == "j-0"
    assert first["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "0"
    assert first["metadata"]["finalizers"] == [batchjob.TRACKING_FINALIZER]
    assert first["metadata"]["ownerReferences"][0]["uid"] == "job-uid"
    assert any(e["name"] == "JOB_COMPLETION_INDEX" for e in first["spec"]["containers"][0]["env"])


def test_never_failure_is_replaced_after_the_pod_failure_backoff() -> None:
    """A failed pod (restartPolicy Never) is counted once and replaced only 10 s after it ended."""
    world = World.of([job(), pod("p1", phase="Failed")])
    out = batchjob.step(world, T0 + 6, CFG)
    assert status_patch(out)["failed"] == 1
    assert not creates(out, "Pod") and out.wake_at == T0 + 15
    marks = {a.key: a.value for a in out.actions if isinstance(a, Mark)}
    counted = World.of([job(status={"failed": 1}), pod("p1", phase="Failed", finalizer=False)],
                       marks=marks)
    later = batchjob.step(counted, T0 + 15, CFG)
    assert [p["metadata"]["generateName"] for p in creates(later, "Pod")] == ["j-0-"]


def test_backoff_limit_sets_failure_target_then_failed() -> None:
    """failed > backoffLimit: FailureTarget, active pods deleted, Failed once none terminate,
    in the next status write (upstream never writes the interim and terminal conditions in one
    update; the real Job controller showed it)."""
    world = World.of([job(backoff=0), pod("p1", phase="Failed")])
    st = status_patch(batchjob.step(world, T0 + 6, CFG))
    types = [(c["type"], c["reason"]) for c in st["conditions"]]
    assert types == [("FailureTarget", "BackoffLimitExceeded")]
    synced = World.of([job(backoff=0, status={k: v for k, v in st.items() if v is not None}),
                       pod("p1", phase="Failed", finalizer=False)])
    st = status_patch(batchjob.step(synced, T0 + 7, CFG))
    types = [(c["type"], c["reason"]) for c in st["conditions"]]
    assert types == [("FailureTarget", "BackoffLimitExceeded"), ("Failed", "BackoffLimitExceeded")]


def test_pod_failure_policy_ignores_disruption() -> None:
    """A DisruptionTarget=True failure matched by an Ignore rule is not counted and not delayed."""
    pfp = {"rules": [{"action": "Ignore", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}]}]}
    evicted = pod("p1", phase="Failed", exit_code=143, conditions=[
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}])
    out = batchjob.step(World.of([job(backoff=0, pfp=pfp), evicted]), T0 + 6, CFG)
    assert status_patch(out)["failed"] == 0
    assert len(creates(out, "Pod")) == 1


def test_pod_failure_policy_fail_job_on_exit_code() -> None:
    """A FailJob exit-code rule fails the Job with reason PodFailurePolicy and the real message."""
    pfp = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}
    out = batchjob.step(World.of([job(backoff=5, pfp=pfp), pod("p1", phase="Failed",
                                                               exit_code=42)]), T0 + 6, CFG)
    cond = status_patch(out)["conditions"][0]
    assert cond["reason"] == "PodFailurePolicy"
    assert cond["message"] == ("Container node for pod ns/p1 failed with exit code 42 matching "
                               "FailJob rule at index 0")


def test_on_failure_restart_counts_bound_the_job() -> None:
    """With OnFailure, restartCount sum >= backoffLimit fails the Job."""
    running = pod("p1", phase="Running")
    running["status"]["containerStatuses"][0].update(restartCount=3, state={"running": {}})
    out = batchjob.step(World.of([job(restart="OnFailure", backoff=3), running]), T0, CFG)
    assert any(isinstance(a, Delete) and a.name == "p1" for a in out.actions)
    assert status_patch(out)["conditions"][0]["type"] == "FailureTarget"


def _rendered() -> tuple[dict[str, Any], dict[str, Any]]:
    runtime, tj = trainjob_objects(entry="communication/nccl-all-reduce", job_name="ar",
                                   namespace="ns", profile=PROF, nodes=["n0", "n1"])
    tj["metadata"]["uid"] = "tj-uid"
    return runtime, tj


def test_trainer_builds_the_mpi_jobset() -> None:
    """Trainer names the JobSet after the TrainJob, merges the patches, sets counts and MPI bits."""
    runtime, tj = _rendered()
    js = trainer.build_jobset(tj, runtime)
    assert js["metadata"]["name"] == "ar-workload"
    assert js["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    rjobs = {rj["name"]: rj for rj in js["spec"]["replicatedJobs"]}
    node_spec = rjobs["node"]["template"]["spec"]
    assert node_spec["parallelism"] == node_spec["completions"] == 2
    launcher_pod = rjobs["launcher"]["template"]["spec"]["template"]
    assert launcher_pod["metadata"]["labels"]["cre.dev/launcher"] == "ar"
    container = launcher_pod["spec"]["containers"][0]
    assert container["command"][-1].endswith("mpirun")
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert {v["name"] for v in launcher_pod["spec"]["volumes"]} >= {"mpi-hostfile",
                                                                    "mpi-ssh-auth"}
    host = trainer.hostfile_configmap(tj, runtime, js)["data"]["hostfile"]
    assert host.splitlines() == ["ar-workload-node-0-0.ar-workload slots=8",
                                 "ar-workload-node-0-1.ar-workload slots=8"]


def test_trainer_copies_jobset_failure_to_trainjob() -> None:
    """TrainJob Failed copies the JobSet's True Failed condition (reason and message)."""
    runtime, tj = _rendered()
    js = trainer.build_jobset(tj, runtime)
    js["status"] = {"conditions": [{"type": "Failed", "status": "True", "reason": "FailedJobs",
                                    "message": "jobset failed", "lastTransitionTime": "t"}]}
    out = trainer.step(World.of([runtime, tj, js]), T0, CFG)
    (patch,) = [a for a in out.actions if isinstance(a, Patch)]
    (cond,) = patch.patch["status"]["conditions"]
    assert (cond["type"], cond["reason"], cond["message"]) == ("Failed", "FailedJobs",
                                                               "jobset failed")


def _jobset() -> dict[str, Any]:
    runtime, tj = _rendered()
    js = trainer.build_jobset(tj, runtime)
    js["metadata"]["uid"] = "js-uid"
    return js


def _child_job(rjob: str, *, uid: str, condition: str) -> dict[str, Any]:
    """Job 0 of replicated job ``rjob`` of ``_jobset()`` (attempt 0), ``condition`` True."""
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": f"ar-workload-{rjob}-0", "namespace": "ns", "uid": uid,
        "labels": {jobset.RJOB_NAME: rjob, jobset.RESTART_ATTEMPT: "0"},
        "ownerReferences": [{"uid": "js-uid", "controller": True}]},
        "status": {"conditions": [{"type": condition, "status": "True"}]}}


def test_jobset_creates_workers_first_and_launcher_on_ready() -> None:
    """dependsOn Ready: only the node Job at first; the launcher once the node Job is ready."""
    js = _jobset()
    jobs = creates(jobset.step(World.of([js]), T0, CFG), "Job")
    assert [j["metadata"]["name"] for j in jobs] == ["ar-workload-node-0"]
    labels = jobs[0]["spec"]["template"]["metadata"]["labels"]
    assert labels[jobset.RJOB_NAME] == "node" and labels[jobset.RESTART_ATTEMPT] == "0"
    assert jobs[0]["spec"]["template"]["spec"]["subdomain"] == "ar-workload"
    node_job = {**jobs[0], "metadata": {**jobs[0]["metadata"], "uid": "nj"},
                "status": {"ready": 2, "active": 2}}
    later = creates(jobset.step(World.of([js, node_job]), T0, CFG), "Job")
    assert [j["metadata"]["name"] for j in later] == ["ar-workload-launcher-0"]


def test_jobset_success_policy_and_failure() -> None:
    """The launcher completing completes the JobSet; a failed Job fails it with FailedJobs."""
    js = _jobset()
    done = _child_job("launcher", uid="l", condition="Complete")
    out = jobset.step(World.of([js, done]), T0, CFG)
    (p,) = [a for a in out.actions if isinstance(a, Patch) and a.resource == JOBSETS]
    assert p.patch["status"]["conditions"][-1]["reason"] == "AllJobsCompleted"
    done["status"] = {"conditions": [{"type": "Failed", "status": "True",
                                      "lastTransitionTime": "t"}]}
    out = jobset.step(World.of([js, done]), T0, CFG)
    (p,) = [a for a in out.actions if isinstance(a, Patch) and a.resource == JOBSETS]
    assert p.patch["status"]["conditions"][-1]["message"] == (
        "jobset failed due to one or more job failures (first failed job: "
        "ar-workload-launcher-0)")


def test_jobset_restart_bumps_attempt() -> None:
    """With failurePolicy maxRestarts 1 a failed Job raises status.restarts instead of failing."""
    js = _jobset()
    js["spec"]["failurePolicy"] = {"maxRestarts": 1}
    failed = _child_job("node", uid="n", condition="Failed")
    out = jobset.step(World.of([js, failed]), T0, CFG)
    (p,) = [a for a in out.actions if isinstance(a, Patch) and a.resource == JOBSETS]
    assert p.patch["status"]["restarts"] == 1
    assert not any(c.get("type") == "Failed" for c in p.patch["status"].get("conditions") or [])


def test_scheduler_binds_or_reports_unschedulable() -> None:
    """A GPU pod binds to a node with room; one asking for too many GPUs gets the real message."""
    nodes = [node_manifest(PROF, 0), node_manifest(PROF, 1)]
    fits = {"apiVersion": "v1", "kind": "Pod", "metadata": _meta("a", "a"), "spec": {
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
        "status": {"phase": "Pending"}}
    big = {**fits, "metadata": _meta("b", "b"), "spec": {"containers": [
        {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "9"}}}],
        "nodeSelector": {"kubernetes.io/hostname": "aws-h100-node-0"}}}
    out = scheduler.step(World.of([*nodes, fits, big]), T0, CFG)
    binds = [a for a in out.actions if isinstance(a, Bind)]
    assert [(b.pod, b.node) for b in binds] == [("a", "aws-h100-node-0")]
    (msg,) = [a.patch["status"]["conditions"][-1]["message"] for a in out.actions
              if isinstance(a, Patch) and a.name == "b"]
    assert msg == ("0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't "
                   "match Pod's node affinity/selector. preemption: 0/2 nodes are available: "
                   "2 Preemption is not helpful for scheduling.")


def onfailure_pod_on_node0() -> tuple[dict[str, Any], dict[str, Any]]:
    """Node 0 and a running ``OnFailure`` pod ``p1`` bound to it (container state left to set)."""
    node = node_manifest(PROF, 0)
    p = pod("p1", phase="Running")
    p["spec"] = {"nodeName": node["metadata"]["name"], "restartPolicy": "OnFailure",
                 "containers": [{"name": "node", "image": "i"}]}
    p["status"].update(startTime="2026-01-01T00:00:00Z")
    return node, p


def test_kubelet_crashloop_backoff_message() -> None:
    """A second failure under OnFailure waits in CrashLoopBackOff with the kubelet's message."""
    node, p = onfailure_pod_on_node0()
    p["status"]["containerStatuses"][0].update(restartCount=1, state={"terminated": {
        "exitCode": 1, "reason": "Error"}})
    out = kubelet.step(World.of([node, p]), T0, CFG)
    (patch,) = [a for a in out.actions if isinstance(a, Patch)]
    waiting = patch.patch["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["reason"] == "CrashLoopBackOff"
    assert waiting["message"] == ("back-off 10s restarting failed container=node "
                                  "pod=p1_ns(uid-p1)")
    assert patch.patch["status"]["phase"] == "Running" and out.wake_at == T0 + 10
    assert RotateLog("ns", "p1", "node") in out.actions


def test_kubelet_rotates_the_log_when_a_run_dies_not_when_the_next_starts() -> None:
    """The crashed run's log becomes the previous=true log as soon as lastState records it."""
    node, p = onfailure_pod_on_node0()
    p["status"]["containerStatuses"][0].update(restartCount=1, state={"waiting": {
        "reason": "CrashLoopBackOff"}}, lastState={"terminated": {"exitCode": 1}})
    world = World(objects=World.of([node, p]).objects, marks={"restartat/uid-p1/node": T0})
    out = kubelet.step(world, T0, CFG)
    assert not any(isinstance(a, RotateLog) for a in out.actions)


def test_node_not_ready_taints_and_evicts_after_toleration() -> None:
    """A NotReady node is tainted; its pods get DisruptionTarget, then a delete when tolerated."""
    node = node_manifest(PROF, 0)
    node["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    p = pod("p1", phase="Running")
    p["spec"] = {"nodeName": node["metadata"]["name"], "tolerations": [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 30}]}
    first = nodelifecycle.step(World.of([node, p]), T0, CFG)
    assert first.wake_at == T0 + 30
    taint = next(a for a in first.actions if isinstance(a, Patch) and a.name == node["metadata"][
        "name"]).patch["spec"]["taints"]
    assert {t["key"] for t in taint} == {"node.kubernetes.io/not-ready"}
    later = nodelifecycle.step(World.of([node, p], marks={
        f"tainted/{node['metadata']['name']}": T0}), T0 + 30, CFG)
    reasons = [c.get("reason") for a in later.actions if isinstance(a, Patch) and a.name == "p1"
               for c in a.patch["status"]["conditions"]]
    assert "DeletionByTaintManager" in reasons
    assert any(isinstance(a, Delete) and a.resource == PODS for a in later.actions)


def _marks(step: Any) -> dict[str, Any]:
    return {a.key: a.value for a in step.actions if isinstance(a, Mark)}


def test_job_expectations_hold_back_a_second_pod_until_the_first_is_seen() -> None:
    """A create whose pod was not observed yet (a dropped watch event) is not sent again; the
    pod's arrival observes the expectation, a failed create forgets it, and it expires at 5 min."""
    first = batchjob.step(World.of([job()]), T0, CFG)
    (create,) = [a for a in first.actions if isinstance(a, Create)]
    marks = _marks(first)
    assert marks == {"jobexpect/job-uid/0": T0}
    assert create.on_failure == (Mark("jobexpect/job-uid/0", None),)
    unseen = batchjob.step(World.of([job(status={"active": 1})], marks=marks), T0 + 5, CFG)
    assert not creates(unseen, "Pod")
    assert unseen.wake_at == T0 + batchjob.EXPECTATIONS_TTL
    running = pod("p0", phase="Running")
    seen = batchjob.step(World.of([job(status={"active": 1}), running], marks=marks), T0 + 5,
                         CFG)
    assert _marks(seen) == {"jobexpect/job-uid/0": None} and not creates(seen, "Pod")
    expired = batchjob.step(World.of([job(status={"active": 1})], marks=marks),
                            T0 + batchjob.EXPECTATIONS_TTL, CFG)
    assert [p["metadata"]["generateName"] for p in creates(expired, "Pod")] == ["j-0-"]


def test_mirror_keeps_the_newest_state_of_an_object() -> None:
    """A write answered with rv 11 is not undone by a list or event still carrying rv 9 (a
    relist in flight); a newer object under the same name (new uid) always replaces it."""
    cluster = _mirror()
    cluster._reflect(PODS, _obj(11))
    cluster._reflect(PODS, _obj(9))
    assert cluster.stores["pods"]["ns/p"]["metadata"]["resourceVersion"] == "11"
    cluster._reflect(PODS, _obj(5, uid="u2"))
    assert cluster.stores["pods"]["ns/p"]["metadata"]["uid"] == "u2"
    cluster._reflect(PODS, _obj(3, uid="u1"), deleted=True)  # the old object's late deletion
    assert cluster.stores["pods"]["ns/p"]["metadata"]["uid"] == "u2"
    cluster._reflect(PODS, _obj(12, uid="u2"), deleted=True)
    assert "ns/p" not in cluster.stores["pods"]


def test_mirror_deletion_is_final_for_its_uid() -> None:
    """Found by the soak (a node's GPUs held forever by a pod gone from the server): after a
    watch gap the relist's synthetic deletion carries the informer's last known version (9),
    older than the simulator's own last write (11); it must still remove the pod. And a patch
    answered after the deletion (in flight when it happened) must not bring the pod back."""
    cluster = _mirror()
    cluster._reflect(PODS, _obj(11))
    cluster._reflect(PODS, _obj(9), deleted=True)
    assert "ns/p" not in cluster.stores["pods"]
    cluster._reflect(PODS, _obj(11))  # the late answer of a write
    assert "ns/p" not in cluster.stores["pods"]
    cluster._reflect(PODS, _obj(20, uid="u3"))  # a new pod under the same name
    assert cluster.stores["pods"]["ns/p"]["metadata"]["uid"] == "u3"


def _obj(rv: int, uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": uid, "resourceVersion": str(rv)}}


def _mirror() -> Any:
    from cre.testing.cluster.clock import SimClock
    from cre.testing.cluster.runtime import SimulatedCluster

    return SimulatedCluster(None, config=CFG, clock=SimClock(), nodes=0,  # type: ignore[arg-type]
                            logs=None)  # type: ignore[arg-type]


def test_only_the_simulator_may_watch_every_pod() -> None:
    """The pod-scope guard waives exactly the simulator's runtime module; any other caller of an
    unscoped pod informer (this test, even naming the runtime as its caller) is refused."""
    import pytest

    from cre.kube.guard import WAIVED_CALLERS, UnscopedPodRead
    from cre.kube.informer import Informer

    assert set(WAIVED_CALLERS) == {"cre.testing.cluster.runtime"}
    with pytest.raises(UnscopedPodRead, match="refusing an unscoped Pod informer"):
        Informer(None, PODS, transform=dict,  # type: ignore[arg-type]
                 caller="cre.testing.cluster.runtime:run")


def _waiting_on(out: Any) -> dict[str, Any]:
    (patch,) = [a for a in out.actions if isinstance(a, Patch)]
    return dict(patch.patch["status"]["containerStatuses"][0]["state"]["waiting"])


def test_kubelet_image_pull_fails_backs_off_and_clears_when_available() -> None:
    """An unavailable registry on the pod's node: ErrImagePull with the kubelet's message, then
    ImagePullBackOff for the 10 s back-off, then another attempt; another node's mark does not
    apply; once available the container starts."""
    node, p = onfailure_pod_on_node0()
    image = "nvcr.io/nvidia/pytorch:24.05-py3"
    p["spec"]["containers"][0]["image"] = image
    p["status"]["containerStatuses"][0].update(state={"waiting": {"reason": "ContainerCreating"}})
    name = node["metadata"]["name"]
    marks = {"created/uid-p1": T0 - 5, kubelet.unavailable_key("nvcr.io"): ((name,), "")}
    world = World(objects=World.of([node, p]).objects, marks=marks)
    out = kubelet.step(world, T0, CFG)
    waiting = _waiting_on(out)
    assert waiting["reason"] == "ErrImagePull"
    assert waiting["message"].startswith(f'Failed to pull image "{image}": rpc error')
    assert out.wake_at == T0 + CFG.container_start_delay
    p["status"]["containerStatuses"][0]["state"] = {"waiting": waiting}
    marks.update({a.key: a.value for a in out.actions if isinstance(a, Mark)})
    later = kubelet.step(World(objects=World.of([node, p]).objects, marks=marks), T0 + 1, CFG)
    backoff = _waiting_on(later)
    assert backoff["reason"] == "ImagePullBackOff"
    assert backoff["message"].startswith(f'Back-off pulling image "{image}": ErrImagePull: rpc')
    assert later.wake_at == T0 + 1 + 10
    p["status"]["containerStatuses"][0]["state"] = {"waiting": _waiting_on(later)}
    marks.update({a.key: a.value for a in later.actions if isinstance(a, Mark)})
    retry = kubelet.step(World(objects=World.of([node, p]).objects, marks=marks), T0 + 11, CFG)
    assert _waiting_on(retry)["reason"] == "ErrImagePull"
    elsewhere = {**marks, kubelet.unavailable_key("nvcr.io"): (("other-node",), "")}
    runs = kubelet.step(World(objects=World.of([node, p]).objects, marks=elsewhere), T0 + 11,
                        CFG)
    (patch,) = [a for a in runs.actions if isinstance(a, Patch)]
    assert "running" in patch.patch["status"]["containerStatuses"][0]["state"]
    cleared = {k: v for k, v in marks.items() if not k.startswith("imageunavailable/")}
    starts = kubelet.step(World(objects=World.of([node, p]).objects, marks=cleared), T0 + 11,
                          CFG)
    (patch,) = [a for a in starts.actions if isinstance(a, Patch)]
    assert "running" in patch.patch["status"]["containerStatuses"][0]["state"]
