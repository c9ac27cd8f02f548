"""What the emulator keeps after objects are deleted: bounded watch history, no pod logs."""

from __future__ import annotations

import pytest

from cre.testing.apiserver import Emulator
from cre.testing.apiserver.store import HISTORY_FLOOR, Store

from .conftest import PODS, Client, pod

pytestmark = pytest.mark.anyio


def test_history_compaction_keeps_the_fresh_window_and_a_floor() -> None:
    """Events older than the fresh window are dropped down to the floor; a resume from before
    the window is then out of history (410), one inside it replays."""
    now = [0.0]
    store = Store(history=4096, fresh_seconds=75.0, clock=lambda: now[0])
    bucket = ("", "pods")
    for i in range(1000):
        store.put(bucket, ("ns", f"p{i}"), {"metadata": {"name": f"p{i}"}})
        store.remove(bucket, ("ns", f"p{i}"))
    now[0] = 10.0
    store.put(bucket, ("ns", "late"), {"metadata": {"name": "late"}})
    b = store.buckets[bucket]
    assert store.compact() == 0  # everything is still fresh
    now[0] = 80.0  # the burst is now 80 s old, "late" 70 s
    assert store.compact() == 2001 - HISTORY_FLOOR
    assert len(b.history) == HISTORY_FLOOR and b.history[-1].key == ("ns", "late")
    assert b.snapshot(10) is None  # before the window: the caller answers 410
    assert b.snapshot(b.evicted_rv) is not None
    now[0] = 200.0
    assert store.compact() == 0 and len(b.history) == HISTORY_FLOOR


async def test_a_deleted_pods_logs_are_forgotten(client: Client, emu: Emulator) -> None:
    """Logs are filed per pod and dropped when the pod leaves the store."""
    await client.post(PODS, pod("p", node="n0"))
    emu.append_log("default", "p", "main", "hello\n")
    emu.rotate_log("default", "p", "main")
    emu.append_log("default", "p", "main", "again\n")
    logs = emu.server.logs
    assert logs.pods() == 1 and logs.count("default", "p", "main", True) == 1
    assert (await client.delete(f"{PODS}/p?gracePeriodSeconds=0"))[0] == 200
    assert logs.pods() == 0 and not logs.has("default", "p", "main", False)
    await client.post(PODS, pod("p", node="n0"))  # same name, new pod: no old log shows
    status, body, _ = await client.get(f"{PODS}/p/log")
    assert status == 400 and "is waiting to start" in body["message"]
