"""The generic controller runtime: requeues, panics as errors, handlers, predicates, passes."""

from __future__ import annotations

from typing import Any

import anyio
import attrs
import pytest
from prometheus_client import CollectorRegistry

from cre.api.job import Job
from cre.api.meta import ObjectMeta, OwnerReference
from cre.api.watch import WatchEventType
from cre.core.common.observed import OwnerRef, TrainJobView
from cre.kube.metrics import metrics_for
from cre.kube.runtime import (
    DONE,
    Again,
    Controller,
    OwnStatusEcho,
    PassesExhausted,
    Result,
    TerminalError,
    WatchEvent,
    converge,
    enqueue_by_label,
    enqueue_mapped,
    enqueue_object,
    enqueue_owner,
    generation_changed,
    must_propagate,
)
from cre.kube.workqueue import PRIORITY_URGENT, WorkQueue
from cre.testing.strategies.job import make_job, pod

pytestmark = pytest.mark.anyio


class Panic(BaseException):
    """What a C extension's panic looks like from Python: not an ``Exception``."""


class Scripted:
    """A Reconciler that answers each key from a script (a Result or an exception to raise)."""

    def __init__(self, script: dict[str, list[Result | BaseException]]) -> None:
        self.script = script
        self.calls: list[str] = []
        self.reached: dict[str, anyio.Event] = {}

    def event(self, key: str) -> anyio.Event:
        """Set once ``key`` has been reconciled."""
        return self.reached.setdefault(key, anyio.Event())

    async def reconcile(self, key: str) -> Result:
        self.calls.append(key)
        self.event(key).set()
        step = self.script[key].pop(0) if self.script.get(key) else DONE
        if isinstance(step, BaseException):
            raise step
        return step


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def _controller(reconciler: Scripted) -> tuple[Controller, CollectorRegistry]:
    registry = CollectorRegistry()
    return Controller("t", reconciler, metrics=metrics_for(registry)), registry


async def test_a_panicking_reconcile_is_an_error_and_the_worker_lives() -> None:
    """A reconcile raising a BaseException subclass (a library panic) is counted as an error and
    a panic, requeued with backoff, and the next key is still reconciled."""
    rec = Scripted({"ns/bad": [Panic("runtime error: index out of range")]})
    ctl, registry = _controller(rec)
    await ctl.process("ns/bad")
    ctl.queue.add("ns/good")
    key = await ctl.queue.get()
    await ctl.process(key)
    assert rec.calls == ["ns/bad", "ns/good"]
    assert _value(registry, "controller_runtime_reconcile_panics_total", controller="t") == 1
    assert _value(registry, "controller_runtime_reconcile_errors_total", controller="t") == 1
    assert _value(registry, "controller_runtime_reconcile_total", controller="t",
                  result="error") == 1
    assert _value(registry, "controller_runtime_reconcile_total", controller="t",
                  result="success") == 1
    assert ctl.queue.num_requeues("ns/bad") == 1 and ctl.queue.pending_delayed() == 1


class Events:
    """An EventRecorder stand-in that keeps what it was asked to emit."""

    def __init__(self) -> None:
        self.emitted: list[dict[str, Any]] = []

    async def emit(self, *, involved: dict[str, Any], type_: str, reason: str,
                   message: str) -> bool:
        self.emitted.append({"involved": involved, "type": type_, "reason": reason,
                             "message": message})
        return True


async def test_a_terminal_error_is_recorded_and_not_requeued() -> None:
    """A reconcile raising TerminalError is counted (errors, terminal errors), its Warning
    event is emitted on the object it names, and the key is neither requeued nor backed off;
    a later add reconciles it again as usual."""
    involved = {"kind": "Workflow", "namespace": "ns", "name": "w"}
    rec = Scripted({"ns/w": [TerminalError("the API server refused TrainingRuntime ns/r (422 "
                                           "Invalid): spec.x: Required value",
                                           reason="CreateRefused", involved=involved)]})
    registry = CollectorRegistry()
    events = Events()
    ctl = Controller("t", rec, metrics=metrics_for(registry), recorder=events)  # type: ignore[arg-type]
    await ctl.process("ns/w")
    assert _value(registry, "controller_runtime_terminal_reconcile_errors_total",
                  controller="t") == 1
    assert _value(registry, "controller_runtime_reconcile_errors_total", controller="t") == 1
    assert _value(registry, "controller_runtime_reconcile_total", controller="t",
                  result="error") == 1
    assert ctl.queue.num_requeues("ns/w") == 0 and ctl.queue.pending_delayed() == 0
    assert len(ctl.queue) == 0
    assert events.emitted == [{"involved": involved, "type": "Warning", "reason": "CreateRefused",
                               "message": "the API server refused TrainingRuntime ns/r (422 "
                                          "Invalid): spec.x: Required value"}]
    ctl.queue.add("ns/w")
    await ctl.process(await ctl.queue.get())
    assert rec.calls == ["ns/w", "ns/w"]


