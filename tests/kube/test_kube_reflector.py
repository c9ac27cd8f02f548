"""The reflector's protocol handling against a scripted client: paging, resume, 410, backoff."""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from kube_fakes import FakeClock
from kube_pods import pod

from cre.api.watch import WatchEventType
from cre.core.common.observed import PodView
from cre.core.common.projections import node_view, pod_view
from cre.kube.client import NODES, PODS, ApiError
from cre.kube.informer import Informer, ReflectorConfig, ReflectorState

pytestmark = pytest.mark.anyio


def _ev(etype: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": etype, "object": obj}).encode() + b"\n"


def _page(items: list[dict[str, Any]], rv: str, cont: str = "") -> dict[str, Any]:
    return {"kind": "PodList", "metadata": {"resourceVersion": rv, "continue": cont},
            "items": items}


class ScriptedClient:
    """Answers lists and watches from scripts; once the watch script is used up, it idles."""

    def __init__(self, lists: list[dict[str, Any] | ApiError],
                 watches: list[list[bytes | float] | ApiError],
                 by_path: dict[str, tuple[list[Any], list[Any]]] | None = None,
                 clock: FakeClock | None = None) -> None:
        self.lists = deque(lists)
        self.watches = deque(watches)
        # Per collection path scripts (several reflectors), else the shared ones above.
        self.by_path = {p: (deque(ls), deque(ws)) for p, (ls, ws) in (by_path or {}).items()}
        self.idle_paths: set[str] = set()
        self.list_queries: list[dict[str, Any]] = []
        self.watch_queries: list[dict[str, Any]] = []
        self.idle = anyio.Event()
        self.clock = clock  # a float in a watch script: that many quiet seconds pass
        self.open_streams = 0

    async def request(self, method: str, path: str, *, query: Any = None,
                      timeout: float | None = None) -> dict[str, Any]:
        self.list_queries.append(dict(query or {}))
        answer = (self.by_path[path][0] if path in self.by_path else self.lists).popleft()
        if isinstance(answer, ApiError):
            raise answer
        return answer

    @asynccontextmanager
    async def stream_lines(self, path: str, *, query: Any = None,
                           timeout: float | None = None) -> AsyncIterator[AsyncIterator[bytes]]:
        self.watch_queries.append(dict(query or {}))
        watches = self.by_path[path][1] if path in self.by_path else self.watches
        if not watches:
            self.idle_paths.add(path)
            if not self.by_path or self.idle_paths >= set(self.by_path):
                self.idle.set()
            self.open_streams += 1
            try:
                await anyio.sleep_forever()
            finally:
                self.open_streams -= 1
        script = watches.popleft()
        if isinstance(script, ApiError):
            raise script

        async def lines() -> AsyncIterator[bytes]:
            for line in script:
                if isinstance(line, float):
                    assert self.clock is not None
                    self.clock.advance(line)
                    continue
                yield line

        yield lines()


class Sleeps:
    """A sleep that records the wait and moves the fake clock instead of waiting."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.advance(seconds)


async def _run_until_idle(inf: Informer[Any], client: ScriptedClient) -> None:
    with anyio.fail_after(10):  # hang guard only; the scripted run takes milliseconds
        async with anyio.create_task_group() as tg:
            tg.start_soon(inf.run)
            await client.idle.wait()
            tg.cancel_scope.cancel()


def _informer(client: ScriptedClient, clock: FakeClock, sleeps: Sleeps,
              rand: float = 0.0) -> Informer[PodView]:
    return Informer(client, PODS, transform=pod_view, label_selector="cre.dev/job",  # type: ignore[arg-type]
                    name="t", clock=clock, rand=lambda: rand, sleep=sleeps,
                    config=ReflectorConfig(page_size=2))


async def test_paged_list_then_watch_from_the_list_version(clock: FakeClock) -> None:
    """Pages are followed with continue; the watch starts at the list RV with bookmarks on."""
    client = ScriptedClient(
        lists=[_page([pod(name="a", rv="5"), pod(name="b", rv="6")], "10", cont="tok"),
               _page([pod(name="c", rv="7")], "10")],
        watches=[[_ev("MODIFIED", pod(name="a", rv="11")), _ev("DELETED", pod(name="b", rv="12")),
                  _ev("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "15"}}),
                  _ev("ADDED", pod(name="d", rv="16"))]])
    sleeps = Sleeps(clock)
    inf = _informer(client, clock, sleeps, rand=0.5)
    seen: list[tuple[WatchEventType, str | None, str | None]] = []
    inf.add_handler(lambda t, old, new: seen.append(
        (t, old.resource_version if old else None, new.resource_version if new else None)))
    await _run_until_idle(inf, client)
    assert client.list_queries == [{"labelSelector": "cre.dev/job", "limit": 2},
                                   {"labelSelector": "cre.dev/job", "limit": 2,
                                    "continue": "tok"}]
    first = client.watch_queries[0]
    assert (first["resourceVersion"], first["allowWatchBookmarks"], first["watch"]) == \
        ("10", True, True)
    assert first["timeoutSeconds"] == 450  # 300 + 300 * rand(0.5)
    assert client.watch_queries[1]["resourceVersion"] == "16", "resume from the last event"
    assert seen == [(WatchEventType.ADDED, None, "5"), (WatchEventType.ADDED, None, "6"),
                    (WatchEventType.ADDED, None, "7"), (WatchEventType.MODIFIED, "5", "11"),
                    (WatchEventType.DELETED, "12", None), (WatchEventType.ADDED, None, "16")]
    assert sorted(inf.store.keys()) == ["cre/a", "cre/c", "cre/d"]
    assert inf.has_synced()
    assert sleeps.waits == [], "a watch that delivered events ends without backoff"


async def test_backoff_doubles_to_the_cap_and_resets_after_quiet(clock: FakeClock) -> None:
    """Consecutive watch failures wait 0.8, 1.6, ... capped at 30 s; 2 quiet minutes reset it."""
    err = ApiError(status=503, body={"reason": "ServiceUnavailable"})
    client = ScriptedClient(lists=[_page([], "1")], watches=[err] * 8)
    sleeps = Sleeps(clock)
    inf = _informer(client, clock, sleeps)
    await _run_until_idle(inf, client)
    assert sleeps.waits == pytest.approx([0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0])
    # Two minutes without a failure: the next failure starts from 0.8 s again.
    client.watches.extend([err])
    client.idle = anyio.Event()
    clock.advance(121)
    sleeps.waits.clear()
    await _run_until_idle(inf, client)
    assert sleeps.waits == pytest.approx([0.8])


async def test_jitter_stays_within_the_cap(clock: FakeClock) -> None:
    """With full jitter each wait lies between the base delay and the 30 s cap."""
    err = ApiError(status=500)
    client = ScriptedClient(lists=[_page([], "1")], watches=[err] * 8)
    sleeps = Sleeps(clock)
    await _run_until_idle(_informer(client, clock, sleeps, rand=0.99), client)
    assert all(0.8 <= w <= 30.0 for w in sleeps.waits)
    assert sleeps.waits[0] == pytest.approx(0.8 * 1.99)


async def test_retry_after_on_429_is_honoured(clock: FakeClock) -> None:
    """A 429 with Retry-After: 7 waits at least 7 s even though the backoff says 0.8 s."""
    client = ScriptedClient(lists=[_page([], "1")],
                            watches=[ApiError(status=429, retry_after=7.0)])
    sleeps = Sleeps(clock)
    await _run_until_idle(_informer(client, clock, sleeps), client)
    assert sleeps.waits == [7.0]


async def test_http_410_relists_and_reconciles_the_store(clock: FakeClock) -> None:
    """A 410 status on the watch relists at once, emitting DELETED/MODIFIED/ADDED for the gap."""
    client = ScriptedClient(
        lists=[_page([pod(name="a", rv="1"), pod(name="b", rv="2"), pod(name="c", rv="3")], "3"),
               _page([pod(name="a", rv="1"), pod(name="c", rv="9"), pod(name="d", rv="10")],
                     "10")],
        watches=[ApiError(status=410, body={"reason": "Expired"})])
    sleeps = Sleeps(clock)
    inf = _informer(client, clock, sleeps)
    inf._reflectors[0]
    seen: list[tuple[WatchEventType, str]] = []
    inf.add_handler(lambda t, old, new: seen.append((t, (new or old).name)))  # type: ignore[union-attr]
    await _run_until_idle(inf, client)
    assert seen[3:] == [(WatchEventType.DELETED, "b"), (WatchEventType.MODIFIED, "c"),
                        (WatchEventType.ADDED, "d")]
    assert sleeps.waits == []
    assert client.watch_queries[-1]["resourceVersion"] == "10"


async def test_error_event_410_right_after_every_list_backs_off(clock: FakeClock) -> None:
    """A server that answers every fresh watch with a 410 ERROR event is not hammered."""
    gone = _ev("ERROR", {"kind": "Status", "code": 410, "reason": "Expired"})
    client = ScriptedClient(lists=[_page([], str(i)) for i in range(1, 6)],
                            watches=[[gone]] * 4)
    sleeps = Sleeps(clock)
    await _run_until_idle(_informer(client, clock, sleeps), client)
    assert len(client.list_queries) == 5
    assert sleeps.waits == pytest.approx([0.8, 1.6, 3.2]), "the first 410 relists at once"


async def test_empty_watches_count_as_failures_and_are_logged_once(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    """Watches that end without any event back off, and the state change is logged once."""
    client = ScriptedClient(lists=[_page([], "1")], watches=[[]] * 4)
    sleeps = Sleeps(clock)
    with caplog.at_level(logging.INFO, logger="cre.kube.informer"):
        await _run_until_idle(_informer(client, clock, sleeps), client)
    assert len(sleeps.waits) == 4
    backing_off = [r for r in caplog.records if "BackingOff" in r.getMessage()]
    assert len(backing_off) == 1


async def test_a_quiet_watch_reaching_its_timeout_resumes_at_once(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    """A watch that delivered nothing but lasted minutes (its timeout) is resumed from the same
    version with no backoff, no reconnect and no warning."""
    client = ScriptedClient(lists=[_page([], "5")], watches=[[300.0], [420.0]], clock=clock)
    sleeps = Sleeps(clock)
    with caplog.at_level(logging.INFO, logger="cre.kube.informer"):
        await _run_until_idle(_informer(client, clock, sleeps), client)
    assert sleeps.waits == []
    assert [q["resourceVersion"] for q in client.watch_queries] == ["5", "5", "5"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_unprojectable_objects_are_skipped_not_fatal(clock: FakeClock) -> None:
    """An object the transform rejects is logged and dropped; the informer keeps going."""
    client = ScriptedClient(
        lists=[_page([], "1")],
        watches=[[_ev("ADDED", {"kind": "Node", "metadata": {"name": "n1"},
                                "status": {"allocatable": {"nvidia.com/gpu": "lots"}}}),
                  _ev("ADDED", {"kind": "Node", "metadata": {"name": "n2",
                                                             "resourceVersion": "3"}})]])
    sleeps = Sleeps(clock)
    inf = Informer(client, NODES, transform=node_view, name="nodes", clock=clock,  # type: ignore[arg-type]
                   rand=lambda: 0.0, sleep=sleeps)
    await _run_until_idle(inf, client)
    assert sorted(inf.store.keys()) == ["n2"]


async def test_running_an_informer_twice_at_once_is_refused(clock: FakeClock) -> None:
    """A second concurrent run() raises instead of starting duplicate watches."""
    client = ScriptedClient(lists=[_page([], "1")], watches=[])
    inf = _informer(client, clock, Sleeps(clock))
    async with anyio.create_task_group() as tg:
        tg.start_soon(inf.run)
        await client.idle.wait()
        with pytest.raises(RuntimeError, match="already running"):
            await inf.run()
        tg.cancel_scope.cancel()


async def test_a_failing_custom_transform_drops_only_that_object(clock: FakeClock) -> None:
    """Any exception from a user transform skips the object; the informer keeps running."""

    def picky(raw: dict[str, Any]) -> str:
        if raw["metadata"]["name"] == "bad":
            raise RuntimeError("cannot convert")
        return str(raw["metadata"]["name"])

    client = ScriptedClient(
        lists=[_page([pod(name="bad", rv="1"), pod(name="good", rv="2")], "2")],
        watches=[[_ev("ADDED", pod(name="later", rv="3"))]])
    inf = Informer(client, PODS, transform=picky, label_selector="x", name="picky",  # type: ignore[arg-type]
                   clock=clock, rand=lambda: 0.0, sleep=Sleeps(clock))
    await _run_until_idle(inf, client)
    assert sorted(inf.store.list()) == ["good", "later"]


async def test_a_relist_in_one_namespace_leaves_the_others_alone(clock: FakeClock) -> None:
    """With one watch per namespace, a 410 relist of one namespace never deletes another's pods."""
    a, b = "/api/v1/namespaces/a/pods", "/api/v1/namespaces/b/pods"
    client = ScriptedClient([], [], by_path={
        a: ([_page([pod(name="a1", namespace="a", rv="1")], "2"),
             _page([pod(name="a2", namespace="a", rv="5")], "5")],
            [ApiError(status=410)]),
        b: ([_page([pod(name="b1", namespace="b", rv="2")], "2")], []),
    })
    inf = Informer(client, PODS, transform=pod_view, label_selector="x", name="multi",  # type: ignore[arg-type]
                   namespace=["a", "b"], clock=clock, rand=lambda: 0.0, sleep=Sleeps(clock))
    rec: list[tuple[WatchEventType, str]] = []
    inf.add_handler(lambda t, old, new: rec.append((t, (new or old).name)))  # type: ignore[union-attr]
    await _run_until_idle(inf, client)
    assert sorted(inf.store.keys()) == ["a/a2", "b/b1"]
    assert (WatchEventType.DELETED, "a1") in rec and (WatchEventType.DELETED, "b1") not in rec
    assert inf.has_synced() and inf.resource_version("a") == "5"


async def test_a_stream_read_timeout_reconnects(clock: FakeClock) -> None:
    """A read timeout in the middle of a watch stream is a reconnect, not a crash."""

    class TimingOut(ScriptedClient):
        @asynccontextmanager
        async def stream_lines(self, path: str, *, query: Any = None,
                               timeout: float | None = None
                               ) -> AsyncIterator[AsyncIterator[bytes]]:
            if len(self.watch_queries) == 0:
                self.watch_queries.append(dict(query or {}))

                async def lines() -> AsyncIterator[bytes]:
                    yield _ev("ADDED", pod(name="a", rv="2"))
                    raise TimeoutError()

                yield lines()
                return
            async with super().stream_lines(path, query=query, timeout=timeout) as inner:
                yield inner

    client = TimingOut(lists=[_page([], "1")], watches=[])
    sleeps = Sleeps(clock)
    inf = _informer(client, clock, sleeps)
    await _run_until_idle(inf, client)
    assert len(sleeps.waits) == 1
    assert client.watch_queries[-1]["resourceVersion"] == "2"
    assert list(inf.store.keys()) == ["cre/a"]


async def test_cancellation_stops_cleanly_and_a_rerun_resumes(clock: FakeClock) -> None:
    """Cancelling run() closes the open watch, leaves every reflector Stopped with the store
    intact, and running again resumes the watch without relisting."""
    client = ScriptedClient(
        lists=[], watches=[],
        by_path={"/api/v1/namespaces/a/pods": ([_page([pod(namespace="a", name="x", rv="3")],
                                                       "4")], []),
                 "/api/v1/namespaces/b/pods": ([_page([], "4")], [])})
    inf = Informer(client, PODS, transform=pod_view, label_selector="cre.dev/job",  # type: ignore[arg-type]
                   namespace=["a", "b"], name="t-cancel", clock=clock, sleep=Sleeps(clock),
                   config=ReflectorConfig(page_size=2))
    assert not inf.has_synced()
    await _run_until_idle(inf, client)
    assert inf.has_synced() and client.open_streams == 0
    assert inf.states == {"a": ReflectorState.STOPPED, "b": ReflectorState.STOPPED}
    assert sorted(inf.store.keys()) == ["a/x"]
    client.idle, client.idle_paths = anyio.Event(), set()
    await _run_until_idle(inf, client)
    assert len(client.list_queries) == 2, "the rerun resumed instead of relisting"
    assert [q["resourceVersion"] for q in client.watch_queries[-2:]] == ["4", "4"]


async def test_an_expired_continue_token_restarts_the_list(clock: FakeClock) -> None:
    """A 410 on a later page (the continue token expired) starts the list over from page one,
    at once, and the store holds exactly the fresh list."""
    gone = ApiError(status=410, body={"reason": "Expired", "code": 410})
    client = ScriptedClient(
        lists=[_page([pod(name="a", rv="5"), pod(name="b", rv="6")], "10", cont="tok"), gone,
               _page([pod(name="a", rv="5"), pod(name="c", rv="12")], "12")],
        watches=[])
    sleeps = Sleeps(clock)
    inf = _informer(client, clock, sleeps)
    await _run_until_idle(inf, client)
    assert [q.get("continue") for q in client.list_queries] == [None, "tok", None]
    assert sorted(inf.store.keys()) == ["cre/a", "cre/c"]
    assert sleeps.waits == []
    assert client.watch_queries[0]["resourceVersion"] == "12"
