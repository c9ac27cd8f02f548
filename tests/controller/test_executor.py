"""The plan executor's preconditions, and the controller's re-run on a conflicting write."""

from __future__ import annotations

import contextlib
from typing import Any

import attrs
import pytest

from cre.api.job import Job
from cre.api.labels import API_VERSION, JOB_FINALIZER
from cre.controller.job.controller import JobController, job_from_dict
from cre.core.common.plan import Delete, EventSeverity, EventSpec, Observation, Plan
from cre.core.job.reconcile import reconcile_job
from cre.core.job.workload import TRAINJOB_API_VERSION, workload_name
from cre.kube.client import EVENTS, JOBS, NAMESPACES, TRAINJOBS, ApiError
from cre.kube.executor import OutcomeKind
from cre.testing.apiserver import Emulator
from cre.testing.jobharness import JobHarness, condition
from cre.testing.strategies.job import at

pytestmark = pytest.mark.anyio

NS = "unwatched"


async def _namespace(h: JobHarness) -> None:
    with contextlib.suppress(ApiError):
        await h.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": NS}})


async def _job(h: JobHarness, name: str) -> dict[str, Any]:
    body = {"apiVersion": API_VERSION, "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "finalizers": [JOB_FINALIZER]},
            "spec": {"workload": {"trainJob": {"runtimeRef": {"name": "mpi-runtime"}}}}}
    return await h.client.create(JOBS, body, namespace=NS)


async def _events(h: JobHarness, name: str) -> list[tuple[str, str]]:
    page = await h.client.list(EVENTS, namespace=NS)
    return [(e["type"], e["reason"]) for e in page.get("items") or []
            if e["involvedObject"]["name"] == name]


async def test_stale_status_write_conflicts_and_writes_nothing(job_harness: JobHarness) -> None:
    """A plan computed from a stale Job gets CONFLICT: no status and no event is written."""
    h = job_harness
    await _namespace(h)
    stale = job_from_dict(await _job(h, "stale"))
    await h.client.patch(JOBS, "stale", {"metadata": {"labels": {"touched": "yes"}}},
                         namespace=NS)
    plan = reconcile_job(stale, Observation(), at(0))
    outcome = await h.controller.executor.apply(stale, plan)
    assert outcome.kind == OutcomeKind.CONFLICT
    served = await h.client.get(JOBS, "stale", namespace=NS)
    assert not (served.get("status") or {}).get("conditions")
    assert await _events(h, "stale") == []


async def test_delete_spares_a_same_named_replacement(job_harness: JobHarness) -> None:
    """A delete carrying the old UID leaves a same-named replacement alone."""
    h = job_harness
    await _namespace(h)
    body = {"apiVersion": TRAINJOB_API_VERSION, "kind": "TrainJob",
            "metadata": {"name": "tj", "namespace": NS},
            "spec": {"runtimeRef": {"name": "mpi-runtime"}}}
    first = await h.client.create(TRAINJOBS, body, namespace=NS)
    await h.client.delete(TRAINJOBS, "tj", namespace=NS)
    second = await h.client.create(TRAINJOBS, body, namespace=NS)
    stale = job_from_dict(await _job(h, "owner"))
    plan = Plan(resource_version=stale.metadata.resource_version or "",
                deletes=(Delete(api_version=TRAINJOB_API_VERSION, kind="TrainJob", namespace=NS,
                                name="tj", uid=first["metadata"]["uid"]),),
                events=(EventSpec(type=EventSeverity.NORMAL, reason="Test", message="m"),))
    outcome = await h.controller.executor.apply(stale, plan)
    assert outcome.kind == OutcomeKind.APPLIED
    still = await h.client.get(TRAINJOBS, "tj", namespace=NS)
    assert still["metadata"]["uid"] == second["metadata"]["uid"]


async def test_stale_cached_job_is_read_live_before_the_create(job_harness: JobHarness) -> None:
    """With a stale cached Job (behind the server), the live read before the create replaces
    it: one create, and the status write lands on the first try (no conflict)."""
    h = job_harness
    await _namespace(h)
    stale = job_from_dict(await _job(h, "j8"))
    await h.client.patch(JOBS, "j8", {"metadata": {"labels": {"touched": "yes"}}}, namespace=NS)
    idle = JobController(h.client, namespaces=[NS])
    idle.jobs.store._put(f"{NS}/j8", stale, stale.metadata.resource_version or "")
    await idle.reconcile(f"{NS}/j8")
    served = await h.client.get(JOBS, "j8", namespace=NS)
    assert served["metadata"]["labels"] == {"touched": "yes"}
    cond = condition(served, "InProgress")
    assert cond is not None and cond["reason"] == "WorkloadCreated"
    assert served["status"]["workloadRef"]["name"] == workload_name("j8")
    assert await _events(h, "j8") == [("Normal", "WorkloadCreated")]


