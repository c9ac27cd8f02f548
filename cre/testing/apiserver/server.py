"""The HTTP face of the emulator: routing, content negotiation and the REST verbs.

One aiohttp catch-all handler parses Kubernetes paths (``/api/v1/namespaces/ns/pods/p/status``,
``/apis/<group>/<version>/...``, the deprecated ``/watch/`` prefix), consults fault injection,
and dispatches to the generic verbs; write semantics live in :mod:`.objects`, watches in
:mod:`.watch`, discovery and OpenAPI in :mod:`.discovery`, tables in :mod:`.table`, logs and
eviction in :mod:`.podapi`, the ``/_emulator/`` control API in :mod:`.control`. Those handlers
see this server only as a :class:`~.context.ServerContext` and share request/response helpers
through :mod:`.httpio`; none of them imports this module back.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import orjson
from aiohttp import web
from ruamel.yaml.error import YAMLError

from cre.api.watch import WatchEventType as EventType

from . import control, discovery, errors, partial, podapi, table, watch
from .admission import Admission
from .audit import Audit, Journal
from .convert import from_storage
from .errors import ApiError
from .faults import Faults
from .gc import GarbageCollector
from .httpio import (
    PlainNotFound,
    Route,
    check_fields,
    error_response,
    json_response,
    load_yaml,
    read_body,
    respond,
    write_options,
)
from .keyorder import builtin_order
from .logs import LogStore
from .objects import Objects
from .query import (
    CONTINUE_AT_LATEST,
    compacted,
    decode_continue,
    delete_options,
    encode_continue,
    list_options,
)
from .rbac import Attributes, Rbac, User, forbidden_message
from .resources import Registry, ResourceType, builtin_types, crd_types
from .store import Event, Obj, Store, dumps
from .writectx import WriteOptions

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
COMPACT_INTERVAL = 5.0  # seconds between watch-history compactions
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


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
        rbac: bool = False,
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
        self.store.listeners.append(self._forget_pod_logs)
        self.faults = Faults(seed)
        self.faults.attach(self.store)
        self.audit = Audit()
        self.journal = Journal()
        self.store.listeners.append(self.journal.listener)
        self.rbac = Rbac(self.store, enforce=rbac)
        self.openapi_generation = 0
        self.openapi_cache: dict[tuple[int, str, str], bytes] = {}
        # What the audit log would count: (user agent's product, verb, resource[/sub]) -> n.
        self.requests: collections.Counter[tuple[str, str, str]] = collections.Counter()
        self._gc_task: asyncio.Task[None] | None = None
        self._compact_task: asyncio.Task[None] | None = None
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
        self._compact_task = asyncio.get_running_loop().create_task(self._compact_loop())

    async def _compact_loop(self) -> None:
        """Trim watch history to its fresh window now and then (as etcd compacts)."""
        while True:
            await asyncio.sleep(COMPACT_INTERVAL)
            if self.store.compact():
                _return_freed_memory()

    def _forget_pod_logs(self, bucket: tuple[str, str], ev: Event) -> None:
        if bucket == ("", "pods") and ev.type is EventType.DELETED:
            self.logs.clear_pod(ev.key[0], ev.key[1])

    async def _stop(self, _app: web.Application) -> None:
        for task in (self._gc_task, self._compact_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path.startswith("/_emulator/"):
            try:
                return await control.handle(self, request)
            except ApiError as exc:
                return error_response(exc)
        user: User | None = None
        seen: list[Attributes | None] = [Attributes(verb=request.method.lower(), path=path)]
        code = 0
        try:
            user = self.rbac.authenticate(request.headers.get("Authorization"))
            if self.faults.latency:
                await asyncio.sleep(self.faults.latency)
            response = await self._serve(request, user, seen)
            code = response.status
            return response
        except ApiError as exc:
            code = exc.code
            return error_response(exc)
        finally:
            if seen[0] is not None:
                self._audit(user, seen[0], code=code)

    async def _serve(self, request: web.Request, user: User,
                     seen: list[Attributes | None]) -> web.StreamResponse:
        """Authorize and serve an API request; ``seen[0]`` becomes its authorizer attributes
        (for the audit record)."""
        path = request.path
        parts = [p for p in path.split("/") if p]
        resource_request = len(parts) >= 3 and (
            parts[:2] == ["api", "v1"] or (parts[0] == "apis" and len(parts) >= 4))
        if not resource_request:
            # Non-resource URLs: allowed for every authenticated user (system:discovery).
            self.rbac.authorize(user, Attributes(verb=request.method.lower(), path=path))
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        # "/version/" is what the generated Python clients' VersionApi asks for.
        if path in ("/version", "/version/", "/api", "/apis") or path.startswith("/openapi"):
            self._nonresource_fault(path)
            return discovery.handle(self, request)
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
        a = Attributes(verb=_verb(request.method, route, request.query), group=group,
                       resource=route.rt.plural, subresource=route.subresource,
                       namespace=route.namespace, name=route.name)
        seen[0] = a
        self.rbac.authorize(user, a)
        if a.verb == "watch":
            # A watch lasts as long as its client: audited when it starts (ResponseStarted).
            self._audit(user, a, code=200)
            seen[0] = None
        return await self._dispatch(request, route, user)

    def _audit(self, user: User | None, a: Attributes, *, code: int) -> None:
        self.audit.add(user=user.name if user else "", verb=a.verb, group=a.group,
                       resource=a.resource, subresource=a.subresource, namespace=a.namespace,
                       name=a.name, path="" if a.resource else a.path, code=code)

    def _check_owner_references(self, user: User, namespace: str, body: Any) -> None:
        """The OwnerReferencesPermissionEnforcement admission plugin (on create): setting
        ``blockOwnerDeletion`` needs ``update`` on the owner's ``finalizers`` subresource."""
        if not self.rbac.enforce or not isinstance(body, dict):
            return
        for ref in (body.get("metadata") or {}).get("ownerReferences") or []:
            if not isinstance(ref, dict) or ref.get("blockOwnerDeletion") is not True:
                continue
            owner = self.registry.by_kind(str(ref.get("apiVersion", "")), str(ref.get("kind")))
            if owner is None:
                continue
            check = Attributes(verb="update", group=owner.group, resource=owner.plural,
                               subresource="finalizers",
                               namespace=namespace if owner.namespaced else "",
                               name=str(ref.get("name", "")),
                               path="admission:OwnerReferencesPermissionEnforcement")
            allowed = self.rbac.allowed(user, check)
            self._audit(user, check, code=200 if allowed else 403)
            if not allowed:
                raise errors.ApiError(
                    code=403, reason=errors.Reason.FORBIDDEN,
                    message="cannot set blockOwnerDeletion if an ownerReference refers to a "
                            "resource you can't set finalizers on: "
                            + forbidden_message(user, check), details={})

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
            raise PlainNotFound()
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

    async def _dispatch(self, request: web.Request, r: Route,
                        user: User) -> web.StreamResponse:
        method = request.method
        q: Any = request.query
        rt = r.rt
        verb = _verb(method, r, q)
        agent = request.headers.get("User-Agent", "").split("/", 1)[0] or "-"
        resource = f"{rt.plural}/{r.subresource}" if r.subresource else rt.plural
        self.requests[(agent, verb, resource)] += 1
        fault = self.faults.check(verb, rt.plural, r.name)
        if fault is not None:
            raise fault
        if r.subresource in ("log", "eviction", "binding"):
            if r.subresource == "log" and method == "GET":
                return await podapi.logs(self, request, r)
            if r.subresource == "eviction" and method == "POST":
                return await podapi.evict(self, request, r, await read_body(request))
            if r.subresource == "binding" and method == "POST":
                return await podapi.bind(self, request, r, await read_body(request))
            raise _method_not_allowed(rt, verb)
        if r.subresource == "token":
            if method != "POST":
                raise _method_not_allowed(rt, verb)
            return self._token_request(r, await read_body(request, optional=True))
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
            body = await read_body(request, rt=rt)
            # A malformed metadata (not an object) is the decoder's 400 below, not a crash here.
            meta = body.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
            refused = self.faults.check_create(rt.qualified, str(name or ""))
            if refused is not None:
                raise refused
            opts = write_options(request)
            self._check_owner_references(user, r.namespace, body)
            obj = self.objects.create(rt, r.namespace, body, opts)
            return respond(request, self, rt, obj, status=201, warnings=opts.warnings)
        if verb == "update":
            body = await read_body(request, rt=None if r.subresource else rt)
            opts = write_options(request)
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

    def _token_request(self, r: Route, body: Any) -> web.StreamResponse:
        """TokenRequest (``kubectl create token``): a bearer token for the service account."""
        self.objects.get(r.rt, r.namespace, r.name)  # 404 for a missing service account
        spec = dict((body or {}).get("spec") or {}) if isinstance(body, dict) else {}
        seconds = int(spec.get("expirationSeconds") or 3600)
        spec["expirationSeconds"] = seconds
        spec.setdefault("audiences", ["https://kubernetes.default.svc.cluster.local"])
        now = self.clock()
        expires = now + timedelta(seconds=seconds)
        return json_response({
            "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": r.name, "namespace": r.namespace,
                         "creationTimestamp": _rfc3339(now)},
            "spec": spec,
            "status": {"token": self.rbac.mint(r.namespace, r.name),
                       "expirationTimestamp": _rfc3339(expires)},
        }, status=201)

    async def _patch(self, request: web.Request, r: Route) -> web.StreamResponse:
        rt = r.rt
        ctype = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        patch_type = PATCH_TYPES.get(ctype)
        if patch_type is None or (patch_type == "strategic" and rt.is_custom):
            accepted = CR_PATCH_TYPES if rt.is_custom else list(PATCH_TYPES)
            raise errors.unsupported_media_type(accepted)
        opts = write_options(request)
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
            patch = load_yaml(raw) if patch_type == "apply" else orjson.loads(raw)
        except (ValueError, YAMLError) as exc:
            # kube-apiserver: "error decoding patch: " and its JSON decoder's message
            raise errors.bad_request(f"error decoding patch: {exc}") from None
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
        check_fields(rt, opts.fields)
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
        if snapshot_rv == CONTINUE_AT_LATEST:
            snapshot_rv = None
        elif snapshot_rv is not None and snapshot_rv < self.store.compacted_rv:
            raise compacted(start, continued=bool(opts.continue_token))
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
        metadata_only = partial.requested(request)
        if metadata_only:
            return json_response(partial.many(rt, items, meta, metadata_only))
        body = {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta,
                "items": _list_items(rt, items)}
        if rt.is_custom:  # an unstructured list: Go writes every map's keys sorted
            return web.Response(body=dumps(body, sort_keys=True) + b"\n",
                                content_type="application/json")
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
             "items": _list_items(rt, items)}
        )


def _list_items(rt: ResourceType, items: list[Obj]) -> list[Obj]:
    """A built-in list's items carry no apiVersion/kind (kube-apiserver encodes the typed
    list, whose items' TypeMeta is empty); custom resources' items keep theirs."""
    if rt.is_custom:
        return items
    return [{k: v for k, v in builtin_order(item).items() if k not in ("apiVersion", "kind")}
            for item in items]


def _return_freed_memory() -> None:
    """Hand freed heap pages back to the OS (glibc's ``malloc_trim``; a no-op elsewhere), so
    the process's RSS follows what compaction released instead of staying at its peak."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        trim = getattr(libc, "malloc_trim", None)
    except OSError:
        return
    if trim is not None:
        trim(0)


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


def _rfc3339(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


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
