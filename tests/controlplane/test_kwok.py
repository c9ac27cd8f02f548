"""The real Job controller and scheduler run Jobs on KWOK's fake GPU nodes.

One plane for the module: etcd + kube-apiserver + kube-controller-manager (Job, GC, pod GC,
node lifecycle) + kube-scheduler + KWOK with CRE's stages, and two fake ``aws-h100`` nodes
(8 GPUs each). Pods script their containers through annotations
(:func:`cre.testing.controlplane.kwok.pod_annotations`). Waits are generous and no test
asserts on wall-clock durations: a loaded machine only makes them slower.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cre.testing.controlplane import ControlPlane
from cre.testing.controlplane import kwok as K
from cre.testing.controlplane.plane import _running
from cre.testing.controlplane.pytest_fixtures import kwok_or_skip, start_or_skip

NS = "default"
WAIT = 180.0
CONTROLLERS = "job,garbagecollector,namespace,podgc,nodelifecycle"


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    binary = kwok_or_skip()
    running = start_or_skip()
    try:
        running.start_controller_manager(controllers=CONTROLLERS)
        running.start_scheduler()
        K.start_kwok(running, kwok=binary)
        K.register_gpu_nodes(running, count=2, profile="aws-h100", timeout=WAIT)
        yield running
    finally:
        pids = running.pids()
        running.stop()
        assert not any(_running(p) for p in pids), "a control-plane process outlived stop()"


def _until(plane: ControlPlane, what: str, probe: Callable[[], Any]) -> Any:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` and the logs."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        for comp in plane.components:
            comp.alive()
        got = probe()
        if got:
            return got
        time.sleep(0.25)
    logs = "\n".join(f"--- {c.name}\n{c.tail(10)}" for c in plane.components
                     if c.name in ("kwok", "kube-controller-manager", "kube-scheduler"))
    raise AssertionError(f"timed out after {WAIT:g}s waiting for {what}\n{logs}")


def _job(name: str, *, completions: int, annotations: dict[str, str],
         backoff_limit: int = 6) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"completions": completions, "parallelism": completions,
                 "backoffLimit": backoff_limit,
                 "template": {"metadata": {"annotations": annotations}, "spec": {
                     "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "cre/worker:test",
                                     "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}},
    }


def _job_condition(plane: ControlPlane, name: str) -> dict[str, Any] | None:
    status, body = plane.request("GET", f"/apis/batch/v1/namespaces/{NS}/jobs/{name}")
    assert status == 200, body
    for cond in body.get("status", {}).get("conditions") or []:
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            return dict(cond)
    return None


def _pods(plane: ControlPlane, job: str) -> list[dict[str, Any]]:
    status, body = plane.request("GET", f"/api/v1/namespaces/{NS}/pods"
                                 f"?labelSelector=job-name%3D{job}")
    assert status == 200, body
    return list(body["items"])


def _create(plane: ControlPlane, path: str, obj: dict[str, Any]) -> None:
    status, body = plane.request("POST", path, obj)
    assert status == 201, body


def test_fake_gpu_nodes_are_ready_with_gpus(plane: ControlPlane) -> None:
    status, body = plane.request("GET", "/api/v1/nodes?labelSelector=type%3Dkwok")
    assert status == 200
    nodes = {n["metadata"]["name"]: n for n in body["items"]}
    assert sorted(nodes) == ["aws-h100-node-0", "aws-h100-node-1"]
    for node in nodes.values():
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready[0]["status"] == "True"
        assert node["status"]["phase"] == "Running"


def test_job_completes_on_two_gpu_nodes(plane: ControlPlane) -> None:
    _create(plane, f"/apis/batch/v1/namespaces/{NS}/jobs",
            _job("ok", completions=2, annotations=K.pod_annotations(exit_code=0, run_seconds=2)))
    cond = _until(plane, "Job ok to complete", lambda: _job_condition(plane, "ok"))
    assert cond["type"] == "Complete"
    pods = _pods(plane, "ok")
    assert len(pods) == 2
    # the real scheduler put one 8-GPU pod on each fake node
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["aws-h100-node-0", "aws-h100-node-1"]
    for pod in pods:
        assert pod["status"]["phase"] == "Succeeded"
        (cs,) = pod["status"]["containerStatuses"]
        assert cs["state"]["terminated"]["exitCode"] == 0
        assert cs["state"]["terminated"]["reason"] == "Completed"
        assert set(cs["state"]) == {"terminated"}
        ready = {c["type"]: c for c in pod["status"]["conditions"]}
        assert ready["Ready"]["status"] == "False"
        assert ready["Ready"]["reason"] == "PodCompleted"
        assert ready["PodScheduled"]["status"] == "True"
        assert pod["status"]["hostIP"].startswith("10.10.0.")
        assert "batch.kubernetes.io/job-tracking" not in pod["metadata"].get("finalizers", [])
    _, job = plane.request("GET", f"/apis/batch/v1/namespaces/{NS}/jobs/ok")
    assert job["status"]["succeeded"] == 2


def test_job_fails_when_its_pod_exits_1(plane: ControlPlane) -> None:
    _create(plane, f"/apis/batch/v1/namespaces/{NS}/jobs",
            _job("bad", completions=1, backoff_limit=0,
                 annotations=K.pod_annotations(exit_code=1, run_seconds=1)))
    cond = _until(plane, "Job bad to fail", lambda: _job_condition(plane, "bad"))
    assert cond["type"] == "Failed"
    assert cond["reason"] == "BackoffLimitExceeded"
    (pod,) = _pods(plane, "bad")
    assert pod["status"]["phase"] == "Failed"
    (cs,) = pod["status"]["containerStatuses"]
    assert cs["state"]["terminated"]["exitCode"] == 1
    assert cs["state"]["terminated"]["reason"] == "Error"


def test_deleting_a_running_pod_finishes(plane: ControlPlane) -> None:
    """No exit code: the containers run until deletion; the pod gets SIGTERM (143), turns
    Failed and KWOK removes it."""
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "server", "finalizers": ["cre.dev/test-hold"]},
           "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 30,
                    "containers": [{"name": "main", "image": "cre/server:test",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    path = f"/api/v1/namespaces/{NS}/pods"
    _create(plane, path, pod)

    def phase() -> str:
        status, body = plane.request("GET", f"{path}/server")
        assert status == 200, body
        return str(body["status"].get("phase", ""))

    _until(plane, "pod server to run", lambda: phase() == "Running")
    status, body = plane.request("DELETE", f"{path}/server")
    assert status == 200, body
    # The test's finalizer holds the object, so the terminal status can be read before KWOK's
    # final delete; then the finalizer goes and the pod with it.
    _until(plane, "pod server to be terminated", lambda: phase() == "Failed")
    _, body = plane.request("GET", f"{path}/server")
    (cs,) = body["status"]["containerStatuses"]
    assert cs["state"]["terminated"]["exitCode"] == 143
    assert body["metadata"]["deletionTimestamp"]
    status, body = plane.request("PATCH", f"{path}/server", {"metadata": {"finalizers": None}},
                                 content_type="application/merge-patch+json")
    assert status == 200, body
    _until(plane, "pod server to be gone",
           lambda: plane.request("GET", f"{path}/server")[0] == 404)


def test_pod_annotations_are_checked() -> None:
    assert K.pod_annotations(exit_code=0, run_seconds=2.5) == {
        K.EXIT_CODE: "0", K.RUN_SECONDS: "2.5"}
    with pytest.raises(ValueError, match=r"exit code 300 is outside 0\.\.255"):
        K.pod_annotations(exit_code=300)
    with pytest.raises(ValueError, match=r"cre\.dev/kwok-run-seconds: -1 seconds is negative"):
        K.pod_annotations(run_seconds=-1)


def test_deleting_a_running_job_pod_counts_as_a_failure(plane: ControlPlane) -> None:
    """The Job controller's tracking finalizer holds the deleted pod until KWOK has made it
    Failed (exit 143); the controller then counts the failure, releases the pod (KWOK deletes
    it) and starts a replacement."""
    _create(plane, f"/apis/batch/v1/namespaces/{NS}/jobs",
            _job("long", completions=1, backoff_limit=3, annotations={}))
    first = _until(plane, "Job long's pod to run", lambda: [
        p for p in _pods(plane, "long") if p["status"].get("phase") == "Running"])[0]
    name = first["metadata"]["name"]
    assert "batch.kubernetes.io/job-tracking" in first["metadata"]["finalizers"]
    status, body = plane.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{name}")
    assert status == 200, body
    _until(plane, f"pod {name} to be gone",
           lambda: plane.request("GET", f"/api/v1/namespaces/{NS}/pods/{name}")[0] == 404)

    def job_failed_once() -> bool:
        _, job = plane.request("GET", f"/apis/batch/v1/namespaces/{NS}/jobs/long")
        return bool(job.get("status", {}).get("failed") == 1)

    _until(plane, "Job long to count one failure", job_failed_once)
    replacement = _until(plane, "a replacement pod to run", lambda: [
        p for p in _pods(plane, "long")
        if p["metadata"]["name"] != name and p["status"].get("phase") == "Running"])
    assert len(replacement) == 1
    status, body = plane.request("DELETE", f"/apis/batch/v1/namespaces/{NS}/jobs/long"
                                 "?propagationPolicy=Foreground")
    assert status == 200, body
    _until(plane, "Job long and its pods to be gone", lambda: not _pods(plane, "long") and
           plane.request("GET", f"/apis/batch/v1/namespaces/{NS}/jobs/long")[0] == 404)


def test_cli_up_with_kwok_and_down(tmp_path: Path) -> None:
    kwok_or_skip()
    cli = [sys.executable, "-m", "cre.testing.controlplane"]
    up = subprocess.run([*cli, "up", "--dir", str(tmp_path), "--kwok"], capture_output=True,
                        text=True, check=False, timeout=300)
    assert up.returncode == 0, up.stderr
    pids = json.loads(up.stdout)["pids"]
    try:
        assert list(pids) == ["etcd", "kube-apiserver", "kwok"]
        assert all(_running(p) for p in pids.values())
    finally:
        down = subprocess.run([*cli, "down", "--dir", str(tmp_path)], capture_output=True,
                              text=True, check=False, timeout=120)
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout)["stopped"] == ["kwok", "kube-apiserver", "etcd"]
    assert not any(_running(p) for p in pids.values())


def test_a_pod_that_has_not_started_is_pending_with_containers_creating(
        plane: ControlPlane) -> None:
    path = f"/api/v1/namespaces/{NS}/pods"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "slow", "annotations": K.pod_annotations(start_seconds=3600)},
           "spec": {"restartPolicy": "Never", "containers": [
               {"name": "a", "image": "cre/a:test"}, {"name": "b", "image": "cre/b:test"}]}}
    _create(plane, path, pod)

    def pending() -> dict[str, Any] | None:
        _, body = plane.request("GET", f"{path}/slow")
        return dict(body) if body["status"].get("startTime") else None

    body = _until(plane, "pod slow to be started on its node", pending)
    status = body["status"]
    assert status["phase"] == "Pending"
    assert status["podIP"] and status["hostIP"].startswith("10.10.0.")
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["PodReadyToStartContainers"]["status"] == "True"
    assert conds["Ready"]["status"] == "False"
    assert conds["Ready"]["reason"] == "ContainersNotReady"
    assert conds["Ready"]["message"] == "containers with unready status: [a b]"
    assert [cs["state"] for cs in status["containerStatuses"]] == [
        {"waiting": {"reason": "ContainerCreating"}}] * 2
    status_code, body = plane.request("DELETE", f"{path}/slow")
    assert status_code == 200, body
    _until(plane, "pod slow to be gone", lambda: plane.request("GET", f"{path}/slow")[0] == 404)


def test_config_and_nodes_need_no_go(tmp_path: Path) -> None:
    """The stage file is YAML KWOK can read (one Stage per document, unique names, every
    template a string); fake nodes carry the selector label and a valid InternalIP."""
    from ruamel.yaml import YAML

    from cre.testing.cluster.profiles import get_profile

    docs = list(YAML(typ="safe").load_all(K.write_config(tmp_path / "s.yaml").read_text()))
    names = [d["metadata"]["name"] for d in docs]
    assert len(names) == len(set(names)) == len(K.stages())
    assert {d["kind"] for d in docs} == {"Stage"}
    assert {d["spec"]["resourceRef"]["kind"] for d in docs} == {"Node", "Pod"}
    node = K.gpu_node(get_profile("gcp-h100"), 300)
    assert node["metadata"]["labels"]["type"] == "kwok"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert "conditions" not in node["status"]
    assert node["status"]["addresses"][0] == {"type": "InternalIP", "address": "10.10.1.51"}
