"""The Job controller against the API emulator, with scripted pod and TrainJob transitions."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from prometheus_client import REGISTRY

from cre.api.watch import WatchEventType
from cre.core.common.projections import pod_view
from cre.core.job.workload import workload_name
from cre.kube.client import JOBS, ApiError
from cre.kube.informer import Informer
from cre.testing.apiserver import Emulator
from cre.testing.jobharness import JobHarness, condition, is_true

pytestmark = pytest.mark.anyio


def _fire(informer: Informer[Any], etype: WatchEventType, old: Any, new: Any) -> None:
    """Deliver one watch event through the informer's handlers (the controller's wiring:
    predicates, then the handler)."""
    informer._dispatch(etype, old, new)

L1 = "j1-workload-launcher-0-0-aaaaa"
L2 = "j1-workload-launcher-0-0-bbbbb"
W0 = "j1-workload-node-0-0-ccccc"
W1 = "j1-workload-node-0-1-ddddd"


def _failure_log(job: dict[str, Any]) -> dict[str, Any]:
    return dict((job.get("status") or {}).get("failureLog") or {})


def _reason(job: dict[str, Any], type_: str) -> str:
    return str((condition(job, type_) or {}).get("reason") or "")


def _message(job: dict[str, Any], type_: str) -> str:
    return str((condition(job, type_) or {}).get("message") or "")


async def test_creates_owned_workload_and_reports_in_progress(job_harness: JobHarness) -> None:
    """A new Job gets the finalizer, an owned labelled TrainJob and InProgress, with one event."""
    h = job_harness
    await h.create_job("j1")
    tj = await h.wait_trainjob("j1")
    assert tj["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert tj["metadata"]["labels"]["cre.dev/job"] == "j1"
    job = await h.wait_job("j1", is_true("InProgress"))
    assert "cre.dev/finalizer" in job["metadata"]["finalizers"]
    assert job["status"]["workloadRef"]["name"] == workload_name("j1")
    await h.wait_event("j1", "WorkloadCreated")  # events follow the status write
    events = await h.events("j1")
    assert [(e["type"], e["reason"]) for e in events] == [("Normal", "WorkloadCreated")]


async def test_launcher_deleted_half_a_second_after_failing_is_captured(
        job_harness: JobHarness) -> None:
    """A launcher that fails and is deleted 0.5 s later still has its log in failureLog, and
    the later Failed verdict keeps it, blaming every group node."""
    h = job_harness
    await h.create_job("j1", group_nodes=("gpu-0", "gpu-1"))
    await h.wait_trainjob("j1")
    await h.script.create_pod(L1, job="j1", launcher=True, node="gpu-0")
    await h.script.create_pod(W0, job="j1", launcher=False, node="gpu-1")
    await h.wait_job("j1", lambda j: _reason(j, "InProgress") == "WorkloadRunning")
    await h.script.terminate(L1, exit_code=1, log="[stub] simulated failure\n")
    await anyio.sleep(0.5)  # JobSet's deletion of the failed launcher, as scripted time
    await h.script.delete_pod(L1)
    await h.script.terminate(W0, exit_code=137, reason="Error", log="sshd exiting\n")
    job = await h.wait_job("j1", lambda j: _failure_log(j).get("podName") == L1)
    assert "[stub] simulated failure" in _failure_log(job)["tail"]
    assert is_true("InProgress")(job)
    await h.script.finish_workload("j1", failed=True, message="launcher failed")
    job = await h.wait_job("j1", is_true("Failed"))
    assert _failure_log(job)["podName"] == L1
    assert job["status"]["failureClass"]["scope"] == "Workload"
    assert {n["name"] for n in job["status"]["failedNodes"]} == {"gpu-0", "gpu-1"}
    await h.wait_event("j1", "WorkloadFailed")  # events follow the status write
    events = await h.events("j1")
    assert [(e["type"], e["reason"]) for e in events] == [
        ("Normal", "WorkloadCreated"), ("Warning", "WorkloadFailed")]


async def test_success_after_launcher_retry_drops_the_record(job_harness: JobHarness) -> None:
    """The first attempt's log is recorded early and dropped when the retry succeeds."""
    h = job_harness
    await h.create_job("j1")
    await h.wait_trainjob("j1")
    await h.script.create_pod(L1, job="j1", launcher=True, node="gpu-0")
    await h.script.terminate(L1, exit_code=1, log="first attempt failed\n")
    await h.wait_job("j1", lambda j: _failure_log(j).get("podName") == L1)
    await h.script.create_pod(L2, job="j1", launcher=True, node="gpu-0")
    await h.script.terminate(L2, exit_code=0, reason="Completed", log="ok\n")
    await h.script.finish_workload("j1", failed=False)
    job = await h.wait_job("j1", is_true("Succeeded"))
    assert "failureLog" not in job["status"] and "failureClass" not in job["status"]


