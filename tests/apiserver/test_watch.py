"""WATCH: initial state, resume, bookmarks, 410 and selector enter/leave semantics."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from cre.testing.apiserver import Emulator

from .conftest import PODS, Client, pod

pytestmark = pytest.mark.anyio


async def _events(emu: Emulator, query: str, n: int, *, stop_on_bookmark: bool = False,
                  after: Any = None) -> list[dict[str, Any]]:
    """Open a watch, run ``after`` once it is open, and read ``n`` events."""
    out: list[dict[str, Any]] = []
    async with aiohttp.ClientSession() as s, s.get(f"{emu.url}{PODS}?watch=true&{query}") as r:
        assert r.status == 200
        if after is not None:
            await after()
        while len(out) < n:
            line = await r.content.readline()
            if not line:
                break
            ev = json.loads(line)
            out.append(ev)
            if stop_on_bookmark and ev["type"] == "BOOKMARK":
                break
    return out


async def test_watch_without_rv_starts_with_current_state(client: Client, emu: Emulator) -> None:
    """A watch with no resourceVersion sends ADDED for existing objects, then changes."""
    await client.post(PODS, pod("a"))

    async def change() -> None:
        await client.post(PODS, pod("b"))

    evs = await _events(emu, "", 2, after=change)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [
        ("ADDED", "a"), ("ADDED", "b")]


async def test_watch_resume_from_rv(client: Client, emu: Emulator) -> None:
    """A watch from a list RV replays only later changes, in order."""
    await client.post(PODS, pod("a"))
    _, lst, _ = await client.get(PODS)
    rv = lst["metadata"]["resourceVersion"]
    await client.post(PODS, pod("b"))
    await client.delete(PODS + "/a")
    evs = await _events(emu, f"resourceVersion={rv}", 2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [
        ("ADDED", "b"), ("DELETED", "a")]
    assert int(evs[1]["object"]["metadata"]["resourceVersion"]) > int(
        evs[0]["object"]["metadata"]["resourceVersion"])


async def test_watch_too_old_rv_gets_410_error_event(client: Client, emu: Emulator) -> None:
    """Resuming from a revision that left the history answers an ERROR event with 410 Expired."""
    for i in range(70):  # the fixture keeps 64 events per resource
        await client.post(PODS, pod(f"p{i}"))
    evs = await _events(emu, "resourceVersion=1", 1)
    assert evs[0]["type"] == "ERROR"
    status = evs[0]["object"]
    assert status["code"] == 410 and status["reason"] == "Expired"
    assert status["message"].startswith("too old resource version: 1 (")


async def test_bookmarks_carry_current_rv(client: Client, emu: Emulator) -> None:
    """allowWatchBookmarks yields BOOKMARK events with only kind, apiVersion and the RV."""
    _, created, _ = await client.post(PODS, pod("a"))
    rv = created["metadata"]["resourceVersion"]
    evs = await _events(emu, f"resourceVersion={rv}&allowWatchBookmarks=true", 1,
                        stop_on_bookmark=True)
    assert evs[0]["type"] == "BOOKMARK"
    assert evs[0]["object"] == {"kind": "Pod", "apiVersion": "v1",
                                "metadata": {"resourceVersion": str(emu.resource_version)}}


async def test_selector_enter_and_leave(client: Client, emu: Emulator) -> None:
    """Objects that start matching arrive as ADDED; ones that stop matching as DELETED."""
    await client.post(PODS, pod("a", labels={"app": "x"}))
    _, lst, _ = await client.get(PODS)
    rv = lst["metadata"]["resourceVersion"]
    m = "application/merge-patch+json"
    await client.patch(PODS + "/a", {"metadata": {"labels": {"app": "y"}}}, m)
    await client.patch(PODS + "/a", {"metadata": {"labels": {"app": "x", "v": "1"}}}, m)
    await client.patch(PODS + "/a", {"metadata": {"labels": {"app": "z"}}}, m)
    evs = await _events(emu, f"resourceVersion={rv}&labelSelector=app%3Dy", 2)
    assert [e["type"] for e in evs] == ["ADDED", "DELETED"]
    gone = evs[1]["object"]
    assert gone["metadata"]["labels"] == {"app": "y"}  # the previous content
    assert gone["metadata"]["resourceVersion"] != evs[0]["object"]["metadata"]["resourceVersion"]


async def test_send_initial_events_ends_with_annotated_bookmark(
    client: Client, emu: Emulator
) -> None:
    """sendInitialEvents=true sends the state, then a bookmark marked initial-events-end."""
    await client.post(PODS, pod("a"))
    evs = await _events(emu, "sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                        "&allowWatchBookmarks=true", 2)
    assert evs[0]["type"] == "ADDED"
    assert evs[1]["type"] == "BOOKMARK"
    assert evs[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_send_initial_events_needs_not_older_than(client: Client) -> None:
    """sendInitialEvents without resourceVersionMatch=NotOlderThan is a 422."""
    status, body, _ = await client.get(PODS + "?watch=1&sendInitialEvents=true")
    assert status == 422
    assert body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")


async def test_timeout_seconds_ends_the_stream(client: Client, emu: Emulator) -> None:
    """timeoutSeconds closes the stream cleanly without an event."""
    _, created, _ = await client.post(PODS, pod("a"))
    rv = created["metadata"]["resourceVersion"]
    evs = await _events(emu, f"resourceVersion={rv}&timeoutSeconds=1", 5)
    assert evs == []


async def test_watch_list_default_from_134() -> None:
    """From 1.34 a plain watch with allowWatchBookmarks ends its initial state with a bookmark."""
    from cre.testing.apiserver import serve

    async with serve(kubernetes_version="1.34") as emu:
        emu.objects.put(pod("a"))
        evs = await _events(emu, "allowWatchBookmarks=true", 2)
    assert [e["type"] for e in evs] == ["ADDED", "BOOKMARK"]
    assert evs[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_deprecated_watch_path(client: Client, emu: Emulator) -> None:
    """/api/v1/watch/namespaces/{ns}/pods/{name} watches one object."""
    await client.post(PODS, pod("a"))
    await client.post(PODS, pod("b"))
    async with aiohttp.ClientSession() as s, s.get(
            f"{emu.url}/api/v1/watch/namespaces/default/pods/b") as r:
        ev = json.loads(await r.content.readline())
    assert (ev["type"], ev["object"]["metadata"]["name"]) == ("ADDED", "b")


async def test_table_watch_sends_columns_once(client: Client, emu: Emulator) -> None:
    """A Table watch carries columnDefinitions in the first event only."""
    await client.post(PODS, pod("a"))
    await client.post(PODS, pod("b"))
    headers = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    async with aiohttp.ClientSession() as s, s.get(
            f"{emu.url}{PODS}?watch=true", headers=headers) as r:
        first = json.loads(await r.content.readline())
        second = json.loads(await r.content.readline())
    assert first["object"]["kind"] == "Table"
    assert [c["name"] for c in first["object"]["columnDefinitions"]][:2] == ["Name", "Ready"]
    assert second["object"]["columnDefinitions"] is None
    assert second["object"]["rows"][0]["cells"][0] == "b"