async def test_cancellation_and_exit_are_not_swallowed() -> None:
    """Only what concerns the process propagates: interrupts, exits, cancellation, and groups
    holding one of them."""
    assert must_propagate(KeyboardInterrupt()) and must_propagate(SystemExit(1))
    assert must_propagate(GeneratorExit())
    assert must_propagate(anyio.get_cancelled_exc_class()())
    assert must_propagate(BaseExceptionGroup("g", [Panic(), KeyboardInterrupt()]))
    assert not must_propagate(Panic()) and not must_propagate(ValueError())
    assert not must_propagate(BaseExceptionGroup("g", [Panic()]))
    rec = Scripted({"ns/x": [KeyboardInterrupt()]})
    ctl, _ = _controller(rec)
    with pytest.raises(KeyboardInterrupt):
        await ctl.process("ns/x")
    assert ctl.queue.processing() == frozenset()


async def test_results_choose_the_requeue() -> None:
    """requeue_after polls (backoff reset), requeue backs off, DONE forgets the key."""
    rec = Scripted({"ns/a": [Result(requeue_after=30.0)], "ns/b": [Result(requeue=True)],
                    "ns/c": [DONE]})
    ctl, registry = _controller(rec)
    for key in ("ns/a", "ns/b", "ns/c"):
        await ctl.process(key)
    assert ctl.queue.pending_delayed() == 2
    assert ctl.queue.num_requeues("ns/a") == 0 and ctl.queue.num_requeues("ns/b") == 1
    for result in ("requeue_after", "requeue", "success"):
        assert _value(registry, "controller_runtime_reconcile_total", controller="t",
                      result=result) == 1
    with pytest.raises(ValueError, match="requeue_after"):
        Result(requeue_after=-1.0)


async def test_run_survives_a_panic_and_stop_drains() -> None:
    """Under run(), a panicking key does not stop the workers: the other keys are reconciled,
    and stop() lets run() return once the queue drained."""
    rec = Scripted({"ns/bad": [Panic("boom")]})
    ctl, _ = _controller(rec)
    async with anyio.create_task_group() as tg:
        tg.start_soon(ctl.run)
        ctl.queue.add("ns/bad")
        ctl.queue.add("ns/good")
        with anyio.fail_after(10):  # a safety net only
            await rec.event("ns/good").wait()
        ctl.stop()
    assert rec.calls[:2] == ["ns/bad", "ns/good"]


async def test_urgent_keys_jump_the_queue() -> None:
    """A key added with a higher priority is handed out first, even when it was already
    waiting at a lower one; equal priorities stay first-in first-out."""
    q: WorkQueue[str] = WorkQueue("t-priority", enable_metrics=False)
    for key in ("a", "b", "c"):
        q.add(key)
    q.add("c", priority=PRIORITY_URGENT)
    q.add("d", priority=PRIORITY_URGENT)
    assert len(q) == 4
    assert [await q.get() for _ in range(4)] == ["c", "d", "a", "b"]
    q.add("a", priority=PRIORITY_URGENT)  # in progress: queued again after done, urgently
    q.add("e")
    q.done("a")
    assert await q.get() == "a"


class Recorder:
    def __init__(self) -> None:
        self.now: list[str] = []
        self.later: list[tuple[str, float]] = []

    def add(self, key: str, *, priority: int = 0) -> None:
        self.now.append(key)

    def add_after(self, key: str, delay: float) -> None:
        self.later.append((key, delay))


def _event(new: Any, old: Any = None, etype: WatchEventType = WatchEventType.MODIFIED
           ) -> WatchEvent[Any]:
    return WatchEvent(etype, old, new)


