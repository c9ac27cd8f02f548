"""Validation causes worded as the real API server words them.

A 422 Invalid Status lists one cause per field error; clients (kubectl, controllers' error
matching, humans) read the field path and the fixed phrases (`Required value`, `Unsupported
value: ...`), so the emulator builds them with the same rules as
`k8s.io/apimachinery/pkg/util/validation/field/errors.go`, including the value rendering that
changed in 1.34 (bare numbers, Go-quoted strings, compact JSON for the rest; `"null"` before).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterable
from typing import Any

import attrs


class CauseType(enum.Enum):
    """The `reason` of a Status cause (`field.ErrorType` in Go)."""

    REQUIRED = "FieldValueRequired"
    INVALID = "FieldValueInvalid"
    TYPE_INVALID = "FieldValueTypeInvalid"
    NOT_SUPPORTED = "FieldValueNotSupported"
    FORBIDDEN = "FieldValueForbidden"
    DUPLICATE = "FieldValueDuplicate"
    TOO_LONG = "FieldValueTooLong"
    TOO_MANY = "FieldValueTooMany"
    NOT_FOUND = "FieldValueNotFound"
    INTERNAL = "InternalError"


# Cause types whose presence stops CEL evaluation on custom resources.
STOPPING = frozenset({
    CauseType.REQUIRED.value, CauseType.NOT_SUPPORTED.value, CauseType.TOO_LONG.value,
    CauseType.TOO_MANY.value, CauseType.TYPE_INVALID.value,
})


@attrs.frozen
class Cause:
    """One field error of a 422 Invalid answer."""

    type: str
    message: str
    field: str

    def to_status_cause(self) -> dict[str, str]:
        """The entry of `details.causes` in the Status body."""
        return {"reason": self.type, "message": self.message, "field": self.field}

    def text(self) -> str:
        """The `<field>: <message>` form used in the Status message."""
        return f"{self.field}: {self.message}" if self.field else self.message


def parse_version(version: str) -> tuple[int, int]:
    """`"1.33"`, `"v1.33.2"` -> (1, 33)."""
    match = re.match(r"v?(\d+)\.(\d+)", version)
    if not match:
        raise ValueError(f"kubernetes version {version!r} is not of the form MAJOR.MINOR")
    return int(match.group(1)), int(match.group(2))


def render(value: Any, *, version: tuple[int, int] = (1, 34)) -> str:
    """A value as field errors print it."""
    if value is None:
        return "null" if version >= (1, 34) else '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def required(field: str, detail: str = "") -> Cause:
    return Cause(CauseType.REQUIRED.value, _join("Required value", detail), field)


def forbidden(field: str, detail: str = "") -> Cause:
    return Cause(CauseType.FORBIDDEN.value, _join("Forbidden", detail), field)


def invalid(field: str, value: Any, detail: str = "", *, version: tuple[int, int] = (1, 34),
            type_invalid: bool = False) -> Cause:
    kind = CauseType.TYPE_INVALID if type_invalid else CauseType.INVALID
    return Cause(kind.value, _join(f"Invalid value: {render(value, version=version)}", detail),
                 field)


def invalid_omitted(field: str, detail: str) -> Cause:
    """An Invalid error whose value is omitted (`Invalid value: <detail>`)."""
    return Cause(CauseType.INVALID.value, f"Invalid value: {detail}", field)


def not_supported(field: str, value: Any, supported: Iterable[Any], *,
                  version: tuple[int, int] = (1, 34)) -> Cause:
    values = ", ".join(render(v, version=version) for v in supported)
    body = f"Unsupported value: {render(value, version=version)}"
    if values:
        body += f": supported values: {values}"
    return Cause(CauseType.NOT_SUPPORTED.value, body, field)


def duplicate(field: str, value: Any, *, version: tuple[int, int] = (1, 34)) -> Cause:
    return Cause(CauseType.DUPLICATE.value, f"Duplicate value: {render(value, version=version)}",
                 field)


def too_long(field: str, limit: int) -> Cause:
    unit = "byte" if limit == 1 else "bytes"
    return Cause(CauseType.TOO_LONG.value, f"Too long: may not be more than {limit} {unit}",
                 field)


def too_many(field: str, actual: int, limit: int) -> Cause:
    unit = "item" if limit == 1 else "items"
    return Cause(CauseType.TOO_MANY.value,
                 f"Too many: {actual}: must have at most {limit} {unit}", field)


def _join(head: str, detail: str) -> str:
    return f"{head}: {detail}" if detail else head


def aggregate_message(causes: list[Cause]) -> str:
    """The aggregate after `is invalid: ` (one error bare, several in brackets, de-duplicated)."""
    texts: list[str] = []
    for cause in causes:
        text = cause.text()
        if text not in texts:
            texts.append(text)
    if len(texts) == 1:
        return texts[0]
    return "[" + ", ".join(texts) + "]"
