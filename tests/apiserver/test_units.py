"""Pure helpers of the emulator: selector grammar, JSONPath, durations, continue tokens."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cre.testing.apiserver.errors import ApiError
from cre.testing.apiserver.jsonpath import evaluate
from cre.testing.apiserver.query import decode_continue, encode_continue
from cre.testing.apiserver.selectors import (
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)
from cre.testing.apiserver.table import human_duration

CONDS = {"status": {"conditions": [
    {"type": "Ready", "status": "False", "reason": "Wait"},
    {"type": "Done", "status": "True", "reason": "Finished"}]}}


def test_jsonpath_filters_and_indexes() -> None:
    """Printer-column JSONPath: filters, indexes, wildcards and missing keys."""
    assert evaluate('.status.conditions[?(@.status=="True")].reason', CONDS) == ["Finished"]
    assert evaluate(".status.conditions[0].type", CONDS) == ["Ready"]
    assert evaluate(".status.conditions[-1].type", CONDS) == ["Done"]
    assert evaluate(".status.conditions[*].type", CONDS) == ["Ready", "Done"]
    assert evaluate(".status.missing.deeper", CONDS) == []
    assert evaluate("{.status.conditions[?(@.type=='Ready')].status}", CONDS) == ["False"]
    assert evaluate(".metadata.labels['app.kubernetes.io/name']",
                    {"metadata": {"labels": {"app.kubernetes.io/name": "x"}}}) == ["x"]


@pytest.mark.parametrize(("seconds", "text"), [
    (5, "5s"), (119, "119s"), (150, "2m30s"), (600, "10m"), (3 * 3600 + 60, "3h1m"),
    (10 * 3600, "10h"), (3 * 86400 + 3600, "3d1h"), (30 * 86400, "30d"),
    (3 * 365 * 86400, "3y"),
])
def test_human_duration(seconds: int, text: str) -> None:
    """Ages print like kubectl's HumanDuration."""
    assert human_duration(seconds) == text


def test_label_selector_errors() -> None:
    """Malformed selectors raise with the parser's wording."""
    with pytest.raises(SelectorError, match="values set can't be empty"):
        parse_label_selector("a in ()")
    with pytest.raises(SelectorError, match="expected: ',' or 'end of string'"):
        parse_label_selector("a=b c")
    with pytest.raises(SelectorError, match="Invalid value"):
        parse_label_selector("a=b~c")


def test_field_selector_matching() -> None:
    """Field selectors compare strings; booleans print as true/false; missing is empty."""
    sel = parse_field_selector("spec.unschedulable=true,metadata.name!=x")
    assert sel.matches({"metadata": {"name": "n"}, "spec": {"unschedulable": True}})
    assert not sel.matches({"metadata": {"name": "x"}, "spec": {"unschedulable": True}})
    assert parse_field_selector("spec.nodeName=").matches({"metadata": {}, "spec": {}})
    with pytest.raises(SelectorError, match="can't understand"):
        parse_field_selector("nonsense")


@given(st.integers(min_value=0, max_value=2**62), st.text(max_size=20), st.text(max_size=20))
def test_continue_token_round_trip(rv: int, ns: str, name: str) -> None:
    """Continue tokens decode to the revision and start key they encode."""
    ns = ns.replace("/", "")
    assert decode_continue(encode_continue(rv, (ns, name))) == (rv, (ns, name))


def test_bad_continue_token() -> None:
    """Garbage tokens are a 400."""
    with pytest.raises(ApiError) as exc:
        decode_continue("%%%")
    assert exc.value.code == 400
