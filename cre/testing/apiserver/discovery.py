"""Discovery (legacy and aggregated v2) and OpenAPI v2/v3 documents.

kubectl resolves every resource through discovery, and ``kubectl apply`` / ``explain`` read
``/openapi/v3``: apply looks for a PATCH operation carrying the object's
``x-kubernetes-group-version-kind`` and a ``fieldValidation`` parameter, explain renders
``components.schemas``. Built-in schemas come from the per-release JSON schemas shipped with
``kubernetes-validate`` (the emulated version picks the set); CRD schemas from the CRD.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .resources import ResourceType
from .store import dumps

if TYPE_CHECKING:
    from .context import ServerContext

V2_DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _json(body: Any, *, content_type: str = "application/json") -> web.Response:
    resp = web.Response(body=dumps(body), status=200)
    resp.headers["Content-Type"] = content_type
    return resp


def handle(server: ServerContext, request: web.Request) -> web.StreamResponse:
    path = request.path.rstrip("/") or "/"
    if path == "/version":
        return _json(version_info(server.kubernetes_version))
    if path.startswith("/openapi/v3"):
        return _openapi_v3(server, path[len("/openapi/v3"):].strip("/"))
    if path == "/openapi/v2":
        return _json(_openapi_v2(server))
    accept = request.headers.get("Accept", "")
    v2 = any(
        "as=APIGroupDiscoveryList" in part and "v=v2" in part.replace(" ", "").split(";")
        for part in accept.split(",")
    )
    if path == "/api":
        if v2:
            return _json(_aggregated(server, core=True), content_type=V2_DISCOVERY)
        return _json({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}]})
    if path == "/apis":
        if v2:
            return _json(_aggregated(server, core=False), content_type=V2_DISCOVERY)
        return _json({"kind": "APIGroupList", "apiVersion": "v1",
                      "groups": [_group(server, g) for g in server.registry.groups() if g]})
    parts = [p for p in path.split("/") if p]
    if parts == ["api", "v1"]:
        return _json(_resource_list(server, "", "v1"))
    if len(parts) == 2 and parts[0] == "apis":
        if parts[1] not in server.registry.groups():
            return web.Response(status=404, text="404 page not found\n")
        return _json({"kind": "APIGroup", "apiVersion": "v1", **_group(server, parts[1])})
    if len(parts) == 3 and parts[0] == "apis":
        return _json(_resource_list(server, parts[1], parts[2]))
    return web.Response(status=404, text="404 page not found\n")


def version_info(kubernetes_version: str) -> dict[str, str]:
    major, _, minor = kubernetes_version.partition(".")
    return {
        "major": major, "minor": minor,
        "emulationMajor": major, "emulationMinor": minor,
        "minCompatibilityMajor": major, "minCompatibilityMinor": str(max(int(minor) - 1, 0)),
        "gitVersion": f"v{kubernetes_version}.0", "gitCommit": "cre-emulator",
        "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0", "compiler": "gc", "platform": "linux/amd64",
    }


def _group(server: ServerContext, group: str) -> dict[str, Any]:
    versions = server.registry.versions(group)
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def _resource_list(server: ServerContext, group: str, version: str) -> dict[str, Any]:
    resources: list[dict[str, Any]] = []
    for rt in server.registry.in_group_version(group, version):
        entry: dict[str, Any] = {"name": rt.plural, "singularName": rt.singular,
                                 "namespaced": rt.namespaced, "kind": rt.kind,
                                 "verbs": _verbs(server, rt)}
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        entry["storageVersionHash"] = rt.storage_version_hash
        resources.append(entry)
        for sub in sorted(rt.subresources):
            resources.append(_sub_entry(rt, sub))
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": resources}


def _verbs(server: ServerContext, rt: ResourceType) -> list[str]:
    """CRD verbs shrink while the CRD is terminating (no create/update/patch)."""
    if rt.is_custom:
        crd = server.store.get(("apiextensions.k8s.io", "customresourcedefinitions"),
                               ("", rt.crd_name))
        if crd is not None and crd["metadata"].get("deletionTimestamp"):
            return ["delete", "deletecollection", "get", "list", "watch"]
    return rt.verbs


def _sub_entry(rt: ResourceType, sub: str) -> dict[str, Any]:
    if sub == "log":
        return {"name": f"{rt.plural}/log", "singularName": "", "namespaced": True,
                "kind": "Pod", "verbs": ["get"]}
    if sub == "eviction":
        return {"name": f"{rt.plural}/eviction", "singularName": "", "namespaced": True,
                "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]}
    if sub == "scale":
        return {"name": f"{rt.plural}/scale", "singularName": "", "namespaced": rt.namespaced,
                "group": "autoscaling", "version": "v1", "kind": "Scale",
                "verbs": ["get", "patch", "update"]}
    return {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced,
            "kind": rt.kind, "verbs": ["get", "patch", "update"]}


def _aggregated(server: ServerContext, *, core: bool) -> dict[str, Any]:
    items = []
    groups = [""] if core else [g for g in server.registry.groups() if g]
    for group in groups:
        versions = []
        for version in server.registry.versions(group):
            resources = []
            for rt in server.registry.in_group_version(group, version):
                gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
                entry: dict[str, Any] = {
                    "resource": rt.plural, "responseKind": gvk,
                    "scope": "Namespaced" if rt.namespaced else "Cluster",
                    "singularResource": rt.singular, "verbs": _verbs(server, rt),
                }
                if rt.short_names:
                    entry["shortNames"] = list(rt.short_names)
                if rt.categories:
                    entry["categories"] = list(rt.categories)
                subs = []
                for sub in sorted(rt.subresources):
                    se = _sub_entry(rt, sub)
                    kind = {"group": se.get("group", rt.group),
                            "version": se.get("version", rt.version), "kind": se["kind"]}
                    subs.append({"subresource": sub, "responseKind": kind, "verbs": se["verbs"]})
                if subs:
                    entry["subresources"] = subs
                resources.append(entry)
            versions.append({"version": version, "resources": resources, "freshness": "Current"})
        meta: dict[str, Any] = {"name": group} if group else {}
        items.append({"metadata": meta, "versions": versions})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {}, "items": items}


# -- OpenAPI ---------------------------------------------------------------------------------


@functools.cache
def _builtin_defs(kubernetes_version: str) -> dict[str, Any]:
    import kubernetes_validate

    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    folder = base / f"v{kubernetes_version}.0-local"
    if not folder.exists():
        folder = sorted(base.glob("v*-local"))[-1]
    raw = json.loads((folder / "_definitions.json").read_text())
    defs = raw.get("$defs") or raw.get("definitions") or {}
    return {k: _to_oas3(v) for k, v in defs.items()}


def _to_oas3(node: Any) -> Any:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                out[k] = "#/components/schemas/" + v.split("/")[-1]
            elif k == "type" and isinstance(v, list):
                types = [t for t in v if t != "null"]
                if len(types) == 1:
                    out[k] = types[0]
            else:
                out[k] = _to_oas3(v)
        return out
    if isinstance(node, list):
        return [_to_oas3(x) for x in node]
    return node


def _schema_name(rt: ResourceType) -> str:
    if rt.is_custom:
        rev = ".".join(reversed(rt.group.split(".")))
        return f"{rev}.{rt.version}.{rt.kind}"
    group = {"": "core", "events.k8s.io": "events", "coordination.k8s.io": "coordination"}.get(
        rt.group, rt.group.split(".")[0])
    if rt.group == "apiextensions.k8s.io":
        return f"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{rt.version}.{rt.kind}"
    return f"io.k8s.api.{group}.{rt.version}.{rt.kind}"


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref.split("/")[-1])
        for v in node.values():
            _refs(v, found)
    elif isinstance(node, list):
        for v in node:
            _refs(v, found)


def _gv_document(server: ServerContext, group: str, version: str) -> dict[str, Any]:
    defs = _builtin_defs(server.kubernetes_version)
    schemas: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    params = [{"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
              for n in ("dryRun", "fieldManager", "fieldValidation")]
    for rt in server.registry.in_group_version(group, version):
        name = _schema_name(rt)
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        if rt.is_custom:
            crd = server.store.get(("apiextensions.k8s.io", "customresourcedefinitions"),
                                   ("", rt.crd_name)) or {}
            schema: dict[str, Any] = {"type": "object"}
            for v in (crd.get("spec") or {}).get("versions") or []:
                if v.get("name") == rt.version:
                    schema = dict((v.get("schema") or {}).get("openAPIV3Schema") or schema)
            props = dict(schema.get("properties") or {})
            props["metadata"] = {"$ref": "#/components/schemas/"
                                 "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
            schema["properties"] = props
        else:
            schema = dict(defs.get(name) or {"type": "object"})
        schema["x-kubernetes-group-version-kind"] = [gvk]
        schemas[name] = schema
        prefix = f"/apis/{group}/{version}" if group else "/api/v1"
        scope = "/namespaces/{namespace}" if rt.namespaced else ""
        ref = {"$ref": f"#/components/schemas/{name}"}
        body = {"content": {"application/json": {"schema": ref}}}
        patch_types = ["application/json-patch+json", "application/merge-patch+json",
                       "application/apply-patch+yaml"]
        if not rt.is_custom:
            patch_types.insert(2, "application/strategic-merge-patch+json")
        item_ops = {
            "get": {"x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk,
                    "responses": {"200": body}},
            "put": {"x-kubernetes-action": "put", "x-kubernetes-group-version-kind": gvk,
                    "parameters": params, "requestBody": body, "responses": {"200": body}},
            "patch": {"x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk,
                      "parameters": [*params, {"name": "force", "in": "query",
                                               "schema": {"type": "boolean",
                                                          "uniqueItems": True}}],
                      "requestBody": {"content": {t: {"schema": {"type": "object"}}
                                                  for t in patch_types}},
                      "responses": {"200": body}},
            "delete": {"x-kubernetes-action": "delete", "x-kubernetes-group-version-kind": gvk,
                       "responses": {"200": body}},
        }
        paths[f"{prefix}{scope}/{rt.plural}/{{name}}"] = item_ops
        paths[f"{prefix}{scope}/{rt.plural}"] = {
            "get": {"x-kubernetes-action": "list", "x-kubernetes-group-version-kind": gvk,
                    "responses": {"200": {"content": {"application/json": {}}}}},
            "post": {"x-kubernetes-action": "post", "x-kubernetes-group-version-kind": gvk,
                     "parameters": params, "requestBody": body, "responses": {"201": body}},
        }
    # the schemas the kinds refer to, transitively
    todo: set[str] = set()
    _refs(schemas, todo)
    while todo:
        dep = todo.pop()
        if dep in schemas or dep not in defs:
            continue
        schemas[dep] = defs[dep]
        _refs(defs[dep], todo)
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v0.0.0"},
            "paths": paths, "components": {"schemas": schemas}}


def _openapi_v3(server: ServerContext, sub: str) -> web.StreamResponse:
    gvs: list[tuple[str, str]] = []
    for group in server.registry.groups():
        for version in server.registry.versions(group):
            gvs.append((group, version))
    if not sub:
        paths = {}
        for group, version in gvs:
            key = f"apis/{group}/{version}" if group else "api/v1"
            digest = _doc_hash(server, group, version)
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
        return _json({"paths": paths})
    parts = sub.split("/")
    if parts == ["api", "v1"]:
        group, version = "", "v1"
    elif len(parts) == 3 and parts[0] == "apis":
        group, version = parts[1], parts[2]
    else:
        return web.Response(status=404, text="404 page not found\n")
    if (group, version) not in gvs:
        return web.Response(status=404, text="404 page not found\n")
    return web.Response(body=_doc_bytes(server, group, version), status=200,
                        content_type="application/json")


def _doc_bytes(server: ServerContext, group: str, version: str) -> bytes:
    cache = server.openapi_cache
    key = (server.openapi_generation, group, version)
    data = cache.get(key)
    if data is None:
        data = dumps(_gv_document(server, group, version))
        cache[key] = data
    return data


def _doc_hash(server: ServerContext, group: str, version: str) -> str:
    return hashlib.sha512(_doc_bytes(server, group, version)).hexdigest()[:32].upper()


def _openapi_v2(server: ServerContext) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for group in server.registry.groups():
        for version in server.registry.versions(group):
            doc = _gv_document(server, group, version)
            paths.update(doc["paths"])
            for k, v in doc["components"]["schemas"].items():
                defs[k] = json.loads(json.dumps(v).replace("#/components/schemas/",
                                                           "#/definitions/"))
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v0.0.0"},
            "paths": {}, "definitions": defs}
