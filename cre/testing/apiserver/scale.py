"""The ``/scale`` subresource: an ``autoscaling/v1`` Scale view of a workload's replica count.

``kubectl scale`` and autoscalers read and write replicas through ``<resource>/<name>/scale``
rather than the object itself. The real server projects the object into a ``Scale`` (name,
namespace, uid, resourceVersion, creationTimestamp; ``spec.replicas``; ``status.replicas`` and
``status.selector`` as a label-selector string) and turns a write of that Scale into an update of
the object's ``spec.replicas``, with the Scale's resourceVersion as an optimistic-concurrency
precondition. apps/v1 Deployments, ReplicaSets and StatefulSets (and core/v1
ReplicationControllers, whose selector is a plain label map) use their own fields (a missing
``spec.replicas`` reads as the default 1); custom resources use the CRD's
``specReplicasPath``/``statusReplicasPath``/``labelSelectorPath``. Left out: server-side apply
to ``/scale`` (answered 415) and the ``scale`` field manager's own managedFields entry (the
write is recorded as an update of the object).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import errors, patching
from ._shapes import clone
from .convert import from_storage
from .httpio import json_response, read_body, write_options
from .resources import ResourceType
from .selectors import selector_string

if TYPE_CHECKING:
    from .context import ServerContext
    from .httpio import Route

Obj = dict[str, Any]
_SCALE = errors.Qualified(group="autoscaling", resource="scale", kind="Scale")
_PATCHES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
}


def _paths(server: ServerContext, rt: ResourceType) -> tuple[str, str, str]:
    """(spec replicas, status replicas, status selector) paths, dotted, without the dot."""
    if not rt.is_custom:
        return "spec.replicas", "status.replicas", ""
    crd = server.store.get(("apiextensions.k8s.io", "customresourcedefinitions"),
                           ("", rt.crd_name)) or {}
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("name") == rt.version:
            scale = (version.get("subresources") or {}).get("scale") or {}
            return (str(scale.get("specReplicasPath", "")).lstrip("."),
                    str(scale.get("statusReplicasPath", "")).lstrip("."),
                    str(scale.get("labelSelectorPath", "")).lstrip("."))
    return "", "", ""


def _lookup(obj: Obj, path: str) -> Any:
    node: Any = obj
    for part in path.split(".") if path else ():
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _assign(obj: Obj, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node = obj
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[last] = value


def to_scale(server: ServerContext, rt: ResourceType, obj: Obj) -> Obj:
    """The Scale projection of a stored object."""
    spec_path, status_path, selector_path = _paths(server, rt)
    meta = obj.get("metadata") or {}
    replicas = _lookup(obj, spec_path)
    if replicas is None:
        replicas = 0 if rt.is_custom else 1
    status: Obj = {"replicas": _lookup(obj, status_path) or 0}
    raw_selector = (obj.get("spec") or {}).get("selector")
    if rt.is_custom:
        selector = _lookup(obj, selector_path)
    elif rt.kind == "ReplicationController":  # a plain label map, not a LabelSelector
        selector = selector_string({"matchLabels": raw_selector or {}})
    else:
        selector = selector_string(raw_selector)
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                          "creationTimestamp") if k in meta},
        "spec": {"replicas": replicas},
        "status": status,
    }


async def handle(server: ServerContext, request: web.Request, r: Route, verb: str) -> web.Response:
    """GET, PUT or PATCH ``<resource>/<name>/scale``."""
    rt = r.rt
    spec_path = _paths(server, rt)[0]
    if not spec_path:
        raise errors.resource_not_found()
    current = from_storage(rt, server.objects.get(rt, r.namespace, r.name))
    if verb == "get":
        return json_response(to_scale(server, rt, current))
    scale = to_scale(server, rt, current)
    if verb == "update":
        body = await read_body(request)
        if not isinstance(body, dict) or body.get("kind") not in (None, "Scale"):
            raise errors.bad_request("the object provided is unrecognized (must be of type Scale)")
        scale = body
    elif verb == "patch":
        scale = _patched(scale, request.headers.get("Content-Type", ""), await request.read())
    else:
        raise errors.method_not_allowed(rt.qualified, verb)
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.invalid_object(_SCALE, r.name, [errors.StatusCause(
            "FieldValueInvalid",
            f"Invalid value: {replicas}: must be greater than or equal to 0", "spec.replicas")])
    wanted: Obj = clone(current)  # stored objects are shared: never change them in place
    precondition = (scale.get("metadata") or {}).get("resourceVersion")
    if precondition:
        wanted["metadata"]["resourceVersion"] = precondition
    _assign(wanted, spec_path, replicas)
    opts = write_options(request)
    updated, _ = server.objects.update(rt, r.namespace, r.name, wanted, opts)
    return json_response(to_scale(server, rt, updated))


def _patched(scale: Obj, content_type: str, raw: bytes) -> Obj:
    import orjson

    kind = _PATCHES.get(content_type.split(";")[0].strip().lower())
    if kind is None:
        raise errors.unsupported_media_type(list(_PATCHES))
    try:
        patch = orjson.loads(raw)
    except ValueError:
        raise errors.bad_request("invalid JSON patch") from None
    try:
        if kind == "json":
            return patching.apply_json_patch(scale, patch)
        if not isinstance(patch, dict):
            raise errors.bad_request("invalid JSON patch")
        if kind == "merge":
            return patching.apply_merge_patch(scale, patch)
        return patching.apply_strategic_merge_patch(scale, patch, kind="Scale")
    except patching.PatchError as exc:
        raise errors.ApiError(code=exc.code, reason=errors.Reason.INVALID if exc.code == 422
                              else errors.Reason.BAD_REQUEST, message=exc.message) from None
