"""Label and field selectors: parsing with the real server's error texts, and matching.

LIST, WATCH and deletecollection filter with these. The grammar follows
``k8s.io/apimachinery/pkg/labels/selector.go`` (``=``, ``==``, ``!=``, ``in``, ``notin``,
exists, ``!`` not-exists, ``gt``/``lt``) and ``pkg/fields`` (``=``, ``==``, ``!=`` only).
Parse errors raise :class:`SelectorError`, which the server answers with 400 BadRequest.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import Any

import attrs


class SelectorError(ValueError):
    """A selector that does not parse; the message is the server's text."""


class Op(enum.Enum):
    EQ = "="
    NE = "!="
    IN = "in"
    NOTIN = "notin"
    EXISTS = "exists"
    NOT_EXISTS = "!"
    GT = "gt"
    LT = "lt"


@attrs.frozen
class Requirement:
    key: str
    op: Op
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op is Op.EQ or self.op is Op.IN:
            return present and value in self.values
        if self.op is Op.NE or self.op is Op.NOTIN:
            return not present or value not in self.values
        if self.op is Op.EXISTS:
            return present
        if self.op is Op.NOT_EXISTS:
            return not present
        if not present or value is None:
            return False
        try:
            have = int(value)
        except ValueError:
            return False
        bound = int(self.values[0])
        return have > bound if self.op is Op.GT else have < bound


@attrs.frozen
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)


_TOKEN = re.compile(r"\s*(!=|==|=|\(|\)|,|!|[^\s!=(),]+)")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        m = _TOKEN.match(text, pos)
        if m is None:  # pragma: no cover - the pattern matches any non-space character
            raise SelectorError(f"unable to parse requirement: found '{text[pos]}'")
        out.append(m.group(1))
        pos = m.end()
    return out


def _check_key(key: str) -> None:
    prefix, _, name = key.rpartition("/")
    if not name or len(name) > 63 or not _NAME_PART.match(name) or (
        "/" in key and not prefix
    ):
        raise SelectorError(
            f'unable to parse requirement: key: Invalid value: "{key}": name part must consist '
            "of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character"
        )


def _check_value(value: str) -> None:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise SelectorError(
            f'unable to parse requirement: values[0]: Invalid value: "{value}": {_VALUE_MSG}'
        )


_KEYWORDS = {"in", "notin", "gt", "lt"}
_OPERATORS = {"=", "==", "!=", "(", ")", ",", "!"}


