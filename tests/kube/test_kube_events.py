"""Events survive a throttling API server: queued without blocking the caller, retried with
bounded backoff on 429/5xx/409, dropped (with a log line) after the last try or when refused."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from kube_emu import emulator
from prometheus_client import CollectorRegistry

from cre.kube.client import EVENTS, KubeClient
from cre.kube.events import EventRecorder
from cre.kube.metrics import KubeMetrics, metrics_for

pytestmark = pytest.mark.anyio

INVOLVED = {"apiVersion": "cre.dev/v1alpha1", "kind": "Job", "name": "j", "namespace": "cre",
            "uid": "u1"}


# The recorders count on a registry of the tests' own (nothing is registered at import).
REGISTRY = CollectorRegistry()
METRICS: KubeMetrics = metrics_for(REGISTRY)


def _count(component: str, result: str) -> float:
    return REGISTRY.get_sample_value("cre_events_total",
                                     {"component": component, "result": result}) or 0.0


async def _poll(check: Callable[[], Awaitable[bool]]) -> None:
    with anyio.fail_after(10):
        while True:
            if await check():
                return
            await anyio.sleep(0.01)


async def _dropped(component: str) -> bool:
    return _count(component, "dropped") >= 1


async def _any_event(client: KubeClient) -> bool:
    return bool(await _events(client))


async def _events(client: KubeClient) -> list[dict[str, Any]]:
    page = await client.list(EVENTS, namespace="cre")
    return list(page.get("items") or [])


async def test_a_throttled_event_is_retried_in_the_background_until_written() -> None:
    """With every Event create answered 429, ``emit`` still returns at once (queued); once the
    server stops throttling, the sink's retry writes the event, and the metrics count it."""
    component = "test/throttled"
    async with emulator() as (emu, client), anyio.create_task_group() as tg:
        client.max_retries = 0  # the recorder's own retries are under test, not the client's
        sleeps: list[float] = []

        async def sleep(seconds: float) -> None:
            sleeps.append(seconds)
            if len(sleeps) == 3:
                emu.faults.reset()  # the brown-out ends
            await anyio.lowlevel.checkpoint()

        recorder = EventRecorder(client, component=component, metrics=METRICS, sleep=sleep)
        recorder.bind(tg)
        emu.faults.add_error(429, verb="create", resource="events", retry_after=2)
        assert await recorder.emit(involved=INVOLVED, type_="Normal", reason="WorkloadCreated",
                                   message="created") is True
        await _poll(lambda: _any_event(client))
        assert sleeps == [2.0, 2.0, 2.0]  # the server's Retry-After
        assert [e["reason"] for e in await _events(client)] == ["WorkloadCreated"]
        assert _count(component, "retried") == 3
        assert _count(component, "recorded") == 1
        recorder.bind(None)
        tg.cancel_scope.cancel()


async def test_an_event_is_dropped_with_a_log_line_after_the_last_try(
        caplog: pytest.LogCaptureFixture) -> None:
    """An API server that keeps answering 503 gets ``max_tries`` tries with growing backoff,
    then the event is dropped and a warning names it."""
    caplog.set_level(logging.WARNING, logger="cre.kube.events")
    component = "test/dropped"
    async with emulator() as (emu, client), anyio.create_task_group() as tg:
        client.max_retries = 0  # the recorder's own retries are under test, not the client's
        sleeps: list[float] = []

        async def sleep(seconds: float) -> None:
            sleeps.append(seconds)
            await anyio.lowlevel.checkpoint()

        recorder = EventRecorder(client, component=component, metrics=METRICS, sleep=sleep,
                                 max_tries=4, retry_base=0.5, retry_cap=1.5)
        recorder.bind(tg)
        emu.faults.add_error(500, verb="create", resource="events")
        await recorder.emit(involved=INVOLVED, type_="Warning", reason="WorkloadFailed",
                            message="boom")
        await _poll(lambda: _dropped(component))
        assert len(sleeps) == 3
        # 0.5 s doubling, up to +50 % jitter, capped at 1.5 s.
        for attempt, slept in enumerate(sleeps, start=1):
            base = 0.5 * 2 ** (attempt - 1)
            assert min(base, 1.5) <= slept <= min(base * 1.5, 1.5)
        assert _count(component, "retried") == 3
        assert await _events(client) == []
        assert any("event WorkloadFailed for cre/j not recorded, dropped: still failing after "
                   "4 tries" in r.getMessage() for r in caplog.records)
        tg.cancel_scope.cancel()


async def test_a_refused_event_is_dropped_at_once() -> None:
    """An event the server refuses for good (its namespace does not exist: 404) is not
    retried."""
    component = "test/refused"
    async with emulator() as (_emu, client), anyio.create_task_group() as tg:
        sleeps: list[float] = []

        async def sleep(seconds: float) -> None:
            sleeps.append(seconds)

        recorder = EventRecorder(client, component=component, metrics=METRICS, sleep=sleep)
        recorder.bind(tg)
        await recorder.emit(involved={**INVOLVED, "namespace": "nowhere"}, type_="Normal",
                            reason="X", message="y")
        await _poll(lambda: _dropped(component))
        assert sleeps == []
        tg.cancel_scope.cancel()


async def test_a_full_queue_drops_the_new_event_without_blocking() -> None:
    """With the sink stuck retrying and the queue full, ``emit`` returns False at once."""
    component = "test/full"
    async with emulator() as (emu, client), anyio.create_task_group() as tg:
        client.max_retries = 0  # the recorder's own retries are under test, not the client's
        stuck = anyio.Event()

        async def sleep(seconds: float) -> None:
            await stuck.wait()

        recorder = EventRecorder(client, component=component, metrics=METRICS, sleep=sleep,
                                 queue_size=2)
        recorder.bind(tg)
        emu.faults.add_error(503, verb="create", resource="events")
        results = []
        for i in range(4):
            results.append(await recorder.emit(involved=INVOLVED, type_="Normal",
                                               reason=f"R{i}", message="m"))
            await anyio.sleep(0.05)  # let the sink take the first one
        assert results == [True, True, True, False]
        assert _count(component, "dropped") == 1
        tg.cancel_scope.cancel()


def test_the_outcome_counters_start_at_zero_on_the_given_registry() -> None:
    """A recorder creates its three series at 0 on the registry it is given (rate() and absence
    alerts work before the first event), and nothing on a registry it was not given."""
    other = CollectorRegistry()
    EventRecorder(KubeClient.__new__(KubeClient), component="test/series", metrics=METRICS)
    for result in ("recorded", "retried", "dropped"):
        assert REGISTRY.get_sample_value("cre_events_total",
                                         {"component": "test/series", "result": result}) == 0.0
        assert other.get_sample_value("cre_events_total",
                                      {"component": "test/series", "result": result}) is None