async def test_crashlooping_worker_is_recorded_from_its_previous_log(
        job_harness: JobHarness) -> None:
    """A worker crash-looping in place (exit only in lastState) is recorded with its own exit
    and the log of the crashed run (read with previous=true), Workload class, group blamed."""
    h = job_harness
    await h.create_job("j1", group_nodes=("gpu-0", "gpu-1"))
    await h.wait_trainjob("j1")
    await h.script.create_pod(L1, job="j1", launcher=True, node="gpu-0")
    await h.script.create_pod(W0, job="j1", launcher=False, node="gpu-1")
    await h.wait_job("j1", lambda j: _reason(j, "InProgress") == "WorkloadRunning")
    await h.script.crashloop(W0, exit_code=2, log="sshd: fatal: bad key\n")
    await h.script.finish_workload("j1", failed=True, message="worker job failed")
    job = await h.wait_job("j1", is_true("Failed"))
    record = _failure_log(job)
    assert (record["podName"], record["containerName"], record["nodeName"],
            record["exitCode"], record["reason"]) == (W0, "node", "gpu-1", 2, "Error")
    assert record["tail"] == "sshd: fatal: bad key\n"
    assert (job["status"]["failureClass"]["scope"],
            job["status"]["failureClass"]["reason"]) == ("Workload", "ContainerFailed")
    assert {n["name"] for n in job["status"]["failedNodes"]} == {"gpu-0", "gpu-1"}


async def test_workload_deleted_by_someone_else_is_control_plane(job_harness: JobHarness) -> None:
    """A TrainJob deleted from outside fails the Job as ControlPlane and blames no node."""
    h = job_harness
    await h.create_job("j1", group_nodes=("gpu-0",))
    await h.wait_trainjob("j1")
    await h.wait_job("j1", lambda j: bool(((j.get("status") or {}).get("workloadRef") or {})
                                          .get("uid")))
    await h.script.delete_workload("j1")
    job = await h.wait_job("j1", is_true("Failed"))
    assert job["status"]["failureClass"]["scope"] == "ControlPlane"
    assert "failedNodes" not in job["status"]
    assert "was deleted" in _message(job, "Failed")


async def test_a_workload_seen_deleted_is_not_read_live_again(
        job_harness: JobHarness, shared_emulator: Emulator) -> None:
    """Once the cache saw the Job's own TrainJob (its uid) deleted, "is the workload gone?" is
    answered from that: the Job fails as it would on a live read's 404, and the controller
    reads no TrainJob after the delete."""
    h = job_harness
    await h.create_job("j1", group_nodes=("gpu-0",))
    await h.wait_trainjob("j1")
    await h.wait_job("j1", lambda j: bool(((j.get("status") or {}).get("workloadRef") or {})
                                          .get("uid")))
    since = shared_emulator.audit.seq
    await h.script.delete_workload("j1")
    job = await h.wait_job("j1", is_true("Failed"))
    assert job["status"]["failureClass"]["scope"] == "ControlPlane"
    assert "was deleted" in _message(job, "Failed")
    reads = [r for r in shared_emulator.audit.since(since)
             if r.verb == "get" and r.resource == "trainjobs" and r.namespace == h.namespace]
    assert reads == []
    assert h.controller.deleted_workloads == {
        h.job_key("j1"): job["status"]["workloadRef"]["uid"]}


async def test_deleted_job_drops_finalizer_after_pods_drain(job_harness: JobHarness) -> None:
    """Deleting a Job deletes its workload and removes the finalizer once its pods are done."""
    h = job_harness
    await h.create_job("j1")
    await h.wait_trainjob("j1")
    await h.script.create_pod(W0, job="j1", launcher=False, node="gpu-1")
    await h.wait_job("j1", is_true("InProgress"))
    await h.client.delete(JOBS, "j1", namespace=h.namespace)
    job = await h.wait_job("j1", lambda j: bool((j.get("status") or {}).get("drainStartTime")))
    assert "cre.dev/finalizer" in job["metadata"]["finalizers"]
    await h.script.terminate(W0, exit_code=0, reason="Completed", log="")
    with anyio.fail_after(20):
        while True:
            try:
                await h.job("j1")
            except ApiError as exc:
                assert exc.not_found
                break
            await anyio.sleep(0.02)


