"""The informer against the API emulator over real HTTP: resume, 410 relist, bookmarks, scope."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from kube_emu import (
    FAST,
    Recorder,
    cache_state,
    create_pod,
    delete_pod,
    drop_watches,
    emulator,
    relists,
    server_state,
    set_labels,
)

from cre.api import labels as L
from cre.api.watch import WatchEventType
from cre.core.common.observed import PodView
from cre.core.common.plan import ReadLog
from cre.core.common.projections import pod_view
from cre.kube.client import PODS
from cre.kube.factory import InformerFactory
from cre.kube.informer import Informer
from cre.kube.pods import (
    INDEX_JOB,
    launcher_pod_informer,
    live_get_pod,
    live_list_pods,
    read_pod_log,
    scoped_pod_informer,
    worker_pod_informer,
)
from cre.testing.apiserver.faults import WatchFaults

pytestmark = pytest.mark.anyio

WORKER = {L.JOB: "nccl"}


def _informer(client: object, name: str, **kw: object) -> Informer[PodView]:
    return scoped_pod_informer(client, label_selector=L.JOB, name=name, config=FAST,  # type: ignore[arg-type]
                               **kw)  # type: ignore[arg-type]


async def test_dropped_watches_resume_without_duplicates_or_gaps() -> None:
    """With every watch cut after 3 events, each write is seen exactly once, in order, no relist."""
    async with emulator() as (emu, client):
        inf = _informer(client, "t-resume")
        rec = Recorder()
        inf.add_handler(rec)
        async with anyio.create_task_group() as tg:
            tg.start_soon(inf.run)
            await inf.wait_synced()
            emu.faults.watch = WatchFaults(after_events=3)
            writes: list[str] = []
            for i in range(8):
                writes.append(await create_pod(client, f"w-{i}", {**WORKER, L.GROUP_LABEL: "0"}))
            for i in range(8):
                writes.append(await set_labels(client, f"w-{i}", {L.GROUP_LABEL: "1"}))
            await rec.wait_until(lambda: len(rec.events) >= len(writes))
            emu.faults.watch = None
            tg.cancel_scope.cancel()
        assert [rv for _, _, rv in rec.events] == writes
        assert [t for t, _, _ in rec.events] == (
            [WatchEventType.ADDED] * 8 + [WatchEventType.MODIFIED] * 8)
        assert relists("t-resume") == 1, "resumed from the last version, never relisted"


async def test_410_relists_and_emits_the_gap() -> None:
    """Creates, updates and deletes made while the watch was down arrive as synthetic events."""
    async with emulator() as (emu, client):
        for name in ("a", "b", "c"):
            await create_pod(client, name, WORKER)
        inf = _informer(client, "t-410")
        rec = Recorder()
        inf.add_handler(rec)
        async with anyio.create_task_group() as tg:
            tg.start_soon(inf.run)
            await inf.wait_synced()
            tg.cancel_scope.cancel()
        rec.events.clear()
        # The gap: the informer is stopped while the cluster changes.
        await delete_pod(client, "b")
        await set_labels(client, "c", {L.GROUP_LABEL: "2"})
        await create_pod(client, "d", WORKER)
        emu.faults.force_410_on_resume = True
        async with anyio.create_task_group() as tg:
            tg.start_soon(inf.run)
            await rec.wait_until(lambda: len(rec.events) >= 3)
            emu.faults.force_410_on_resume = False
            expected = await server_state(client, L.JOB)
            await rec.wait_until(lambda: cache_state(inf) == expected)
            tg.cancel_scope.cancel()
        assert sorted((t, k) for t, k, _ in rec.events) == [
            (WatchEventType.ADDED, "cre/d"), (WatchEventType.DELETED, "cre/b"),
            (WatchEventType.MODIFIED, "cre/c")]
        assert relists("t-410") >= 2


async def test_bookmarks_advance_the_resume_version() -> None:
    """Writes outside the selector move the version forward through bookmarks; a dropped watch
    resumes from there without relisting."""
    async with emulator(bookmark_interval=0.02) as (emu, client):
        inf = _informer(client, "t-bookmark")
        rec = Recorder()
        inf.add_handler(rec)
        async with anyio.create_task_group() as tg:
            tg.start_soon(inf.run)
            await inf.wait_synced()
            listed = int(inf.resource_version())
            rv = await create_pod(client, "outsider", {"app": "other"})
            with anyio.fail_after(30):  # hang guard only
                await inf.wait_for_resource_version(rv)
            bookmarked = int(inf.resource_version())
            drop_watches(emu)
            await create_pod(client, "w-0", WORKER)
            await rec.wait_until(lambda: "cre/w-0" in inf.store)
            tg.cancel_scope.cancel()
        assert bookmarked >= int(rv) > listed
        assert [k for _, k, _ in rec.events] == ["cre/w-0"]
        assert relists("t-bookmark") == 1


async def test_relabelled_pod_leaves_and_rejoins_the_cache() -> None:
    """Removing the selector label deletes the pod from the cache; adding it back re-adds it."""
    async with emulator() as (_emu, client):
        await create_pod(client, "w-0", WORKER)
        inf = worker_pod_informer(InformerFactory(client, namespaces=["cre"], config=FAST),
                                  name="t-scope")
        rec = Recorder()
        inf.add_handler(rec)
        async with anyio.create_task_group() as tg:
            tg.start_soon(inf.run)
            await inf.wait_synced()
            assert inf.store.by_index(INDEX_JOB, "cre/nccl")[0].name == "w-0"
            await set_labels(client, "w-0", {L.JOB: None})
            await rec.wait_until(lambda: "cre/w-0" not in inf.store)
            assert inf.store.by_index(INDEX_JOB, "cre/nccl") == ()
            await set_labels(client, "w-0", {L.JOB: "nccl"})
            await rec.wait_until(lambda: "cre/w-0" in inf.store)
            tg.cancel_scope.cancel()
        assert [t for t, _, _ in rec.events] == [WatchEventType.ADDED, WatchEventType.DELETED,
                                                 WatchEventType.ADDED]


async def test_worker_and_launcher_caches_are_disjoint_and_namespace_scoped() -> None:
    """Workers and launchers land in their own caches; other namespaces are not watched."""
    async with emulator(namespaces=("cre", "team-a", "elsewhere")) as (_emu, client):
        await create_pod(client, "w", {L.JOB: "j"})
        await create_pod(client, "l", {L.LAUNCHER: "j"})
        await create_pod(client, "w2", {L.JOB: "j"}, namespace="team-a")
        await create_pod(client, "w3", {L.JOB: "j"}, namespace="elsewhere")
        await create_pod(client, "plain", {"app": "x"})
        workers = worker_pod_informer(
            InformerFactory(client, namespaces=["cre", "team-a"], config=FAST), name="t-w")
        launchers = launcher_pod_informer(InformerFactory(client, config=FAST), name="t-l")
        async with anyio.create_task_group() as tg:
            tg.start_soon(workers.run)
            tg.start_soon(launchers.run)
            await workers.wait_synced()
            await launchers.wait_synced()
            tg.cancel_scope.cancel()
        assert sorted(workers.store.keys()) == ["cre/w", "team-a/w2"]
        assert sorted(launchers.store.keys()) == ["cre/l"]


async def test_live_reads_and_log_tail() -> None:
    """Live get/list bypass the cache; the log read honours tail_lines and reports errors."""
    async with emulator() as (emu, client):
        await create_pod(client, "w-0", WORKER, node="gpu-1")
        got = await live_get_pod(client, namespace="cre", name="w-0")
        assert got is not None and got.label(L.JOB) == "nccl"
        assert await live_get_pod(client, namespace="cre", name="nope") is None
        listed = await live_list_pods(client, label_selector=L.JOB, namespace="cre", page_size=1)
        assert [p.name for p in listed] == ["w-0"]
        emu.append_log("cre", "w-0", "node", "".join(f"line {i}\n" for i in range(10)))
        tail = await read_pod_log(client, ReadLog(namespace="cre", pod="w-0", container="node",
                                                     pod_uid="u-w0", tail_lines=2))
        assert (tail.text, tail.error, tail.pod_uid, tail.previous) == (
            "line 8\nline 9\n", None, "u-w0", False)
        missing = await read_pod_log(client, ReadLog(namespace="cre", pod="gone",
                                                        container="node", previous=True))
        assert missing.text == "" and missing.error == "pod cre/gone not found"
        assert missing.previous, "the tail says which run it was read for"


async def test_throttled_watch_waits_for_retry_after() -> None:
    """A 429 on the watch makes the informer wait at least the server's Retry-After, then resume."""
    async with emulator() as (emu, client):
        waits: list[float] = []
        throttled = anyio.Event()

        async def sleep(seconds: float) -> None:
            waits.append(seconds)
            emu.faults.reset()  # the server recovers while we wait
            throttled.set()
            await anyio.lowlevel.checkpoint()

        inf: Informer[PodView] = Informer(client, PODS, transform=pod_view, label_selector=L.JOB,
                                          name="t-429", config=FAST, sleep=sleep)
        rec = Recorder()
        inf.add_handler(rec)
        emu.faults.add_error(429, verb="watch", resource="pods", retry_after=3)
        async with anyio.create_task_group() as tg:
            tg.start_soon(inf.run)
            await throttled.wait()
            await create_pod(client, "w-0", WORKER)
            await rec.wait_until(lambda: "cre/w-0" in inf.store)
            tg.cancel_scope.cancel()
        assert waits[0] >= 3.0, "Retry-After outranks the 1 ms backoff"
        assert relists("t-429") == 1
