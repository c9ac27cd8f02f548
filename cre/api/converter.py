"""The one cattrs converter between CRE models and Kubernetes JSON.

Wire names are camelCase (with explicit exceptions declared on the field), attributes are
snake_case. Structuring is strict: wrong types, missing required fields and unknown fields in
``spec``/``status`` are all collected and raised together as ``ValidationError`` with field
paths; unknown ``metadata`` keys (``managedFields`` and friends) are ignored. Unstructuring
omits ``None`` and empty collections so documents stay small and stable for goldens.
"""

from __future__ import annotations

import copy
import enum
import functools
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import (
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
)
from cattrs.gen import make_dict_structure_fn, override

from cre.api.errors import FieldError, ValidationError, describe, join, map_key
from cre.api.fields import json_name, json_names
from cre.api.meta import ObjectMeta, format_time, parse_time

T = TypeVar("T")

# Classes whose unknown JSON keys are ignored rather than rejected.
LENIENT: set[type] = {ObjectMeta}


def _strict(kind: type, *, accept: tuple[type, ...] = ()) -> Callable[[Any, type], Any]:
    names = {str: "string", int: "integer", bool: "boolean", float: "number"}

    def hook(value: Any, tp: type) -> Any:
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return tp(value)
        if isinstance(value, bool) and kind is not bool:
            raise TypeError(f"expected {names[kind]}, got boolean")
        if isinstance(value, (kind, *accept)):
            return kind(value)
        raise TypeError(f"expected {names[kind]}, got {_json_type(value)}")

    return hook


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _is_homogeneous_tuple(tp: Any) -> bool:
    args = get_args(tp)
    return get_origin(tp) is tuple and len(args) == 2 and args[1] is Ellipsis


def _structure_opaque(value: Any, _: type) -> Any:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected object, got {_json_type(value)}")
    return copy.deepcopy(dict(value))


def _structure_time(value: Any, _: type) -> datetime:
    return parse_time(value)


def _is_opaque(tp: Any) -> bool:
    args = get_args(tp)
    return get_origin(tp) in (dict, Mapping) and len(args) == 2 and args[1] is Any


def _empty_default(field: attrs.Attribute[Any]) -> bool:
    default = field.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return True
    return isinstance(default, tuple) and default == ()


def emitted(field: attrs.Attribute[Any], value: Any) -> bool:
    """Whether ``unstructure`` writes ``field`` (``None`` and empty default collections are
    left out)."""
    return value is not None and (bool(value) or not _empty_default(field))


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(detailed_validation=True, forbid_extra_keys=True)
    # Registered by class, so subclasses (StrEnum reasons, IntEnum) reach these hooks too;
    # the hooks hand enums to the enum constructor.
    conv.register_structure_hook(str, _strict(str))
    conv.register_structure_hook(int, _strict(int))
    conv.register_structure_hook(bool, _strict(bool))
    conv.register_structure_hook(float, _strict(float, accept=(int,)))
    conv.register_structure_hook(datetime, _structure_time)
    conv.register_unstructure_hook(datetime, format_time)
    conv.register_structure_hook_func(_is_opaque, _structure_opaque)
    conv.register_unstructure_hook_func(_is_opaque, lambda v: copy.deepcopy(dict(v)))
    conv.register_unstructure_hook_func(
        lambda t: isinstance(t, type) and issubclass(t, enum.Enum), lambda v: v.value
    )

    def seq_unstructure_factory(tp: Any) -> Callable[[Any], list[Any]]:
        args = get_args(tp)
        inner = args[0] if args else Any

        def unstructure_seq(value: Any) -> list[Any]:
            return [conv.unstructure(v, unstructure_as=inner) for v in value]

        return unstructure_seq

    conv.register_unstructure_hook_factory(_is_homogeneous_tuple, seq_unstructure_factory)

    def structure_factory(cls: type) -> Callable[[Any, type], Any]:
        attrs.resolve_types(cls)
        renames = {f.name: override(rename=json_name(f)) for f in attrs.fields(cls)}
        fn: Callable[[Any, Any], Any] = make_dict_structure_fn(
            cls,
            conv,
            _cattrs_forbid_extra_keys=cls not in LENIENT,
            **renames,  # type: ignore[arg-type]
        )

        def structure(value: Any, tp: type) -> Any:
            if not isinstance(value, Mapping):
                raise TypeError(f"expected object, got {_json_type(value)}")
            # A JSON null means "unset", as the API server treats it for non-nullable fields.
            return fn({k: v for k, v in value.items() if v is not None}, tp)

        return structure

    def unstructure_factory(cls: type) -> Callable[[Any], dict[str, Any]]:
        attrs.resolve_types(cls)
        plan = [(f, json_name(f)) for f in attrs.fields(cls)]

        def unstructure(value: Any) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for field, key in plan:
                item = getattr(value, field.name)
                if emitted(field, item):
                    out[key] = conv.unstructure(item, unstructure_as=field.type)
            return out

        return unstructure

    conv.register_structure_hook_factory(attrs.has, structure_factory)
    conv.register_unstructure_hook_factory(attrs.has, unstructure_factory)
    return conv