async def test_create_error_is_transient_and_reported(job_harness: JobHarness,
                                                      shared_emulator: Emulator) -> None:
    """A failing TrainJob create emits Warning WorkloadCreationError, never fails the Job, and
    the Job proceeds once creates succeed again."""
    h = job_harness
    shared_emulator.faults.add_error(500, verb="create", resource="trainjobs")
    try:
        await h.create_job("j1")
        await h.wait_event("j1", "WorkloadCreationError")
        job = await h.job("j1")
        assert condition(job, "Failed") is None
    finally:
        shared_emulator.faults.reset()
    await h.wait_job("j1", is_true("InProgress"))
    warnings = [e for e in await h.events("j1") if e["reason"] == "WorkloadCreationError"]
    assert all(e["type"] == "Warning" for e in warnings)


async def test_capture_delay_and_phase_metrics(job_harness: JobHarness) -> None:
    """An early capture observes the exit-to-failureLog histogram and the phase gauge follows."""
    h = job_harness
    before = REGISTRY.get_sample_value("cre_job_failure_log_delay_seconds_count") or 0.0
    await h.create_job("j1")
    await h.wait_trainjob("j1")
    await h.script.create_pod(L1, job="j1", launcher=True, node="gpu-0")
    await h.wait_job("j1", lambda j: _reason(j, "InProgress") == "WorkloadRunning")
    await h.script.terminate(L1, exit_code=1, log="boom\n")
    await h.wait_job("j1", lambda j: _failure_log(j).get("podName") == L1)
    after = REGISTRY.get_sample_value("cre_job_failure_log_delay_seconds_count") or 0.0
    assert after == before + 1
    labels = {"namespace": h.namespace, "job": "j1"}
    assert REGISTRY.get_sample_value("cre_job_status", {**labels, "phase": "Running"}) == 1.0
    assert REGISTRY.get_sample_value("cre_job_status", {**labels, "phase": "Failed"}) == 0.0


async def test_long_log_keeps_its_end(job_harness: JobHarness) -> None:
    """A log longer than 32 KiB is recorded as its last 32 KiB, ending with the last line."""
    h = job_harness
    await h.create_job("j1")
    await h.wait_trainjob("j1")
    await h.script.create_pod(L1, job="j1", launcher=True, node="gpu-0")
    await h.wait_job("j1", lambda j: _reason(j, "InProgress") == "WorkloadRunning")
    lines = "".join(f"line {i:04d} {'x' * 90}\n" for i in range(700)) + "FATAL: the cause\n"
    await h.script.terminate(L1, exit_code=1, log=lines)
    job = await h.wait_job("j1", lambda j: _failure_log(j).get("podName") == L1)
    tail = _failure_log(job)["tail"]
    assert tail.endswith("FATAL: the cause\n") and len(tail.encode()) <= 32768


async def test_conflicting_status_writes_still_converge_with_one_event_each(
        job_harness: JobHarness, shared_emulator: Emulator) -> None:
    """With half of all Job status writes answered 409, the launcher capture and the verdict
    still land, and each transition is announced exactly once."""
    h = job_harness
    shared_emulator.faults.add_error(409, rate=0.5, verb="update", resource="jobs")
    try:
        await h.create_job("j1", group_nodes=("gpu-0",))
        await h.wait_trainjob("j1")
        await h.script.create_pod(L1, job="j1", launcher=True, node="gpu-0")
        await h.wait_job("j1", lambda j: _reason(j, "InProgress") == "WorkloadRunning")
        await h.script.terminate(L1, exit_code=1, log="[stub] simulated failure\n")
        await h.wait_job("j1", lambda j: _failure_log(j).get("podName") == L1)
        await h.script.finish_workload("j1", failed=True, message="launcher failed")
        job = await h.wait_job("j1", is_true("Failed"))
        injected = shared_emulator.faults.injected
    finally:
        shared_emulator.faults.reset()
    assert injected > 0
    assert "[stub] simulated failure" in _failure_log(job)["tail"]
    # A 409 right after the create makes the re-run adopt the workload it just created.
    # Events follow the status write, so the Failed condition can be seen before its event.
    await h.wait_event("j1", "WorkloadFailed")
    events = [(e["type"], e["reason"]) for e in await h.events("j1")]
    assert events in ([("Normal", "WorkloadCreated"), ("Warning", "WorkloadFailed")],
                      [("Normal", "WorkloadAdopted"), ("Warning", "WorkloadFailed")])


