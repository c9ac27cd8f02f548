"""A CRD version's structural schema, compiled once: defaulting, pruning and validation.

The API server runs three passes over every custom-resource write (and defaulting again when it
reads from storage): it prunes fields the schema does not declare, applies `default:` values,
then validates types, OpenAPI value constraints and `x-kubernetes-validations` CEL rules. This
module compiles the `openAPIV3Schema` into a tree of `_Node`s once per CRD version (regexes and
CEL programs included), so each write only walks the object.

Messages follow kube-openapi (`<path> in body must be of type integer: "string"`) and the CEL
validator of apiextensions-apiserver (schema type name shown up to 1.34, value from 1.35).
Validation ratcheting (GA in 1.33) is followed: on update, a subtree equal to its correlated old
value is not validated again. Left out: `anyOf`/`oneOf` messages are kube-openapi's generic
ones, and the cost budget of CEL.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from cre.testing.apiserver import _causes as C
from cre.testing.apiserver._causes import Cause
from cre.testing.apiserver._cel import (
    CelCompileError,
    Program,
    compile_expression,
    error_text,
    optional,
)
from cre.testing.apiserver._shapes import clone

OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields",
})
_ROOT_KEEP = ("apiVersion", "kind", "metadata")
_OLD_SELF = "oldSelf"
_REASONS = {
    "FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate",
}


class _Rule:
    __slots__ = ("field_path", "message", "message_expression", "optional_old", "program",
                 "reason", "rule", "transition")

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.rule = str(raw.get("rule", ""))
        self.program: Program = compile_expression(self.rule)
        self.transition = _OLD_SELF in self.program.variables
        self.optional_old = bool(raw.get("optionalOldSelf", False))
        self.message = str(raw.get("message") or "").strip()
        expr = raw.get("messageExpression")
        self.message_expression = compile_expression(str(expr)) if expr else None
        reason = raw.get("reason") or "FieldValueInvalid"
        self.reason = reason if reason in _REASONS else "FieldValueInvalid"
        self.field_path = str(raw.get("fieldPath") or "")


Builder = Callable[[Mapping[str, Any]], "_Node"]


class _Node:
    """One compiled schema node."""

    __slots__ = (
        "additional", "all_of", "alt_types", "any_of", "default", "embedded", "enum",
        "exclusive_maximum",
        "exclusive_minimum", "format", "has_default", "int_or_string", "items", "list_map_keys",
        "list_type", "max_items", "max_length", "max_properties", "maximum", "min_items",
        "min_length", "min_properties", "minimum", "multiple_of", "not_", "nullable", "one_of",
        "pattern", "pattern_source", "preserve", "properties", "required", "rules", "type",
        "unique_items",
    )

    def __init__(self, raw: Mapping[str, Any], build: Builder | None = None) -> None:
        self.fill(raw, build or _Node)

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
        self.rules = [_Rule(r) for r in raw.get("x-kubernetes-validations") or ()]

    def child(self, key: str) -> _Node | None:
        node = self.properties.get(key)
        return node if node is not None else self.additional

    def type_name(self) -> str:
        if self.alt_types:
            return ",".join(self.alt_types)
        if self.int_or_string:
            return "integer,string" if self.type is None else self.type
        return self.type or "object"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_ok(node: _Node, value: Any) -> bool:
    actual = _json_type(value)
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


def _format_ok(fmt: str, value: Any) -> bool:
    name = fmt.replace("-", "") if fmt == "date-time" else fmt
    if name in ("int32", "int64"):
        if not isinstance(value, int) or isinstance(value, bool):
            return True
        limit = 2**31 if name == "int32" else 2**63
        return -limit <= value < limit
    if not isinstance(value, str):
        return True
    if name == "datetime":
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return False
        return "T" in value or " " in value
    pattern = _FORMATS.get(name)
    if pattern is None:
        return True
    if name == "k8s-short-name" and len(value) > 63:
        return False
    return bool(pattern.match(value))


def _list_key(item: Any, keys: tuple[str, ...]) -> Any:
    if not isinstance(item, dict):
        return None
    return tuple((k, repr(item.get(k))) for k in keys)


class CRDSchema:
    """The compiled schema of one CRD version (`CRDSchema.from_crd(crd, version)`)."""

    def __init__(self, *, kind: str, version: str, schema: Mapping[str, Any],
                 kubernetes_version: str = "1.33") -> None:
        self.kind = kind
        self.version = version
        self.raw = schema
        self.kubernetes_version = C.parse_version(kubernetes_version)
        self.root = _Node(schema)
        self.has_rules = _has_rules(self.root, set())

    @classmethod
    def from_crd(cls, crd: Mapping[str, Any], version: str, *,
                 kubernetes_version: str = "1.33") -> CRDSchema:
        """Compile the schema of `version` of `crd`; raises ValueError when it has none."""
        spec = crd.get("spec") or {}
        name = (crd.get("metadata") or {}).get("name", "")
        for entry in spec.get("versions") or ():
            if entry.get("name") == version:
                schema = ((entry.get("schema") or {}).get("openAPIV3Schema")
                          or {"type": "object", "x-kubernetes-preserve-unknown-fields": True})
                try:
                    return cls(kind=str((spec.get("names") or {}).get("kind", "")),
                               version=version, schema=schema,
                               kubernetes_version=kubernetes_version)
                except (CelCompileError, re.error) as exc:
                    raise ValueError(
                        f"CustomResourceDefinition {name!r} version {version!r}: {exc}") from exc
        raise ValueError(f"CustomResourceDefinition {name!r} has no version {version!r}")

    # --- defaulting -------------------------------------------------------------------------

    def default(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A copy of `obj` with schema defaults applied and non-nullable nulls dropped."""
        result: dict[str, Any] = clone(obj)
        self._default(result, self.root, root=True)
        return result

    def _default(self, value: Any, node: _Node, *, root: bool = False) -> None:
        if isinstance(value, dict):
            for key, child in node.properties.items():
                if root and key == "metadata":
                    continue
                current = value.get(key, _MISSING)
                if current is _MISSING or (current is None and not child.nullable):
                    if child.has_default:
                        value[key] = clone(child.default)
                    elif current is None:
                        del value[key]
            for key, item in list(value.items()):
                if root and key in _ROOT_KEEP:
                    continue
                child_node = node.child(key)
                if child_node is None:
                    continue
                if item is None and key not in node.properties and not child_node.nullable:
                    if child_node.has_default:
                        value[key] = clone(child_node.default)
                    else:
                        del value[key]
                        continue
                self._default(value[key], child_node)
        elif isinstance(value, list) and node.items is not None:
            for index, item in enumerate(value):
                if item is None and not node.items.nullable and node.items.has_default:
                    value[index] = clone(node.items.default)
                self._default(value[index], node.items)

    # --- pruning ----------------------------------------------------------------------------

    def prune(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A copy of `obj` without the fields the schema does not declare."""
        return self.prune_with_paths(obj)[0]

    def prune_with_paths(self, obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Prune and report the dotted paths dropped (for `unknown field` warnings)."""
        result: dict[str, Any] = clone(obj)
        dropped: list[str] = []
        self._prune(result, self.root, "", dropped, root=True)
        return result, dropped

    def _prune(self, value: Any, node: _Node, path: str, dropped: list[str], *,
               root: bool = False) -> None:
        if isinstance(value, dict):
            keep_meta = root or node.embedded
            for key in list(value):
                child = node.child(key)
                child_path = f"{path}.{key}" if path else key
                if keep_meta and key in _ROOT_KEEP:
                    if key == "metadata" and isinstance(value[key], dict):
                        for meta_key in list(value[key]):
                            if meta_key not in OBJECT_META_FIELDS:
                                del value[key][meta_key]
                                dropped.append(f"{child_path}.{meta_key}")
                    continue
                if child is None:
                    if not node.preserve:
                        del value[key]
                        dropped.append(child_path)
                    continue
                self._prune(value[key], child, child_path, dropped)
        elif isinstance(value, list) and node.items is not None:
            for index, item in enumerate(value):
                self._prune(item, node.items, f"{path}[{index}]", dropped)

    # --- validation -------------------------------------------------------------------------

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[Cause]:
        """Schema and CEL errors of `obj` (an update when `old` is given), as Status causes."""
        run = _Run(self.kubernetes_version, ratchet=old is not None)
        run.walk(obj, self.root, "", old if old is not None else _MISSING, root=True)
        causes = run.causes
        if not self.has_rules:
            return causes
        if any(c.type in C.STOPPING for c in causes):
            detail = ("some validation rules were not checked because the object was invalid; "
                      "correct the existing errors to complete validation")
            return [*causes, C.invalid("<nil>", None, detail, version=self.kubernetes_version)]
        for rule, value, old_value, node, path in run.pending:
            cause = run.evaluate(rule, value, old_value, node, path)
            if cause is not None:
                causes.append(cause)
        return causes


class _MissingType:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _MissingType()


class _Run:
    """One validation pass: schema errors now, CEL rules queued until the schema passes."""

    def __init__(self, version: tuple[int, int], *, ratchet: bool) -> None:
        self.version = version
        self.ratchet = ratchet
        self.causes: list[Cause] = []
        self.pending: list[tuple[_Rule, Any, Any, _Node, str]] = []

    def walk(self, value: Any, node: _Node, path: str, old: Any, *, root: bool = False) -> None:
        if self.ratchet and old is not _MISSING and old == value:
            return
        if value is None:
            if node.nullable:
                return
            self._type_error(node, value, path)
            return
        if not _type_ok(node, value):
            self._type_error(node, value, path)
            return
        self._values(value, node, path)
        for sub in node.all_of:
            self._values(value, sub, path)
        if node.any_of and not node.int_or_string and not any(
                _passes(value, sub) for sub in node.any_of):
            self.causes.append(C.invalid(
                path, value, f"{path} in body must validate at least one schema (anyOf)",
                version=self.version))
        if node.one_of and sum(_passes(value, sub) for sub in node.one_of) != 1:
            self.causes.append(C.invalid(
                path, value, f"{path} in body must validate one and only one schema (oneOf)",
                version=self.version))
        if node.not_ is not None and _passes(value, node.not_):
            self.causes.append(C.invalid(
                path, value, f"{path} in body must not validate the schema (not)",
                version=self.version))
        for rule in node.rules:
            if rule.transition and old is _MISSING and not rule.optional_old:
                continue
            self.pending.append((rule, value, old, node, path))
        if isinstance(value, dict):
            self._object(value, node, path, old, root=root)
        elif isinstance(value, list):
            self._array(value, node, path, old)

    def _type_error(self, node: _Node, value: Any, path: str) -> None:
        found = _json_type(value)
        self.causes.append(C.invalid(
            path, found, f"{path} in body must be of type {node.type_name()}: \"{found}\"",
            version=self.version, type_invalid=True))

    def _object(self, value: dict[str, Any], node: _Node, path: str, old: Any, *,
                root: bool) -> None:
        for name in node.required:
            if name not in value:
                self.causes.append(C.required(f"{path}.{name}" if path else name))
        if node.embedded:
            for name in ("apiVersion", "kind"):
                if name not in value:
                    self.causes.append(C.required(f"{path}.{name}" if path else name))
        old_map = old if isinstance(old, dict) else {}
        for key, item in value.items():
            child = node.child(key)
            if child is None:
                continue
            if root and key in ("apiVersion", "kind") and not node.properties.get(key):
                continue
            child_path = f"{path}.{key}" if path else key
            self.walk(item, child, child_path, old_map.get(key, _MISSING))

    def _array(self, value: list[Any], node: _Node, path: str, old: Any) -> None:
        if node.list_type in ("set", "map"):
            seen: dict[Any, int] = {}
            for index, item in enumerate(value):
                key = (_list_key(item, node.list_map_keys) if node.list_type == "map"
                       else repr(item))
                if key in seen:
                    shown = ({k: item.get(k) for k in node.list_map_keys}
                             if node.list_type == "map" and isinstance(item, dict) else item)
                    self.causes.append(C.duplicate(f"{path}[{index}]", shown,
                                                   version=self.version))
                seen.setdefault(key, index)
        if node.items is None:
            return
        old_items: dict[Any, Any] = {}
        if node.list_type == "map" and isinstance(old, list):
            old_items = {_list_key(item, node.list_map_keys): item for item in old}
        for index, item in enumerate(value):
            old_item = (old_items.get(_list_key(item, node.list_map_keys), _MISSING)
                        if node.list_type == "map" else _MISSING)
            self.walk(item, node.items, f"{path}[{index}]", old_item)

    def _values(self, value: Any, node: _Node, path: str) -> None:
        add = self.causes.append
        version = self.version
        if node.enum is not None and value not in node.enum:
            add(C.not_supported(path, value, node.enum, version=version))
        if isinstance(value, int | float) and not isinstance(value, bool):
            self._numeric(value, node, path)
        elif isinstance(value, str):
            length = len(value)
            if node.max_length is not None and length > node.max_length:
                add(C.too_long(path, node.max_length))
            if node.min_length is not None and length < node.min_length:
                add(C.invalid(path, value,
                              f"{path} in body should be at least {node.min_length} chars long",
                              version=version))
            if node.pattern is not None and not node.pattern.search(value):
                add(C.invalid(path, value,
                              f"{path} in body should match '{node.pattern_source}'",
                              version=version))
        elif isinstance(value, list):
            if node.max_items is not None and len(value) > node.max_items:
                add(C.too_many(path, len(value), node.max_items))
            if node.min_items is not None and len(value) < node.min_items:
                add(C.invalid(path, value,
                              f"{path} in body should have at least {node.min_items} items",
                              version=version))
            if node.unique_items and len({repr(v) for v in value}) != len(value):
                add(C.invalid(path, value, f"{path} in body shouldn't contain duplicates",
                              version=version))
        elif isinstance(value, dict):
            if node.max_properties is not None and len(value) > node.max_properties:
                add(C.too_many(path, len(value), node.max_properties))
            if node.min_properties is not None and len(value) < node.min_properties:
                add(C.invalid(
                    path, value,
                    f"{path} in body should have at least {node.min_properties} properties",
                    version=version))
        if node.format is not None and not _format_ok(node.format, value):
            add(C.invalid(path, value, f"{path} in body must be of type {node.format}: "
                          f"{C.render(value, version=version)}", version=version))

    def _numeric(self, value: float, node: _Node, path: str) -> None:
        add = self.causes.append
        if node.minimum is not None:
            low = node.minimum
            if value < low or (node.exclusive_minimum and value == low):
                word = "greater than" if node.exclusive_minimum else "greater than or equal to"
                add(C.invalid(path, value, f"{path} in body should be {word} {_num(low)}",
                              version=self.version))
        if node.maximum is not None:
            high = node.maximum
            if value > high or (node.exclusive_maximum and value == high):
                word = "less than" if node.exclusive_maximum else "less than or equal to"
                add(C.invalid(path, value, f"{path} in body should be {word} {_num(high)}",
                              version=self.version))
        if node.multiple_of:
            quotient = value / node.multiple_of
            if not math.isclose(quotient, round(quotient)):
                add(C.invalid(path, value,
                              f"{path} in body should be a multiple of {_num(node.multiple_of)}",
                              version=self.version))

    def evaluate(self, rule: _Rule, value: Any, old: Any, node: _Node,
                 path: str) -> Cause | None:
        variables: dict[str, Any] = {"self": value}
        if rule.transition and rule.optional_old:
            variables[_OLD_SELF] = optional(old, present=old is not _MISSING)
        elif rule.transition:
            variables[_OLD_SELF] = old
        try:
            result = rule.program.run(variables)
        except Exception as exc:  # the CEL runtime raises KeyError/TypeError/RuntimeError
            return C.invalid(path or "<nil>", node.type_name(),
                             f"{error_text(exc)} evaluating rule: {rule.rule}",
                             version=self.version)
        if result is True:
            return None
        detail = rule.message or f"failed rule: {rule.rule.strip()}"
        if rule.message_expression is not None:
            try:
                text = rule.message_expression.run(variables)
            except Exception:  # fall back to the static message, as the server does
                text = None
            if isinstance(text, str) and text.strip():
                detail = text.strip()
        field = path + _field_path(rule.field_path) if rule.field_path else path
        field = field.lstrip(".") or "<nil>"
        if rule.reason == "FieldValueForbidden":
            return C.forbidden(field, detail)
        if rule.reason == "FieldValueRequired":
            return C.required(field, detail)
        shown = self._shown(value, node)
        if rule.reason == "FieldValueDuplicate":
            return Cause(C.CauseType.DUPLICATE.value,
                         f"Duplicate value: {C.render(shown, version=self.version)}", field)
        if shown is _MISSING:
            return C.invalid_omitted(field, detail)
        return C.invalid(field, shown, detail, version=self.version)

    def _shown(self, value: Any, node: _Node) -> Any:
        """The value a CEL error prints: the type name up to 1.34, the value (scalars) after."""
        if self.version < (1, 35):
            return node.type_name()
        if isinstance(value, dict | list):
            return _MISSING
        return value


def _has_rules(node: _Node, seen: set[int]) -> bool:
    if id(node) in seen:
        return False
    seen.add(id(node))
    children = [*node.properties.values(), node.additional, node.items]
    return bool(node.rules) or any(
        _has_rules(child, seen) for child in children if child is not None)


def _passes(value: Any, node: _Node) -> bool:
    run = _Run((1, 34), ratchet=False)
    run.walk(value, node, "", _MISSING)
    return not run.causes


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _field_path(field_path: str) -> str:
    """A rule's `fieldPath` (`.a.b`, `['x.y']`, `[0]`) in field-error form."""
    out = re.sub(r"\['([^']*)'\]", r".\1", field_path)
    return out if out.startswith((".", "[")) else f".{out}"


class _RefBuilder:
    """Builds nodes from a Kubernetes JSON schema (`$ref`s, `type: [t, "null"]`, `oneOf` types)."""

    def __init__(self, definitions: Mapping[str, Any]) -> None:
        self.definitions = definitions
        self.memo: dict[str, _Node] = {}

    def __call__(self, raw: Mapping[str, Any]) -> _Node:
        ref = raw.get("$ref")
        if not isinstance(ref, str):
            return _Node(self._normalise(raw), self)
        name = ref.rsplit("/", 1)[-1]
        node = self.memo.get(name)
        if node is None:
            node = _Node.__new__(_Node)
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


SchemaNode = _Node


def compile_json_schema(schema: Mapping[str, Any], definitions: Mapping[str, Any]) -> _Node:
    """Compile a Kubernetes JSON schema (as published per release) into a schema node."""
    return _RefBuilder(definitions)(schema)


def check(node: _Node, obj: Mapping[str, Any], *, version: tuple[int, int]) -> list[Cause]:
    """Schema errors of `obj` against a compiled node (no CEL rules, no ratcheting)."""
    run = _Run(version, ratchet=False)
    run.walk(obj, node, "", _MISSING, root=True)
    return run.causes
