"""normalise() strips server identity and clocks; to_json() fixes the file format."""

from __future__ import annotations

from typing import Any

from cre.testing.golden import normalise, to_json


def test_identity_and_times_removed() -> None:
    """uids, resourceVersions and timestamps go; condition times become null; rest stays."""
    obj: dict[str, Any] = {
        "metadata": {
            "name": "a",
            "uid": "u",
            "resourceVersion": "7",
            "generation": 2,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{}],
            "ownerReferences": [{"kind": "Job", "name": "j", "uid": "u2", "controller": True}],
        },
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ],
            "startTime": "2026-01-01T00:00:00Z",
        },
    }
    assert normalise(obj) == {
        "metadata": {
            "name": "a",
            "ownerReferences": [{"kind": "Job", "name": "j", "controller": True}],
        },
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": None}],
            "startTime": None,
        },
    }
    assert obj["metadata"]["uid"] == "u"


def test_nested_objects_normalised_too() -> None:
    """Objects inside lists and maps (e.g. collected children) are normalised as well."""
    out = normalise(
        {
            "Pod/x": {"metadata": {"uid": "1", "name": "x"}},
            "items": [{"metadata": {"resourceVersion": "3"}}],
        }
    )
    assert out == {"Pod/x": {"metadata": {"name": "x"}}, "items": [{"metadata": {}}]}


def test_json_format() -> None:
    """Sorted keys, two-space indent, trailing newline."""
    assert to_json({"b": 1, "a": [1]}) == '{\n  "a": [\n    1\n  ],\n  "b": 1\n}\n'
