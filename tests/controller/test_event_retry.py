"""A transition's Event that hits a throttling API server is retried in the background: the
status write is not held up, and the Event lands once the server recovers."""

from __future__ import annotations

import pytest

from cre.testing.apiserver import Emulator
from cre.testing.jobharness import JobHarness, is_true

pytestmark = pytest.mark.anyio


async def test_throttled_transition_event_is_retried_without_blocking_the_reconcile(
        job_harness: JobHarness, shared_emulator: Emulator) -> None:
    """Every Event create answers 429: the Job still reaches InProgress (status written, no
    event yet); when the throttling ends, the WorkloadCreated event is written by a retry."""
    h = job_harness
    shared_emulator.faults.add_error(429, verb="create", resource="events", retry_after=1)
    try:
        await h.create_job("throttled")
        await h.wait_job("throttled", is_true("InProgress"))
        assert await h.events("throttled") == []
    finally:
        shared_emulator.faults.reset()
    event = await h.wait_event("throttled", "WorkloadCreated")
    assert event["type"] == "Normal"
    assert [e["reason"] for e in await h.events("throttled")].count("WorkloadCreated") == 1
