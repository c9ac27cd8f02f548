"""The measurement controller with the Job controller against the API emulator: a Job asking
for a bandwidth measurement gets one, the launcher's log is measured, thresholds are judged."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry

from cre.api.converter import to_dict
from cre.api.labels import API_VERSION
from cre.controller.measure.bandwidth import BandwidthController
from cre.core.measure.logprofile import shipped_profiles
from cre.kube.client import (
    BANDWIDTHMEASUREMENTS,
    JOBS,
    LOGPROFILES,
    ApiError,
    KubeClient,
    Resource,
)
from cre.testing.apiserver import Emulator
from cre.testing.cluster.stubs import nccl_table
from cre.testing.jobharness import JobHarness, condition, is_true

pytestmark = pytest.mark.anyio

LAUNCHER = "j1-workload-launcher-0-0-aaaaa"


@pytest.fixture
async def both(job_harness: JobHarness, shared_emulator: Emulator
               ) -> AsyncIterator[tuple[JobHarness, BandwidthController, CollectorRegistry]]:
    """The Job controller's harness plus a BandwidthController on the same namespace."""
    h = job_harness
    for profile in shipped_profiles():
        with contextlib.suppress(ApiError):
            await h.client.create(LOGPROFILES, to_dict(profile))
    registry = CollectorRegistry()
    mc = BandwidthController(h.client, namespaces=[h.namespace], registry=registry)
    async with anyio.create_task_group() as tg:
        tg.start_soon(mc.run)
        with anyio.fail_after(20):
            await mc.wait_synced()
        yield h, mc, registry
        tg.cancel_scope.cancel()


async def _job(h: JobHarness, thresholds: dict[str, str]) -> None:
    spec: dict[str, Any] = {
        "workload": {"trainJob": {"runtimeRef": {"name": "mpi-runtime"}, "runtimePatches": [
            {"manager": "cre.dev/renderer", "trainingRuntimeSpec": {"template": {"spec": {
                "replicatedJobs": [{"name": "launcher"}, {"name": "node"}]}}}}]}},
        "bandwidthMeasurement": {"logProfileRef": "nccl-bandwidth", "sampleInterval": "1s",
                                 "testType": "all_reduce"},
        "thresholds": thresholds, "measurementTimeout": "30s"}
    await h.client.create(JOBS, {"apiVersion": API_VERSION, "kind": "Job",
                                 "metadata": {"name": "j1", "namespace": h.namespace},
                                 "spec": spec}, namespace=h.namespace)


async def _measurement(h: JobHarness, check: Any, *, limit: float = 20.0) -> dict[str, Any]:
    with anyio.fail_after(limit):
        while True:
            with contextlib.suppress(ApiError):
                bm = await h.client.get(BANDWIDTHMEASUREMENTS, "j1-bandwidth",
                                        namespace=h.namespace)
                if check(bm):
                    return bm
            await anyio.sleep(0.05)


TABLE = nccl_table("all_reduce_perf", "all_reduce_perf -b 1M -e 1G -f 4 -g 8", busbw=400.0,
                   ranks=2)


@pytest.mark.parametrize(("expr", "failed", "reason"), [
    ("value >= 1", "False", "ThresholdsMet"),
    ("value >= 1000000", "True", "ThresholdViolated"),
])
async def test_measured_and_judged(both: tuple[JobHarness, BandwidthController,
                                               CollectorRegistry],
                                   expr: str, failed: str, reason: str) -> None:
    """Provisional gauges while running; the final read decides; the Job carries the verdict."""
    h, _, registry = both
    await _job(h, {"busBandwidthGBps": expr})
    await h.wait_trainjob("j1")
    await h.script.create_pod(LAUNCHER, job="j1", launcher=True, node="n0", container="launcher")
    h.script.append_log(h.namespace, LAUNCHER, "launcher",
                        "node-0:1:1 [0] NCCL INFO Using network IB\n" + TABLE)
    bm = await _measurement(h, lambda bm: bool((bm.get("status") or {}).get("results")))
    assert bm["metadata"]["ownerReferences"][0]["name"] == "j1"
    sizes = [r["sizeBytes"] for r in bm["status"]["results"]]
    assert registry.get_sample_value("cre_nccl_busbw_gbps", {
        "namespace": h.namespace, "job": "j1", "size_bytes": str(sizes[-1])}) is not None
    await h.script.terminate(LAUNCHER, exit_code=0, log="", container="launcher")
    await h.script.finish_workload("j1", failed=False)
    bm = await _measurement(h, lambda bm: (condition(bm, "Complete") or {}).get("status")
                            == "True")
    assert condition(bm, "Complete")["reason"] == "JobSucceeded"  # type: ignore[index]
    assert bm["status"]["transports"] == ["IB"]
    assert all(r["samples"] == 1 for r in bm["status"]["results"])  # final replaced provisional
    job = await h.wait_job("j1", lambda j: condition(j, "ValidationFailed") is not None)
    cond = condition(job, "ValidationFailed")
    assert cond is not None and (cond["status"], cond["reason"]) == (failed, reason)
    top = max(float(r["busBW"]) for r in bm["status"]["results"])
    assert job["status"]["busBandwidthGBps"] == f"{top:.2f}"
    assert is_true("Succeeded")(job)  # additive: the trio stays Succeeded
    if failed == "True":
        assert f"measured {top:.4f}, expression: {expr}" in cond["message"]
    assert registry.get_sample_value("cre_nccl_busbw_gbps", {
        "namespace": h.namespace, "job": "j1", "size_bytes": str(sizes[-1])}) is None
    assert (registry.get_sample_value("cre_nccl_parsed_lines_total") or 0) > 0