CONVERTER: cattrs.Converter = _make_converter()


def structure_errors(exc: BaseException, cls: type, path: str = "") -> list[FieldError]:
    """Flatten a cattrs (detailed-validation) exception into field errors with JSON paths."""
    if isinstance(exc, ForbiddenExtraKeysError):
        return [
            FieldError(path=join(path, k), message="unknown field")
            for k in sorted(exc.extra_fields)
        ]
    if isinstance(exc, ClassValidationError):
        names = json_names(exc.cl) if attrs.has(exc.cl) else {}
        found: list[FieldError] = []
        for sub in exc.exceptions:
            note = _note(sub, "name")
            if note is None:
                found.extend(structure_errors(sub, cls, path))
                continue
            sub_path = join(path, names.get(note.name, note.name))
            if isinstance(sub, KeyError):
                found.append(FieldError(path=sub_path, message="required field is missing"))
            else:
                found.extend(structure_errors(sub, note.type, sub_path))
        return found
    if isinstance(exc, IterableValidationError):
        found = []
        for sub in exc.exceptions:
            note = _note(sub, "index")
            if note is None:
                found.extend(structure_errors(sub, cls, path))
            elif isinstance(note.index, int):
                found.extend(structure_errors(sub, note.type, join(path, note.index)))
            else:
                found.extend(structure_errors(sub, note.type, map_key(path, str(note.index))))
        return found
    if isinstance(exc, BaseExceptionGroup):
        return [e for sub in exc.exceptions for e in structure_errors(sub, cls, path)]
    return [FieldError(path=path, message=_message(exc, cls))]


def _note(exc: BaseException, attr: str) -> Any:
    for note in getattr(exc, "__notes__", ()):
        if hasattr(note, attr) and hasattr(note, "type"):
            return note
    return None


def _message(exc: BaseException, cls: Any) -> str:
    members = [a for a in get_args(cls) if a is not type(None)]
    if len(members) == 1:  # ``X | None``
        cls = members[0]
    if isinstance(cls, type) and issubclass(cls, enum.Enum) and isinstance(exc, ValueError):
        allowed = ", ".join(repr(m.value) for m in cls)
        return f"unsupported value: must be one of {allowed}"
    text = str(exc)
    return text.strip("'\"") if isinstance(exc, KeyError) else text


def structure(obj: Any, cls: type[T]) -> T:
    """Build a model of ``cls`` from JSON data; raises ``ValidationError`` listing every problem."""
    try:
        return CONVERTER.structure(obj, cls)
    except Exception as exc:  # cattrs raises groups and plain errors alike
        raise ValidationError(
            describe(obj, getattr(cls, "KIND", cls.__name__)), structure_errors(exc, cls)
        ) from exc


def unstructure(model: Any) -> Any:
    """JSON-ready data for a model (camelCase keys, RFC 3339 times, ``None`` omitted)."""
    return CONVERTER.unstructure(model)


@functools.cache
def _kinds() -> dict[str, type]:
    from cre.api.kinds import KINDS

    return {info.kind: info.model for info in KINDS}


def from_dict(obj: Mapping[str, Any]) -> Any:
    """The model for a CRE object dict, chosen by its ``kind``."""
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    model = _kinds().get(kind) if isinstance(kind, str) else None
    if model is None:
        known = ", ".join(sorted(_kinds()))
        raise ValidationError(
            describe(obj),
            [
                FieldError(
                    path="kind", message=f"unknown CRE kind (expected one of {known})", value=kind
                )
            ],
        )
    return structure(obj, model)


def to_dict(model: Any) -> dict[str, Any]:
    """The JSON dict of a CRE model (same as ``unstructure``, typed as a dict)."""
    data = unstructure(model)
    if not isinstance(data, dict):
        raise TypeError(f"{type(model).__name__} does not unstructure to an object")
    return data
