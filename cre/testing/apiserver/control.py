"""The private ``/_emulator/`` HTTP control API, for processes that cannot call Python directly.

``make demo`` runs the cluster simulator as a separate process; it feeds container logs and
configures faults through these endpoints (the in-process equivalent is the
:class:`~cre.testing.apiserver.Emulator` object):

* ``POST /_emulator/logs/{namespace}/{pod}/{container}[?previous=true]`` — body (text) is
  appended to that container's log (``&repeat=N``: N times, for huge logs such as the 1 GB
  one of ``python -m bench logs``); ``204``.
* ``POST /_emulator/logs/{namespace}/{pod}/{container}/rotate`` — a restart: the current log
  becomes the ``previous=true`` log; ``204``.
* ``GET /_emulator/faults`` — the current fault configuration (JSON);
  ``POST /_emulator/faults`` — apply a JSON spec (see :meth:`Faults.configure`), e.g.
  ``{"dropWatches": true}`` (or a plural) ends open watch streams now and
  ``{"watchGoneStatus": 1}`` answers the next watch resume with an HTTP 410 Status and
  ``{"refuseCreate": {"resource": "trainjobs", "code": 403, "message": ...}}`` refuses every
  create of a resource as admission would (``{"resource": ..., "remove": true}`` ends it);
  ``DELETE /_emulator/faults`` — clear every fault.
* ``GET /_emulator/state`` — ``{"resourceVersion": ..., "kubernetesVersion": ..., "now": ...}``.
* ``GET /_emulator/requests`` — the API requests served so far, as an audit log would count
  them: ``[{"userAgent", "verb", "resource", "count"}]`` (the product token of the client's
  User-Agent, so ``cre-manager`` and the simulator are told apart); ``DELETE`` resets them.
* ``POST /_emulator/compact`` — compact storage at the current revision as etcd's compaction
  does: lists at an older revision (exact ``resourceVersion``, continue tokens) answer 410,
  watches still replay; ``{"revision": n}``.
* ``POST /_emulator/gc`` — run the garbage collector until nothing is pending; ``204``.
* ``GET /_emulator/audit[?since=N]`` — every request since sequence ``N`` (user, verb, group,
  resource, subresource, namespace, name, path, code; see :mod:`.audit`);
  ``DELETE /_emulator/audit`` — forget them.
* ``POST /_emulator/journal`` — start keeping every object version written;
  ``GET /_emulator/journal`` — them (``{"dropped": n, "objects": [...]}``);
  ``DELETE /_emulator/journal`` — stop and forget.
* ``GET /_emulator/objects`` — every stored object now, all resources.
* ``POST /_emulator/rbac`` — ``{"enforce": true|false}`` turns RBAC enforcement on or off
  (:mod:`.rbac`).

These paths are not part of the Kubernetes API; real clients never call them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from aiohttp import web

from . import errors
from .meta import rfc3339
from .query import parse_bool, parse_int
from .store import dumps

if TYPE_CHECKING:
    from .context import ServerContext

MAX_REPEAT = 1 << 20
MAX_LOG_CHARS = 4 << 30  # one append never builds more than 4 GiB of text


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
            repeat = parse_int(request.query.get("repeat"), name="repeat")
            if repeat is not None:
                if not 1 <= repeat <= MAX_REPEAT or len(text) * repeat > MAX_LOG_CHARS:
                    raise errors.bad_request(
                        f"repeat must be 1..{MAX_REPEAT} and the text at most "
                        f"{MAX_LOG_CHARS} characters in all")
                text *= repeat
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
    if parts == ["compact"] and method == "POST":
        return _json({"revision": server.store.compact_storage()})
    if parts == ["state"] and method == "GET":
        return _json({"resourceVersion": str(server.store.rv),
                      "kubernetesVersion": server.kubernetes_version,
                      "now": rfc3339(server.clock())})
    if parts == ["audit"]:
        if method == "GET":
            since = parse_int(request.query.get("since"), name="since") or 0
            return _json({"seq": server.audit.seq,
                          "records": [r.to_json() for r in server.audit.since(since)]})
        if method == "DELETE":
            server.audit.clear()
            return web.Response(status=204)
    if parts == ["journal"]:
        journal = server.journal
        if method == "POST":
            journal.enabled = True
            return web.Response(status=204)
        if method == "DELETE":
            journal.enabled = False
            journal.clear()
            return web.Response(status=204)
        if method == "GET":
            body = b'{"dropped":%d,"objects":[' % journal.dropped + b",".join(
                b'{"group":%s,"resource":%s,"object":%s}' % (dumps(g), dumps(r), raw)
                for g, r, raw in journal.entries) + b"]}"
            return web.Response(body=body, content_type="application/json")
    if parts == ["objects"] and method == "GET":
        return _json([{"group": g, "resource": r, "object": obj}
                      for (g, r), bucket in sorted(server.store.buckets.items())
                      for obj in bucket.objects.values()])
    if parts == ["rbac"] and method == "POST":
        try:
            spec = json.loads(await request.read() or b"{}")
        except ValueError as exc:
            raise errors.bad_request(f"rbac spec is not JSON: {exc}") from None
        if not isinstance(spec, dict) or not isinstance(spec.get("enforce"), bool):
            raise errors.bad_request('rbac spec must be {"enforce": true|false}')
        server.rbac.enforce = spec["enforce"]
        return web.Response(status=204)
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
