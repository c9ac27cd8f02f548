"""Hypothesis stateful test: whatever happens to the cluster and the watch, the cache converges.

Random creates, updates, deletes, relabels in and out of the selector, dropped watches and forced
410s run against the emulator over HTTP while the informer watches; after quiescence the cache,
and the store rebuilt from the handler's events alone, both equal the server's state for the
selector. The emulator and the informer run on an event loop in a thread (an anyio blocking
portal) because hypothesis drives the state machine synchronously.
"""

from __future__ import annotations

from contextlib import ExitStack, suppress
from typing import Any

import anyio
import anyio.lowlevel
from anyio.from_thread import start_blocking_portal
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule
from kube_emu import (
    FAST,
    Recorder,
    cache_state,
    create_pod,
    delete_pod,
    drop_watches,
    emulator,
    server_state,
    set_labels,
)

from cre.api import labels as L
from cre.kube.pods import scoped_pod_informer

NAMES = [f"p{i}" for i in range(6)]
name_st = st.sampled_from(NAMES)


class CacheMatchesServer(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.stack = ExitStack()
        self.portal = self.stack.enter_context(start_blocking_portal(backend="asyncio"))
        self.emu, self.client = self.stack.enter_context(
            self.portal.wrap_async_context_manager(emulator()))
        self.inf = scoped_pod_informer(self.client, label_selector=L.JOB, name="t-stateful",
                                       config=FAST)
        self.rec = Recorder()
        self.inf.add_handler(self.rec)
        self._start()
        self.portal.call(self.inf.wait_synced)
        self.exists: set[str] = set()
        self.outsider_rv = 0

    def _start(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self.stopped = anyio.Event()
        self.portal.start_task_soon(self._run)

    async def _run(self) -> None:
        with anyio.CancelScope() as scope:
            self.scope = scope
            await self.inf.run()
        self.stopped.set()

    async def _stop(self) -> None:
        while self.scope is None:  # the task was started but has not run yet
            await anyio.lowlevel.checkpoint()
        self.scope.cancel()
        await self.stopped.wait()

    def _call(self, fn: Any, *args: Any) -> Any:
        return self.portal.call(fn, *args)

    @precondition(lambda self: len(self.exists) < len(NAMES))
    @rule(name=name_st, in_scope=st.booleans(), group=st.integers(0, 3))
    def create(self, name: str, in_scope: bool, group: int) -> None:
        if name in self.exists:
            return
        labels = {L.GROUP_LABEL: str(group)} | ({L.JOB: "j"} if in_scope else {})
        self._call(create_pod, self.client, name, labels)
        self.exists.add(name)

    @rule(name=name_st, group=st.integers(0, 3))
    def update(self, name: str, group: int) -> None:
        if name in self.exists:
            self._call(set_labels, self.client, name, {L.GROUP_LABEL: str(group)})

    @rule(name=name_st, in_scope=st.booleans())
    def relabel(self, name: str, in_scope: bool) -> None:
        if name in self.exists:
            self._call(set_labels, self.client, name, {L.JOB: "j" if in_scope else None})

    @rule(name=name_st)
    def delete(self, name: str) -> None:
        if name in self.exists:
            self._call(delete_pod, self.client, name)
            self.exists.discard(name)

    @rule()
    def drop_watch(self) -> None:
        drop_watches(self.emu)

    @rule(gap=st.lists(st.tuples(st.sampled_from(["create", "update", "relabel", "delete"]),
                                 name_st, st.booleans()), max_size=6))
    def gap_then_forced_410(self, gap: list[tuple[str, str, bool]]) -> None:
        """The informer stops, the cluster changes, and the resume is answered with 410."""
        self._call(self._stop)
        for op, name, flag in gap:
            if op == "create":
                self.create(name, flag, 0)
            elif op == "update":
                self.update(name, 1)
            elif op == "relabel":
                self.relabel(name, flag)
            else:
                self.delete(name)
        self.emu.faults.force_410_on_resume = True
        self._start()
        self.outsider_rv += 1
        rv = self._call(create_pod, self.client, f"outsider-{self.outsider_rv}", {"app": "x"})

        async def relisted() -> None:
            with anyio.fail_after(30):  # hang guard only
                await self.inf.wait_for_resource_version(rv)

        self._call(relisted)
        self.emu.faults.force_410_on_resume = False

    @rule()
    def quiesce_and_compare(self) -> None:
        self._check()

    def _check(self) -> None:
        expected = self._call(server_state, self.client, L.JOB)

        async def converged() -> None:
            await self.rec.wait_until(lambda: cache_state(self.inf) == expected
                                      and self.rec.mirror == expected)

        # If it never converges, the asserts below show the difference.
        with suppress(TimeoutError):
            self._call(converged)
        assert cache_state(self.inf) == expected
        assert self.rec.mirror == expected, "handlers missed an event"

    def teardown(self) -> None:
        try:
            self._check()
        finally:
            self._call(self._stop)
            self.stack.close()


CacheMatchesServer.TestCase.settings = settings(max_examples=12, stateful_step_count=20,
                                                deadline=None)
TestCacheMatchesServer = CacheMatchesServer.TestCase
