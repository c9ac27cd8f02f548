"""The supervised process: one anyio task group for probes, metrics, election and controllers.

Structured concurrency gives the guarantee the manager needs: when any part fails for good, the
task group cancels every other part and the process exits with a code that says why, rather than
limping on half-running (a controller dead but the probes still green). Shutdown follows
controller-runtime's order: stop taking new work, let in-flight reconciles finish within the
grace period, release the lease so a standby takes over at once, exit 0. A second signal exits
immediately, and a watchdog exits if an orderly shutdown itself hangs.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Sequence
from functools import partial

import anyio
from anyio.abc import TaskGroup
from prometheus_client import REGISTRY, CollectorRegistry

from cre.kube.leader import LeaderElector, LeadershipLost
from cre_manager.config import ManagerConfig
from cre_manager.errors import ExitCode
from cre_manager.registry import manager_metrics, register_all
from cre_manager.runnable import RunnableFailed, Supervised
from cre_manager.servers import Bound, Check, serve_metrics, serve_probes

log = logging.getLogger("cre_manager")

WATCHDOG_SLACK = 15.0  # beyond the grace period, for releasing the lease and closing servers
SYNC_POLL = 0.1  # how often the on_synced task looks at has_synced() (it has no event to await)


def _leaf(exc: BaseException) -> BaseException:
    """The first non-group exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class Manager:
    """Runs the given runnables (behind leader election when configured) until told to stop."""

    def __init__(self, *, config: ManagerConfig, runnables: Sequence[Supervised],
                 elector: LeaderElector | None,
                 on_synced: Callable[[], object] | None = None,
                 registry: CollectorRegistry | None = None) -> None:
        """``on_synced`` runs once each time the controllers start, when all have synced (the
        process front passes :func:`cre_manager.gcstats.freeze_heap`). ``registry`` is what
        /metrics serves (the process front passes its own, the one its controllers report to;
        default: prometheus-client's default registry); every CRE collector is created on it."""
        self._config = config
        self.registry = register_all(REGISTRY if registry is None else registry)
        self._on_synced = on_synced
        self._runnables = list(runnables)
        self._elector = elector
        self._stop = anyio.Event()
        self._stopping = False
        self._controllers_running = False
        self.exit_code = ExitCode.OK
        self.bound: dict[str, Bound] = {}
        self.started = anyio.Event()  # servers bound; ``bound`` is filled

    # -- state and readiness -------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stopping

    def request_stop(self) -> None:
        """Begin an orderly shutdown (what the first SIGTERM/SIGINT does)."""
        if not self._stopping:
            self._stopping = True
            self._stop.set()

    def _check_shutdown(self) -> tuple[bool, str]:
        return (False, "shutting down") if self._stopping else (True, "")

    def _check_leader_election(self) -> tuple[bool, str]:
        if self._elector is None:
            return True, "disabled"
        if self._elector.healthy():
            role = "leading" if self._elector.is_leader() else \
                f"standing by (leader: {self._elector.leader or 'none'})"
            return True, role
        return False, "no answer from the API server about the lease within a lease duration"

    def _check_caches(self) -> tuple[bool, str]:
        if not self._controllers_running:
            if self._elector is not None and self._elector.healthy():
                return True, "standing by: controllers start when this replica leads"
            return False, "controllers not started"
        unsynced = [s.name for s in self._runnables if not s.has_synced()]
        return (False, "not synced: " + ", ".join(unsynced)) if unsynced else (True, "")

    def readiness_checks(self) -> dict[str, Check]:
        return {"shutdown": self._check_shutdown,
                "leader-election": self._check_leader_election,
                "informers": self._check_caches}

    # -- life cycle --------------------------------------------------------------------------------

    async def run(self) -> ExitCode:
        """Serve, elect, run controllers; returns the process exit code. A failure in a part
        outside the controllers (a server, the signal handler) stops everything and is logged
        like a controller's, exit code CRASHED, rather than escaping as a bare traceback."""
        try:
            return await self._run()
        except Exception as exc:
            log.error("manager failed", exc_info=_leaf(exc))
            return ExitCode.CRASHED

    async def _run(self) -> ExitCode:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._signals, tg)
            for name, address, serve in (
                ("health", self._config.health_address,
                 partial(serve_probes, checks=self.readiness_checks())),
                ("metrics", self._config.metrics_address,
                 partial(serve_metrics, registry=self.registry)),
            ):
                if address is None:
                    continue
                try:
                    self.bound[name] = await tg.start(serve, address)
                except OSError as exc:
                    flag = "--health-probe-bind-address" if name == "health" else \
                        "--metrics-bind-address"
                    log.error(f"cannot listen on {flag} {address}: {exc}")
                    self.exit_code = ExitCode.BAD_CONFIG
                    tg.cancel_scope.cancel()
                    return self.exit_code
            self.started.set()
            tg.start_soon(self._main, tg)
        return self.exit_code

    async def _signals(self, tg: TaskGroup) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                name = signal.Signals(signum).name
                if self._stopping:
                    log.warning("second signal, exiting at once", extra={"signal": name})
                    logging.shutdown()
                    os._exit(128 + signum)
                log.info("signal received, shutting down", extra={
                    "signal": name, "gracePeriodSeconds": self._config.shutdown_grace_period})
                self.request_stop()
                tg.start_soon(self._watchdog)

    async def _watchdog(self) -> None:
        await anyio.sleep(self._config.shutdown_grace_period + WATCHDOG_SLACK)
        log.error("shutdown did not finish in time, exiting")
        logging.shutdown()
        os._exit(int(ExitCode.CRASHED))

    async def _main(self, tg: TaskGroup) -> None:
        try:
            if self._elector is None:
                await self._run_controllers()
            else:
                await self._elect_and_run(self._elector)
        except Exception as exc:
            leaf = _leaf(exc)
            if isinstance(leaf, LeadershipLost):
                log.error("leadership lost, stopping so that Kubernetes restarts us",
                          extra={"error": str(leaf)})
                self.exit_code = ExitCode.LEADERSHIP_LOST
            elif isinstance(leaf, RunnableFailed):
                log.error("stopping the manager", extra={"error": str(leaf)})
                self.exit_code = ExitCode.CRASHED
            else:
                log.error("manager failed", exc_info=leaf)
                self.exit_code = ExitCode.CRASHED
        else:
            log.info("manager stopped")
        finally:
            tg.cancel_scope.cancel()

    async def _elect_and_run(self, elector: LeaderElector) -> None:
        status = manager_metrics(self.registry).leader_status.labels(
            name=elector.config.lease_name)
        status.set(0)

        def started() -> None:
            status.set(1)

        def stopped() -> None:
            status.set(0)

        async def lead() -> None:
            started()
            await self._run_controllers()

        async with anyio.create_task_group() as inner:
            async def stop_standby() -> None:
                await self._stop.wait()
                if not elector.is_leader():
                    log.info("stopping while standing by")
                    inner.cancel_scope.cancel()

            inner.start_soon(stop_standby)
            await elector.run(on_started_leading=lead, on_stopped_leading=stopped)
            inner.cancel_scope.cancel()

    async def _run_controllers(self) -> None:
        self._controllers_running = True
        log.info("starting controllers", extra={"controllers": [s.name for s in self._runnables]})
        try:
            async with anyio.create_task_group() as ctg:
                for sup in self._runnables:
                    ctg.start_soon(partial(sup.run, stopping=lambda: self._stopping),
                                   name=f"runnable:{sup.name}")
                if self._on_synced is not None:
                    ctg.start_soon(self._call_when_synced, self._on_synced, name="on-synced")
                await self._stop.wait()
                graceful = [s for s in self._runnables if s.stop()]
                log.info("stopping controllers", extra={
                    "draining": [s.name for s in graceful],
                    "gracePeriodSeconds": self._config.shutdown_grace_period})
                with anyio.move_on_after(self._config.shutdown_grace_period) as scope:
                    for sup in graceful:
                        await sup.done.wait()
                if scope.cancelled_caught:
                    log.warning("grace period over, cancelling in-flight work")
                ctg.cancel_scope.cancel()
        finally:
            self._controllers_running = False

    async def _call_when_synced(self, hook: Callable[[], object]) -> None:
        # has_synced() is a plain predicate on every runnable; there is no event to await.
        while not all(s.has_synced() for s in self._runnables):  # noqa: ASYNC110
            await anyio.sleep(SYNC_POLL)
        hook()
