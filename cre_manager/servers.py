"""The manager's two small HTTP servers: probes (/healthz, /readyz) and Prometheus /metrics.

Kubernetes restarts a pod whose liveness probe fails and stops routing to one whose readiness
probe fails, so the two must mean different things: ``/healthz`` answers while the event loop
runs; ``/readyz`` runs named checks (caches synced, leader election healthy, not shutting down)
and, like the API server's own ``/readyz?verbose``, lists each check as ``[+]name ok`` or
``[-]name failed: why``. Metrics are served from the registry the manager gives (its own, see
:mod:`cre_manager.registry`; prometheus-client's default registry when none is given).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import anyio
import attrs
from aiohttp import web
from anyio.abc import TaskStatus
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

from cre_manager.config import BindAddress

log = logging.getLogger("cre_manager.servers")

#: A readiness check: ``(ok, detail)``.
Check = Callable[[], tuple[bool, str]]
_QUIET_PATHS: Final = ("/healthz", "/readyz")


@attrs.frozen(slots=True)
class Bound:
    """Where a server actually listens (the port is resolved when 0 was asked)."""

    name: str
    host: str
    port: int


def _probe_app(checks: dict[str, Check]) -> web.Application:
    async def healthz(_req: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(req: web.Request) -> web.Response:
        results = [(name, *check()) for name, check in checks.items()]
        ok = all(r[1] for r in results)
        if ok and "verbose" not in req.query:
            return web.Response(text="ok")
        lines = [(f"[+]{n} ok" + (f" ({why})" if why else "")) if good else
                 f"[-]{n} failed: {why}" for n, good, why in results]
        lines.append("readyz check passed" if ok else "readyz check failed")
        return web.Response(text="\n".join(lines) + "\n", status=200 if ok else 500)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


def _metrics_app(registry: CollectorRegistry) -> web.Application:
    async def metrics(_req: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


async def _serve(name: str, app: web.Application, address: BindAddress,
                 task_status: TaskStatus[Bound]) -> None:
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host=address.host, port=address.port, reuse_address=True)
        await site.start()
        addresses = runner.addresses
        host, port = addresses[0][:2] if addresses else (address.host or "", address.port)
        bound = Bound(name=name, host=str(host), port=int(port))
        log.info("serving", extra={"server": name, "address": f"{bound.host}:{bound.port}"})
        task_status.started(bound)
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await runner.cleanup()


async def serve_probes(address: BindAddress, checks: dict[str, Check], *,
                       task_status: TaskStatus[Bound] = anyio.TASK_STATUS_IGNORED) -> None:
    """Serve /healthz and /readyz until cancelled; reports the bound address when listening."""
    await _serve("health", _probe_app(checks), address, task_status)


async def serve_metrics(address: BindAddress, *, registry: CollectorRegistry = REGISTRY,
                        task_status: TaskStatus[Bound] = anyio.TASK_STATUS_IGNORED) -> None:
    """Serve /metrics from ``registry`` until cancelled."""
    await _serve("metrics", _metrics_app(registry), address, task_status)
