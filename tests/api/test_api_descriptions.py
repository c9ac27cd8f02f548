"""Every field of every CRE CRD tells `kubectl explain` what it means, from the models' metadata."""

from __future__ import annotations

import typing
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import pytest

from cre.api import crdgen
from cre.api.fields import DESCRIPTION_KEY, c, constraints, json_name
from cre.api.kinds import KINDS, KindInfo
from cre.api.schema import field_description, model_schema, unwrap_optional

# The root ``metadata`` stays a bare ``type: object`` (a structural-schema rule): the API server
# publishes ObjectMeta's own documentation for it, so kubectl explain has a description there.
SERVER_OWNED = {".metadata"}


def _schema(info: KindInfo) -> dict[str, Any]:
    schema: dict[str, Any] = crdgen.build_crd(info)["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"
    ]
    return schema


def _element(tp: Any) -> tuple[Any, str]:
    """The attrs class inside a field type and the schema path step to it ("", "[]", "[*]")."""
    tp = unwrap_optional(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is tuple:
        return unwrap_optional(args[0]), "[]"
    if origin in (dict, Mapping):
        return unwrap_optional(args[1]), "[*]"
    return tp, ""


def _properties(
    cls: type, schema: dict[str, Any], path: str = ""
) -> Iterator[tuple[str, type, attrs.Attribute[Any], dict[str, Any]]]:
    """(schema path, owning model class, attrs field, schema node) for every property."""
    attrs.resolve_types(cls)
    for field in attrs.fields(cls):
        key = json_name(field)
        node = schema["properties"][key]
        yield f"{path}.{key}", cls, field, node
        if f"{path}.{key}" in SERVER_OWNED:
            continue
        inner, step = _element(field.type)
        sub = node.get("items") if step == "[]" else node.get("additionalProperties")
        if attrs.has(inner):
            yield from _properties(inner, node if not step else sub or {}, f"{path}.{key}{step}")


def undocumented(kind: str, cls: type, schema: dict[str, Any]) -> list[str]:
    """One line per property whose model field has no ``doc`` (or whose schema node has no
    description), saying where and how to add one. A nested object's class docstring is not
    enough: the field says what it is for, the class only what it is."""
    return [
        f"{kind}{path}: no description. Add doc=\"<what it means, with its unit>\" to the "
        f"metadata of {owner.__module__}.{owner.__qualname__}.{field.name}: "
        f"attrs.field(..., metadata=c(..., doc=\"...\")) (for a duration or a thresholds map: "
        f"metadata=duration_field(doc=...) / threshold_values(doc=...) from cre.api.common), "
        f"then run `python -m cre.api.crdgen`"
        for path, owner, field, node in _properties(cls, schema)
        if path not in SERVER_OWNED
        and not ((constraints(field).doc or "").strip() and node.get("description", "").strip())
    ]


@attrs.frozen(kw_only=True)
class Leaf:
    """A nested demo model whose class docstring is all a field of its type would show."""

    value: int = attrs.field(default=0, metadata=c(doc="A value."))


@attrs.frozen(kw_only=True)
class Inner:
    """A nested demo model with one documented and one bare field."""

    documented: int = attrs.field(default=1, metadata=c(doc="Told."))
    bare_field: str | None = None
    nested: Leaf | None = None  # described by its class docstring only: not enough


@attrs.frozen(kw_only=True)
class Outer:
    """A demo model holding a list of ``Inner``."""

    items: tuple[Inner, ...] = attrs.field(default=(), metadata=c(doc="Listed."))


@pytest.mark.parametrize("info", KINDS, ids=lambda i: i.kind)
def test_every_crd_property_has_a_description(info: KindInfo) -> None:
    """No property of the kind's schema, spec or status, nested or not, lacks a description."""
    missing = undocumented(info.kind, info.model, _schema(info))
    assert not missing, "\n".join(missing)


def test_every_property_is_walked() -> None:
    """The walk reaches as many properties as the schema holds (none is skipped unchecked)."""

    def count(node: dict[str, Any]) -> int:
        props = node.get("properties", {})
        inner = node.get("items") or node.get("additionalProperties")
        below = count(inner) if isinstance(inner, dict) else 0
        return len(props) + sum(count(p) for p in props.values()) + below

    for info in KINDS:
        schema = _schema(info)
        assert len(list(_properties(info.model, schema))) == count(schema), info.kind


def test_a_field_without_doc_is_reported_with_its_class_and_the_fix() -> None:
    """A model field lacking ``doc`` fails the check, naming the class, field and remedy."""
    lines = undocumented("Demo", Outer, model_schema(Outer))
    assert [line.split(":", 1)[0] for line in lines] == [
        "Demo.items[].bareField", "Demo.items[].nested"]
    assert lines[0].startswith("Demo.items[].bareField: no description.")
    assert f"{__name__}." in lines[0] and "Inner.bare_field" in lines[0]
    assert 'metadata=c(..., doc="...")' in lines[0]


def test_description_carries_unit_default_and_bounds() -> None:
    """The default and bounds are appended from the enforced facts; the unit is in the text."""
    spec = _schema(next(i for i in KINDS if i.kind == "Job"))["properties"]["spec"]
    startup = spec["properties"]["startupStallTimeoutSeconds"]["description"]
    assert startup.startswith("Seconds ")
    assert startup.endswith("Default 1200. At least 1.")
    workflow = _schema(next(i for i in KINDS if i.kind == "Workflow"))["properties"]["spec"]
    policy = workflow["properties"]["failurePolicy"]["properties"]
    assert policy["infraRetries"]["description"].endswith("Default 1. 0..10.")
    assert policy["mode"]["description"].endswith('Default "Continue".')
    cert = _schema(next(i for i in KINDS if i.kind == "Certification"))["properties"]["spec"]
    assert cert["properties"]["categories"]["description"].endswith("1..64 items.")
    timeout = cert["properties"]["timeoutPerJob"]
    bounds = f"At most 720h. At most {timeout['maxLength']} characters."
    assert timeout["description"].endswith(bounds)


def test_field_description_without_doc_falls_back_to_the_type() -> None:
    """A nested object field without its own doc is described by its class docstring."""

    @attrs.frozen(kw_only=True)
    class Plain:
        n: int = attrs.field(default=3, metadata=c(minimum=0, maximum=9))

    (field,) = attrs.fields(Plain)
    assert field_description(field) == "Default 3. 0..9."
    assert field_description(field, "A count.") == "A count. Default 3. 0..9."
    assert constraints(field).doc is None


def test_doc_is_mirrored_where_documentation_tools_read_it() -> None:
    """``c(doc=...)`` also stores the text under the plain ``description`` metadata key."""
    meta = c(minimum=1, doc="Nodes in each group.")
    assert meta[DESCRIPTION_KEY] == "Nodes in each group."
    assert DESCRIPTION_KEY not in c(minimum=1)
    for info in KINDS:
        for _, _, field, _ in _properties(info.model, _schema(info)):
            doc = constraints(field).doc
            if doc:
                assert field.metadata[DESCRIPTION_KEY] == doc, field.name
