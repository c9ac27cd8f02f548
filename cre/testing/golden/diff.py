"""Say how an output differs from its golden: the first differing field, then a unified diff.

A unified diff of two JSON files shows lines, not fields: with many similar objects (eight
pods, three ConfigMaps) a changed line does not say whose field it is. The report therefore
opens with the JSONPath of the first difference in file order and both values, then the diff.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from cre.testing.golden.jsonpath import Location, format_location

_MISSING = object()
PREVIEW = 200


def first_difference(expected: Any, actual: Any,
                     at: Location = ()) -> tuple[Location, Any, Any] | None:
    """The location and both values of the first difference in file order (sorted keys),
    or None when equal. A value absent on one side is reported as ``_MISSING``."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual)):
            found = first_difference(expected.get(key, _MISSING), actual.get(key, _MISSING),
                                     (*at, key))
            if found is not None:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        for i in range(max(len(expected), len(actual))):
            found = first_difference(expected[i] if i < len(expected) else _MISSING,
                                     actual[i] if i < len(actual) else _MISSING, (*at, i))
            if found is not None:
                return found
        return None
    if type(expected) is type(actual) and expected == actual:
        return None
    return at, expected, actual


def _preview(value: Any) -> str:
    if value is _MISSING:
        return "(absent)"
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= PREVIEW else text[:PREVIEW] + "..."


def describe_mismatch(expected_text: str, actual_text: str, *, golden: str) -> str:
    """The report for a golden (``golden`` names its file) that differs from the output."""
    lines = [f"output differs from {golden}"]
    try:
        found = first_difference(json.loads(expected_text), json.loads(actual_text))
    except ValueError:
        found = None
        lines.append("(the golden is not valid JSON; only the text diff follows)")
    if found is not None:
        loc, exp, act = found
        lines.append(f"first difference at {format_location(loc)}:")
        lines.append(f"  golden: {_preview(exp)}")
        lines.append(f"  actual: {_preview(act)}")
    diff = difflib.unified_diff(expected_text.splitlines(keepends=True),
                                actual_text.splitlines(keepends=True),
                                fromfile=golden, tofile="actual")
    return "\n".join(lines) + "\n" + "".join(diff)


__all__ = ["describe_mismatch", "first_difference"]
