"""``${name}`` substitution is the only templating, and it cannot run code."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cre.catalog.template import TemplateError, references, substitute, substitute_tree


def test_lone_reference_keeps_type() -> None:
    """A string that is exactly one reference becomes the value itself."""
    assert substitute("${n}", {"n": 8}) == 8
    assert substitute("${flag}", {"flag": True}) is True


def test_embedded_reference_becomes_text() -> None:
    """References inside text are rendered as strings; booleans in lower case."""
    assert substitute("-g ${n} x${flag}", {"n": 8, "flag": False}) == "-g 8 xfalse"


def test_shell_dollar_is_left_alone_and_escape_works() -> None:
    """``$PATH`` stays literal and ``$${`` writes ``${``."""
    assert substitute("$PATH:/bin $${n}", {"n": 1}) == "$PATH:/bin ${n}"


def test_unknown_and_malformed_references() -> None:
    """An unknown name or an unterminated reference raises instead of passing through."""
    with pytest.raises(TemplateError, match="unknown reference"):
        substitute("${x}", {})
    with pytest.raises(TemplateError, match="malformed"):
        references("${x")
    with pytest.raises(TemplateError, match="malformed"):
        references("${__import__('os')}")


def test_tree_substitution_covers_keys_and_lists() -> None:
    """Every string of a nested structure is substituted, keys included."""
    tree = {"a-${n}": ["${n}", {"b": "x${n}"}], "c": 3}
    assert substitute_tree(tree, {"n": 2}) == {"a-2": [2, {"b": "x2"}], "c": 3}


@given(st.text(alphabet=st.characters(blacklist_characters="$"), max_size=40))
def test_text_without_dollar_is_unchanged(text: str) -> None:
    """Strings with no ``$`` are returned untouched."""
    assert substitute(text, {}) == text
