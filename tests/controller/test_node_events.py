"""GPU node events reach the Jobs whose group lists the node, even with no pod bound to it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
import pytest

from cre.api.labels import API_VERSION, GROUP_NODES
from cre.controller.job.controller import JobController
from cre.kube.client import JOBS, NAMESPACES, NODES, ApiError, KubeClient
from cre.testing.jobharness import JobHarness

pytestmark = pytest.mark.anyio


async def _drain(c: JobController) -> list[str]:
    """Every key on the controller's queue now (marked done)."""
    keys: list[str] = []
    while len(c.queue):
        key = await c.queue.get()
        c.queue.done(key)
        keys.append(key)
    return keys


@contextlib.asynccontextmanager
async def _caches_only(client: KubeClient, namespace: str) -> AsyncIterator[JobController]:
    """A JobController for ``namespace`` whose caches run but whose workers do not, so its
    queue shows exactly what the event mapping enqueued."""
    c = JobController(client, namespaces=[namespace])
    async with anyio.create_task_group() as tg:
        for informer in c.informers:
            tg.start_soon(informer.run)
        with anyio.fail_after(20):
            await c.wait_synced()
        yield c
        tg.cancel_scope.cancel()


async def _wait_rv(h: JobHarness, c: JobController, node: str, rv: str) -> None:
    """Return once ``c``'s node cache (and so its handlers) saw ``node`` at ``rv``."""
    await h.wait_until(lambda: c.nodes.store.resource_version(node) == rv,
                       what=f"node {node} at resourceVersion {rv}")


async def _set_ready(client: KubeClient, node: str, ready: bool) -> str:
    raw = await client.get(NODES, node)
    raw["status"] = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    done = await client.replace(NODES, raw, subresource="status")
    return str(done["metadata"]["resourceVersion"])


async def test_group_node_events_enqueue_non_terminal_jobs(job_harness: JobHarness) -> None:
    """A group node going NotReady enqueues every non-terminal Job listing it (no pod bound
    anywhere), a terminal Job is left alone, and a heartbeat-only node update enqueues none."""
    h = job_harness
    ns = f"{h.namespace}-idle"
    await h.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": ns}})
    a, b = f"{ns}-gpu-a", f"{ns}-gpu-b"
    await h.add_gpu_node(a)
    await h.add_gpu_node(b)
    spec = {"workload": {"trainJob": {"runtimeRef": {"name": "mpi-runtime"}}}}
    for name, group in (("j1", f"{a},{b}"), ("j2", b), ("j3", a)):
        await h.client.create(JOBS, {"apiVersion": API_VERSION, "kind": "Job", "metadata": {
            "name": name, "namespace": ns, "annotations": {GROUP_NODES: group}}, "spec": spec},
            namespace=ns)
    j3 = await h.client.get(JOBS, "j3", namespace=ns)
    j3["status"] = {"phase": "Failed", "conditions": [{
        "type": "Failed", "status": "True", "reason": "WorkloadFailed", "message": "failed",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    await h.client.replace(JOBS, j3, subresource="status")
    async with _caches_only(h.client, ns) as c:
        await _drain(c)  # the initial list's ADDED events
        # A heartbeat-only update: the slim NodeView is unchanged, nothing is enqueued.
        raw = await h.client.get(NODES, a)
        raw["metadata"].setdefault("annotations", {})["heartbeat"] = "1"
        rv = str((await h.client.replace(NODES, raw))["metadata"]["resourceVersion"])
        await _wait_rv(h, c, a, rv)
        assert await _drain(c) == []
        await _wait_rv(h, c, a, await _set_ready(h.client, a, ready=False))
        assert sorted(await _drain(c)) == [f"{ns}/j1"]
        await _wait_rv(h, c, b, await _set_ready(h.client, b, ready=False))
        assert sorted(await _drain(c)) == [f"{ns}/j1", f"{ns}/j2"]
    for node in (a, b):
        with contextlib.suppress(ApiError):
            await h.client.delete(NODES, node)
