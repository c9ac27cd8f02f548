"""Start the controller under test in-process, whatever it is built on.

Three shapes are supported, told apart by what the case names and what the factory returns:

* ``factory: module:callable`` returning something with an async ``run()`` (a
  :class:`cre.kube.runtime.CoreReconciler`, which runs its informers when it owns them, or any
  object like it): it runs
  until the case ends; ``wait_synced()`` is awaited when it has one;
* ``factory: module:callable`` returning an awaitable, or an ``async def`` factory: a plain
  asyncio program, run as a task and cancelled when the case ends;
* ``kopf: module`` (or a list): the modules are imported (their ``@kopf.on`` handlers register
  in kopf's default registry) and ``kopf.operator()`` runs in-process, standalone, with its
  ``KUBECONFIG`` pointing at the emulator (kopf's own login and the handlers' clients read it).

A factory is called with the keyword arguments it declares, from: ``kubeconfig`` (path),
``client`` (a :class:`cre.kube.client.KubeClient` the runner closes), ``namespace`` (the first
of ``controller.namespaces``, else ``default``), ``namespaces`` (the tuple), ``clock`` (the
simulated clock: ``now()`` seconds, ``wall_delay(seconds)``), ``now`` (a callable returning an
aware datetime in simulated time), ``time_scale`` and the case's ``controller.args``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import os
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import anyio
from anyio.abc import TaskGroup

from cre.kube.client import KubeClient
from cre.testing.cluster.clock import SimClock
from cre.testing.golden.controller.case import ControllerCaseError, ControllerSpec

#: Wall seconds a kopf operator may take to run its startup handlers.
STARTUP_TIMEOUT = 30.0


def load_factory(spec: str, *, where: str) -> Callable[..., Any]:
    module_name, _, attr = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ControllerCaseError(f"{where}: cannot import {module_name!r}: {exc} (is the "
                                  f"project installed, e.g. pip install -e .?)") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ControllerCaseError(f"{where}: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ControllerCaseError(f"{where}: {spec!r} is not callable")
    factory: Callable[..., Any] = obj
    return factory


def factory_kwargs(factory: Callable[..., Any], offered: dict[str, Any], *,
                   where: str) -> dict[str, Any]:
    """The offered arguments the factory declares; a required one not offered is an error."""
    params = inspect.signature(factory).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(offered)
    out = {}
    for name, p in params.items():
        if name in offered:
            out[name] = offered[name]
        elif p.default is inspect.Parameter.empty and p.kind not in (
                inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ControllerCaseError(
                f"{where}: the factory needs {name!r}, which the runner does not offer "
                f"(offered: {sorted(offered)}; add it to controller.args)")
    return out


@contextlib.asynccontextmanager
async def started(spec: ControllerSpec, *, emu: Any, clock: SimClock,
                  where: str) -> AsyncIterator[None]:
    """Run the controller for the duration of the block (started and synced when the block
    begins; cancelled, before its client is closed, when the block ends)."""
    old_kubeconfig = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(emu.kubeconfig_path)  # for clients the controller builds
    client = await KubeClient.from_kubeconfig(str(emu.kubeconfig_path))
    try:
        async with anyio.create_task_group() as tg:
            if spec.kopf:
                await _start_kopf(spec, emu=emu, tg=tg, where=where)
            else:
                assert spec.factory is not None
                await _start_factory(spec, emu=emu, client=client, clock=clock, tg=tg,
                                     where=where)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
    finally:
        await client.close()
        if old_kubeconfig is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = old_kubeconfig


async def _start_factory(spec: ControllerSpec, *, emu: Any, client: KubeClient,
                         clock: SimClock, tg: TaskGroup, where: str) -> None:
    at = f"{where}.factory"
    factory = load_factory(str(spec.factory), where=at)
    offered: dict[str, Any] = {
        "kubeconfig": str(emu.kubeconfig_path), "client": client,
        "namespace": spec.namespaces[0] if spec.namespaces else "default",
        "namespaces": spec.namespaces, "clock": clock, "time_scale": clock.scale,
        "now": lambda: datetime.fromtimestamp(clock.now(), tz=UTC), **spec.args}
    made = factory(**factory_kwargs(factory, offered, where=at))
    if inspect.isawaitable(made) and not callable(getattr(made, "run", None)):
        awaitable = made

        async def program() -> None:
            await awaitable

        tg.start_soon(program, name=f"controller {spec.factory}")
        return
    run = getattr(made, "run", None)
    if run is None or not inspect.iscoroutinefunction(run):
        raise ControllerCaseError(
            f"{at}: {spec.factory} returned {type(made).__name__}; expected a controller "
            f"with an async run() (e.g. a cre.kube.runtime.CoreReconciler) or an awaitable")
    tg.start_soon(run, name=f"controller {spec.factory}")
    wait_synced = getattr(made, "wait_synced", None)
    if wait_synced is not None and inspect.iscoroutinefunction(wait_synced):
        await wait_synced()


async def _start_kopf(spec: ControllerSpec, *, emu: Any, tg: TaskGroup, where: str) -> None:
    try:
        import kopf
    except ImportError as exc:
        raise ControllerCaseError(f"{where}.kopf: kopf is not installed "
                                  f"(pip install kopf)") from exc
    for module in spec.kopf:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ControllerCaseError(f"{where}.kopf: cannot import {module!r}: {exc}") from exc
    # kopf logs in with its own fallback handlers, which read $KUBECONFIG (set by started()).
    stop, ready = asyncio.Event(), asyncio.Event()

    async def operator() -> None:
        try:
            await kopf.operator(registry=kopf.get_default_registry(), standalone=True,
                                clusterwide=not spec.namespaces,
                                namespaces=list(spec.namespaces), stop_flag=stop,
                                ready_flag=ready)
        finally:
            stop.set()

    async def stopper() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            stop.set()

    tg.start_soon(operator, name="kopf operator")
    tg.start_soon(stopper, name="kopf stop flag")
    with anyio.move_on_after(STARTUP_TIMEOUT) as scope:
        await ready.wait()
    if scope.cancelled_caught:
        raise ControllerCaseError(f"{where}.kopf: the operator was not ready after "
                                  f"{STARTUP_TIMEOUT:g} s (a startup handler failing? see the "
                                  f"captured log)")


__all__ = ["factory_kwargs", "load_factory", "started"]
