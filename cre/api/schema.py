"""OpenAPI v3 structural schemas derived from the attrs models.

The schema of a field follows from its Python type (``str``, ``int``, enums, tuples, maps,
nested models, opaque ``Mapping[str, Any]``) plus the ``Constraints`` declared on it, so the
CRD a server enforces is the same contract ``cre.api.validate`` checks. Structural rules a
real API server insists on are kept: every node has a ``type``; ``properties`` and
``additionalProperties`` never meet; opaque JSON is ``type: object`` with
``x-kubernetes-preserve-unknown-fields``; immutability becomes CEL transition rules.
"""

from __future__ import annotations

import enum
import types
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Union, get_args, get_origin

import attrs

from cre.api.fields import CelRule, Constraints, constraints, json_name


def _class_rules(cls: type) -> tuple[CelRule, ...]:
    rules: tuple[CelRule, ...] = getattr(cls, "CEL_RULES", ())
    return rules


def unwrap_optional(tp: Any) -> Any:
    """``X | None`` -> ``X``; other types unchanged."""
    if get_origin(tp) in (Union, types.UnionType):
        members = [a for a in get_args(tp) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return tp


def is_optional(tp: Any) -> bool:
    """Whether ``tp`` admits ``None``."""
    return get_origin(tp) in (Union, types.UnionType) and type(None) in get_args(tp)


def _doc(cls: type) -> str | None:
    doc = (cls.__doc__ or "").strip()
    return " ".join(doc.split("\n\n")[0].split()).replace("``", "`") if doc else None


def _default(field: attrs.Attribute[Any]) -> Any:
    value = field.default
    if value is attrs.NOTHING or value is None or isinstance(value, attrs.Factory):  # type: ignore[arg-type]
        return None
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bool | int | float | str):
        return value
    return None


def _json_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def _range(low: Any, high: Any, unit: str = "") -> str | None:
    suffix = f" {unit}" if unit else ""
    if low is not None and high is not None:
        return f"{low}..{high}{suffix}."
    if low is not None:
        return f"At least {low}{suffix}."
    if high is not None:
        return f"At most {high}{suffix}."
    return None


def facts(field: attrs.Attribute[Any]) -> str:
    """The default and bounds of ``field`` in words ("Default 300. 1..86400."), from the same
    default and ``Constraints`` the schema enforces; empty when it has none."""
    cons = constraints(field)
    default = _default(field)
    parts = [
        f"Default {_json_literal(default)}." if default is not None else None,
        _range(cons.minimum, cons.maximum),
        f"At most {cons.max_duration}." if cons.max_duration else None,
        _range(cons.min_length, cons.max_length, "characters"),
        _range(cons.min_items, cons.max_items, "items"),
        _range(cons.min_properties, cons.max_properties, "entries"),
    ]
    return " ".join(p for p in parts if p)


def field_description(field: attrs.Attribute[Any], fallback: str | None = None) -> str | None:
    """What ``kubectl explain`` shows for ``field``: its ``doc`` (or ``fallback``, the
    description of its type) followed by its default and bounds."""
    text = " ".join(p for p in (constraints(field).doc or fallback, facts(field)) if p)
    return text or None


def schema_for_type(tp: Any, cons: Constraints | None = None) -> dict[str, Any]:
    """The OpenAPI schema of a Python type with ``cons`` applied at this node."""
    cons = cons or Constraints()
    tp = unwrap_optional(tp)
    origin, args = get_origin(tp), get_args(tp)
    out: dict[str, Any]
    if attrs.has(tp):
        out = model_schema(tp)
        _put(out, minProperties=cons.min_properties, maxProperties=cons.max_properties)
    elif origin in (dict, Mapping):
        if args[1] is Any or cons.preserve_unknown:
            out = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        else:
            out = {"type": "object",
                   "additionalProperties": schema_for_type(args[1], cons.values)}
        _put(out, minProperties=cons.min_properties, maxProperties=cons.max_properties)
    elif origin is tuple:
        out = {"type": "array", "items": schema_for_type(args[0])}
        _put(out, minItems=cons.min_items, maxItems=cons.max_items)
        if cons.list_map_keys:
            out["x-kubernetes-list-type"] = "map"
            out["x-kubernetes-list-map-keys"] = list(cons.list_map_keys)
    elif isinstance(tp, type) and issubclass(tp, enum.Enum):
        out = {"type": "string", "enum": [m.value for m in tp]}
    elif tp is bool:
        out = {"type": "boolean"}
    elif tp is int:
        out = {"type": "integer"}
        _put(out, format=cons.int_format, minimum=cons.minimum, maximum=cons.maximum)
    elif tp is float:
        out = {"type": "number"}
        _put(out, minimum=cons.minimum, maximum=cons.maximum)
    elif tp is str:
        out = {"type": "string"}
        _put(out, minLength=cons.min_length, maxLength=cons.max_length, pattern=cons.pattern)
        if cons.max_duration is not None:
            out["x-kubernetes-validations"] = [{
                "rule": f"duration(self) <= duration('{cons.max_duration}')",
                "message": f"must be at most {cons.max_duration}"}]
    elif tp is datetime:
        out = {"type": "string", "format": "date-time"}
    else:
        raise TypeError(f"no OpenAPI schema for {tp!r}")
    if cons.doc:
        out["description"] = cons.doc
    return out


def _put(out: dict[str, Any], **values: Any) -> None:
    out.update({k: v for k, v in values.items() if v is not None})


def model_schema(cls: type) -> dict[str, Any]:
    """The object schema of an attrs model: properties, required, defaults and CEL rules."""
    attrs.resolve_types(cls)
    props: dict[str, Any] = {}
    required: list[str] = []
    rules: list[dict[str, str]] = []
    for field in attrs.fields(cls):
        key, cons = json_name(field), constraints(field)
        node = schema_for_type(field.type, cons)
        description = field_description(field, node.get("description"))
        if description:
            node["description"] = description
        default = _default(field)
        if default is not None:
            node["default"] = default
        if cons.immutable:
            node.setdefault("x-kubernetes-validations", []).append(
                {"rule": "self == oldSelf", "message": f"{key} cannot change once set"}
            )
        if cons.presence_immutable:
            rules.append(
                {
                    "rule": f"has(self.{key}) == has(oldSelf.{key})",
                    "message": f"{key} can only be set when the object is created",
                }
            )
        props[key] = node
        if field.default is attrs.NOTHING and not is_optional(field.type):
            required.append(key)
    out: dict[str, Any] = {"type": "object"}
    doc = _doc(cls)
    if doc:
        out["description"] = doc
    out["properties"] = props
    if required:
        out["required"] = required
    rules.extend({"rule": r.rule, "message": r.message} for r in _class_rules(cls))
    if rules:
        out["x-kubernetes-validations"] = rules
    return out


def object_schema(cls: type) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of a top-level kind (metadata left to the server)."""
    schema = model_schema(cls)
    props = schema["properties"]
    props["apiVersion"] = {"type": "string", "description": "APIVersion of this object"}
    props["kind"] = {"type": "string", "description": "Kind of this object"}
    props["metadata"] = {"type": "object"}
    schema.pop("default", None)
    schema["required"] = [k for k in schema.get("required", []) if k in ("spec",)]
    if not schema["required"]:
        del schema["required"]
    return schema
