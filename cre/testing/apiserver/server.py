"""The HTTP face of the emulator: routing, content negotiation and the REST verbs.

One aiohttp catch-all handler parses Kubernetes paths (``/api/v1/namespaces/ns/pods/p/status``,
``/apis/<group>/<version>/...``, the deprecated ``/watch/`` prefix), consults fault injection,
and dispatches to the generic verbs; write semantics live in :mod:`.objects`, watches in
:mod:`.watch`, discovery and OpenAPI in :mod:`.discovery`, tables in :mod:`.table`, logs and
eviction in :mod:`.podapi`, the ``/_emulator/`` control API in :mod:`.control`.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable
from datetime import datetime
from typing import Any

import attrs
import orjson
import yaml
from aiohttp import web

from . import control, discovery, errors, podapi, table, watch
from .admission import Admission
from .convert import from_storage
from .errors import ApiError
from .faults import Faults
from .gc import GarbageCollector
from .logs import LogStore
from .objects import Objects, WriteOptions
from .query import check_dry_run, decode_continue, delete_options, encode_continue, list_options
from .resources import Registry, ResourceType, builtin_types, crd_types
from .store import Obj, Store, dumps

JSON = "application/json"
PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}
CR_PATCH_TYPES = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
]
BODY_TYPES = {"application/json", "application/yaml", "application/x-yaml", "text/yaml", "",
              "text/plain", "application/octet-stream"}
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# resources with their own field-selector list (others answer the "not a known field" form)
_OWN_FIELD_LISTS = {"pods", "events", "nodes", "namespaces", "secrets", "services", "jobs"}


@attrs.frozen
class Route:
    rt: ResourceType
    namespace: str
    name: str
    subresource: str
    watch_path: bool


class ApiServer:
    """All emulator state plus the aiohttp application that serves it."""

    def __init__(
        self,
        *,
        kubernetes_version: str = "1.33",
        clock: Callable[[], datetime],
        seed: int = 0,
        history: int = 4096,
        bookmark_interval: float = 60.0,
    ) -> None:
        self.kubernetes_version = kubernetes_version
        self.clock = clock
        self.bookmark_interval = bookmark_interval
        self.store = Store(history=history)
        self.registry = Registry()
        for rt in builtin_types():
            self.registry.add(rt)
        self.admission = Admission(kubernetes_version=kubernetes_version)
        self.objects = Objects(
            store=self.store,
            registry=self.registry,
            admission=self.admission,
            clock=clock,
            rng=random.Random(seed),
        )
        self.objects.crd_listeners.append(self._crd_changed)
        self.gc = GarbageCollector(self.objects)
        self.logs = LogStore(clock)
        self.faults = Faults(seed)
        self.faults.attach(self.store)
        self.openapi_generation = 0
        self._gc_task: asyncio.Task[None] | None = None
        ns_rt = self.registry.get("", "v1", "namespaces")
        assert ns_rt is not None
        for ns in DEFAULT_NAMESPACES:
            self.objects.create(
                ns_rt, "", {"metadata": {"name": ns}}, WriteOptions(manager="kube-apiserver")
            )
        svc_rt = self.registry.get("", "v1", "services")
        assert svc_rt is not None
        # kube-apiserver publishes itself as default/kubernetes (its controlplane controller).
        # Its uid comes from a side generator so the seeded names and uids of everything a test
        # creates stay what they were without it.
        seeded, self.objects.rng = self.objects.rng, random.Random(f"{seed}/kubernetes-service")
        self.objects.create(svc_rt, "default", {
            "metadata": {"name": "kubernetes",
                         "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
                     "sessionAffinity": "None", "ipFamilies": ["IPv4"],
                     "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster",
                     "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                                "targetPort": 6443}]},
        }, WriteOptions(manager="kube-apiserver"))
        self.objects.rng = seeded

    # -- CRDs ----------------------------------------------------------------------------------

    def _crd_changed(self, crd: Obj, present: bool) -> None:
        name = str(crd["metadata"].get("name", ""))
        spec = crd.get("spec") or {}
        group = str(spec.get("group", ""))
        plural = str((spec.get("names") or {}).get("plural", ""))
        self.registry.remove_crd(name)
        self.admission.remove_crd(group, plural)
        self.openapi_generation += 1
        if present:
            self.admission.install_crd(crd)
            for rt in crd_types(crd):
                self.registry.add(rt)
        else:
            self.store.drop_bucket((group, plural))

    # -- application -----------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def _start(self, _app: web.Application) -> None:
        self._gc_task = asyncio.get_running_loop().create_task(self.gc.run())

    async def _stop(self, _app: web.Application) -> None:
        if self._gc_task is not None:
            self._gc_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._gc_task

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        try:
            if path.startswith("/_emulator/"):
                return await control.handle(self, request)
            if self.faults.latency:
                await asyncio.sleep(self.faults.latency)
            if path in ("/healthz", "/readyz", "/livez"):
                return web.Response(text="ok")
            # "/version/" is what the generated Python clients' VersionApi asks for.
            if path in ("/version", "/version/", "/api", "/apis") or path.startswith("/openapi"):
                self._nonresource_fault(path)
                return discovery.handle(self, request)
            parts = [p for p in path.split("/") if p]
            if parts[:2] == ["api", "v1"]:
                group, version, rest = "", "v1", parts[2:]
            elif parts[:1] == ["apis"] and len(parts) >= 2:
                if len(parts) == 2:
                    self._nonresource_fault(path)
                    return discovery.handle(self, request)
                group, version, rest = parts[1], parts[2], parts[3:]
            else:
                return web.Response(status=404, text="404 page not found\n")
            if not rest:
                self._nonresource_fault(path)
                if not self.registry.in_group_version(group, version):
                    return web.Response(status=404, text="404 page not found\n")
                return discovery.handle(self, request)
            route = self._route(group, version, rest)
            return await self._dispatch(request, route)
        except ApiError as exc:
            return error_response(exc)

    def _nonresource_fault(self, path: str) -> None:
        """Raise the injected fault for ``/version`` or a discovery document, if any."""
        if path.startswith("/openapi"):
            return
        kind = "version" if path.startswith("/version") else "discovery"
        fault = self.faults.check_nonresource(kind)
        if fault is not None:
            raise fault

    def _route(self, group: str, version: str, rest: list[str]) -> Route:
        if not self.registry.in_group_version(group, version):
            raise _PlainNotFound()
        watch_path = False
        if rest[0] == "watch":
            watch_path, rest = True, rest[1:]
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = self.registry.get(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise errors.resource_not_found()
        rt = self.registry.get(group, version, rest[0])
        if rt is None:
            raise errors.resource_not_found()
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if sub and sub not in rt.subresources:
            raise errors.resource_not_found()
        return Route(rt, namespace, name, sub, watch_path)

    async def _dispatch(self, request: web.Request, r: Route) -> web.StreamResponse:
        method = request.method
        q: Any = request.query
        rt = r.rt
        verb = _verb(method, r, q)
        fault = self.faults.check(verb, rt.plural, r.name)
        if fault is not None:
            raise fault
        if r.subresource in ("log", "eviction"):
            if r.subresource == "log" and method == "GET":
                return await podapi.logs(self, request, r)
            if r.subresource == "eviction" and method == "POST":
                return await podapi.evict(self, request, r, await read_body(request))
            raise _method_not_allowed(rt, verb)
        if r.subresource == "scale":
            from . import scale

            return await scale.handle(self, request, r, verb)
        if verb == "watch":
            if r.name:
                q = _with_name_selector(q, r.name)
            return await watch.serve(self, request, rt, r.namespace, list_options(q))
        if verb == "list":
            return self._list(request, rt, r.namespace)
        if verb == "get":
            obj = from_storage(rt, self.objects.get(rt, r.namespace, r.name))
            return respond(request, self, rt, obj)
        if verb == "create":
            if r.subresource:
                raise _method_not_allowed(rt, verb)
            body = await read_body(request)
            opts = self._write_opts(request)
            obj = self.objects.create(rt, r.namespace, body, opts)
            return respond(request, self, rt, obj, status=201, warnings=opts.warnings)
        if verb == "update":
            body = await read_body(request)
            opts = self._write_opts(request)
            obj, created = self.objects.update(
                rt, r.namespace, r.name, body, opts, subresource=r.subresource or None,
            )
            return respond(request, self, rt, obj, status=201 if created else 200,
                           warnings=opts.warnings)
        if verb == "patch":
            return await self._patch(request, r)
        if verb == "delete":
            if r.subresource:
                raise _method_not_allowed(rt, verb)
            dopts = delete_options(q, await read_body(request, optional=True))
            obj, removed = self.objects.delete(rt, r.namespace, r.name, dopts)
            if removed and not rt.return_deleted_object:
                return json_response(_success_status(rt, obj))
            return respond(request, self, rt, obj)
        if verb == "deletecollection":
            return await self._delete_collection(request, rt, r.namespace)
        raise _method_not_allowed(rt, verb)

    def _write_opts(self, request: web.Request) -> WriteOptions:
        q = request.query
        manager = q.get("fieldManager") or request.headers.get("User-Agent", "").split("/")[0]
        fv = q.get("fieldValidation")
        if fv not in (None, "", "Ignore", "Warn", "Strict"):
            raise errors.invalid_options("CreateOptions", [errors.StatusCause(
                "FieldValueNotSupported",
                f'Unsupported value: "{fv}": supported values: "Ignore", "Warn", "Strict"',
                "fieldValidation")])
        force = q.get("force")
        return WriteOptions(
            manager=manager or "unknown",
            dry_run=check_dry_run(list(q.getall("dryRun", []))),
            force=force in ("1", "t", "T", "true", "True", "TRUE"),
            field_validation=fv or "Warn",
            patch=request.method == "PATCH",
        )

    async def _patch(self, request: web.Request, r: Route) -> web.StreamResponse:
        rt = r.rt
        ctype = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        patch_type = PATCH_TYPES.get(ctype)
        if patch_type is None or (patch_type == "strategic" and rt.is_custom):
            accepted = CR_PATCH_TYPES if rt.is_custom else list(PATCH_TYPES)
            raise errors.unsupported_media_type(accepted)
        opts = self._write_opts(request)
        if patch_type == "apply" and not request.query.get("fieldManager"):
            raise errors.invalid_options("PatchOptions", [errors.StatusCause(
                "FieldValueRequired", "Required value: is required for apply patch",
                "fieldManager")])
        if patch_type != "apply" and "force" in request.query:
            raise errors.invalid_options("PatchOptions", [errors.StatusCause(
                "FieldValueForbidden", "Forbidden: may not be specified for non-apply patch",
                "force")])
        raw = await request.read()
        try:
            patch = yaml.safe_load(raw) if patch_type == "apply" else orjson.loads(raw)
        except (ValueError, yaml.YAMLError) as exc:
            if patch_type == "apply":
                raise errors.bad_request(f"error decoding patch: {exc}") from None
            raise errors.bad_request("invalid JSON patch") from None
        if patch_type == "json" and not isinstance(patch, list):
            raise errors.bad_request(
                "error decoding patch: json: cannot unmarshal object into Go value of type "
                "[]handlers.jsonPatchOp"
            )
        if patch_type in ("merge", "strategic") and not isinstance(patch, dict):
            raise errors.bad_request("invalid JSON patch")
        obj, created = self.objects.patch(
            rt, r.namespace, r.name, patch_type, patch, opts, subresource=r.subresource or None
        )
        return respond(request, self, rt, obj, status=201 if created else 200,
                       warnings=opts.warnings)

    # -- reads ---------------------------------------------------------------------------------

    def list_objects(
        self, rt: ResourceType, namespace: str, q: Any
    ) -> tuple[list[Obj], int, str, int | None]:
        """(items, list RV, continue token, remainingItemCount) for a LIST request."""
        opts = list_options(q)
        self._check_fields(rt, opts.fields)
        current = self.store.rv
        snapshot_rv: int | None = None
        start: tuple[str, str] | None = None
        if opts.continue_token:
            snapshot_rv, start = decode_continue(opts.continue_token)
        elif opts.resource_version not in (None, "", "0"):
            want = int(opts.resource_version or 0)
            exact = opts.rv_match == "Exact" or (not opts.rv_match and opts.limit > 0)
            if want > current:
                raise _too_large(want, current)
            if exact:
                snapshot_rv = want
        bucket = self.store.bucket(rt.bucket)
        objects: dict[tuple[str, str], Obj] = bucket.objects
        keys: list[tuple[str, str]]
        if snapshot_rv is not None and snapshot_rv != current:
            snap = bucket.snapshot(snapshot_rv)
            if snap is None:
                if opts.continue_token:
                    raise errors.expired(
                        "The provided continue parameter is too old to display a consistent list "
                        "result. You can start a new list without the continue parameter."
                    )
                raise errors.expired(f"too old resource version: {snapshot_rv}")
            objects = snap
            keys = sorted(snap)
        else:
            keys = bucket.keys_sorted()
        list_rv = snapshot_rv if snapshot_rv is not None else current
        lo = 0
        if namespace:
            lo = _bisect(keys, (namespace, ""))
        if start is not None:
            lo = max(lo, _bisect(keys, start))
        items: list[Obj] = []
        token = ""
        remaining: int | None = None
        filtered = not (opts.labels.empty and opts.fields.empty)
        for i in range(lo, len(keys)):
            key = keys[i]
            if namespace and key[0] != namespace:
                break
            obj = objects[key]
            if filtered and not (
                opts.labels.matches(obj["metadata"].get("labels"))
                and opts.fields.matches(obj)
            ):
                continue
            if opts.limit and len(items) >= opts.limit:
                token = encode_continue(list_rv, key)
                if not filtered:
                    end = len(keys)
                    if namespace:
                        end = _bisect(keys, (namespace + "\x00", ""))
                    remaining = end - i
                break
            items.append(from_storage(rt, obj))
        return items, list_rv, token, remaining

    def _check_fields(self, rt: ResourceType, fields: Any) -> None:
        for req in fields.requirements:
            if not rt.selectable(req.field):
                if rt.is_custom or rt.plural in _OWN_FIELD_LISTS:
                    raise errors.bad_request(f"field label not supported: {req.field}")
                raise errors.bad_request(
                    f'"{req.field}" is not a known field selector: only "metadata.name", '
                    '"metadata.namespace"'
                )

    def _list(self, request: web.Request, rt: ResourceType, namespace: str) -> web.StreamResponse:
        items, list_rv, token, remaining = self.list_objects(rt, namespace, request.query)
        meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if token or rt.is_custom:
            meta["continue"] = token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        table_version = table.requested(request)
        if table_version:
            return json_response(table.build(self, rt, items, meta, table_version, request))
        body = {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta,
                "items": items}
        if rt.is_custom:
            body = {k: body[k] for k in sorted(body)}
        return json_response(body)

    async def _delete_collection(
        self, request: web.Request, rt: ResourceType, namespace: str
    ) -> web.StreamResponse:
        opts = delete_options(request.query, await read_body(request, optional=True))
        items, list_rv, token, _ = self.list_objects(rt, namespace, request.query)
        for item in items:
            meta = item["metadata"]
            try:
                self.objects.delete(rt, meta.get("namespace", ""), meta["name"], opts)
            except ApiError as exc:
                if exc.code != 404:
                    raise
        meta_out: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if token:
            meta_out["continue"] = token
        return json_response(
            {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta_out,
             "items": items}
        )


class _PlainNotFound(ApiError):
    def __init__(self) -> None:
        super().__init__(code=404, reason=errors.Reason.NOT_FOUND, message="404 page not found")


def _bisect(keys: list[tuple[str, str]], target: tuple[str, str]) -> int:
    import bisect

    return bisect.bisect_left(keys, target)


def _too_large(want: int, current: int) -> ApiError:
    return ApiError(
        code=504,
        reason=errors.Reason.TIMEOUT,
        message=f"Timeout: Too large resource version: {want}, current: {current}",
        details={"causes": [{"reason": "ResourceVersionTooLarge",
                             "message": "Too large resource version"}]},
        retry_after=1,
    )


def _verb(method: str, r: Route, q: Any) -> str:
    if method == "GET":
        watch = r.watch_path or q.get("watch") in ("1", "t", "T", "true", "True", "TRUE")
        if watch:
            return "watch"
        return "get" if r.name else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update" if r.name else "put"
    if method == "PATCH":
        return "patch" if r.name else "patch-collection"
    if method == "DELETE":
        return "delete" if r.name else "deletecollection"
    return method.lower()


def _method_not_allowed(rt: ResourceType, verb: str) -> ApiError:
    return errors.method_not_allowed(rt.qualified if rt.is_custom else None, verb)


def _with_name_selector(q: Any, name: str) -> dict[str, str]:
    out = dict(q)
    sel = f"metadata.name={name}"
    out["fieldSelector"] = f"{out['fieldSelector']},{sel}" if out.get("fieldSelector") else sel
    return out


def _success_status(rt: ResourceType, obj: Obj) -> dict[str, Any]:
    details: dict[str, Any] = {"name": obj["metadata"].get("name", "")}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.plural
    details["uid"] = obj["metadata"].get("uid", "")
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": details}


async def read_body(request: web.Request, *, optional: bool = False) -> Any:
    raw = await request.read()
    if not raw.strip():
        if optional:
            return None
        raise errors.bad_request("the object provided is unrecognized: empty body")
    ctype = request.headers.get("Content-Type", JSON).split(";")[0].strip().lower()
    if ctype not in BODY_TYPES:
        raise errors.unsupported_media_type(["application/json", "application/yaml"])
    try:
        if ctype in ("application/yaml", "application/x-yaml", "text/yaml"):
            return yaml.safe_load(raw)
        return orjson.loads(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise errors.bad_request(
            f"the object provided is unrecognized: {exc} ({raw[:30]!r}...)"
        ) from None


def json_response(body: Any, *, status: int = 200) -> web.Response:
    return web.Response(body=dumps(body), status=status, content_type=JSON)


def error_response(exc: ApiError) -> web.Response:
    if isinstance(exc, _PlainNotFound):
        return web.Response(status=404, text="404 page not found\n")
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after > 0 else None
    return web.Response(body=exc.encode(), status=exc.code, content_type=JSON, headers=headers)


def respond(
    request: web.Request,
    server: ApiServer,
    rt: ResourceType,
    obj: Obj,
    *,
    status: int = 200,
    warnings: list[str] | None = None,
) -> web.Response:
    version = table.requested(request)
    if version:
        meta = {"resourceVersion": str(obj["metadata"].get("resourceVersion", ""))}
        resp = json_response(table.build(server, rt, [obj], meta, version, request),
                             status=status)
    else:
        resp = json_response(obj, status=status)
    for text in dict.fromkeys(warnings or ()):
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        resp.headers.add("Warning", f'299 - "{escaped}"')
    return resp