def test_handlers_map_models_and_views_to_keys() -> None:
    """enqueue_object, enqueue_owner, enqueue_by_label and enqueue_mapped read attrs models
    and slim views alike; a delay coalesces through add_after."""
    q = Recorder()
    job = make_job()
    enqueue_object()(_event(job), q)
    ref = OwnerRef(api_version="cre.dev/v1alpha1", kind="Job", name="j1", uid="u",
                   controller=True)
    view = TrainJobView(name="j1-workload", namespace="team-a", uid="t", owner_refs=(ref,))
    enqueue_owner(kind="Job", group="cre.dev")(_event(view), q)
    enqueue_owner(kind="Job", group="batch")(_event(view), q)  # another group: nothing
    owned = attrs.evolve(job, metadata=attrs.evolve(job.metadata, name="child", owner_references=(
        OwnerReference(api_version="cre.dev/v1alpha1", kind="Workflow", name="wf", uid="w",
                       controller=True),)))
    enqueue_owner(kind="Workflow", group="cre.dev")(_event(owned), q)
    enqueue_by_label("cre.dev/job", delay=0.2)(_event(pod("w-0")), q)
    labelled = attrs.evolve(job, metadata=attrs.evolve(job.metadata, labels={"cre.dev/wf": "wf"}))
    enqueue_by_label("cre.dev/wf")(_event(labelled), q)
    enqueue_mapped(lambda e: ["b/2", "a/1", "b/2"])(_event(job), q)
    assert q.now == ["team-a/j1", "team-a/j1", "team-a/wf", "team-a/wf", "a/1", "b/2"]
    assert q.later == [("team-a/j1", 0.2)]


def test_predicates() -> None:
    """generation_changed passes spec changes, creates and deletes only; OwnStatusEcho drops
    the echo of the remembered status write and nothing else."""
    old = make_job(resource_version="1")
    bumped = attrs.evolve(old, metadata=attrs.evolve(old.metadata, generation=2))
    assert generation_changed(_event(bumped, old))
    assert not generation_changed(_event(attrs.evolve(old, status=attrs.evolve(
        old.status, restart_count=1)), old))
    assert generation_changed(_event(None, old, WatchEventType.DELETED))
    echo = OwnStatusEcho()
    status = attrs.evolve(old.status, restart_count=1)
    written: Job = attrs.evolve(old, status=status, metadata=attrs.evolve(
        old.metadata, resource_version="2"))
    assert echo(_event(written, old))
    echo.remember("team-a/j1", status)
    assert not echo(_event(written, old))
    relabelled = attrs.evolve(written, metadata=attrs.evolve(written.metadata,
                                                             labels={"x": "y"}))
    assert echo(_event(relabelled, old))
    echo.forget("team-a/j1")
    assert echo(_event(written, old)) and len(echo) == 0
    assert isinstance(old.metadata, ObjectMeta)


def _at(job: Job, rv: str, restarts: int) -> Job:
    return attrs.evolve(job, status=attrs.evolve(job.status, restart_count=restarts),
                        metadata=attrs.evolve(job.metadata, resource_version=rv))


def test_own_writes_stand_in_for_the_cache_until_their_echo() -> None:
    """While the cache holds a copy the controller's own status writes replaced (the one a
    reconcile started from, or the one a plan was computed on after a conflict), ``latest``
    gives the copy the last write returned; once the cache shows that copy or a newer one (or
    the echo passes the predicate), the cache wins; a key never written, or forgotten, reads
    the cache."""
    echo = OwnStatusEcho()
    key = "team-a/j1"
    v1, v2, v3, v4 = (_at(make_job(), str(rv), rv) for rv in (1, 2, 3, 4))
    assert echo.latest(key, v1) is v1  # the reconcile starts from the cache's v1
    echo.remember(key, v2.status, replaced="1", copy=("2", lambda: v2))
    assert echo.latest(key, v1) is v2  # the watch has not delivered v2 yet
    # That reconcile's plan conflicted with a foreign write (v3, read live) and wrote v4.
    echo.remember(key, v4.status, replaced="3", copy=("4", lambda: v4))
    assert [echo.latest(key, c) for c in (v1, v3)] == [v4, v4]
    assert echo.latest(key, v4) is v4 and echo.latest(key, v1) is v1  # caught up: cache wins
    echo.remember(key, v2.status, replaced="1", copy=("2", lambda: v2))
    assert not echo(_event(v2, v1))  # the echo arrives: dropped, and the stand-in ends
    assert echo.latest(key, v1) is v1
    echo.remember(key, v2.status, replaced="1", copy=("2", lambda: v2))
    echo.forget(key)
    assert echo.latest(key, v1) is v1 and echo.latest(key, None) is None


