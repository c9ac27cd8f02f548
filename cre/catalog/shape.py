"""Type-checking of the ``spec`` block of catalog entries and platform fabric blocks.

A YAML typo (``enviroment:``, a list where a map belongs) must fail when the catalog loads, not
when a Job renders on a customer cluster. The shapes here are data: one declarative tree per
block, checked by one walker that reports the exact key path.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

import attrs

from cre.catalog.errors import CatalogError
from cre.catalog.template import Scalar, TemplateError, references, substitute, substitute_tree


class Kind(Enum):
    """What a node of the shape tree accepts."""

    STR = "string"
    INT = "integer"
    BOOL = "boolean"
    QUANTITY = "string or integer"
    OBJECT = "mapping (a Kubernetes object fragment)"
    LIST = "list"
    MAP = "mapping"
    STRUCT = "mapping with known keys"


@attrs.frozen
class Shape:
    """One node of a shape tree."""

    kind: Kind
    item: Shape | None = None
    fields: Mapping[str, Shape] = attrs.field(factory=dict)


STR = Shape(Kind.STR)
INT = Shape(Kind.INT)
BOOL = Shape(Kind.BOOL)
QUANTITY = Shape(Kind.QUANTITY)
OBJECT = Shape(Kind.OBJECT)


def list_of(item: Shape) -> Shape:
    """A list whose items all have ``item``'s shape."""
    return Shape(Kind.LIST, item=item)


def map_of(item: Shape) -> Shape:
    """A mapping from strings to values of ``item``'s shape."""
    return Shape(Kind.MAP, item=item)


def struct(**fields: Shape) -> Shape:
    """A mapping with exactly these optional keys."""
    return Shape(Kind.STRUCT, fields=fields)


POD_PART = struct(
    resources=map_of(QUANTITY),
    annotations=map_of(STR),
    env=map_of(STR),
    volumes=list_of(OBJECT),
    volumeMounts=list_of(OBJECT),
    initContainers=list_of(OBJECT),
    capabilities=list_of(STR),
    privileged=BOOL,
    hostNetwork=BOOL,
    dnsPolicy=STR,
    backoffLimit=INT,
)

SPEC = struct(
    image=STR,
    timeoutSeconds=INT,
    mpirun=struct(path=STR, args=list_of(STR)),
    command=list_of(STR),
    env=map_of(STR),
    worker=POD_PART,
    launcher=POD_PART,
    computeDomain=BOOL,
    claims=list_of(struct(name=STR, deviceClassName=STR, count=INT)),
)


def _lone_reference(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        names = references(value)
    except TemplateError:
        return False
    return len(names) == 1 and value == "${" + names[0] + "}"


def check(value: Any, shape: Shape, *, file: str, path: str, allow_templates: bool = True) -> None:
    """Raise CatalogError at the first place ``value`` does not fit ``shape``.

    With ``allow_templates`` an integer or boolean slot may hold a lone ``${name}`` that is
    resolved later; after resolution the same walk runs without it.
    """
    kind = shape.kind
    if allow_templates and kind in (Kind.INT, Kind.BOOL) and _lone_reference(value):
        return
    ok = {
        Kind.STR: isinstance(value, str),
        Kind.INT: isinstance(value, int) and not isinstance(value, bool),
        Kind.BOOL: isinstance(value, bool),
        Kind.QUANTITY: isinstance(value, str | int) and not isinstance(value, bool),
        Kind.OBJECT: isinstance(value, Mapping),
        Kind.LIST: isinstance(value, list),
        Kind.MAP: isinstance(value, Mapping),
        Kind.STRUCT: isinstance(value, Mapping),
    }[kind]
    if value is None and path:
        return  # null deletes the key when merged (see merge.deep_merge)
    if not ok:
        raise CatalogError(file, path, f"expected a {kind.value}, got {_describe(value)}")
    if kind is Kind.LIST:
        assert shape.item is not None
        for i, item in enumerate(value):
            check(item, shape.item, file=file, path=f"{path}[{i}]", allow_templates=allow_templates)
    elif kind is Kind.MAP:
        assert shape.item is not None
        for key, item in value.items():
            if not isinstance(key, str):
                raise CatalogError(file, path, f"key {key!r} is not a string")
            check(
                item, shape.item, file=file, path=f"{path}.{key}", allow_templates=allow_templates
            )
    elif kind is Kind.STRUCT:
        for key, item in value.items():
            if key not in shape.fields:
                known = ", ".join(sorted(shape.fields))
                raise CatalogError(file, f"{path}.{key}", f"unknown key (known: {known})")
            check(
                item,
                shape.fields[key],
                file=file,
                path=f"{path}.{key}",
                allow_templates=allow_templates,
            )


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def resolve(value: Any, shape: Shape, values: Mapping[str, Scalar]) -> Any:
    """Substitute references in ``value`` guided by ``shape``.

    String slots always get a string (``"-n ${iterations}"`` and ``${iterations}`` alike);
    integer, boolean and quantity slots keep a lone reference's type; Kubernetes fragments
    (OBJECT) keep types too. Raises TemplateError on an unknown reference.
    """
    if isinstance(value, str):
        out = substitute(value, values)
        if shape.kind is Kind.STR:
            return str(out).lower() if isinstance(out, bool) else str(out)
        return out
    if shape.kind in (Kind.LIST, Kind.MAP) and shape.item is not None:
        if isinstance(value, list):
            return [resolve(v, shape.item, values) for v in value]
        if isinstance(value, Mapping):
            return {k: resolve(v, shape.item, values) for k, v in value.items()}
    if shape.kind is Kind.STRUCT and isinstance(value, Mapping):
        return {
            k: resolve(v, shape.fields[k], values) if k in shape.fields else v
            for k, v in value.items()
        }
    return substitute_tree(value, values)
