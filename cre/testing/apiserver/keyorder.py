"""Objects in the key order kube-apiserver writes them.

Go's ``encoding/json`` writes a struct's fields in their declared order and a map's keys
sorted. A custom resource is an unstructured map all the way down, so the real server writes
every one of its keys sorted (:func:`encode_object` sorts them as it encodes). A built-in object
is a struct: TypeMeta (``kind``, then ``apiVersion``), then ObjectMeta in its declared order
with the ``labels`` and ``annotations`` maps sorted (:func:`builtin_order`). The emulator stores
objects in the order clients sent them; below ``metadata`` a built-in's fields (spec, status,
data) keep that order, as the declared order of every built-in struct is not modelled here (the
differential's allowlist names this for the successful responses it compares byte for byte).
"""

from __future__ import annotations

from typing import Any

OBJECT_META = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
               "generation", "creationTimestamp", "deletionTimestamp",
               "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences",
               "finalizers", "managedFields")
"""ObjectMeta's JSON fields in the order ``k8s.io/apimachinery`` declares them."""
_SORTED_MAPS = ("labels", "annotations")


def builtin_order(obj: dict[str, Any]) -> dict[str, Any]:
    """A built-in object with TypeMeta first and its metadata in ObjectMeta's order."""
    out: dict[str, Any] = {}
    for key in ("kind", "apiVersion"):
        if key in obj:
            out[key] = obj[key]
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = metadata_order(meta)
    out.update((k, v) for k, v in obj.items() if k not in out)
    return out


def metadata_order(meta: dict[str, Any]) -> dict[str, Any]:
    """ObjectMeta in its declared order, labels and annotations sorted (any other key after)."""
    ordered = {k: meta[k] for k in OBJECT_META if k in meta}
    for k in _SORTED_MAPS:
        value = ordered.get(k)
        if isinstance(value, dict):
            ordered[k] = {m: value[m] for m in sorted(value)}
    ordered.update((k, v) for k, v in meta.items() if k not in ordered)
    return ordered
