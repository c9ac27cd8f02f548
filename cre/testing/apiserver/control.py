"""The private ``/_emulator/`` HTTP control API, for processes that cannot call Python directly.

``make demo`` runs the cluster simulator as a separate process; it feeds container logs and
configures faults through these endpoints (the in-process equivalent is the
:class:`~cre.testing.apiserver.Emulator` object):

* ``POST /_emulator/logs/{namespace}/{pod}/{container}[?previous=true]`` — body (text) is
  appended to that container's log; ``204``.
* ``POST /_emulator/logs/{namespace}/{pod}/{container}/rotate`` — a restart: the current log
  becomes the ``previous=true`` log; ``204``.
* ``GET /_emulator/faults`` — the current fault configuration (JSON);
  ``POST /_emulator/faults`` — apply a JSON spec (see :meth:`Faults.configure`), e.g.
  ``{"dropWatches": true}`` (or a plural) ends open watch streams now and
  ``{"watchGoneStatus": 1}`` answers the next watch resume with an HTTP 410 Status;
  ``DELETE /_emulator/faults`` — clear every fault.
* ``GET /_emulator/state`` — ``{"resourceVersion": ..., "kubernetesVersion": ..., "now": ...}``.
* ``GET /_emulator/requests`` — the API requests served so far, as an audit log would count
  them: ``[{"userAgent", "verb", "resource", "count"}]`` (the product token of the client's
  User-Agent, so ``cre-manager`` and the simulator are told apart); ``DELETE`` resets them.
* ``POST /_emulator/gc`` — run the garbage collector until nothing is pending; ``204``.

These paths are not part of the Kubernetes API; real clients never call them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from aiohttp import web

from . import errors
from .meta import rfc3339
from .query import parse_bool
from .store import dumps

if TYPE_CHECKING:
    from .context import ServerContext


async def handle(server: ServerContext, request: web.Request) -> web.StreamResponse:
    parts = [p for p in request.path.split("/") if p][1:]
    method = request.method
    if parts and parts[0] == "logs" and method == "POST" and len(parts) in (4, 5):
        ns, pod, container = parts[1], parts[2], parts[3]
        if len(parts) == 5:
            if parts[4] != "rotate":
                raise errors.resource_not_found()
            server.logs.rotate(ns, pod, container)
        else:
            text = (await request.read()).decode("utf-8", errors="replace")
            previous = bool(parse_bool(request.query.get("previous"), name="previous"))
            server.logs.append(ns, pod, container, text, previous=previous)
        return web.Response(status=204)
    if parts == ["faults"]:
        if method == "GET":
            return _json(server.faults.describe())
        if method == "POST":
            try:
                spec = json.loads(await request.read() or b"{}")
            except ValueError as exc:
                raise errors.bad_request(f"fault spec is not JSON: {exc}") from None
            if not isinstance(spec, dict):
                raise errors.bad_request("fault spec must be a JSON object")
            try:
                server.faults.configure(spec)
            except (KeyError, ValueError, TypeError) as exc:
                raise errors.bad_request(f"invalid fault spec: {exc}") from None
            return _json(server.faults.describe())
        if method == "DELETE":
            server.faults.reset()
            return web.Response(status=204)
    if parts == ["state"] and method == "GET":
        return _json({"resourceVersion": str(server.store.rv),
                      "kubernetesVersion": server.kubernetes_version,
                      "now": rfc3339(server.clock())})
    if parts == ["requests"] and method == "GET":
        return _json([{"userAgent": a, "verb": v, "resource": r, "count": n}
                      for (a, v, r), n in sorted(server.requests.items())])
    if parts == ["requests"] and method == "DELETE":
        server.requests.clear()
        return web.Response(status=204)
    if parts == ["gc"] and method == "POST":
        server.gc.settle()
        return web.Response(status=204)
    raise errors.resource_not_found()


def _json(body: object) -> web.Response:
    return web.Response(body=dumps(body), content_type="application/json")
