"""WorkQueue: dedup, exclusivity, re-add while processing, delays, backoff, shutdown."""

from __future__ import annotations

import itertools

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kube_fakes import FakeClock
from prometheus_client import REGISTRY, CollectorRegistry

from cre.kube.metrics import metrics_for
from cre.kube.ratelimit import (
    ItemExponentialRateLimiter,
    MaxOfRateLimiter,
    TokenBucketRateLimiter,
    default_controller_rate_limiter,
)
from cre.kube.workqueue import QueueShutDown, WorkQueue

pytestmark = pytest.mark.anyio


async def test_key_added_many_times_is_handed_out_once() -> None:
    """Adding the same key repeatedly before a get yields it once."""
    q: WorkQueue[str] = WorkQueue("t-dedup")
    for _ in range(5):
        q.add("a")
    q.add("b")
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"
    assert len(q) == 0


async def test_readd_while_processing_is_processed_again_after_done() -> None:
    """A key re-added during processing is not handed out until done, then exactly once more."""
    q: WorkQueue[str] = WorkQueue("t-readd")
    q.add("a")
    key = await q.get()
    q.add("a")
    q.add("a")
    assert len(q) == 0, "a key in progress must not be queued for another worker"
    q.done(key)
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0


async def test_add_after_waits_for_the_clock(clock: FakeClock) -> None:
    """add_after hands the key out only once the (injected) clock reaches the due time."""
    q: WorkQueue[str] = WorkQueue("t-after", clock=clock)
    q.add_after("a", 10.0)
    q.add_after("a", 20.0)  # a later request does not postpone the earlier one
    got: list[str] = []

    async def getter() -> None:
        got.append(await q.get())

    async with anyio.create_task_group() as tg:
        tg.start_soon(getter)
        await anyio.wait_all_tasks_blocked()
        assert got == [] and q.pending_delayed() == 1
        clock.advance(9.0)
        q.tick()
        await anyio.wait_all_tasks_blocked()
        assert got == []
        clock.advance(1.0)
        q.tick()
    assert got == ["a"]
    assert q.pending_delayed() == 0


async def test_delayed_key_waits_from_when_it_fell_due(clock: FakeClock) -> None:
    """A delayed key no getter looked at for a while is counted as queued since its due time,
    not since the get that finally noticed it (busy workers do not hide its wait)."""
    registry = CollectorRegistry()
    q: WorkQueue[str] = WorkQueue("t-due", clock=clock, metrics=metrics_for(registry))
    q.add_after("a", 1.0)
    clock.advance(5.0)  # due 4 s ago; every worker was busy meanwhile
    assert await q.get() == "a"
    labels = {"name": "t-due"}
    assert registry.get_sample_value("workqueue_queue_duration_seconds_sum", labels) == 4.0
    assert registry.get_sample_value("workqueue_queue_duration_seconds_count", labels) == 1


async def test_delayed_key_stands_ahead_of_later_adds(clock: FakeClock) -> None:
    """A key that fell due before another key was added is handed out first."""
    q: WorkQueue[str] = WorkQueue("t-due-order", clock=clock, enable_metrics=False)
    q.add_after("late", 3.0)
    q.add_after("due", 1.0)
    clock.advance(2.0)
    q.add("b")
    clock.advance(2.0)
    q.add("c")
    assert [await q.get() for _ in range(4)] == ["due", "b", "late", "c"]


async def test_rate_limited_adds_back_off_and_forget_resets(clock: FakeClock) -> None:
    """Each rate-limited add doubles the wait; forget starts the streak over."""
    q: WorkQueue[str] = WorkQueue("t-rl", clock=clock, rate_limiter=ItemExponentialRateLimiter(
        base=1.0, max_delay=8.0))
    for _ in range(3):
        q.add_rate_limited("a")
    assert q.num_requeues("a") == 3
    q.forget("a")
    assert q.num_requeues("a") == 0


