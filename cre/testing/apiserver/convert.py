"""Conversion between the stored form of an object and the form of the requested version.

Custom resources use the ``None`` conversion strategy (only ``apiVersion`` changes). Events are
stored once and served both as ``core/v1`` Events and as ``events.k8s.io/v1`` Events, whose field
names differ (``regarding`` for ``involvedObject``, ``note`` for ``message``, ...), as the real
server does with its internal Event type.
"""

from __future__ import annotations

from typing import Any

from .resources import ResourceType

Obj = dict[str, Any]

# events.k8s.io/v1 name -> core/v1 name
_EVENT_FIELDS = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_EVENT_SAME = ("eventTime", "series", "reportingInstance", "action", "reason", "related", "type")


def is_new_event(rt: ResourceType) -> bool:
    return rt.group == "events.k8s.io"


_OMITTED_WHEN_EMPTY_META = ("labels", "annotations", "finalizers", "ownerReferences")
_OMITTED_WHEN_EMPTY: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "ConfigMap"): ("data", "binaryData"),
    ("", "Secret"): ("data", "stringData"),
}


def drop_empty_fields(rt: ResourceType, obj: Obj) -> Obj:
    """Drop the empty maps and lists kube-apiserver never returns: ObjectMeta's (Go
    ``omitempty``, on every kind, custom resources too) and a ConfigMap's or Secret's data."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for field in _OMITTED_WHEN_EMPTY_META:
            if field in meta and not meta[field]:
                del meta[field]
    if not rt.is_custom:
        for field in _OMITTED_WHEN_EMPTY.get((rt.group, rt.kind), ()):
            if field in obj and not obj[field]:
                del obj[field]
    return obj


def to_storage(rt: ResourceType, obj: Obj, storage_api_version: str) -> Obj:
    """The object as stored (core/v1 for events; storage version for custom resources)."""
    if is_new_event(rt):
        out: Obj = {"kind": "Event", "apiVersion": "v1", "metadata": obj.get("metadata") or {}}
        for new, old in _EVENT_FIELDS.items():
            if new in obj:
                out[old] = obj[new]
        for f in _EVENT_SAME:
            if f in obj:
                out[f] = obj[f]
        core_event_defaults(out)
        return out
    if obj.get("apiVersion") != storage_api_version:
        obj["apiVersion"] = storage_api_version
    return obj


def from_storage(rt: ResourceType, obj: Obj) -> Obj:
    """The stored object in ``rt``'s group/version (no copy when nothing changes)."""
    if is_new_event(rt):
        out: Obj = {
            "kind": "Event",
            "apiVersion": rt.api_version,
            "metadata": obj.get("metadata") or {},
        }
        for new, old in _EVENT_FIELDS.items():
            if old in obj and obj[old] not in (None, {}, 0, ""):
                out[new] = obj[old]
        for f in _EVENT_SAME:
            if f in obj:
                out[f] = obj[f]
        return out
    if obj.get("apiVersion") == rt.api_version:
        return obj
    return {**obj, "apiVersion": rt.api_version}


def core_event_defaults(obj: Obj) -> None:
    """Fields a core/v1 Event always carries when serialised."""
    obj.setdefault("reportingComponent", "")
    obj.setdefault("reportingInstance", "")
    obj.setdefault("eventTime", None)
    obj.setdefault("firstTimestamp", None)
    obj.setdefault("lastTimestamp", None)
    obj.setdefault("involvedObject", {})
    obj.setdefault("source", {})
