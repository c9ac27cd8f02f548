"""A pods/log endpoint that ignores ``limitBytes`` and floods: the worst server a log read meets.

A real API server honours ``limitBytes``; a proxy in front of it, or a kubelet of another
release, may not. The Job controller's log reads must bound memory themselves, by cutting the
stream at their limit. This tiny aiohttp server answers every
``/api/v1/namespaces/{ns}/pods/{pod}/log`` read with ``chunk`` repeated ``count`` times, whatever
the query, and counts what it managed to send before the client hung up, so a test or a
benchmark can prove the client cut the stream instead of draining it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web

__all__ = ["flooding_log_server"]


@asynccontextmanager
async def flooding_log_server(chunk: bytes, count: int,
                              sent: list[int] | None = None) -> AsyncIterator[str]:
    """Serve the flood on loopback; yields the base URL. ``sent[0]`` grows by each chunk written."""

    async def log(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        try:
            for _ in range(count):
                await resp.write(chunk)
                if sent is not None:
                    sent[0] += len(chunk)
        except (ConnectionError, aiohttp.ClientConnectionResetError):
            pass  # the client cut the stream: what is under test
        return resp

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{ns}/pods/{pod}/log", log)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
