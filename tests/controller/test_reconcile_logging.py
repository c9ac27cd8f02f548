"""Every log record of a Job reconcile carries controller, namespace, name and reconcileID."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from cre.testing.jobharness import JobHarness, is_true
from cre_manager.logs import JsonFormatter

pytestmark = pytest.mark.anyio


class JsonLines(logging.Handler):
    """Formats each record as the manager's JSON line while the emitting task's context is live,
    and signals when a reconcile of ``key`` has finished."""

    def __init__(self, key: str) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[dict[str, Any]] = []
        self.key = key
        self.finished = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        line = json.loads(self.format(record))
        self.lines.append(line)
        if line["msg"].startswith(f"job {self.key}: reconciled"):
            self.finished.set()


@pytest.fixture
def debug_logs() -> Iterator[logging.Logger]:
    """The ``cre`` logger at DEBUG for the test (restored afterwards)."""
    logger = logging.getLogger("cre")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        yield logger
    finally:
        logger.setLevel(level)


async def test_reconcile_records_carry_their_key_and_one_reconcile_id(
        job_harness: JobHarness, debug_logs: logging.Logger) -> None:
    """The records of one reconcile share one reconcileID and name the Job they reconcile; two
    reconciles get different IDs."""
    h = job_harness
    handler = JsonLines(f"{h.namespace}/j1")
    debug_logs.addHandler(handler)
    try:
        await h.create_job("j1")
        await h.wait_job("j1", is_true("InProgress"))
        with anyio.fail_after(20):
            await handler.finished.wait()
    finally:
        debug_logs.removeHandler(handler)
    ours = [line for line in handler.lines if line["msg"].startswith(f"job {h.namespace}/j1:")]
    assert ours, "the reconcile logged nothing"
    for line in ours:
        assert (line.get("controller"), line.get("namespace"), line.get("name")) == (
            "job", h.namespace, "j1"), line
        assert line.get("reconcileID"), line
    passes: dict[str, list[str]] = {}
    for line in ours:
        passes.setdefault(line["reconcileID"], []).append(line["msg"].split(": ", 1)[1])
    # Every pass logs its start first; a completed pass also its end.
    assert all(msgs[0] == "reconciling" for msgs in passes.values())
    finished = [msgs for msgs in passes.values() if msgs[-1].startswith("reconciled")]
    assert len(passes) >= 2 and all(msgs.count("reconciling") == 1 for msgs in passes.values())
    assert finished
    assert any(m.startswith("applied") for msgs in finished for m in msgs)
