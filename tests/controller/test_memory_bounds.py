"""What the controller keeps in memory about failed pods stays bounded: per Job, by age, and
not past the Job's verdict or deletion."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from cre.api.watch import WatchEventType
from cre.controller.job.controller import MAX_DEPARTED_WORKERS, JobController
from cre.controller.job.prefetch import LogPrefetcher
from cre.controller.job.tombstones import Tombstones
from cre.core.common.plan import ReadLog
from cre.core.common.projections import pod_view
from cre.kube.informer import Informer
from cre.testing.jobharness import JobHarness
from cre.testing.strategies.job import at, make_job, pod, terminated

pytestmark = pytest.mark.anyio


def _fire(informer: Informer[Any], etype: WatchEventType, old: Any, new: Any) -> None:
    """Deliver one watch event through the informer's handlers (the controller's wiring:
    predicates, then the handler)."""
    informer._dispatch(etype, old, new)


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_tombstones_keep_the_earliest_failures_per_job() -> None:
    """Past the cap per Job, the tombstone whose failure would be chosen last goes first
    (an OOMKilled one is kept over earlier plain exits); other Jobs are untouched."""
    stones = Tombstones(per_job=3)
    for i, second in enumerate((5, 1, 9, 3)):
        stones.remember("ns/a", pod(f"w-{i}", state=terminated(finished=at(second))))
    assert set(stones.pods("ns/a")) == {"w-0", "w-1", "w-3"}
    stones.remember("ns/a", pod("w-oom", state=terminated(reason="OOMKilled", finished=at(50))))
    assert set(stones.pods("ns/a")) == {"w-oom", "w-1", "w-3"}
    stones.remember("ns/b", pod("w-b", state=terminated(finished=at(7))))
    assert len(stones) == 4
    stones.forget("ns/a")
    assert stones.pods("ns/a") == {} and set(stones.pods("ns/b")) == {"w-b"}


def test_tombstones_expire_after_their_ttl() -> None:
    """A tombstone older than the time to live is dropped, with its Job's entry."""
    clock = FakeClock()
    stones = Tombstones(per_job=4, ttl=60.0, clock=clock)
    stones.remember("ns/a", pod("w-0", state=terminated(finished=at(1))))
    clock.now = 30.0
    stones.remember("ns/a", pod("w-1", state=terminated(finished=at(2))))
    clock.now = 61.0
    assert set(stones.pods("ns/a")) == {"w-1"}
    clock.now = 91.0
    assert stones.pods("ns/a") == {} and len(stones) == 0


async def test_worker_tombstones_are_capped_and_dropped_with_the_job(
        job_harness: JobHarness) -> None:
    """Many failed workers deleted at once keep at most the cap per Job, and the Job's
    deletion drops them all."""
    c = JobController(job_harness.client, namespaces=["team-a"])
    c.jobs.store._put("team-a/j1", make_job(), "1")
    for i in range(MAX_DEPARTED_WORKERS + 10):
        failed = pod(f"j1-workload-node-0-{i}-x", state=terminated(finished=at(i)))
        _fire(c.workers, WatchEventType.DELETED, failed, None)
    kept = c.tombstones("team-a/j1")
    assert len(kept) == MAX_DEPARTED_WORKERS
    assert "j1-workload-node-0-0-x" in kept  # the earliest failure is never the one dropped
    _fire(c.jobs, WatchEventType.DELETED, make_job(), None)
    assert c.tombstones("team-a/j1") == frozenset() and len(c.departed_workers) == 0


async def test_prefetched_tails_are_capped_per_job_expire_and_are_forgotten(
        job_harness: JobHarness) -> None:
    """The prefetcher keeps at most ``per_owner`` tails per Job (newest kept), drops a tail
    unused for its time to live, and forgets a Job's tails on request."""
    h = job_harness
    clock = FakeClock()
    prefetcher = LogPrefetcher(h.client, timeout=5.0, per_owner=2, ttl=60.0, clock=clock)
    views = []
    for name in ("w-aaaaa", "w-bbbbb", "w-ccccc"):
        await h.script.create_pod(name, job="j1", launcher=False, node="gpu-0")
        views.append(pod_view(await h.script.terminate(name, exit_code=1, log=f"{name}\n")))
        async with anyio.create_task_group() as tg:  # one read at a time: a fixed order
            prefetcher.bind(tg)
            prefetcher.request(views[-1], "node", owner="ns/a")
    other = views[0]
    async with anyio.create_task_group() as tg:
        prefetcher.bind(tg)
        prefetcher.request(other, "node", owner="ns/b")
    assert prefetcher.pods_of("ns/a") == {"w-bbbbb", "w-ccccc"}
    assert prefetcher.pods_of("ns/b") == {"w-aaaaa"}
    clock.now = 30.0
    req = ReadLog(namespace=h.namespace, pod="w-ccccc", container="node", pod_uid=views[2].uid)
    assert await prefetcher.tail_for(req) is not None  # used: its time to live starts again
    clock.now = 70.0
    assert await prefetcher.tail_for(req) is not None
    assert prefetcher.pods_of("ns/a") == {"w-ccccc"} and prefetcher.pods_of("ns/b") == set()
    prefetcher.forget("ns/a")
    assert len(prefetcher) == 0
