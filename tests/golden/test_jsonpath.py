"""The golden JSONPath finds values with their locations, deletes them and names them."""

from __future__ import annotations

from typing import Any

import pytest

from cre.testing.golden.jsonpath import JsonPathError, delete, format_location, parse

DOC: dict[str, Any] = {
    "metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "web"}},
    "status": {"conditions": [{"type": "Ready", "status": "True", "n": 3},
                              {"type": "Synced", "status": "False", "n": 1}]},
    "items": [{"metadata": {"name": "x"}}, {"metadata": {"name": "y"}}],
}


@pytest.mark.parametrize(("expr", "values"), [
    ("$.metadata.name", ["a"]),
    (".metadata.name", ["a"]),
    ("metadata.name", ["a"]),
    ("{.metadata.name}", ["a"]),
    ("$.metadata.labels['app.kubernetes.io/name']", ["web"]),
    ('$.metadata.labels["app.kubernetes.io/name"]', ["web"]),
    ("$.status.conditions[1].type", ["Synced"]),
    ("$.status.conditions[-1].type", ["Synced"]),
    ("$.status.conditions[*].type", ["Ready", "Synced"]),
    ("$.status.conditions.*.n", [3, 1]),
    ("$..name", ["a", "x", "y"]),
    ("$.status.conditions[?(@.type == 'Ready')].status", ["True"]),
    ('$.status.conditions[?(@.type=="Synced")].status', ["False"]),
    ("$.status.conditions[?(@.n > 2)].type", ["Ready"]),
    ("$.status.conditions[?(@.n)].type", ["Ready", "Synced"]),
    ("$.status.conditions[?(@.missing)].type", []),
    ("$.nothing.here", []),
    ("$.status.conditions[5]", []),
])
def test_values(expr: str, values: list[Any]) -> None:
    """The supported forms select what kubectl users expect."""
    assert parse(expr).values(DOC) == values


def test_locations_and_names() -> None:
    """A match carries its location; format_location writes it back as JSONPath."""
    (loc, value), = parse("$.metadata.labels['app.kubernetes.io/name']").find(DOC)
    assert value == "web"
    assert format_location(loc) == "$.metadata.labels['app.kubernetes.io/name']"
    assert format_location(("objects", "Job/x", "spec", 0)) == "$.objects['Job/x'].spec[0]"


def test_delete_removes_every_match() -> None:
    """Deleting list elements by filter keeps the others in order."""
    doc = {"c": [{"t": "a"}, {"t": "b"}, {"t": "a"}, {"t": "c"}], "m": {"x": 1, "y": 2}}
    assert delete(doc, parse("$.c[?(@.t == 'a')]")) == 2
    assert delete(doc, parse("$..y")) == 1
    assert doc == {"c": [{"t": "b"}, {"t": "c"}], "m": {"x": 1}}


@pytest.mark.parametrize("expr", ["$.a[", "$..", "$.a[?(@.x ~ 1)]", "$.a b"])
def test_errors_name_the_position(expr: str) -> None:
    """An expression that does not parse says what was expected where."""
    with pytest.raises(JsonPathError, match="expected"):
        parse(expr)