async def test_shutdown_drains_queued_keys_then_raises() -> None:
    """After shutdown, queued keys are still handed out, new adds are ignored, then get raises."""
    q: WorkQueue[str] = WorkQueue("t-shutdown")
    q.add("a")
    q.add("b")
    q.shutdown()
    q.add("c")
    assert [await q.get(), await q.get()] == ["a", "b"]
    with pytest.raises(QueueShutDown):
        await q.get()


async def test_wait_drained_returns_when_work_is_done() -> None:
    """wait_drained blocks while a key is in progress and returns after done."""
    q: WorkQueue[str] = WorkQueue("t-drain")
    q.add("a")
    key = await q.get()
    finished = False

    async def waiter() -> None:
        nonlocal finished
        await q.wait_drained()
        finished = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        assert not finished
        q.done(key)
    assert finished


async def test_blocked_getter_wakes_on_add() -> None:
    """A getter waiting on an empty queue receives a key added later."""
    q: WorkQueue[int] = WorkQueue("t-wake")
    got: list[int] = []

    async def getter() -> None:
        got.append(await q.get())

    async with anyio.create_task_group() as tg:
        tg.start_soon(getter)
        await anyio.wait_all_tasks_blocked()
        q.add(7)
    assert got == [7]


async def test_an_add_wakes_one_idle_getter_not_all() -> None:
    """With ten idle getters, each added key wakes exactly one of them (the others stay
    asleep instead of waking to find nothing), and a finished key wakes none; every key is
    still handed out."""

    class Counting(WorkQueue[int]):
        waits = 0

        async def _idle(self) -> None:
            Counting.waits += 1
            await super()._idle()

    q = Counting("t-wake-one", enable_metrics=False)
    got: list[int] = []

    async def getter() -> None:
        got.append(await q.get())

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(getter)
        await anyio.wait_all_tasks_blocked()
        assert Counting.waits == 10
        q.add(1)
        await anyio.wait_all_tasks_blocked()
        assert got == [1] and Counting.waits == 10
        q.done(1)
        await anyio.wait_all_tasks_blocked()
        assert Counting.waits == 10
        for key in range(2, 11):
            q.add(key)
    assert sorted(got) == list(range(1, 11)) and Counting.waits == 10


async def test_one_idle_getter_keeps_the_time_of_delayed_keys() -> None:
    """With ten idle getters, a delayed key falling due wakes the one getter that keeps the
    clock (and the one it hands the clock to), not all ten, and is handed out."""

    class Counting(WorkQueue[str]):
        waits = 0

        async def _idle(self) -> None:
            Counting.waits += 1
            await super()._idle()

    q = Counting("t-keeper", enable_metrics=False)
    got: list[str] = []
    handed_out = anyio.Event()

    async def getter() -> None:
        got.append(await q.get())
        handed_out.set()

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(getter)
        await anyio.wait_all_tasks_blocked()
        q.add_after("a", 0.01)
        with anyio.fail_after(10):
            await handed_out.wait()
        await anyio.wait_all_tasks_blocked()
        assert got == ["a"]
        assert Counting.waits <= 10 + 3, Counting.waits
        tg.cancel_scope.cancel()


async def test_metrics_use_controller_runtime_names(clock: FakeClock) -> None:
    """Adds, depth, retries and the in-progress gauges are exported under the workqueue_* names."""
    q: WorkQueue[str] = WorkQueue("t-metrics", clock=clock)
    q.add("a")
    q.add("b")
    assert REGISTRY.get_sample_value("workqueue_depth", {"name": "t-metrics"}) == 2
    assert REGISTRY.get_sample_value("workqueue_adds_total", {"name": "t-metrics"}) == 2
    clock.advance(0.5)
    key = await q.get()
    assert REGISTRY.get_sample_value("workqueue_queue_duration_seconds_count",
                                     {"name": "t-metrics"}) == 1
    assert REGISTRY.get_sample_value("workqueue_queue_duration_seconds_sum",
                                     {"name": "t-metrics"}) == 0.5
    clock.advance(3.0)
    assert REGISTRY.get_sample_value("workqueue_longest_running_processor_seconds",
                                     {"name": "t-metrics"}) == 3.0
    assert REGISTRY.get_sample_value("workqueue_unfinished_work_seconds",
                                     {"name": "t-metrics"}) == 3.0
    q.done(key)
    assert REGISTRY.get_sample_value("workqueue_work_duration_seconds_count",
                                     {"name": "t-metrics"}) == 1
    q.add_rate_limited("c")
    assert REGISTRY.get_sample_value("workqueue_retries_total", {"name": "t-metrics"}) == 1


