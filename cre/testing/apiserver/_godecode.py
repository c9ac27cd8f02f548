"""The Go JSON decoder's type errors for built-in kinds: 400, not 422.

kube-apiserver decodes a built-in object into its Go struct before any validation, so a value
of the wrong JSON type (a string for ``spec.replicas``, a string for a label selector) fails
there: 400 BadRequest ``<Kind> in version "<v>" cannot be handled as a <Kind>: json: cannot
unmarshal <json type> into Go struct field <Struct>.<path> of type <Go type>``, where
``<Struct>`` is the Go type holding the field and ``<path>`` the dotted JSON keys from the root
(list indices and map keys left out). Custom resources have no Go struct: their schema reports
a 422 cause. A patch whose result does not decode is worded differently (a 422 quoting the
patched object) and is left to validation.

:func:`decode_error` walks the object beside the published OpenAPI schema of the release and
returns that message for the first mismatch in document order, or None. Values whose Go types
decode themselves (IntOrString, Quantity, Time, RawExtension) are not checked: their errors
are worded by their own decoders.
"""

from __future__ import annotations

from typing import Any

_JSON_TYPES = {str: "string", bool: "bool", int: "number", float: "number", dict: "object",
               list: "array"}
_REF = "#/$defs/"  # refs read "<file>#/$defs/<name>" (the root file) or "#/$defs/<name>"


def _json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), "value")


_NODES: dict[int, tuple[dict[str, Any], dict[str, Any], str | None, frozenset[str]]] = {}
"""id(schema) -> (schema kept alive, resolved schema, definition name, JSON types): the
schemas are the release's cached, never-mutated documents, so a write walks them once."""


def _node(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[dict[str, Any], str | None,
                                                                 frozenset[str]]:
    hit = _NODES.get(id(schema))
    if hit is None or hit[0] is not schema:
        resolved, name = _resolve(schema, defs)
        hit = _NODES[id(schema)] = (schema, resolved, name, frozenset(_types(resolved) - {"null"}))
    return hit[1], hit[2], hit[3]


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The schema behind a ``$ref`` (or an ``allOf`` of one) and its definition name."""
    ref = schema.get("$ref")
    if not ref and isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
        ref = schema["allOf"][0].get("$ref")
    if isinstance(ref, str) and _REF in ref:
        name = ref.partition(_REF)[2]
        return defs.get(name, {}), name
    return schema, None


def _types(schema: dict[str, Any]) -> set[str]:
    raw = schema.get("type")
    return {raw} if isinstance(raw, str) else set(raw or ())


def _go_type(schema: dict[str, Any], defs: dict[str, Any]) -> str | None:
    """How Go prints the field's type (``int32``, ``v1.LabelSelector``, ``[]string``)."""
    resolved, name = _resolve(schema, defs)
    if name is not None:
        package, _, short = name.rpartition(".")
        return f"{package.rpartition('.')[2]}.{short}"
    types = _types(resolved) - {"null"}
    if types == {"string"}:
        return "string"
    if types == {"boolean"}:
        return "bool"
    if types == {"integer"}:
        return str(resolved.get("format") or "int64")
    if types == {"number"}:
        return "float64"
    if types == {"array"}:
        inner = _go_type(resolved.get("items") or {}, defs)
        return None if inner is None else f"[]{inner}"
    if types == {"object"} and isinstance(resolved.get("additionalProperties"), dict):
        inner = _go_type(resolved["additionalProperties"], defs)
        return None if inner is None else f"map[string]{inner}"
    return None


_ACCEPTS = {"string": {"string"}, "bool": {"boolean"}, "number": {"integer", "number"},
            "object": {"object"}, "array": {"array"}}
_NONE: frozenset[str] = frozenset()


def _resolve_cached(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[dict[str, Any],
                                                                          str | None]:
    resolved, name, _ = _node(schema, defs)
    return resolved, name


_SELF_DECODING = ("IntOrString", "Quantity", "Time", "MicroTime", "RawExtension", "Duration",
                  "JSON", "FieldsV1")


def _walk(value: Any, schema: dict[str, Any], defs: dict[str, Any], *, struct: str,
          path: tuple[str, ...], old: Any = None) -> str | None:
    if value is None:
        return None
    resolved, name = _resolve_cached(schema, defs)
    if name is not None and name.rpartition(".")[2] in _SELF_DECODING:
        return None
    found = _json_type(value)
    types = _node(schema, defs)[2]
    if types and not (_ACCEPTS.get(found, _NONE) & types):
        go = _go_type(schema, defs)
        if go is None:
            return None
        return (f"json: cannot unmarshal {found} into Go struct field {struct}."
                f"{'.'.join(path)} of type {go}")
    if isinstance(value, dict) and isinstance(resolved.get("properties"), dict):
        holder = name.rpartition(".")[2] if name else struct
        before = old if isinstance(old, dict) else {}
        for key, item in value.items():
            sub = resolved["properties"].get(key)
            if isinstance(sub, dict) and item != before.get(key, _UNSET):
                error = _walk(item, sub, defs, struct=holder, path=(*path, key),
                              old=before.get(key))
                if error:
                    return error
    elif isinstance(value, dict) and isinstance(resolved.get("additionalProperties"), dict):
        for item in value.values():  # a map value's error names the map, not the key
            error = _walk(item, resolved["additionalProperties"], defs, struct=struct,
                          path=path)
            if error:
                return error
    elif isinstance(value, list) and isinstance(resolved.get("items"), dict):
        for item in value:
            error = _walk(item, resolved["items"], defs, struct=struct, path=path)
            if error:
                return error
    return None


_UNSET = object()


def decode_error(obj: dict[str, Any], schema: dict[str, Any], defs: dict[str, Any], *,
                 old: dict[str, Any] | None = None) -> str | None:
    """The Go decoder's error for ``obj`` (a built-in kind's body) against its schema; the
    fields equal to the stored ``old`` object's (which decoded when it was written) are not
    walked again."""
    return _walk(obj, schema, defs, struct=str(obj.get("kind", "")), path=(), old=old)
