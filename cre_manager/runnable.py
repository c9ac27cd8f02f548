"""What the manager supervises, and how it restarts or gives up on a failing part.

The manager owns no logic; it runs *runnables*: controllers (each with its informers and
workqueue) and any other long-lived task. The contract is deliberately small so wiring a new
controller is a few lines: ``async run()`` works until cancelled, ``has_synced()`` says whether
its caches are filled. A runnable that can drain gracefully also offers ``stop()``: stop taking
new work and let ``run()`` return once the in-flight reconciles are done; the manager gives it the
shutdown grace period before cancelling.

Failures: a transient API error (no connection, 429, 5xx) escaping ``run()`` is logged and the
runnable restarted with exponential back-off, a few times in a row at most; anything else, or too
many restarts, stops the whole process (the task group cancels every other part, the lease is
released) instead of leaving a half-running manager.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import anyio
import attrs

from cre.kube.client import ApiError
from cre.kube.logcontext import log_fields

log = logging.getLogger("cre_manager.runnable")


@runtime_checkable
class Runnable(Protocol):
    """Runs until cancelled; ``has_synced`` is True once its caches reflect the cluster."""

    async def run(self) -> None: ...

    def has_synced(self) -> bool: ...


@runtime_checkable
class GracefulRunnable(Runnable, Protocol):
    """A runnable that can stop taking new work and finish what it has started."""

    def stop(self) -> None: ...


class DrainableQueue(Protocol):
    """The part of :class:`cre.kube.workqueue.WorkQueue` a graceful stop needs."""

    def shutdown(self) -> None: ...

    async def wait_drained(self) -> None: ...


class QueueController(Runnable, Protocol):
    """A controller whose workers take keys from ``queue`` (every CRE controller)."""

    @property
    def queue(self) -> DrainableQueue: ...


class Draining:
    """Makes a :class:`QueueController` graceful: ``stop()`` shuts its queue, so no new key is
    taken once the queued ones are done, and ``run()`` returns when the in-flight reconciles
    have finished (controller-runtime's shutdown-with-drain)."""

    def __init__(self, controller: QueueController) -> None:
        self.controller = controller
        self._stopping = anyio.Event()

    def has_synced(self) -> bool:
        return self.controller.has_synced()

    def stop(self) -> None:
        self.controller.queue.shutdown()
        self._stopping.set()

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            async def inner() -> None:
                await self.controller.run()
                tg.cancel_scope.cancel()

            tg.start_soon(inner)
            await self._stopping.wait()
            await self.controller.queue.wait_drained()
            tg.cancel_scope.cancel()


class RunnableFailed(Exception):
    """A supervised part failed for good; the manager stops."""

    def __init__(self, name: str, cause: BaseException | None) -> None:
        what = f"{type(cause).__name__}: {cause}" if cause else "returned before shutdown"
        super().__init__(f"{name} failed: {what}")
        self.name = name


@attrs.frozen(slots=True)
class RestartPolicy:
    """How many consecutive transient failures to absorb, and the back-off between restarts."""

    max_restarts: int = 5
    initial_backoff: float = 1.0
    max_backoff: float = 30.0
    healthy_after: float = 60.0  # a run this long resets the consecutive-failure count


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, ApiError) and exc.retryable


@attrs.define
class Supervised:
    """One runnable under supervision, with its name and completion flag."""

    name: str
    runnable: Runnable
    policy: RestartPolicy = attrs.field(factory=RestartPolicy)
    done: anyio.Event = attrs.field(factory=anyio.Event)
    restarts: int = 0

    def has_synced(self) -> bool:
        return self.runnable.has_synced()

    def stop(self) -> bool:
        """Ask a graceful runnable to drain; False when it cannot (it will be cancelled)."""
        if isinstance(self.runnable, GracefulRunnable):
            self.runnable.stop()
            return True
        return False

    async def run(self, *, stopping: Callable[[], bool]) -> None:
        """Run with the restart policy until stopped, cancelled, or failed for good."""
        backoff = self.policy.initial_backoff
        try:
            while True:
                started = anyio.current_time()
                try:
                    # Tasks the runnable starts inherit this context: their records say
                    # which controller they belong to even outside a reconcile.
                    with log_fields(controller=self.name):
                        await self.runnable.run()
                except Exception as exc:
                    if anyio.current_time() - started > self.policy.healthy_after:
                        self.restarts, backoff = 0, self.policy.initial_backoff
                    if stopping():
                        log.warning("runnable failed while stopping",
                                    extra={"runnable": self.name}, exc_info=True)
                        return
                    if not is_transient(exc) or self.restarts >= self.policy.max_restarts:
                        log.error("runnable failed", extra={"runnable": self.name},
                                  exc_info=True)
                        raise RunnableFailed(self.name, exc) from exc
                    self.restarts += 1
                    log.warning("runnable failed, restarting", exc_info=True, extra={
                        "runnable": self.name, "restart": self.restarts, "backoff": backoff})
                    await anyio.sleep(backoff)
                    backoff = min(backoff * 2, self.policy.max_backoff)
                    continue
                if stopping():
                    return
                raise RunnableFailed(self.name, None)
        finally:
            self.done.set()