def parse_label_selector(text: str) -> LabelSelector:
    """Parse ``labelSelector=`` text; raises :class:`SelectorError` with the server's message."""
    toks = _tokens(text)
    reqs: list[Requirement] = []
    i = 0
    n = len(toks)
    while i < n:
        tok = toks[i]
        if tok == "!":
            i += 1
            key = toks[i] if i < n else ""
            if not key or key in _OPERATORS:
                raise SelectorError(
                    f"unable to parse requirement: found '{key}', expected: identifier"
                )
            _check_key(key)
            reqs.append(Requirement(key, Op.NOT_EXISTS))
            i += 1
        elif tok in _OPERATORS:
            raise SelectorError(
                f"found '{tok}', expected: !, identifier, or 'end of string'"
            )
        else:
            key = tok
            _check_key(key)
            i += 1
            if i >= n or toks[i] == ",":
                reqs.append(Requirement(key, Op.EXISTS))
            else:
                op_tok = toks[i]
                i += 1
                if op_tok in ("=", "==", "!="):
                    value = ""
                    if i < n and toks[i] not in _OPERATORS:
                        value = toks[i]
                        i += 1
                    _check_value(value)
                    op = Op.NE if op_tok == "!=" else Op.EQ
                    reqs.append(Requirement(key, op, (value,)))
                elif op_tok in ("in", "notin"):
                    if i >= n or toks[i] != "(":
                        found = toks[i] if i < n else ""
                        raise SelectorError(
                            f"unable to parse requirement: found '{found}', expected: '('"
                        )
                    i += 1
                    values: list[str] = []
                    while i < n and toks[i] != ")":
                        if toks[i] == ",":
                            i += 1
                            continue
                        _check_value(toks[i])
                        values.append(toks[i])
                        i += 1
                    if i >= n:
                        raise SelectorError(
                            "unable to parse requirement: found '', expected: ',', ')' or "
                            "identifier"
                        )
                    i += 1
                    if not values:
                        raise SelectorError(
                            "unable to parse requirement: for 'in', 'notin' operators, "
                            "values set can't be empty"
                        )
                    reqs.append(
                        Requirement(key, Op.IN if op_tok == "in" else Op.NOTIN, tuple(values))
                    )
                elif op_tok in ("gt", "lt"):
                    value = toks[i] if i < n else ""
                    i += 1
                    try:
                        int(value)
                    except ValueError:
                        raise SelectorError(
                            f"unable to parse requirement: for 'Gt', 'Lt' operators, the value "
                            f"must be an integer: {value}"
                        ) from None
                    reqs.append(Requirement(key, Op.GT if op_tok == "gt" else Op.LT, (value,)))
                else:
                    raise SelectorError(
                        f"unable to parse requirement: found '{op_tok}', expected: in, notin, "
                        "=, ==, !=, gt, lt"
                    )
        if i < n:
            if toks[i] != ",":
                raise SelectorError(f"found '{toks[i]}', expected: ',' or 'end of string'")
            i += 1
            if i >= n:
                raise SelectorError("found '', expected: identifier after ','")
    return LabelSelector(tuple(reqs))


@attrs.frozen
class FieldRequirement:
    field: str
    value: str
    negate: bool


@attrs.frozen
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, obj: Mapping[str, Any]) -> bool:
        for r in self.requirements:
            have = field_value(obj, r.field)
            if (have == r.value) == r.negate:
                return False
        return True

    def exact_name(self) -> str | None:
        for r in self.requirements:
            if r.field == "metadata.name" and not r.negate:
                return r.value
        return None


def parse_field_selector(text: str) -> FieldSelector:
    """Parse ``fieldSelector=`` text (``a=b,c!=d``)."""
    reqs: list[FieldRequirement] = []
    if not text.strip():
        return FieldSelector()
    for part in _split_unescaped(text):
        for op, negate in (("!=", True), ("==", False), ("=", False)):
            if op in part:
                field, _, value = part.partition(op)
                field = field.strip()
                if not field:
                    break
                reqs.append(FieldRequirement(field, _unescape(value.strip()), negate))
                break
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
    return FieldSelector(tuple(reqs))


def _split_unescaped(text: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            cur.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def field_value(obj: Mapping[str, Any], field: str) -> str:
    """The string a field selector compares against; missing values compare as ``""``."""
    if field == "spec.host":
        field = "spec.nodeName"
    if field == "source" and obj.get("kind") == "Event":
        return str((obj.get("source") or {}).get("component", ""))
    cur: Any = obj
    for part in field.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
        if cur is None:
            return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, list):
        if field == "status.podIPs":
            return ",".join(str(x.get("ip", "")) for x in cur if isinstance(x, Mapping))
        return ""
    return str(cur)


def selector_string(selector: Any) -> str:
    """A ``metav1.LabelSelector`` in the label-selector string syntax (sorted by key)."""
    if not isinstance(selector, dict):
        return ""
    parts: list[tuple[str, str]] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        parts.append((str(key), f"{key}={value}"))
    for expr in selector.get("matchExpressions") or ():
        key, op = str(expr.get("key", "")), expr.get("operator")
        values = ",".join(sorted(str(v) for v in expr.get("values") or ()))
        text = {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                "Exists": key, "DoesNotExist": f"!{key}"}.get(str(op), key)
        parts.append((key, text))
    return ",".join(text for _, text in sorted(parts))