async def test_converge_bounds_the_passes() -> None:
    """The shell answers until the core asks nothing; a core that keeps asking is an error
    naming the object and the answers given."""
    async def settles(obj: int, obs: int) -> Again[int, int] | str:
        return Again(obj, obs + 1, "read") if obs < 3 else f"done at {obs}"

    assert await converge(settles, 0, 0, what="x") == "done at 3"

    async def spins(obj: int, obs: int) -> Again[int, int] | str:
        return Again(obj, obs, "log reads")

    with pytest.raises(PassesExhausted, match=r"job ns/x: .* after 4 passes \(log reads"):
        await converge(spins, 0, 0, what="job ns/x", max_passes=4)


class _Informer:
    """Just enough of an Informer for Controller.watch: it keeps the dispatch function."""

    def __init__(self) -> None:
        self.dispatch: Any = None

    def add_handler(self, fn: Any) -> None:
        self.dispatch = fn


def test_watch_own_enqueues_changes_and_forgets_the_deleted() -> None:
    """The own-kind watch: a change enqueues the object, the echo of the controller's own status
    write does not, and a deletion forgets the key's echo and requeue history and runs
    ``on_deleted`` instead of enqueueing."""
    ctrl, _ = _controller(Scripted({}))
    informer, echo, deleted = _Informer(), OwnStatusEcho(), []
    ctrl.watch_own(informer, echo, on_deleted=deleted.append)  # type: ignore[arg-type]
    old = make_job(resource_version="1")
    informer.dispatch(WatchEventType.ADDED, None, old)
    assert len(ctrl.queue) == 1
    status = attrs.evolve(old.status, restart_count=1)
    echo.remember("team-a/j1", status)
    written = attrs.evolve(old, status=status,
                           metadata=attrs.evolve(old.metadata, resource_version="2"))
    informer.dispatch(WatchEventType.MODIFIED, old, written)
    assert len(ctrl.queue) == 1 and not deleted  # the echo enqueued nothing more
    ctrl.queue.add_rate_limited("team-a/j1")
    assert ctrl.queue.num_requeues("team-a/j1") == 1
    informer.dispatch(WatchEventType.DELETED, written, None)
    assert deleted == [written] and len(echo) == 0
    assert ctrl.queue.num_requeues("team-a/j1") == 0


class _Cache:
    """An informer stand-in: synced only once something runs it; counts the runs."""

    def __init__(self) -> None:
        self.name = "cache"
        self.runs = 0
        self._synced = anyio.Event()

    def add_handler(self, handler: Any) -> None:
        pass

    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    async def run(self) -> None:
        self.runs += 1
        self._synced.set()
        await anyio.sleep_forever()


async def test_a_standalone_controller_runs_its_informers_a_shared_one_does_not() -> None:
    """runs_informers=True: run() starts the watched informers itself and reconciles once they
    synced (a controller that owns its caches); by default the informers are their factory's
    to run, and run() only waits for them."""
    rec = Scripted({})
    own, shared = _Cache(), _Cache()
    ctl = Controller("own", rec, metrics=metrics_for(CollectorRegistry()), runs_informers=True)
    ctl.watch(own, lambda event, queue: None)  # type: ignore[arg-type]
    waiting = Controller("shared", rec, metrics=metrics_for(CollectorRegistry()))
    waiting.watch(shared, lambda event, queue: None)  # type: ignore[arg-type]
    async with anyio.create_task_group() as tg:
        tg.start_soon(ctl.run)
        tg.start_soon(waiting.run)
        ctl.queue.add("ns/a")
        with anyio.fail_after(10):  # a safety net only
            await rec.event("ns/a").wait()
        assert own.runs == 1 and shared.runs == 0 and not waiting.has_synced()
        ctl.stop()
        tg.cancel_scope.cancel()
