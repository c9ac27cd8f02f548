"""A structural OpenAPI schema compiled into nodes, once, for fast per-write walks.

Both CRD versions (`openAPIV3Schema`) and the published JSON schemas of built-in kinds are turned
into `SchemaNode` trees: every keyword the validator needs becomes an attribute, patterns are
compiled regular expressions and `x-kubernetes-validations` rules are compiled CEL programs. The
Kubernetes JSON schemas are normalised on the way (`$ref`s resolved with recursion allowed,
`type: [t, "null"]` read as nullable, int-or-string and quantity `oneOf`s as alternative types).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from cre.testing.apiserver._cel import Program, compile_expression

OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields",
})
ROOT_KEEP = ("apiVersion", "kind", "metadata")
OLD_SELF = "oldSelf"
_REASONS = {
    "FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate",
}


class Rule:
    __slots__ = ("field_path", "message", "message_expression", "optional_old", "program",
                 "reason", "rule", "transition")

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.rule = str(raw.get("rule", ""))
        self.program: Program = compile_expression(self.rule)
        self.transition = OLD_SELF in self.program.variables
        self.optional_old = bool(raw.get("optionalOldSelf", False))
        self.message = str(raw.get("message") or "").strip()
        expr = raw.get("messageExpression")
        self.message_expression = compile_expression(str(expr)) if expr else None
        reason = raw.get("reason") or "FieldValueInvalid"
        self.reason = reason if reason in _REASONS else "FieldValueInvalid"
        self.field_path = str(raw.get("fieldPath") or "")


Builder = Callable[[Mapping[str, Any]], "SchemaNode"]


class SchemaNode:
    """One compiled schema node."""

    __slots__ = (
        "additional", "all_of", "alt_types", "any_of", "default", "embedded", "enum",
        "exclusive_maximum",
        "exclusive_minimum", "fast_types", "format", "has_default", "int_or_string", "items",
        "list_map_keys",
        "list_type", "max_items", "max_length", "max_properties", "maximum", "min_items",
        "min_length", "min_properties", "minimum", "multiple_of", "not_", "nullable", "one_of",
        "pattern", "pattern_source", "preserve", "properties", "required", "rules",
        "scalar_types", "type", "unique_items", "value_checks",
    )

    def __init__(self, raw: Mapping[str, Any], build: Builder | None = None) -> None:
        self.fill(raw, build or SchemaNode)

    def fill(self, raw: Mapping[str, Any], build: Builder) -> None:
        """Set every attribute from the raw schema; children are made by `build`."""
        self.type: str | None = raw.get("type")
        self.nullable = bool(raw.get("nullable", False))
        self.int_or_string = bool(raw.get("x-kubernetes-int-or-string", False))
        self.alt_types: tuple[str, ...] = tuple(raw.get("x-cre-alternative-types") or ())
        self.preserve = bool(raw.get("x-kubernetes-preserve-unknown-fields", False))
        self.embedded = bool(raw.get("x-kubernetes-embedded-resource", False))
        self.properties = {k: build(v) for k, v in (raw.get("properties") or {}).items()}
        extra = raw.get("additionalProperties")
        self.additional = build(extra) if isinstance(extra, Mapping) else None
        items = raw.get("items")
        self.items = build(items) if isinstance(items, Mapping) else None
        self.required: tuple[str, ...] = tuple(raw.get("required") or ())
        self.enum: tuple[Any, ...] | None = tuple(raw["enum"]) if "enum" in raw else None
        self.pattern_source: str | None = raw.get("pattern")
        self.pattern = re.compile(self.pattern_source) if self.pattern_source else None
        self.format: str | None = raw.get("format")
        self.minimum = raw.get("minimum")
        self.maximum = raw.get("maximum")
        self.exclusive_minimum = bool(raw.get("exclusiveMinimum", False))
        self.exclusive_maximum = bool(raw.get("exclusiveMaximum", False))
        self.multiple_of = raw.get("multipleOf")
        self.min_length = raw.get("minLength")
        self.max_length = raw.get("maxLength")
        self.min_items = raw.get("minItems")
        self.max_items = raw.get("maxItems")
        self.unique_items = bool(raw.get("uniqueItems", False))
        self.min_properties = raw.get("minProperties")
        self.max_properties = raw.get("maxProperties")
        self.list_type: str = raw.get("x-kubernetes-list-type") or "atomic"
        self.list_map_keys: tuple[str, ...] = tuple(raw.get("x-kubernetes-list-map-keys") or ())
        self.has_default = "default" in raw
        self.default = raw.get("default")
        self.all_of = [build(s) for s in raw.get("allOf") or ()]
        self.any_of = [build(s) for s in raw.get("anyOf") or ()]
        self.one_of = [build(s) for s in raw.get("oneOf") or ()]
        self.not_ = build(raw["not"]) if isinstance(raw.get("not"), Mapping) else None
        self.rules = [Rule(r) for r in raw.get("x-kubernetes-validations") or ()]
        # For the quick validity pass: Python types accepted without a closer look (a float is
        # an integer only when integral: left to `type_ok`), and whether any value constraint
        # applies at all.
        self.fast_types = _fast_types(self)
        self.value_checks = any(x is not None for x in (
            self.enum, self.pattern, self.format, self.minimum, self.maximum, self.multiple_of,
            self.min_length, self.max_length, self.min_items, self.max_items,
            self.min_properties, self.max_properties)) or self.unique_items
        # scalar types a value of which is valid here with no further check at all
        simple = not (self.value_checks or self.any_of or self.one_of or self.all_of
                      or self.not_ is not None)
        self.scalar_types = self.fast_types & _SCALARS if simple else frozenset()

    def child(self, key: str) -> SchemaNode | None:
        node = self.properties.get(key)
        return node if node is not None else self.additional

    def type_name(self) -> str:
        if self.alt_types:
            return ",".join(self.alt_types)
        if self.int_or_string:
            return "integer,string" if self.type is None else self.type
        return self.type or "object"


_PY_TYPES: dict[str, frozenset[type]] = {
    "integer": frozenset({int}), "number": frozenset({int, float}), "string": frozenset({str}),
    "boolean": frozenset({bool}), "array": frozenset({list}), "object": frozenset({dict}),
}
_ANY_TYPE = frozenset({bool, int, float, str, list, dict})
_SCALARS = frozenset({bool, int, float, str})


def _fast_types(node: SchemaNode) -> frozenset[type]:
    if node.int_or_string:
        return frozenset({int, str})
    if node.alt_types:
        out: set[type] = set()
        for name in node.alt_types:
            out |= _PY_TYPES.get(name, frozenset())
        return frozenset(out)
    if node.type is None:
        return _ANY_TYPE
    return _PY_TYPES.get(node.type, frozenset())


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_JSON_INT_MAX = 2**53 - 1


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        # Go decodes an integer beyond int64 as a float64, which is past 2**53: a "number".
        return "integer" if _INT64_MIN <= value <= _INT64_MAX else "number"
    if isinstance(value, float):
        # swag.IsFloat64AJSONInteger: integral and within the exactly representable range.
        return "integer" if value.is_integer() and abs(value) <= _JSON_INT_MAX else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def type_ok(node: SchemaNode, value: Any) -> bool:
    actual = json_type(value)
    if node.int_or_string:
        return actual in ("integer", "string")
    if node.alt_types:
        return actual in node.alt_types or (actual == "integer" and "number" in node.alt_types)
    expected = node.type
    if expected is None:
        return True
    if expected == "number":
        return actual in ("integer", "number")
    return actual == expected


_FORMATS: dict[str, re.Pattern[str]] = {
    "uuid": re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"),
    "hostname": re.compile(
        r"^[a-zA-Z0-9]([-a-zA-Z0-9]{0,62})?(\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,62})?)*\.?$"),
    "ipv4": re.compile(r"^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$"),
    "email": re.compile(r"^[^@\s]+@[^@\s]+$"),
    "date": re.compile(r"^\d{4}-\d{2}-\d{2}$"),
    "byte": re.compile(r"^[A-Za-z0-9+/]*={0,2}$"),
    "k8s-short-name": re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
}


def format_ok(fmt: str, value: Any) -> bool:
    name = fmt.replace("-", "") if fmt == "date-time" else fmt
    if name in ("int32", "int64"):
        if not isinstance(value, int) or isinstance(value, bool):
            return True
        limit = 2**31 if name == "int32" else 2**63
        return -limit <= value < limit
    if not isinstance(value, str):
        return True
    if name == "datetime":
        return _datetime_ok(value)
    pattern = _FORMATS.get(name)
    if pattern is None:
        return True
    if name == "k8s-short-name" and len(value) > 63:
        return False
    return bool(pattern.match(value))


@functools.lru_cache(maxsize=4096)
def _datetime_ok(value: str) -> bool:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in value or " " in value


def list_key(item: Any, keys: tuple[str, ...]) -> Any:
    if not isinstance(item, dict):
        return None
    return tuple((k, repr(item.get(k))) for k in keys)


class _RefBuilder:
    """Builds nodes from a Kubernetes JSON schema (`$ref`s, `type: [t, "null"]`, `oneOf` types)."""

    def __init__(self, definitions: Mapping[str, Any]) -> None:
        self.definitions = definitions
        self.memo: dict[str, SchemaNode] = {}

    def __call__(self, raw: Mapping[str, Any]) -> SchemaNode:
        ref = raw.get("$ref")
        if not isinstance(ref, str):
            return SchemaNode(self._normalise(raw), self)
        name = ref.rsplit("/", 1)[-1]
        node = self.memo.get(name)
        if node is None:
            node = SchemaNode.__new__(SchemaNode)
            self.memo[name] = node  # registered first: definitions may be recursive
            node.fill(self._normalise(self.definitions.get(name) or {}), self)
        return node

    @staticmethod
    def _normalise(raw: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in raw.items()
               if k not in ("x-kubernetes-list-type", "x-kubernetes-validations", "oneOf",
                            "description")}
        kinds = raw.get("type")
        if isinstance(kinds, list):
            concrete = [k for k in kinds if k != "null"]
            out["nullable"] = "null" in kinds
            if len(concrete) == 1:
                out["type"] = concrete[0]
            else:
                out.pop("type", None)
        alternatives = raw.get("oneOf")
        if isinstance(alternatives, list) and alternatives:
            types: list[str] = []
            for alt in alternatives:
                alt_type = alt.get("type") if isinstance(alt, Mapping) else None
                types.extend(t for t in (alt_type if isinstance(alt_type, list) else [alt_type])
                             if isinstance(t, str) and t != "null")
            out["nullable"] = True
            if sorted(types) == ["integer", "string"]:
                out["x-kubernetes-int-or-string"] = True
            elif types:
                out["x-cre-alternative-types"] = types
        return out


def compile_json_schema(schema: Mapping[str, Any], definitions: Mapping[str, Any]) -> SchemaNode:
    """Compile a Kubernetes JSON schema (as published per release) into a schema node."""
    return _RefBuilder(definitions)(schema)
