"""JSONPath for golden cases: pick fields to drop, lists to sort and values to wait for.

A case names places in a JSON document in three ways (``normalise.drop``, ``normalise.sort``
and ``waitFor``), and a mismatch report names the first differing field. All four need the
*location* of a match, not only its value (a drop removes the key from its parent), which
Kubernetes' template JSONPath does not give; so this is a small evaluator of its own, pure.

Grammar (a subset of Goessner's JSONPath, as kubectl users write it)::

    $                       the document (may be omitted: ``.status.phase`` = ``$.status.phase``)
    .name  ['name']         a key (brackets for keys with dots, slashes or spaces)
    [3]  [-1]               a list position
    .*  [*]                 every key or every element
    ..name  ..*             a key, or anything, at any depth below
    [?(@.type == 'Ready')]  elements whose own path compares to a literal
                            (==, !=, <, <=, >, >=; bare ``[?(@.x)]`` tests presence)

Literals are quoted strings, numbers, ``true``, ``false`` and ``null``. ``{...}`` around the
expression (kubectl's template form) is accepted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import attrs

Location = tuple[str | int, ...]


class JsonPathError(ValueError):
    """An expression that does not parse; the message names it and the offending position."""


@attrs.frozen
class _Key:
    name: str


@attrs.frozen
class _Index:
    index: int


@attrs.frozen
class _Wild:
    pass


@attrs.frozen
class _Descend:
    """``..``: the current node and every node below it, then ``then`` on each."""

    then: _Key | _Wild


@attrs.frozen
class _Filter:
    path: tuple[_Key | _Index, ...]
    op: str | None
    literal: Any


_Step = _Key | _Index | _Wild | _Descend | _Filter

_NAME: Final = re.compile(r"[A-Za-z0-9_\-/]+")
_QUOTED: Final = re.compile(r"""\[\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")\s*\]""")
_INDEX: Final = re.compile(r"\[\s*(-?\d+)\s*\]")
_WILD_BRACKET: Final = re.compile(r"\[\s*\*\s*\]")
_FILTER: Final = re.compile(
    r"\[\s*\?\(\s*@((?:\.[A-Za-z0-9_\-/]+|\[\s*(?:'[^']*'|\"[^\"]*\"|-?\d+)\s*\])*)\s*"
    r"(?:(==|!=|<=|>=|<|>)\s*('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^)\s]+))?\s*\)\s*\]")
_OPS: Final = ("==", "!=", "<=", ">=", "<", ">")


@attrs.frozen
class JsonPath:
    """A parsed expression; :func:`parse` builds one."""

    text: str
    steps: tuple[_Step, ...]

    def find(self, doc: Any) -> list[tuple[Location, Any]]:
        """Every match as ``(location, value)``, in document order."""
        current: list[tuple[Location, Any]] = [((), doc)]
        for step in self.steps:
            current = [m for loc, value in current for m in _apply(step, loc, value)]
        return current

    def values(self, doc: Any) -> list[Any]:
        """The matched values, in document order."""
        return [value for _, value in self.find(doc)]

    def first(self, doc: Any, default: Any = None) -> Any:
        """The first matched value, or ``default`` when nothing matches."""
        found = self.find(doc)
        return found[0][1] if found else default


def parse(text: str) -> JsonPath:
    """Parse ``text``; :class:`JsonPathError` names the position that does not parse."""
    expr = text.strip()
    if expr.startswith("{") and expr.endswith("}"):
        expr = expr[1:-1].strip()
    pos = 1 if expr.startswith("$") else 0
    steps: list[_Step] = []
    while pos < len(expr):
        step, pos = _next_step(text, expr, pos)
        steps.append(step)
    return JsonPath(text=text, steps=tuple(steps))


