"""when: blocks merge maps, replace lists and delete on null."""

from __future__ import annotations

from cre.catalog.merge import deep_merge


def test_maps_merge_lists_replace_null_deletes() -> None:
    """The three merge rules in one example; the inputs are not modified."""
    base = {"env": {"A": "1", "B": "2"}, "args": ["x", "y"], "gone": {"k": 1}}
    over = {"env": {"B": "3", "C": None}, "args": ["z"], "gone": None, "new": {"k": None, "j": 2}}
    assert deep_merge(base, over) == {
        "env": {"A": "1", "B": "3"},
        "args": ["z"],
        "new": {"j": 2},
    }
    assert base["env"] == {"A": "1", "B": "2"}
