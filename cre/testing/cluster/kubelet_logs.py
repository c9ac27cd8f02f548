"""Container logs for a real kube-apiserver, served the way a kubelet serves them.

On a real control plane ``GET .../pods/{name}/log`` is proxied by kube-apiserver to the kubelet
of the pod's node: it looks the node up, takes its ``InternalIP`` address and the port in
``status.daemonEndpoints.kubeletEndpoint``, and calls ``/containerLogs/{ns}/{pod}/{container}``
over HTTPS. The emulator has its own log store; to run CRE's log capture against the real
server, the simulated kubelets' output goes here instead: an HTTPS server on loopback (with the
plane's certificate, signed by the CA the apiserver trusts for kubelets) that keeps each
container's current and previous log and answers ``tailLines``, ``limitBytes``, ``previous``
and ``timestamps`` like the kubelet. :meth:`KubeletLogs.node_status` is what a node must carry
for the apiserver to find it.
"""

from __future__ import annotations

import ssl
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

Key = tuple[str, str, str]


class KubeletLogs:
    """The log side of a kubelet, for every simulated node at once (all share 127.0.0.1)."""

    def __init__(self, *, cert: Path, key: Path) -> None:
        self._cert, self._key = cert, key
        self._current: dict[Key, list[tuple[str, str]]] = {}
        self._previous: dict[Key, list[tuple[str, str]]] = {}
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.requests = 0

    async def start(self) -> int:
        app = web.Application()
        app.router.add_get("/containerLogs/{ns}/{pod}/{container}", self._logs)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(self._cert), str(self._key))
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self.port

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def node_status(self) -> dict[str, Any]:
        """The node status fields kube-apiserver uses to reach this server."""
        return {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}}}

    # -- writing (the simulated container runtime) ------------------------------------------

    def append_log(self, namespace: str, pod: str, container: str, text: str) -> None:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lines = self._current.setdefault((namespace, pod, container), [])
        lines.extend((stamp, part) for part in text.splitlines(keepends=True))

    def rotate_log(self, namespace: str, pod: str, container: str) -> None:
        """The container restarted: its log becomes the ``previous=true`` log."""
        key = (namespace, pod, container)
        self._previous[key] = self._current.pop(key, [])

    async def append(self, namespace: str, pod: str, container: str, text: str, *,
                     at: float | None = None) -> None:
        # Stamped with the wall clock, as a kubelet stamps what it reads: ``at`` is simulated
        # time, which the real API server's clock (sinceTime, timestamps) does not follow.
        del at
        self.append_log(namespace, pod, container, text)

    async def rotate(self, namespace: str, pod: str, container: str) -> None:
        self.rotate_log(namespace, pod, container)

    # -- serving (what kube-apiserver calls) ---------------------------------------------------

    async def _logs(self, request: web.Request) -> web.Response:
        self.requests += 1
        key = (request.match_info["ns"], request.match_info["pod"],
               request.match_info["container"])
        query = request.query
        store = self._previous if query.get("previous") == "true" else self._current
        if key not in store:
            which = "previous terminated" if store is self._previous else "current"
            return web.Response(status=404, text=f"{which} log of container {key[2]!r} in "
                                                 f"pod {key[1]!r} not found")
        lines = store[key]
        if "tailLines" in query:
            count = int(query["tailLines"])
            lines = lines[-count:] if count > 0 else []
        stamped = query.get("timestamps") == "true"
        body = "".join(f"{t} {line}" if stamped else line for t, line in lines).encode()
        if "limitBytes" in query:
            body = body[:int(query["limitBytes"])]
        return web.Response(body=body, content_type="text/plain", charset="utf-8")