def _next_step(text: str, expr: str, pos: int) -> tuple[_Step, int]:
    rest = expr[pos:]
    if rest.startswith(".."):
        inner = expr[pos + 2:]
        if inner.startswith("*"):
            return _Descend(_Wild()), pos + 3
        m = _NAME.match(inner)
        if m is not None:
            return _Descend(_Key(m.group(0))), pos + 2 + m.end()
        q = _QUOTED.match(inner)
        if q is not None:
            return _Descend(_Key(_unquote(q))), pos + 2 + q.end()
        raise _error(text, expr, pos + 2, "a key or * after '..'")
    if rest.startswith("."):
        if rest.startswith(".*"):
            return _Wild(), pos + 2
        m = _NAME.match(rest, 1)
        if m is None:
            raise _error(text, expr, pos + 1, "a key after '.'")
        return _Key(m.group(0)), m.end() + pos
    if pos == 0 and _NAME.match(rest):  # "status.phase": a leading key without '.'
        m = _NAME.match(rest)
        assert m is not None
        return _Key(m.group(0)), m.end()
    for pattern, build in ((_QUOTED, lambda m: _Key(_unquote(m))),
                           (_INDEX, lambda m: _Index(int(m.group(1)))),
                           (_WILD_BRACKET, lambda m: _Wild())):
        m = pattern.match(rest)
        if m is not None:
            return build(m), pos + m.end()
    f = _FILTER.match(rest)
    if f is not None:
        sub = parse("$" + f.group(1)).steps if f.group(1) else ()
        if not all(isinstance(s, _Key | _Index) for s in sub):
            raise _error(text, expr, pos, "a filter path of keys and positions only")
        literal = _literal(f.group(3)) if f.group(2) else None
        return _Filter(tuple(s for s in sub if isinstance(s, _Key | _Index)), f.group(2),
                       literal), pos + f.end()
    raise _error(text, expr, pos, "'.key', '..key', '[n]', '[*]', \"['key']\" or '[?(...)]'")


def _error(text: str, expr: str, pos: int, wanted: str) -> JsonPathError:
    return JsonPathError(f"JSONPath {text!r}: expected {wanted} at {expr[pos:pos + 20]!r}")


def _unquote(m: re.Match[str]) -> str:
    raw = m.group(1) if m.group(1) is not None else m.group(2)
    return re.sub(r"\\(.)", r"\1", raw)


def _literal(token: str) -> Any:
    token = token.strip()
    if token[:1] in ("'", '"'):
        return re.sub(r"\\(.)", r"\1", token[1:-1])
    try:
        return json.loads(token)
    except ValueError:
        return token  # a bare word compares as a string


def _children(loc: Location, value: Any) -> Iterator[tuple[Location, Any]]:
    if isinstance(value, Mapping):
        for key in value:
            yield (*loc, key), value[key]
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield (*loc, i), item


def _descendants(loc: Location, value: Any) -> Iterator[tuple[Location, Any]]:
    yield loc, value
    for child_loc, child in _children(loc, value):
        yield from _descendants(child_loc, child)


def _apply(step: _Step, loc: Location, value: Any) -> list[tuple[Location, Any]]:
    if isinstance(step, _Key):
        if isinstance(value, Mapping) and step.name in value:
            return [((*loc, step.name), value[step.name])]
        return []
    if isinstance(step, _Index):
        if isinstance(value, list | tuple) and -len(value) <= step.index < len(value):
            i = step.index % len(value)
            return [((*loc, i), value[i])]
        return []
    if isinstance(step, _Wild):
        return list(_children(loc, value))
    if isinstance(step, _Descend):
        return [m for d_loc, d in _descendants(loc, value) for m in _apply(step.then, d_loc, d)]
    return [(c_loc, c) for c_loc, c in _children(loc, value) if _holds(step, c)]


def _holds(f: _Filter, item: Any) -> bool:
    found: list[tuple[Location, Any]] = [((), item)]
    for s in f.path:
        found = [m for loc, v in found for m in _apply(s, loc, v)]
    if not found:
        return False
    if f.op is None:
        return True
    return any(_compare(v, f.op, f.literal) for _, v in found)


def _compare(a: Any, op: str, b: Any) -> bool:
    if op == "==":
        return bool(a == b)
    if op == "!=":
        return bool(a != b)
    try:
        return bool({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op])
    except TypeError:
        return False


def format_location(loc: Sequence[str | int]) -> str:
    """``$.metadata.labels['app.kubernetes.io/name']`` for a location tuple."""
    out = ["$"]
    for part in loc:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*", part):
            out.append(f".{part}")
        else:
            out.append("['" + part.replace("\\", "\\\\").replace("'", "\\'") + "']")
    return "".join(out)


def delete(doc: Any, path: JsonPath) -> int:
    """Remove every match of ``path`` from ``doc`` in place; the number removed."""
    found = [loc for loc, _ in path.find(doc) if loc]
    # Deepest and last first, so removing a list element does not shift the others' indexes.
    removed = 0
    for loc in sorted(found, key=_removal_order, reverse=True):
        parent = doc
        for part in loc[:-1]:
            parent = parent[part]
        last = loc[-1]
        present = (last in parent) if isinstance(parent, dict) else (
            isinstance(parent, list) and isinstance(last, int) and last < len(parent))
        if present:
            del parent[last]
            removed += 1
    return removed


def _removal_order(loc: Location) -> tuple[int, tuple[tuple[int, int | str], ...]]:
    return len(loc), tuple((0, p) if isinstance(p, int) else (1, p) for p in loc)


__all__ = ["JsonPath", "JsonPathError", "Location", "delete", "format_location", "parse"]