async def _orphan(h: JobHarness, name: str, job_ref: dict[str, str]) -> None:
    await h.client.create(BANDWIDTHMEASUREMENTS, {
        "apiVersion": API_VERSION, "kind": "BandwidthMeasurement",
        "metadata": {"name": name, "namespace": h.namespace},
        "spec": {"jobRef": job_ref, "logProfileRef": "nccl-bandwidth"}}, namespace=h.namespace)


async def _status_of(h: JobHarness, name: str, type_: str) -> dict[str, Any]:
    with anyio.fail_after(20):
        while True:
            bm = await h.client.get(BANDWIDTHMEASUREMENTS, name, namespace=h.namespace)
            found = condition(bm, type_)
            if found is not None:
                return found
            await anyio.sleep(0.05)


async def test_every_accepted_measurement_gets_a_status(
        both: tuple[JobHarness, BandwidthController, CollectorRegistry]) -> None:
    """A measurement of a Job that does not exist waits visibly (Measuring=False / JobNotFound
    naming it); one whose jobRef names another kind completes InvalidJobRef saying which."""
    h, _, _ = both
    await _orphan(h, "waits", {"apiGroup": "cre.dev", "kind": "Job", "name": "nope"})
    await _orphan(h, "wrong", {"apiGroup": "batch", "kind": "Job", "name": "j1"})
    waiting = await _status_of(h, "waits", "Measuring")
    assert (waiting["status"], waiting["reason"]) == ("False", "JobNotFound")
    assert "Job nope does not exist" in waiting["message"]
    done = await _status_of(h, "wrong", "Complete")
    assert (done["status"], done["reason"]) == ("True", "InvalidJobRef")
    assert "'batch'" in done["message"]


class _SlowEvents:
    """The recorder's client: Event creates wait until ``gate`` is set (an API server slow to
    take Events), then go to the emulator."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.gate = anyio.Event()
        self.written: list[str] = []
        self.both = anyio.Event()  # set once two were written

    async def create(self, resource: Resource, body: dict[str, Any], *,
                     namespace: str) -> dict[str, Any]:
        await self.gate.wait()
        self.written.append(body["involvedObject"]["name"])
        if len(self.written) == 2:
            self.both.set()
        return await self.client.create(resource, body, namespace=namespace)


async def test_an_event_write_does_not_hold_a_worker(job_harness: JobHarness) -> None:
    """With one worker and Event writes stalled, two measurements of absent Jobs both get their
    status: the Warning each emits waits in the background, not in the worker, and is written
    once the server takes Events again."""
    h = job_harness
    mc = BandwidthController(h.client, namespaces=[h.namespace], max_concurrent_reconciles=1,
                               registry=CollectorRegistry())
    events = _SlowEvents(h.client)
    mc.recorder.client = events  # type: ignore[assignment]
    async with anyio.create_task_group() as tg:
        tg.start_soon(mc.run)
        for name in ("first", "second"):
            await _orphan(h, name, {"apiGroup": "cre.dev", "kind": "Job", "name": f"{name}-job"})
        for name in ("first", "second"):
            assert (await _status_of(h, name, "Measuring"))["reason"] == "JobNotFound"
        assert events.written == []
        events.gate.set()
        with anyio.fail_after(20):  # a safety net only
            await events.both.wait()
        tg.cancel_scope.cancel()
    assert sorted(events.written) == ["first", "second"]
