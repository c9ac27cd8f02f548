"""Metadata-only responses: ``Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io``.

Metadata informers (client-go's ``metadatainformer``, the Python dynamic client's
``PartialObjectMetadataList`` requests) ask the server for objects' metadata alone: a
``PartialObjectMetadata`` for one object, a ``PartialObjectMetadataList`` (each item a
``PartialObjectMetadata``, with its own kind and apiVersion) for a list, in ``meta.k8s.io/v1``
(or ``v1beta1``); the metadata is a typed ObjectMeta, so it is written in its Go field order
even for a custom resource. Asking for the list form of one object, or the single form of a
list, is a 406 that kube-apiserver writes outside its serializer (indented, no final newline)
naming the object's internal Go type.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from . import errors
from .keyorder import metadata_order
from .resources import ResourceType

ONE = "PartialObjectMetadata"
LIST = "PartialObjectMetadataList"


def requested(request: web.Request) -> tuple[str, str] | None:
    """``(kind, meta.k8s.io version)`` when the client asked for metadata only, else None."""
    for part in request.headers.get("Accept", "").split(","):
        params = dict(p.strip().partition("=")[::2] for p in part.split(";")[1:])
        kind = params.get("as")
        if kind in (ONE, LIST) and params.get("g") == "meta.k8s.io" \
                and params.get("v") in ("v1", "v1beta1"):
            return kind, params["v"]
    return None


def _go_type(rt: ResourceType, *, is_list: bool) -> str:
    """The internal type kube-apiserver names in its 406 (``*core.Namespace``)."""
    if rt.is_custom:
        return "*unstructured.UnstructuredList" if is_list else "*unstructured.Unstructured"
    package = "core" if rt.group in ("", "events.k8s.io") else rt.group.split(".")[0]
    return f"*{package}.{rt.kind}{'List' if is_list else ''}"


def _refuse(rt: ResourceType, want: str, *, is_list: bool) -> errors.ApiError:
    what = "a list" if is_list else "not a list"
    return errors.not_acceptable_raw(
        f"you requested {want}, but the requested object is {what} "
        f"({_go_type(rt, is_list=is_list)})")


def one(rt: ResourceType, obj: dict[str, Any], want: tuple[str, str]) -> dict[str, Any]:
    """One object's metadata as ``want`` asks (406 when it asks for the list form)."""
    kind, version = want
    if kind != ONE:
        raise _refuse(rt, kind, is_list=False)
    return {"kind": ONE, "apiVersion": f"meta.k8s.io/{version}",
            "metadata": metadata_order(obj.get("metadata", {}))}


def many(rt: ResourceType, items: list[dict[str, Any]], meta: dict[str, Any],
         want: tuple[str, str]) -> dict[str, Any]:
    """A list's metadata as ``want`` asks (406 when it asks for the single form)."""
    kind, version = want
    if kind != LIST:
        raise _refuse(rt, kind, is_list=True)
    api_version = f"meta.k8s.io/{version}"
    return {"kind": LIST, "apiVersion": api_version, "metadata": meta,
            "items": [{"kind": ONE, "apiVersion": api_version,
                       "metadata": metadata_order(item.get("metadata", {}))} for item in items]}
