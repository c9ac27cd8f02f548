"""The log prefetcher: a failed launcher's log read at once survives the pod's deletion."""

from __future__ import annotations

import anyio
import attrs
import pytest

from cre.controller.job.events import new_failures
from cre.controller.job.prefetch import LogPrefetcher
from cre.core.common.plan import ReadLog
from cre.core.common.projections import pod_view
from cre.testing.jobharness import JobHarness

pytestmark = pytest.mark.anyio

POD = "j1-workload-launcher-0-0-aaaaa"


async def test_prefetched_tail_outlives_the_pod(job_harness: JobHarness) -> None:
    """A prefetch started at the exit still answers after the pod was deleted."""
    h = job_harness
    await h.script.create_pod(POD, job="j1", launcher=True, node="gpu-0")
    raw = await h.script.terminate(POD, exit_code=1, log="[stub] simulated failure\n")
    view = pod_view(raw)
    prefetcher = LogPrefetcher(h.client, timeout=5.0)
    async with anyio.create_task_group() as tg:
        prefetcher.bind(tg)
        prefetcher.request(view, "node")
        prefetcher.request(view, "node")  # a second request for the same container is a no-op
        req = ReadLog(namespace=h.namespace, pod=POD, container="node", pod_uid=view.uid)
        tail = await prefetcher.tail_for(req)
    await h.script.delete_pod(POD)
    assert tail is not None and tail.error is None and "[stub]" in tail.text
    again = await prefetcher.tail_for(req)
    assert again == tail and len(prefetcher) == 1


async def test_unbound_prefetcher_reads_nothing(job_harness: JobHarness) -> None:
    """Without a task group the prefetcher stays idle and answers None."""
    prefetcher = LogPrefetcher(job_harness.client, timeout=5.0)
    view = pod_view({"metadata": {"name": POD, "namespace": "x", "uid": "u"}, "spec": {},
                     "status": {}})
    prefetcher.request(view, "node")
    assert await prefetcher.tail_for(ReadLog(namespace="x", pod=POD, container="node",
                                                pod_uid="u")) is None


async def test_capacity_evicts_least_recently_used(job_harness: JobHarness) -> None:
    """Past its capacity the prefetcher forgets the oldest tail first."""
    h = job_harness
    prefetcher = LogPrefetcher(h.client, timeout=5.0, capacity=1)
    async with anyio.create_task_group() as tg:
        prefetcher.bind(tg)
        for name in ("p-aaaaa", "p-bbbbb"):
            await h.script.create_pod(name, job="j1", launcher=True, node="gpu-0")
            raw = await h.script.terminate(name, exit_code=1, log=f"{name}\n")
            prefetcher.request(pod_view(raw), "node")
    assert len(prefetcher) == 1
    last = await prefetcher.tail_for(ReadLog(namespace=h.namespace, pod="p-bbbbb",
                                                container="node", pod_uid=pod_view(raw).uid))
    assert last is not None and last.text == "p-bbbbb\n"


async def test_previous_run_is_prefetched_separately(job_harness: JobHarness) -> None:
    """A launcher restarted in place has its crashed run's log prefetched with previous=true,
    kept apart from (and not answering) a request for the current run."""
    h = job_harness
    await h.script.create_pod(POD, job="j1", launcher=True, node="gpu-0")
    raw = await h.script.crashloop(POD, exit_code=1, log="crashed run\n")
    view = pod_view(raw)
    assert new_failures(None, view) == [("node", True)]
    prefetcher = LogPrefetcher(h.client, timeout=5.0)
    async with anyio.create_task_group() as tg:
        prefetcher.bind(tg)
        for container, previous in new_failures(None, view):
            prefetcher.request(view, container, previous=previous)
        req = ReadLog(namespace=h.namespace, pod=POD, container="node", pod_uid=view.uid,
                         previous=True)
        tail = await prefetcher.tail_for(req)
    assert tail is not None and tail.previous and tail.text == "crashed run\n"
    assert await prefetcher.tail_for(attrs.evolve(req, previous=False)) is None
