"""Status messages count things in proper English: "1 group", "2 groups", "1 category"."""

from __future__ import annotations

import pytest

from cre.core.common.wording import count, every, plural


@pytest.mark.parametrize(("n", "noun", "expected"), [
    (1, "group", "1 group"), (2, "group", "2 groups"), (0, "node", "0 nodes"),
    (1, "category", "1 category"), (3, "category", "3 categories"),
    (2, "infra retry", "2 infra retries"), (2, "day", "2 days"),
    (2, "message size", "2 message sizes"),
])
def test_count_spells_the_noun_for_the_number(n: int, noun: str, expected: str) -> None:
    """One takes the singular, anything else the plural (consonant + y -> ies)."""
    assert count(n, noun) == expected
    assert plural(n, noun) == expected.split(" ", 1)[1]


def test_every_says_all_only_for_more_than_one() -> None:
    """"All 1 iterations" never appears: one is "1 iteration", more are "All N iterations"."""
    assert every(1, "iteration") == "1 iteration"
    assert every(3, "iteration") == "All 3 iterations"
    assert every(2, "category") == "All 2 categories"
