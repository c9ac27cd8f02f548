"""A bad Job never crashes the controller: invalid specs fail with a clear reason, and objects
the model cannot read at all are skipped (and named in the log) while the others reconcile."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from cre.api.labels import API_VERSION
from cre.kube.client import CRDS, JOBS, ApiError, KubeClient
from cre.testing.apiserver import serve
from cre.testing.apiserver.pytest_fixtures import default_crd_sources
from cre.testing.jobharness import JobHarness, condition, is_true, running_harness

pytestmark = pytest.mark.anyio


def _spec(**extra: Any) -> dict[str, Any]:
    return {"workload": {"trainJob": {"runtimeRef": {"name": "mpi-runtime"}}}, **extra}


async def _create(h: JobHarness, name: str, spec: dict[str, Any]) -> None:
    await h.client.create(JOBS, {"apiVersion": API_VERSION, "kind": "Job", "metadata": {
        "name": name, "namespace": h.namespace}, "spec": spec}, namespace=h.namespace)


async def test_invalid_spec_fails_with_a_named_reason_and_others_keep_reconciling(
        job_harness: JobHarness) -> None:
    """A Job the CRD accepts but CRE's validation rejects (unknown threshold key, bad CEL) gets
    Failed/InvalidSpec naming the object and every bad field, a Warning event, no workload; a
    valid Job next to it still reconciles."""
    h = job_harness
    await _create(h, "bad", _spec(thresholds={"noSuchKey": "value > 1",
                                              "busBandwidthGBps": "value >= ("}))
    await _create(h, "good", _spec())
    bad = await h.wait_job("bad", is_true("Failed"))
    cond = condition(bad, "Failed") or {}
    assert cond["reason"] == "InvalidSpec"
    message = str(cond["message"])
    assert f"Job {h.namespace}/bad" in message
    assert "spec.thresholds[noSuchKey]: unknown threshold key" in message
    assert "spec.thresholds[busBandwidthGBps]: invalid CEL expression" in message
    assert bad["status"]["failureClass"]["scope"] == "Platform"
    assert not bad["status"].get("failedNodes")
    assert await h.script.trainjob("bad") is None
    event = await h.wait_event("bad", "InvalidSpec")
    assert event["type"] == "Warning" and "spec.thresholds[noSuchKey]" in event["message"]
    await h.wait_job("good", is_true("InProgress"))
    assert await h.script.trainjob("good") is not None


async def _loosen_job_crd(client: KubeClient) -> None:
    """Version skew: the installed Job CRD accepts any ``spec`` (as an older, looser CRD would),
    so the API server stores objects this manager's model cannot read."""
    crd = await client.get(CRDS, "jobs.cre.dev")
    for version in crd["spec"]["versions"]:
        props = version["schema"]["openAPIV3Schema"]["properties"]
        props["spec"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    await client.replace(CRDS, crd)


async def test_unstructurable_job_is_skipped_and_named(
        caplog: pytest.LogCaptureFixture) -> None:
    """A served Job whose spec the model cannot structure at all is dropped by the Jobs informer
    with a log naming it; the informer keeps running and the next Job still reconciles."""
    caplog.set_level(logging.ERROR, logger="cre.kube.informer")
    async with (serve(crds=default_crd_sources()) as emu,
                running_harness(emu, namespace="skew") as h):
        await _loosen_job_crd(h.client)
        await _create(h, "garbled", {"workload": {"trainJob": "not an object"}})
        await _create(h, "after", _spec())
        await h.wait_job("after", is_true("InProgress"))
        assert h.controller.jobs.store.get(h.job_key("garbled")) is None
        assert await h.script.trainjob("garbled") is None
        assert h.controller.has_synced()
    assert any("skew/garbled" in r.getMessage() for r in caplog.records)


# ~65,600 characters with a syntax error past column 65,535: the CEL library panics on it (a
# pyo3 PanicException, a BaseException) instead of raising ValueError.
_PANICKING_CEL = "value > " + "(" * 65_600


async def test_huge_cel_threshold_is_refused_at_admission_and_valid_jobs_still_run(
        job_harness: JobHarness) -> None:
    """A threshold expression of ~65,600 characters is rejected by the CRD's maxLength (422
    naming the field); a valid Job applied after it runs to success."""
    h = job_harness
    with pytest.raises(ApiError) as caught:
        await _create(h, "huge", _spec(thresholds={"busBandwidthGBps": _PANICKING_CEL}))
    assert caught.value.status == 422
    assert "spec.thresholds.busBandwidthGBps" in caught.value.message
    assert "2048" in caught.value.message
    await _create(h, "after", _spec(thresholds={"busBandwidthGBps": "value >= 100.0"}))
    await h.wait_trainjob("after")
    await h.script.finish_workload("after", failed=False)
    done = await h.wait_job("after", is_true("Succeeded"))
    assert (condition(done, "Succeeded") or {})["reason"] == "WorkloadCompleted"


async def test_huge_cel_threshold_under_an_older_crd_fails_the_job_not_the_manager() -> None:
    """Version skew: a CRD without the length bound stores the ~65,600-character expression;
    the controller fails that Job (InvalidSpec naming the field) instead of crashing on the CEL
    library's panic, and a valid Job applied after it still runs to success."""
    async with (serve(crds=default_crd_sources()) as emu,
                running_harness(emu, namespace="skew-cel") as h):
        await _loosen_job_crd(h.client)
        await _create(h, "huge", _spec(thresholds={"busBandwidthGBps": _PANICKING_CEL}))
        bad = await h.wait_job("huge", is_true("Failed"))
        cond = condition(bad, "Failed") or {}
        assert cond["reason"] == "InvalidSpec"
        assert "spec.thresholds[busBandwidthGBps]: must have at most 2048 characters" in str(
            cond["message"])
        assert await h.script.trainjob("huge") is None
        await _create(h, "after", _spec())
        await h.wait_trainjob("after")
        await h.script.finish_workload("after", failed=False)
        await h.wait_job("after", is_true("Succeeded"))
        assert h.controller.has_synced()


@pytest.mark.parametrize("timeout", ["99999999999h", "900000000000s"])
async def test_overflowing_timeout_is_refused_at_admission(job_harness: JobHarness,
                                                           timeout: str) -> None:
    """``timeoutPerJob`` beyond 720h is rejected by the CRD (422 naming the field); a Job with a
    sane timeout applied next runs."""
    h = job_harness
    with pytest.raises(ApiError) as caught:
        await _create(h, "forever", _spec(timeoutPerJob=timeout))
    assert caught.value.status == 422
    assert "spec.timeoutPerJob" in caught.value.message
    assert "must be at most 720h" in caught.value.message
    await _create(h, "sane", _spec(timeoutPerJob="2h"))
    await h.wait_job("sane", is_true("InProgress"))


async def test_overflowing_timeout_under_an_older_crd_fails_the_job_once() -> None:
    """Under a CRD without the bound, a Job with ``timeoutPerJob: 99999999999h`` fails
    InvalidSpec naming the field (no retry loop, no workload); the next Job runs."""
    async with (serve(crds=default_crd_sources()) as emu,
                running_harness(emu, namespace="skew-duration") as h):
        await _loosen_job_crd(h.client)
        await _create(h, "forever", _spec(timeoutPerJob="99999999999h"))
        bad = await h.wait_job("forever", is_true("Failed"))
        cond = condition(bad, "Failed") or {}
        assert cond["reason"] == "InvalidSpec"
        assert "spec.timeoutPerJob: must be at most 720h" in str(cond["message"])
        assert await h.script.trainjob("forever") is None
        await _create(h, "after", _spec(timeoutPerJob="1h"))
        await h.wait_job("after", is_true("InProgress"))
