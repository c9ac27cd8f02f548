"""The Manager in-process with stand-in runnables: probes, metrics, drain, crash handling."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from cre.kube.client import ApiError
from cre.kube.workqueue import QueueShutDown, WorkQueue
from cre_manager.config import ManagerConfig, parse_config
from cre_manager.errors import ExitCode
from cre_manager.manager import Manager
from cre_manager.runnable import Draining, RestartPolicy, Supervised

pytestmark = pytest.mark.anyio


class Forever:
    """Runs until cancelled; counts its runs and whether it was cancelled."""

    def __init__(self) -> None:
        self.synced = False
        self.runs = 0
        self.running = anyio.Event()
        self.cancelled = False

    async def run(self) -> None:
        self.runs += 1
        self.running.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise

    def has_synced(self) -> bool:
        return self.synced


class Graceful(Forever):
    """On stop(), stops taking work and returns once its in-flight item is released."""

    def __init__(self) -> None:
        super().__init__()
        self.stop_requested = anyio.Event()
        self.release = anyio.Event()
        self.finished = False

    def stop(self) -> None:
        self.stop_requested.set()

    async def run(self) -> None:
        self.runs += 1
        self.running.set()
        await self.stop_requested.wait()
        await self.release.wait()
        self.finished = True


class Failing(Forever):
    """Raises the given errors on its first runs, then runs forever."""

    def __init__(self, *errors: Exception) -> None:
        super().__init__()
        self.errors = list(errors)

    async def run(self) -> None:
        if self.errors:
            self.runs += 1
            raise self.errors.pop(0)
        await super().run()


class Returning(Forever):
    async def run(self) -> None:
        self.runs += 1


def _config(kubeconfig: Path, grace: str = "30s") -> ManagerConfig:
    return parse_config(["--health-probe-bind-address", "127.0.0.1:0",
                         "--metrics-bind-address", "127.0.0.1:0",
                         "--shutdown-grace-period", grace], {"KUBECONFIG": str(kubeconfig)})


def _start(tg: anyio.abc.TaskGroup, manager: Manager) -> list[ExitCode]:
    """Run ``manager`` in ``tg``; the returned list receives its exit code once it ends."""
    result: list[ExitCode] = []

    async def run() -> None:
        result.append(await manager.run())

    tg.start_soon(run)
    return result


async def _get(manager: Manager, server: str, path: str) -> tuple[int, str]:
    bound = manager.bound[server]
    async with aiohttp.ClientSession() as http, \
            http.get(f"http://{bound.host}:{bound.port}{path}") as resp:
        return resp.status, await resp.text()


async def test_probes_follow_cache_sync_and_shutdown(kubeconfig: Path) -> None:
    """/readyz fails until every runnable has synced and again once shutdown begins."""
    runnable = Graceful()
    manager = Manager(config=_config(kubeconfig), runnables=[Supervised("job", runnable)],
                      elector=None)
    async with anyio.create_task_group() as tg:
        async def run() -> None:
            assert await manager.run() is ExitCode.OK

        tg.start_soon(run)
        await manager.started.wait()
        await runnable.running.wait()
        assert await _get(manager, "health", "/healthz") == (200, "ok")
        status, body = await _get(manager, "health", "/readyz")
        assert status == 500
        assert "[-]informers failed: not synced: job" in body
        runnable.synced = True
        assert await _get(manager, "health", "/readyz") == (200, "ok")
        status, body = await _get(manager, "health", "/readyz?verbose")
        assert status == 200 and "[+]leader-election ok" in body
        manager.request_stop()
        await runnable.stop_requested.wait()
        status, body = await _get(manager, "health", "/readyz")
        assert status == 500 and "[-]shutdown failed: shutting down" in body
        runnable.release.set()
    assert runnable.finished


async def test_metrics_served_from_default_registry(kubeconfig: Path) -> None:
    """/metrics exposes the controller-runtime and workqueue collectors."""
    manager = Manager(config=_config(kubeconfig), runnables=[Supervised("job", Forever())],
                      elector=None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(manager.run)
        await manager.started.wait()
        status, body = await _get(manager, "metrics", "/metrics")
        manager.request_stop()
    assert status == 200
    for name in ("controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total",
                 "workqueue_depth", "cre_informer_relists_total"):
        assert f"# TYPE {name.removesuffix('_total')}" in body


async def test_drain_waits_for_in_flight_work(kubeconfig: Path) -> None:
    """After a stop request the manager waits for the draining runnable, cancels the others."""
    draining, plain = Graceful(), Forever()
    manager = Manager(config=_config(kubeconfig),
                      runnables=[Supervised("job", draining), Supervised("other", plain)],
                      elector=None)
    async with anyio.create_task_group() as tg:
        result = _start(tg, manager)
        await draining.running.wait()
        await plain.running.wait()
        manager.request_stop()
        await draining.stop_requested.wait()
        assert not plain.cancelled  # still running while the in-flight reconcile finishes
        draining.release.set()
    assert result == [ExitCode.OK]
    assert draining.finished and plain.cancelled


async def test_grace_period_bounds_the_drain(kubeconfig: Path) -> None:
    """A runnable that does not finish within the grace period is cancelled; exit is still 0."""
    stuck = Graceful()
    manager = Manager(config=_config(kubeconfig, grace="100ms"),
                      runnables=[Supervised("job", stuck)], elector=None)
    async with anyio.create_task_group() as tg:
        result = _start(tg, manager)
        await stuck.running.wait()
        manager.request_stop()
    assert result == [ExitCode.OK]
    assert not stuck.finished


async def test_fatal_error_stops_everything(kubeconfig: Path) -> None:
    """A non-transient error in one runnable cancels the others and exits CRASHED."""
    bad, good = Failing(ValueError("bug")), Forever()
    manager = Manager(config=_config(kubeconfig),
                      runnables=[Supervised("good", good), Supervised("bad", bad)], elector=None)
    assert await manager.run() is ExitCode.CRASHED
    assert good.cancelled


async def test_transient_error_is_retried(kubeconfig: Path) -> None:
    """A retryable API error restarts the runnable after a back-off instead of stopping."""
    flaky = Failing(ApiError(status=503, message="unavailable"), ApiError(status=0))
    sup = Supervised("job", flaky, RestartPolicy(initial_backoff=0.01, max_backoff=0.02))
    manager = Manager(config=_config(kubeconfig), runnables=[sup], elector=None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(manager.run)
        await flaky.running.wait()
        manager.request_stop()
    assert flaky.runs == 3
    assert sup.restarts == 2


async def test_too_many_transient_errors_stop(kubeconfig: Path) -> None:
    """Transient errors beyond the restart budget stop the manager."""
    flaky = Failing(*(ApiError(status=503) for _ in range(3)))
    sup = Supervised("job", flaky, RestartPolicy(max_restarts=2, initial_backoff=0.01))
    manager = Manager(config=_config(kubeconfig), runnables=[sup], elector=None)
    assert await manager.run() is ExitCode.CRASHED
    assert flaky.runs == 3


async def test_early_return_is_a_failure(kubeconfig: Path) -> None:
    """A runnable whose run() returns before shutdown stops the manager."""
    manager = Manager(config=_config(kubeconfig), runnables=[Supervised("job", Returning())],
                      elector=None)
    assert await manager.run() is ExitCode.CRASHED


async def test_port_in_use_is_a_config_error(kubeconfig: Path) -> None:
    """A bind address already in use exits BAD_CONFIG naming the flag."""
    first = Manager(config=_config(kubeconfig), runnables=[Supervised("a", Forever())],
                    elector=None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(first.run)
        await first.started.wait()
        taken = first.bound["health"].port
        cfg = parse_config(["--health-probe-bind-address", f"127.0.0.1:{taken}",
                            "--metrics-bind-address", "0"], {"KUBECONFIG": str(kubeconfig)})
        second = Manager(config=cfg, runnables=[Supervised("b", Forever())], elector=None)
        assert await second.run() is ExitCode.BAD_CONFIG
        first.request_stop()


class QueueWorker:
    """A controller in miniature: one worker reconciling keys from a real WorkQueue."""

    def __init__(self) -> None:
        self.queue: WorkQueue[str] = WorkQueue("test-drain", enable_metrics=False)
        self.started: dict[str, anyio.Event] = {}
        self.release = anyio.Event()
        self.finished: list[str] = []

    def has_synced(self) -> bool:
        return True

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._worker)
            await anyio.sleep_forever()

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except QueueShutDown:
                return
            self.started.setdefault(key, anyio.Event()).set()
            await self.release.wait()
            self.finished.append(key)
            self.queue.done(key)


async def test_draining_finishes_in_flight_and_takes_no_new_keys(kubeconfig: Path) -> None:
    """Draining: stop() lets the in-flight reconcile finish; keys added later are refused."""
    ctrl = QueueWorker()
    ctrl.started["a"] = anyio.Event()
    manager = Manager(config=_config(kubeconfig), runnables=[Supervised("job", Draining(ctrl))],
                      elector=None)
    async with anyio.create_task_group() as tg:
        result = _start(tg, manager)
        ctrl.queue.add("a")
        await ctrl.started["a"].wait()
        manager.request_stop()
        while not ctrl.queue.shutting_down:  # the manager reacts at its next scheduling point
            await anyio.lowlevel.checkpoint()
        ctrl.queue.add("late")  # refused: the queue is shut down
        ctrl.release.set()
    assert result == [ExitCode.OK]
    assert ctrl.finished == ["a"]


async def test_on_synced_runs_once_all_runnables_have_synced(
        kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The on_synced hook (the heap freeze in the process) waits for every runnable's caches."""
    monkeypatch.setattr("cre_manager.manager.SYNC_POLL", 0.0)  # every poll is one checkpoint
    first, second = Forever(), Forever()
    called = anyio.Event()
    calls: list[tuple[bool, bool]] = []

    def hook() -> None:
        calls.append((first.synced, second.synced))
        called.set()

    manager = Manager(config=_config(kubeconfig), elector=None, on_synced=hook,
                      runnables=[Supervised("a", first), Supervised("b", second)])
    async with anyio.create_task_group() as tg:
        tg.start_soon(manager.run)
        await first.running.wait()
        await second.running.wait()
        first.synced = True
        for _ in range(50):  # the hook's poll runs between these checkpoints
            await anyio.lowlevel.checkpoint()
        assert calls == []
        second.synced = True
        await called.wait()
        manager.request_stop()
    assert calls == [(True, True)]


async def test_a_crashing_server_stops_everything_and_exits_crashed(
        kubeconfig: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A part outside the controllers failing (here the metrics server) cancels the runnables,
    is logged with its error, and the exit code is CRASHED."""
    runnable = Forever()

    async def broken_metrics(address: object, *, registry: object,
                             task_status: anyio.abc.TaskStatus[object]) -> None:
        task_status.started(None)
        await runnable.running.wait()
        raise RuntimeError("metrics server exploded")

    monkeypatch.setattr("cre_manager.manager.serve_metrics", broken_metrics)
    manager = Manager(config=_config(kubeconfig), runnables=[Supervised("job", runnable)],
                      elector=None)
    assert await manager.run() is ExitCode.CRASHED
    assert runnable.cancelled
    (record,) = [r for r in caplog.records if r.getMessage() == "manager failed"]
    assert record.exc_info is not None and "exploded" in str(record.exc_info[1])