async def test_workload_refused_by_validation_fails_as_platform(job_harness: JobHarness) -> None:
    """A TrainJob the API server refuses for good (schema validation) fails the Job at once,
    Platform class AdmissionRejected, blaming no node, instead of being retried forever."""
    h = job_harness
    body = {"apiVersion": "cre.dev/v1alpha1", "kind": "Job",
            "metadata": {"name": "bad", "namespace": h.namespace,
                         "annotations": {"cre.dev/group-nodes": "gpu-0,gpu-1"}},
            "spec": {"workload": {"trainJob": {"runtimeRef": {"name": 5}}}}}
    await h.client.create(JOBS, body, namespace=h.namespace)
    job = await h.wait_job("bad", is_true("Failed"))
    cond = condition(job, "Failed")
    assert cond is not None and cond["reason"] == "WorkloadCreationError"
    status = job["status"]
    assert status["failureClass"]["scope"] == "Platform"
    assert status["failureClass"]["reason"] == "AdmissionRejected"
    assert not status.get("failedNodes")
    assert status["failureLog"]["reason"] == "WorkloadCreationError"
    assert await h.script.trainjob("bad") is None


async def test_crashlooping_worker_deleted_before_the_verdict_is_recorded(
        job_harness: JobHarness) -> None:
    """A worker that crash-loops and is deleted (its Job past backoffLimit) before the workload
    fails is not written while the run goes on, yet the verdict names it with its crashed run's
    tail; the Job's tombstones and prefetched tails are dropped once it is Failed."""
    h = job_harness
    key = h.job_key("j1")
    await h.create_job("j1", group_nodes=("gpu-0", "gpu-1"))
    await h.wait_trainjob("j1")
    await h.script.create_pod(L1, job="j1", launcher=True, node="gpu-0")
    await h.script.create_pod(W0, job="j1", launcher=False, node="gpu-1")
    await h.wait_job("j1", lambda j: _reason(j, "InProgress") == "WorkloadRunning")
    await h.script.crashloop(W0, exit_code=1, log="sshd: fatal: Cannot bind any address.\n")
    await h.wait_until(lambda: W0 in h.controller.prefetcher.pods_of(key), what="prefetch")
    await h.script.delete_pod(W0)
    await h.wait_until(lambda: W0 in h.controller.tombstones(key), what="tombstone")
    await h.controller.reconcile(key)  # a pass that sees the deleted worker while running
    job = await h.job("j1")
    assert "failureLog" not in job["status"] and is_true("InProgress")(job)
    await h.script.finish_workload("j1", failed=True, message="worker job failed")
    job = await h.wait_job("j1", is_true("Failed"))
    record = _failure_log(job)
    assert (record["podName"], record["containerName"], record["nodeName"],
            record["exitCode"], record["reason"]) == (W0, "node", "gpu-1", 1, "Error")
    assert record["tail"] == "sshd: fatal: Cannot bind any address.\n"
    assert job["status"]["failureClass"]["scope"] == "Workload"
    # Dropped by the pass that wrote the verdict, right after its status write landed.
    await h.wait_until(lambda: not (h.controller.tombstones(key)
                                    or h.controller.prefetcher.pods_of(key)),
                       what="tombstones and tails dropped after the verdict")
    await h.wait_until(lambda: h.controller._settled(key), what="the cache shows the verdict")
    await h.script.create_pod(W1, job="j1", launcher=False, node="gpu-0")
    late = pod_view(await h.script.terminate(W1, exit_code=143, log="sshd: terminated\n"))
    _fire(h.controller.workers, WatchEventType.DELETED, late, None)
    assert h.controller.tombstones(key) == frozenset()  # nothing kept for a settled Job


async def test_failed_worker_deleted_unprefetched_still_names_the_pod(
        job_harness: JobHarness) -> None:
    """A failed worker whose deletion is the first thing the controller hears of it is still
    the recorded candidate (pod, exit, reason), its tail explaining that the log was gone."""
    h = job_harness
    key = h.job_key("j1")
    await h.create_job("j1", group_nodes=("gpu-1",))
    await h.wait_trainjob("j1")
    await h.script.create_pod(W0, job="j1", launcher=False, node="gpu-1")
    await h.wait_job("j1", lambda j: _reason(j, "InProgress") == "WorkloadRunning")
    h.controller.prefetcher.bind(None)  # the exit's log read never happens
    await h.script.terminate(W0, exit_code=3, log="lost\n")
    await h.script.delete_pod(W0)
    await h.wait_until(lambda: W0 in h.controller.tombstones(key), what="tombstone")
    await h.script.finish_workload("j1", failed=True, message="worker job failed")
    job = await h.wait_job("j1", is_true("Failed"))
    record = _failure_log(job)
    assert (record["podName"], record["exitCode"], record["reason"]) == (W0, 3, "Error")
    assert "could not be read" in record["tail"]
