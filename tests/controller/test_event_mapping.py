"""How the Job controller maps cache events to Job keys (no reconcile runs here)."""

from __future__ import annotations

from typing import Any

import anyio
import attrs
import pytest

from cre.api.watch import WatchEventType
from cre.controller.job.controller import JobController
from cre.core.common.observed import PodView
from cre.kube.informer import Informer
from cre.testing.jobharness import JobHarness
from cre.testing.strategies.job import (
    at,
    crashloop,
    make_job,
    pod,
    running_status,
    terminated,
    trainjob,
)

pytestmark = pytest.mark.anyio


def _fire(informer: Informer[Any], etype: WatchEventType, old: Any, new: Any) -> None:
    """Deliver one watch event through the informer's handlers (the controller's wiring:
    predicates, then the handler)."""
    informer._dispatch(etype, old, new)

LAUNCHER = "j1-workload-launcher-0-0-aaaaa"


def _idle_controller(h: JobHarness) -> JobController:
    """A controller whose caches and workers are never started."""
    return JobController(h.client, namespaces=["team-a"])


async def test_launcher_failure_is_enqueued_at_once(job_harness: JobHarness) -> None:
    """A launcher's first non-zero exit puts its Job on the queue with no delay."""
    c = _idle_controller(job_harness)
    running = pod(LAUNCHER, launcher=True)
    failed = pod(LAUNCHER, launcher=True, state=terminated(finished=at(3)))
    _fire(c.launchers, WatchEventType.MODIFIED, running, failed)
    assert len(c.queue) == 1 and c.queue.pending_delayed() == 0
    assert await c.queue.get() == "team-a/j1"


async def test_worker_churn_is_coalesced_but_failure_is_not(job_harness: JobHarness) -> None:
    """Ordinary worker updates wait briefly to coalesce; a worker's first failure does not."""
    c = _idle_controller(job_harness)
    _fire(c.workers, WatchEventType.ADDED, None, pod("j1-workload-node-0-0-b"))
    assert len(c.queue) == 0 and c.queue.pending_delayed() == 1
    _fire(c.workers, WatchEventType.MODIFIED, pod("j1-workload-node-0-0-b"),
                 pod("j1-workload-node-0-0-b", state=terminated(finished=at(2))))
    assert len(c.queue) == 1


async def test_failed_launcher_deleted_unseen_stays_observable(job_harness: JobHarness) -> None:
    """A failed launcher deleted before any reconcile read it is kept for the Observation."""
    c = _idle_controller(job_harness)
    failed = pod(LAUNCHER, launcher=True, state=terminated(finished=at(3)))
    _fire(c.launchers, WatchEventType.DELETED, failed, None)
    obs = c.observe(make_job())
    assert [p.name for p in obs.launcher_pods] == [LAUNCHER]
    _fire(c.launchers, WatchEventType.DELETED, pod("other-launcher", launcher=True), None)
    assert [p.name for p in c.observe(make_job()).launcher_pods] == [LAUNCHER]


async def test_trainjob_maps_through_controller_owner(job_harness: JobHarness) -> None:
    """A TrainJob event reaches the Job named by its controller ownerReference, and a TrainJob
    no Job controls reaches none."""
    c = _idle_controller(job_harness)
    _fire(c.trainjobs, WatchEventType.MODIFIED, None, trainjob())
    assert await c.queue.get() == "team-a/j1"
    _fire(c.trainjobs, WatchEventType.ADDED, None, attrs.evolve(trainjob(), owner_refs=()))
    assert len(c.queue) == 0


async def test_stop_drains_and_run_returns(job_harness: JobHarness) -> None:
    """After stop(), run() finishes the queued work and returns on its own."""
    c = JobController(job_harness.client, namespaces=[job_harness.namespace])
    async with anyio.create_task_group() as tg:
        tg.start_soon(c.run)
        with anyio.fail_after(20):
            await c.wait_synced()
        c.queue.add(f"{job_harness.namespace}/absent")
        c.stop()
    assert c.queue.shutting_down and len(c.queue) == 0


async def test_own_status_echo_is_not_requeued(job_harness: JobHarness) -> None:
    """The watch echo of the controller's own last status write enqueues nothing; any other
    change to the Job does."""
    c = _idle_controller(job_harness)
    status = running_status()
    old = make_job(resource_version="1")
    echo = make_job(resource_version="2", status=status)
    c.status_echo.remember("team-a/j1", status)
    _fire(c.jobs, WatchEventType.MODIFIED, old, echo)
    assert len(c.queue) == 0
    relabelled = attrs.evolve(echo, metadata=attrs.evolve(echo.metadata, labels={"x": "y"}))
    _fire(c.jobs, WatchEventType.MODIFIED, old, relabelled)
    assert len(c.queue) == 1


async def test_launcher_failure_starts_a_log_prefetch(job_harness: JobHarness) -> None:
    """The first non-zero exit of a launcher starts reading its log before any reconcile."""
    c = _idle_controller(job_harness)
    running = pod(LAUNCHER, launcher=True)
    failed = pod(LAUNCHER, launcher=True, state=terminated(finished=at(3)))
    async with anyio.create_task_group() as tg:
        c.prefetcher.bind(tg)
        _fire(c.launchers, WatchEventType.MODIFIED, running, running)
        assert len(c.prefetcher) == 0
        _fire(c.launchers, WatchEventType.MODIFIED, running, failed)
    assert len(c.prefetcher) == 1


async def test_failed_worker_deleted_unseen_stays_observable(job_harness: JobHarness) -> None:
    """A failed worker deleted before the verdict is kept, for single-pod and MPI workloads
    alike; a worker that never failed is not, and a Job being deleted sees no tombstone."""
    failed = pod("j1-workload-node-0-0-b", state=terminated(finished=at(3)))
    for job in (make_job(launcher=False), make_job()):
        c = _idle_controller(job_harness)
        c.jobs.store._put("team-a/j1", job, "1")
        _fire(c.workers, WatchEventType.DELETED, failed, None)
        _fire(c.workers, WatchEventType.DELETED, pod("j1-workload-node-0-1-c"), None)
        assert [p.name for p in c.observe(job).worker_pods] == [failed.name]
        assert c.tombstones("team-a/j1") == {failed.name}
        deleting = attrs.evolve(job, metadata=attrs.evolve(job.metadata, deletion_timestamp=at(9)))
        assert c.observe(deleting).worker_pods == ()


async def test_worker_failure_prefetches_each_new_crash(job_harness: JobHarness) -> None:
    """A worker's non-zero exit starts a log read at once, and one more crash of a container
    restarted in place reads its previous log again; an unchanged failure reads nothing."""
    c = _idle_controller(job_harness)
    running = pod("j1-workload-node-0-0-b")
    first = pod("j1-workload-node-0-0-b", state=crashloop(),
                last_state=terminated(finished=at(3)))
    second = pod("j1-workload-node-0-0-b", state=crashloop(),
                 last_state=terminated(finished=at(9)))
    requests: list[tuple[str, str, bool, str, bool]] = []

    def record(pod: PodView, container: str, *, previous: bool = False, owner: str = "",
               refresh: bool = False) -> None:
        requests.append((pod.name, container, previous, owner, refresh))

    c.prefetcher.request = record  # type: ignore[method-assign]
    _fire(c.workers, WatchEventType.MODIFIED, running, first)
    _fire(c.workers, WatchEventType.MODIFIED, first, first)
    _fire(c.workers, WatchEventType.MODIFIED, first, second)
    assert requests == [("j1-workload-node-0-0-b", "node", True, "team-a/j1", True)] * 2