async def test_conflict_rereads_live_and_recomputes(job_harness: JobHarness) -> None:
    """The Job changes between the live read and the status write: the write conflicts; the
    controller re-reads the Job, re-runs the core on the fresh copy, adopts the workload it had
    just created, and emits only the event of the write that succeeded."""
    h = job_harness
    await _namespace(h)
    await _job(h, "j9")
    idle = JobController(h.client, namespaces=[NS])
    cached = job_from_dict(await h.client.get(JOBS, "j9", namespace=NS))
    idle.jobs.store._put(f"{NS}/j9", cached, cached.metadata.resource_version or "")
    check = idle.executor._check_owner

    async def check_then_touch(job: Any) -> Any:
        answer = await check(job)
        await h.client.patch(JOBS, "j9", {"metadata": {"labels": {"touched": "yes"}}},
                             namespace=NS)
        return answer

    idle.executor._check_owner = check_then_touch  # type: ignore[method-assign]
    await idle.reconcile(f"{NS}/j9")
    served = await h.client.get(JOBS, "j9", namespace=NS)
    assert served["metadata"]["labels"] == {"touched": "yes"}
    cond = condition(served, "InProgress")
    assert cond is not None and cond["reason"] == "WorkloadAdopted"
    tj = await h.client.get(TRAINJOBS, workload_name("j9"), namespace=NS)
    assert served["status"]["workloadRef"]["uid"] == tj["metadata"]["uid"]
    assert await _events(h, "j9") == [("Normal", "WorkloadAdopted")]


async def test_event_is_emitted_even_when_a_later_delete_fails(
        job_harness: JobHarness, shared_emulator: Emulator) -> None:
    """The event of a status write that landed is emitted even if the delete after it fails:
    the next pass sees the transition already written and would never announce it."""
    h = job_harness
    await _namespace(h)
    job = job_from_dict(await _job(h, "evt"))
    plan = Plan(resource_version=job.metadata.resource_version or "",
                status=attrs.evolve(job.status, restart_count=1),
                deletes=(Delete(api_version=TRAINJOB_API_VERSION, kind="TrainJob", namespace=NS,
                                name="gone", uid="u-1"),),
                events=(EventSpec(type=EventSeverity.WARNING, reason="Flip", message="m"),))
    rule = shared_emulator.faults.add_error(500, verb="delete", resource="trainjobs")
    try:
        with pytest.raises(ApiError):
            await h.controller.executor.apply(job, plan)
    finally:
        shared_emulator.faults.errors.remove(rule)
    served = await h.client.get(JOBS, "evt", namespace=NS)
    assert served["status"]["restartCount"] == 1
    assert await _events(h, "evt") == [("Warning", "Flip")]


def _owner_reads(emu: Emulator, name: str, since: int) -> int:
    """Live GETs of the Job ``name`` in the test namespace served after audit record ``since``."""
    return sum(1 for r in emu.audit.since(since) if r.verb == "get" and r.resource == "jobs"
               and r.namespace == NS and r.name == name)


async def _finalized(h: JobHarness, name: str) -> tuple[JobController, Job]:
    """A controller that is not running (passes only when called) and a Job ``name`` it gave
    its finalizer in one pass, as served after that patch."""
    await _namespace(h)
    body = {"apiVersion": API_VERSION, "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"workload": {"trainJob": {"runtimeRef": {"name": "mpi-runtime"}}}}}
    first = job_from_dict(await h.client.create(JOBS, body, namespace=NS))
    idle = JobController(h.client, namespaces=[NS])
    idle.jobs.store._put(f"{NS}/{name}", first, first.metadata.resource_version or "")
    await idle.reconcile(f"{NS}/{name}")  # the finalizer patch
    return idle, job_from_dict(await h.client.get(JOBS, name, namespace=NS))


async def test_own_finalizer_write_vouches_for_the_copy_before_the_creates(
        job_harness: JobHarness, shared_emulator: Emulator) -> None:
    """A Job's first create pass, planned on the copy its own finalizer patch returned, creates
    without reading the Job live; the same copy planned on again is read live first (a vouch
    serves one create pass)."""
    h = job_harness
    idle, patched = await _finalized(h, "v1")
    assert JOB_FINALIZER in patched.metadata.finalizers
    since = shared_emulator.audit.seq
    plan = reconcile_job(patched, Observation(), at(0))
    assert plan.creates
    outcome = await idle.executor.apply(patched, plan)
    assert outcome.kind == OutcomeKind.APPLIED
    assert _owner_reads(shared_emulator, "v1", since) == 0
    again = attrs.evolve(plan, status=None)
    since = shared_emulator.audit.seq
    assert (await idle.executor.apply(patched, again)).kind == OutcomeKind.CONFLICT
    assert _owner_reads(shared_emulator, "v1", since) == 1


async def test_a_change_after_the_vouching_write_still_converges(
        job_harness: JobHarness, shared_emulator: Emulator) -> None:
    """Someone changes the Job between its finalizer patch and the create pass planned on the
    patched copy: the creates go ahead unread, the status write conflicts, and the re-run on the
    live copy adopts the one workload created (no second create, one event)."""
    h = job_harness
    idle, patched = await _finalized(h, "v2")
    idle.jobs.store._put(f"{NS}/v2", patched, patched.metadata.resource_version or "")
    await h.client.patch(JOBS, "v2", {"metadata": {"labels": {"touched": "yes"}}}, namespace=NS)
    since = shared_emulator.audit.seq
    await idle.reconcile(f"{NS}/v2")
    served = await h.client.get(JOBS, "v2", namespace=NS)
    cond = condition(served, "InProgress")
    assert cond is not None and cond["reason"] == "WorkloadAdopted"
    tj = await h.client.get(TRAINJOBS, workload_name("v2"), namespace=NS)
    assert served["status"]["workloadRef"]["uid"] == tj["metadata"]["uid"]
    creates = [r for r in shared_emulator.audit.since(since)
               if r.verb == "create" and r.resource == "trainjobs" and r.namespace == NS]
    assert len(creates) == 1
    assert await _events(h, "v2") == [("Normal", "WorkloadAdopted")]
