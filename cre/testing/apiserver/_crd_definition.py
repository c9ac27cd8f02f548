"""Checks on a CustomResourceDefinition itself, before the emulator serves its resource.

The real server refuses a CRD whose names do not fit together, whose versions do not have exactly
one storage version, or whose schemas are not structural
(`apiextensions-apiserver/pkg/apis/apiextensions/validation`, `pkg/apiserver/schema`). This
module checks the subset that catches real mistakes: names, scope, versions, the structural rules
(types everywhere, `items` on arrays, `properties` xor `additionalProperties`, list-map keys,
int-or-string / preserve / embedded combinations), regular expressions that do not compile, and
CEL rules that do not compile.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from cre.testing.apiserver import _causes as C
from cre.testing.apiserver._causes import Cause
from cre.testing.apiserver._cel import CelCompileError, compile_expression

_SCOPES = ("Cluster", "Namespaced")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_JUNCTORS = ("allOf", "anyOf", "oneOf")


def validate_crd_definition(crd: Mapping[str, Any]) -> list[Cause]:
    """Why the real server would reject this CRD (empty: it would accept it)."""
    return list(_crd(crd))


def _crd(crd: Mapping[str, Any]) -> Iterator[Cause]:
    meta = crd.get("metadata") or {}
    spec = crd.get("spec")
    if not isinstance(spec, Mapping):
        yield C.required("spec")
        return
    group = spec.get("group")
    names = spec.get("names") or {}
    plural = names.get("plural")
    if not group:
        yield C.required("spec.group")
    elif "." not in str(group):
        yield C.invalid("spec.group", group, "should be a domain with at least one dot")
    if not plural:
        yield C.required("spec.names.plural")
    if not names.get("kind"):
        yield C.required("spec.names.kind")
    if not names.get("listKind") and names.get("kind"):
        pass  # defaulted to <kind>List by the server
    for field in ("plural", "singular"):
        value = names.get(field)
        if value and not _DNS1035.match(str(value)):
            yield C.invalid(f"spec.names.{field}", value,
                            "a DNS-1035 label must consist of lower case alphanumeric "
                            "characters or '-', start with an alphabetic character, and end "
                            "with an alphanumeric character")
    if group and plural and meta.get("name") != f"{plural}.{group}":
        yield C.invalid("metadata.name", meta.get("name"),
                        'must be spec.names.plural+"."+spec.group')
    scope = spec.get("scope")
    if scope not in _SCOPES:
        yield C.not_supported("spec.scope", scope, _SCOPES)
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        yield C.invalid("spec.versions", versions, "must have exactly one version marked as "
                        "storage version")
        return
    storage = [v for v in versions if isinstance(v, Mapping) and v.get("storage")]
    if len(storage) != 1:
        yield C.invalid("spec.versions", versions,
                        "must have exactly one version marked as storage version")
    seen: set[str] = set()
    for index, version in enumerate(versions):
        where = f"spec.versions[{index}]"
        if not isinstance(version, Mapping):
            yield C.required(where)
            continue
        name = version.get("name")
        if not name:
            yield C.required(f"{where}.name")
        elif name in seen:
            yield C.duplicate(f"{where}.name", name)
        else:
            seen.add(str(name))
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if schema is None:
            yield C.required(f"{where}.schema.openAPIV3Schema")
            continue
        path = f"{where}.schema.openAPIV3Schema"
        if schema.get("type") != "object":
            yield C.invalid(f"{path}.type", schema.get("type"), "must be object at the root")
        yield from _node(schema, path, root=True, in_junctor=False)


def _node(schema: Any, path: str, *, root: bool, in_junctor: bool) -> Iterator[Cause]:
    if not isinstance(schema, Mapping):
        yield C.invalid(path, schema, "must be an object")
        return
    int_or_string = bool(schema.get("x-kubernetes-int-or-string"))
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    embedded = bool(schema.get("x-kubernetes-embedded-resource"))
    kind = schema.get("type")
    if in_junctor:
        for field in ("type", "additionalProperties", "default", "nullable",
                      "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource"):
            if field in schema:
                yield C.forbidden(f"{path}.{field}", "must be empty inside a junctor")
    elif not kind and not int_or_string and not preserve:
        yield C.required(f"{path}.type", "must not be empty for specified object fields")
    if int_or_string and (preserve or embedded):
        yield C.forbidden(f"{path}.x-kubernetes-int-or-string",
                          "must be false if x-kubernetes-preserve-unknown-fields or "
                          "x-kubernetes-embedded-resource is true")
    if embedded and kind != "object":
        yield C.invalid(f"{path}.type", kind, "must be object if "
                        "x-kubernetes-embedded-resource is true")
    if "properties" in schema and "additionalProperties" in schema:
        yield C.forbidden(f"{path}.additionalProperties",
                          "additionalProperties and properties are mutual exclusive")
    if kind == "array" and not in_junctor and "items" not in schema:
        yield C.required(f"{path}.items", "must be specified")
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            re.compile(pattern)
        except re.error as exc:
            yield C.invalid(f"{path}.pattern", pattern, f"must be a valid regular expression, "
                            f"but isn't: {exc}")
    list_type = schema.get("x-kubernetes-list-type")
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        yield C.not_supported(f"{path}.x-kubernetes-list-type", list_type,
                              ("atomic", "set", "map"))
    if list_type == "map" and not schema.get("x-kubernetes-list-map-keys"):
        yield C.required(f"{path}.x-kubernetes-list-map-keys",
                         "must not be empty if x-kubernetes-list-type is map")
    for index, rule in enumerate(schema.get("x-kubernetes-validations") or ()):
        where = f"{path}.x-kubernetes-validations[{index}]"
        source = rule.get("rule") if isinstance(rule, Mapping) else None
        if not source:
            yield C.required(f"{where}.rule")
            continue
        for field in ("rule", "messageExpression"):
            expression = rule.get(field)
            if not expression:
                continue
            try:
                compile_expression(str(expression))
            except CelCompileError as exc:
                yield C.invalid(f"{where}.{field}", expression, f"compilation failed: {exc}")
    for name, child in (schema.get("properties") or {}).items():
        child_path = f"{path}.properties[{name}]"
        if root and name == "metadata" and isinstance(child, Mapping):
            extra = set(child.get("properties") or {}) - {"name", "generateName"}
            if extra:
                yield C.forbidden(f"{child_path}.properties",
                                  "must not specify anything other than name and generateName, "
                                  "but metadata is implicitly specified")
        yield from _node(child, child_path, root=False, in_junctor=in_junctor)
    extra_schema = schema.get("additionalProperties")
    if isinstance(extra_schema, Mapping):
        yield from _node(extra_schema, f"{path}.additionalProperties", root=False,
                         in_junctor=in_junctor)
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from _node(items, f"{path}.items", root=False, in_junctor=in_junctor)
    for junctor in _JUNCTORS:
        for index, sub in enumerate(schema.get(junctor) or ()):
            if int_or_string and isinstance(sub, Mapping) and set(sub) == {"type"}:
                continue
            yield from _node(sub, f"{path}.{junctor}[{index}]", root=False, in_junctor=True)