# -- rate limiters ------------------------------------------------------------------------


@given(failures=st.integers(min_value=1, max_value=200))
def test_item_backoff_stays_within_bounds_and_doubles(failures: int) -> None:
    """Per-key backoff starts at 5 ms, doubles, and never exceeds 1000 s."""
    rl = ItemExponentialRateLimiter()
    delays = [rl.when("k") for _ in range(failures)]
    assert delays[0] == pytest.approx(0.005)
    assert all(0.005 <= d <= 1000.0 for d in delays)
    assert all(b == min(1000.0, 2 * a) for a, b in itertools.pairwise(delays))
    rl.forget("k")
    assert rl.when("k") == pytest.approx(0.005)


def test_token_bucket_allows_burst_then_paces(clock: FakeClock) -> None:
    """The bucket lets 100 through at once, then one every 0.1 s, refilling with time."""
    tb = TokenBucketRateLimiter(rate=10, burst=100, clock=clock)
    assert [tb.when(i) for i in range(100)] == [0.0] * 100
    assert tb.when("x") == pytest.approx(0.1)
    assert tb.when("y") == pytest.approx(0.2)
    clock.advance(10.0)
    assert tb.when("z") == 0.0


def test_max_of_limiters_takes_the_longest_wait(clock: FakeClock) -> None:
    """The default limiter answers the max of the per-key backoff and the global bucket."""
    rl = default_controller_rate_limiter(clock=clock)
    assert isinstance(rl, MaxOfRateLimiter)
    waits = [rl.when("k") for _ in range(12)]
    assert waits[-1] == pytest.approx(0.005 * 2**11)
    # 101 distinct keys: the 101st exceeds the burst, so the bucket dominates its 5 ms.
    rl2 = default_controller_rate_limiter(clock=clock)
    last = [rl2.when(i) for i in range(101)][-1]
    assert last == pytest.approx(0.1)


# -- hypothesis: concurrent workers ---------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["add", "yield"]), st.integers(0, 5)),
                    min_size=1, max_size=60),
       workers=st.integers(1, 4))
def test_concurrent_workers_never_share_a_key_and_lose_nothing(
        ops: list[tuple[str, int]], workers: int) -> None:
    """With several workers, no key is processed twice at once and every add is processed later."""

    async def scenario() -> None:
        q: WorkQueue[int] = WorkQueue("t-prop", enable_metrics=False)
        in_progress: set[int] = set()
        last_add: dict[int, int] = {}
        last_start: dict[int, int] = {}
        tick = 0

        async def worker() -> None:
            nonlocal tick
            while True:
                try:
                    key = await q.get()
                except QueueShutDown:
                    return
                assert key not in in_progress, f"key {key} processed concurrently"
                in_progress.add(key)
                tick += 1
                last_start[key] = tick
                await anyio.lowlevel.checkpoint()
                await anyio.lowlevel.checkpoint()
                in_progress.discard(key)
                q.done(key)

        async with anyio.create_task_group() as tg:
            for _ in range(workers):
                tg.start_soon(worker)
            for op, key in ops:
                if op == "add":
                    tick += 1
                    last_add[key] = tick
                    q.add(key)
                else:
                    await anyio.lowlevel.checkpoint()
            await q.wait_drained()
            q.shutdown()
        for key, added in last_add.items():
            assert last_start.get(key, -1) > added, f"add of {key} at {added} never processed"

    anyio.run(scenario, backend="asyncio")
