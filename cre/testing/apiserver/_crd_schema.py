"""A CRD version's structural schema, compiled once: defaulting, pruning and validation.

The API server runs three passes over every custom-resource write (and defaulting again when it
reads from storage): it prunes fields the schema does not declare, applies `default:` values,
then validates types, OpenAPI value constraints and `x-kubernetes-validations` CEL rules. This
module walks the tree of `SchemaNode`s (`_schema_node`) compiled once per CRD version
(regexes and CEL programs included), so each write only walks the object.

Messages follow kube-openapi (`<path> in body must be of type integer: "string"`) and the CEL
validator of apiextensions-apiserver (schema type name shown up to 1.34, value from 1.35).
Validation ratcheting (GA in 1.33) is followed: on update, a subtree equal to its correlated old
value is not validated again. Left out: `anyOf`/`oneOf` messages are kube-openapi's generic
ones, and the cost budget of CEL.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from cre.testing.apiserver import _causes as C
from cre.testing.apiserver._causes import Cause
from cre.testing.apiserver._cel import (
    CelCompileError,
    error_text,
    optional,
)
from cre.testing.apiserver._schema_node import (
    OBJECT_META_FIELDS,
    OLD_SELF,
    ROOT_KEEP,
    Rule,
    SchemaNode,
    compile_json_schema,
    format_ok,
    json_type,
    list_key,
    type_ok,
)
from cre.testing.apiserver._shapes import clone

__all__ = ["OBJECT_META_FIELDS", "CRDSchema", "SchemaNode", "check", "compile_json_schema"]

class CRDSchema:
    """The compiled schema of one CRD version (`CRDSchema.from_crd(crd, version)`)."""

    def __init__(self, *, kind: str, version: str, schema: Mapping[str, Any],
                 kubernetes_version: str = "1.33") -> None:
        self.kind = kind
        self.version = version
        self.raw = schema
        self.kubernetes_version = C.parse_version(kubernetes_version)
        self.root = SchemaNode(schema)
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

    def _default(self, value: Any, node: SchemaNode, *, root: bool = False) -> None:
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
                if root and key in ROOT_KEEP:
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

    def _prune(self, value: Any, node: SchemaNode, path: str, dropped: list[str], *,
               root: bool = False) -> None:
        if isinstance(value, dict):
            keep_meta = root or node.embedded
            for key in list(value):
                child = node.child(key)
                child_path = f"{path}.{key}" if path else key
                if keep_meta and key in ROOT_KEEP:
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


_CEL_ROOT_METADATA = ("name", "generateName")


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
        self.pending: list[tuple[Rule, Any, Any, SchemaNode, str]] = []

    def walk(self, value: Any, node: SchemaNode, path: str, old: Any, *,
             root: bool = False) -> None:
        if self.ratchet and old is not _MISSING and old == value:
            return
        if value is None:
            if node.nullable:
                return
            self._type_error(node, value, path)
            return
        if not type_ok(node, value):
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

    def quick(self, value: Any, node: SchemaNode, old: Any, *, root: bool = False) -> bool:
        """True only when `walk` would find no schema error here (CEL rules aside).

        The same checks without building field paths or messages; anything unusual answers
        False and the caller runs `walk` for the exact causes.
        """
        if self.ratchet and old is not _MISSING and old == value:
            return True
        if value is None:
            return node.nullable
        if type(value) not in node.fast_types and not type_ok(node, value):
            return False
        if node.any_of or node.one_of or node.all_of or node.not_ is not None:
            return False
        if node.value_checks:
            before = len(self.causes)
            self._values(value, node, "")
            if len(self.causes) != before:
                return False
        if isinstance(value, dict):
            if node.embedded and ("apiVersion" not in value or "kind" not in value):
                return False
            for name in node.required:
                if name not in value:
                    return False
            properties = node.properties
            additional = node.additional
            old_map = old if isinstance(old, dict) else {}
            for key, item in value.items():
                child = properties.get(key) or additional
                if child is None or type(item) in child.scalar_types:
                    continue
                if root and key in ("apiVersion", "kind") and not properties.get(key):
                    continue
                if not self.quick(item, child, old_map.get(key, _MISSING)):
                    return False
        elif isinstance(value, list):
            items = node.items
            if node.list_type == "map":
                keys = [list_key(item, node.list_map_keys) for item in value]
                if len(set(keys)) != len(keys):
                    return False
                if items is None:
                    return True
                old_items = ({list_key(item, node.list_map_keys): item for item in old}
                             if isinstance(old, list) else {})
                return all(self.quick(item, items, old_items.get(key, _MISSING))
                           for key, item in zip(keys, value, strict=True))
            if node.list_type == "set" and len({repr(v) for v in value}) != len(value):
                return False
            if items is not None:
                return all(self.quick(item, items, _MISSING) for item in value)
        return True

    def _type_error(self, node: SchemaNode, value: Any, path: str) -> None:
        found = json_type(value)
        self.causes.append(C.invalid(
            path, found, f"{path} in body must be of type {node.type_name()}: \"{found}\"",
            version=self.version, type_invalid=True))

    def _object(self, value: dict[str, Any], node: SchemaNode, path: str, old: Any, *,
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

    def _array(self, value: list[Any], node: SchemaNode, path: str, old: Any) -> None:
        if node.list_type in ("set", "map"):
            seen: dict[Any, int] = {}
            for index, item in enumerate(value):
                key = (list_key(item, node.list_map_keys) if node.list_type == "map"
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
            old_items = {list_key(item, node.list_map_keys): item for item in old}
        for index, item in enumerate(value):
            old_item = (old_items.get(list_key(item, node.list_map_keys), _MISSING)
                        if node.list_type == "map" else _MISSING)
            self.walk(item, node.items, f"{path}[{index}]", old_item)

    def _values(self, value: Any, node: SchemaNode, path: str) -> None:
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
        if node.format is not None and not format_ok(node.format, value):
            add(C.invalid(path, value, f"{path} in body must be of type {node.format}: "
                          f"{C.render(value, version=version)}", version=version))

    def _numeric(self, value: float, node: SchemaNode, path: str) -> None:
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

    def evaluate(self, rule: Rule, value: Any, old: Any, node: SchemaNode,
                 path: str) -> Cause | None:
        if not path and isinstance(value, dict) and isinstance(value.get("metadata"), dict):
            # rules on the root see only metadata.name and metadata.generateName
            meta = {k: v for k, v in value["metadata"].items() if k in _CEL_ROOT_METADATA}
            value = {**value, "metadata": meta}
        variables: dict[str, Any] = {"self": value}
        if rule.transition and rule.optional_old:
            variables[OLD_SELF] = optional(old, present=old is not _MISSING)
        elif rule.transition:
            variables[OLD_SELF] = old
        try:
            result = rule.program.run(variables)
        except Exception as exc:  # the CEL runtime raises KeyError/TypeError/RuntimeError
            return C.invalid(path or "<nil>", node.type_name(),
                             # the rule's message when it has one, as kube-apiserver does
                             f"{error_text(exc)} evaluating rule: "
                             f"{(rule.message or rule.rule).strip()}",
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

    def _shown(self, value: Any, node: SchemaNode) -> Any:
        """The value a CEL error prints: the type name up to 1.34, the value (scalars) after."""
        if self.version < (1, 35):
            return node.type_name()
        if isinstance(value, dict | list):
            return _MISSING
        return value


def _has_rules(node: SchemaNode, seen: set[int]) -> bool:
    if id(node) in seen:
        return False
    seen.add(id(node))
    children = [*node.properties.values(), node.additional, node.items]
    return bool(node.rules) or any(
        _has_rules(child, seen) for child in children if child is not None)


def _passes(value: Any, node: SchemaNode) -> bool:
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


def check(node: SchemaNode, obj: Mapping[str, Any], *, version: tuple[int, int],
          old: Mapping[str, Any] | None = None) -> list[Cause]:
    """Schema errors of `obj` against a compiled node (no CEL rules).

    With `old` (an update of an object that passed this check when it was written), subtrees
    equal to their old values are not walked again: they cannot hold new errors. A quick
    pass answers the common valid case; the full walk builds the causes.
    """
    ratchet = old is not None
    start = old if old is not None else _MISSING
    if _Run(version, ratchet=ratchet).quick(obj, node, start, root=True):
        return []
    run = _Run(version, ratchet=ratchet)
    run.walk(obj, node, "", start, root=True)
    return run.causes
