"""One simulated-cluster tick: run every controller step in order, applying as it goes.

The controllers run in the order objects flow (Trainer -> JobSet -> Job -> scheduler -> node
lifecycle -> kubelet), each on a fresh snapshot that already holds the previous controller's
writes, so one tick carries a new TrainJob as far as it can go at this instant. The tick is
repeated while it still changes something (bounded), then the caller sleeps until the earliest
``wake_at`` or the next watch event. Backends decide what applying means: the in-memory backend
for unit tests (:mod:`cre.testing.cluster.memory`) or HTTP against the API emulator
(:mod:`cre.testing.cluster.runtime`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol

import anyio

from cre.testing.cluster import batchjob, jobset, kubelet, nodelifecycle, scheduler, trainer
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.model import (
    Action,
    AppendLog,
    Bind,
    Create,
    Delete,
    Mark,
    Patch,
    RotateLog,
    Step,
    World,
)

Controller = Callable[[World, float, SimConfig], Step]

CONTROLLERS: tuple[tuple[str, Controller], ...] = (
    ("trainer", trainer.step),
    ("jobset", jobset.step),
    ("job", batchjob.step),
    ("scheduler", scheduler.step),
    ("nodelifecycle", nodelifecycle.step),
    ("kubelet", kubelet.step),
)
MAX_ROUNDS = 20
ROLES: tuple[str, ...] = tuple(name for name, _ in CONTROLLERS)


def parse_roles(text: str | Iterable[str], *, where: str = "roles") -> frozenset[str]:
    """The simulated controllers named in ``text`` (``"trainer,jobset,kubelet"`` or a list);
    an unknown name is an error naming it and the known ones."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text)]
    names = [n for n in names if n]
    unknown = sorted(set(names) - set(ROLES))
    if unknown:
        raise ValueError(f"{where}: unknown simulated controller(s) {unknown} "
                         f"(known: {list(ROLES)})")
    return frozenset(names)


def controllers(cfg: SimConfig) -> tuple[tuple[str, Controller], ...]:
    """The controllers ``cfg.roles`` selects, in flow order."""
    if cfg.roles is None:
        return CONTROLLERS
    return tuple((name, ctrl) for name, ctrl in CONTROLLERS if name in cfg.roles)


class SyncBackend(Protocol):
    """Somewhere a tick's actions land synchronously (the in-memory cluster)."""

    def snapshot(self) -> World: ...

    def apply(self, action: Action, now: float) -> None: ...


class AsyncBackend(Protocol):
    """Somewhere a tick's actions land over I/O (the emulator over HTTP)."""

    def snapshot(self) -> World: ...

    async def apply(self, action: Action, now: float) -> None: ...


def _merge_wake(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


def _changes(actions: Iterable[Action], world: World) -> bool:
    """Whether any action changes something (a Mark to the value it already has does not)."""
    for act in actions:
        if not isinstance(act, Mark) or world.marks.get(act.key) != act.value:
            return True
    return False


def tick(backend: SyncBackend, now: float, cfg: SimConfig) -> float | None:
    """Run the controllers until quiet at simulated time ``now``; the next wake-up time."""
    wake: float | None = None
    for _ in range(MAX_ROUNDS):
        changed = False
        wake = None
        for _name, ctrl in controllers(cfg):
            world = backend.snapshot()
            result = ctrl(world, now, cfg)
            wake = _merge_wake(wake, result.wake_at)
            if _changes(result.actions, world):
                changed = True
            for act in result.actions:
                backend.apply(act, now)
        if not changed:
            break
    return wake


async def atick(backend: AsyncBackend, now: Callable[[], float], cfg: SimConfig,
                on_error: Callable[[str, Action | None, Exception], Awaitable[None]]
                ) -> float | None:
    """:func:`tick` for an async backend; ``now`` is re-read per controller (time moves).

    A controller step that raises (a simulator bug meeting input it did not expect) is
    reported through ``on_error`` with no action and skipped for this round; the cluster and
    the other controllers keep running, as a real control plane outlives one bad object.
    """
    wake: float | None = None
    for _ in range(MAX_ROUNDS):
        changed = False
        wake = None
        for name, ctrl in controllers(cfg):
            world = backend.snapshot()
            t = now()
            try:
                result = ctrl(world, t, cfg)
            except Exception as exc:
                await on_error(name, None, exc)
                continue
            wake = _merge_wake(wake, result.wake_at)
            if _changes(result.actions, world):
                changed = True
            if cfg.write_concurrency <= 1:
                for act in result.actions:
                    await _apply_one(backend, name, act, t, on_error)
            else:
                await _apply_chains(backend, name, result.actions, t, on_error,
                                    cfg.write_concurrency)
        if not changed:
            break
    return wake


async def _apply_one(backend: AsyncBackend, name: str, act: Action, t: float,
                     on_error: Callable[[str, Action | None, Exception], Awaitable[None]]
                     ) -> None:
    try:
        await backend.apply(act, t)
    except Exception as exc:  # one failed write must not stop the cluster
        await on_error(name, act, exc)
        for undo in getattr(act, "on_failure", ()):
            await backend.apply(undo, t)


def _target(act: Action, position: int) -> tuple[str, ...]:
    """The object an action writes (its chain); a generated name is its own chain."""
    if isinstance(act, Patch | Delete):
        return (act.resource.plural, act.namespace or "", act.name)
    if isinstance(act, Bind):
        return ("pods", act.namespace, act.pod)
    if isinstance(act, AppendLog | RotateLog):
        return ("pods", act.namespace, act.pod)
    if isinstance(act, Create):
        meta = act.body.get("metadata") or {}
        if meta.get("name"):
            return (act.resource.plural, str(meta.get("namespace", "")), str(meta["name"]))
    return ("#", str(position))


async def _apply_chains(backend: AsyncBackend, name: str, actions: Sequence[Action], t: float,
                        on_error: Callable[[str, Action | None, Exception], Awaitable[None]],
                        limit: int) -> None:
    """Apply one step's actions with up to ``limit`` writes in flight: marks at once in step
    order, every object's writes in step order on its own chain (batched status writes)."""
    chains: dict[tuple[str, ...], list[Action]] = {}
    for i, act in enumerate(actions):
        if isinstance(act, Mark):
            await backend.apply(act, t)
        else:
            chains.setdefault(_target(act, i), []).append(act)
    if not chains:
        return
    gate = anyio.CapacityLimiter(limit)

    async def run(chain: list[Action]) -> None:
        async with gate:
            for act in chain:
                await _apply_one(backend, name, act, t, on_error)

    async with anyio.create_task_group() as tg:
        for chain in chains.values():
            tg.start_soon(run, chain)
