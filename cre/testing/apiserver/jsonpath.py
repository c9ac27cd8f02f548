"""A small Kubernetes-flavoured JSONPath for CRD printer columns and selectable fields.

Printer columns are JSONPath expressions evaluated by ``k8s.io/client-go/util/jsonpath``;
CRDs use the simple forms: ``.a.b``, ``.a['x.y']``, ``.a[0]``, ``.a[*].b``, ``.a[-1]`` and
filters such as ``.status.conditions[?(@.type=="Ready")].status`` (``==``, ``!=``, ``<``,
``>``, ``<=``, ``>=`` and bare existence). Missing keys yield no result instead of an error,
as ``allowMissingKeys`` does for tables.
"""

from __future__ import annotations

import json
import re
from typing import Any


class JsonPathError(ValueError):
    """An expression the evaluator does not understand."""


_FILTER = re.compile(r"^\?\(\s*@((?:\.[\w-]+|\['[^']*'\])*)\s*(?:(==|!=|<=|>=|<|>)\s*(.+?))?\s*\)$")


def _split(path: str) -> list[str]:
    """Split into steps: ``name`` for fields, ``[...]`` for brackets."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1].strip()
    if path.startswith("$"):
        path = path[1:]
    steps: list[str] = []
    i = 0
    while i < len(path):
        ch = path[i]
        if ch == ".":
            i += 1
            m = re.match(r"[\w\-/]+|\*", path[i:])
            if m is None:
                if i >= len(path):
                    break
                if path[i] == "[":
                    continue
                raise JsonPathError(f"unrecognized character in {path!r} at {i}")
            steps.append(m.group(0))
            i += m.end()
        elif ch == "[":
            depth, j = 0, i
            while j < len(path):
                if path[j] == "[":
                    depth += 1
                elif path[j] == "]":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= len(path):
                raise JsonPathError(f"unterminated [ in {path!r}")
            steps.append(path[i : j + 1])
            i = j + 1
        else:
            m = re.match(r"[\w\-/]+", path[i:])
            if m is None:
                raise JsonPathError(f"unrecognized character in {path!r} at {i}")
            steps.append(m.group(0))
            i += m.end()
    return steps


def _literal(text: str) -> Any:
    text = text.strip()
    if text.startswith(("'", '"')) and text.endswith(text[0]) and len(text) >= 2:
        return text[1:-1]
    try:
        return json.loads(text)
    except ValueError:
        return text


def _compare(a: Any, op: str, b: Any) -> bool:
    if op == "==":
        return bool(a == b or (isinstance(a, int | float) and str(a) == str(b)))
    if op == "!=":
        return not _compare(a, "==", b)
    try:
        if op == "<":
            return bool(a < b)
        if op == ">":
            return bool(a > b)
        if op == "<=":
            return bool(a <= b)
        return bool(a >= b)
    except TypeError:
        return False


def _step(values: list[Any], step: str) -> list[Any]:
    out: list[Any] = []
    if not step.startswith("["):
        for v in values:
            if step == "*":
                if isinstance(v, dict):
                    out.extend(v.values())
                elif isinstance(v, list):
                    out.extend(v)
            elif isinstance(v, dict) and step in v:
                out.append(v[step])
        return out
    inner = step[1:-1].strip()
    fm = _FILTER.match(inner)
    if fm is not None:
        sub = fm.group(1)
        op, lit = fm.group(2), fm.group(3)
        for v in values:
            for item in v if isinstance(v, list) else []:
                got = evaluate(sub, item) if sub else [item]
                if not got:
                    continue
                if op is None or _compare(got[0], op, _literal(lit)):
                    out.append(item)
        return out
    if inner == "*":
        return _step(values, "*")
    if inner.startswith(("'", '"')):
        key = inner[1:-1]
        return [v[key] for v in values if isinstance(v, dict) and key in v]
    if ":" in inner:
        a, _, b = inner.partition(":")
        for v in values:
            if isinstance(v, list):
                out.extend(v[int(a) if a else None : int(b) if b else None])
        return out
    try:
        idx = int(inner)
    except ValueError:
        raise JsonPathError(f"unsupported subscript {step!r}") from None
    for v in values:
        if isinstance(v, list) and -len(v) <= idx < len(v):
            out.append(v[idx])
    return out


def evaluate(path: str, obj: Any) -> list[Any]:
    """Every value ``path`` selects in ``obj`` (empty when keys are missing)."""
    values = [obj]
    for step in _split(path):
        values = _step(values, step)
        if not values:
            return []
    return values
