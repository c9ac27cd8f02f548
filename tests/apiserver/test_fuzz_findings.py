"""Emulator fixes found by the Job fuzz (tests/controller/test_fuzz_jobs.py)."""

from __future__ import annotations

from cre.testing.apiserver._schema_node import json_type
from cre.testing.apiserver.httpio import warning_text


def test_integers_beyond_int64_are_numbers() -> None:
    """Go decodes an integer beyond int64 as a float64, and kube-openapi counts a float as an
    integer only within 2**53: 10**40 in an int32 field is "must be of type integer"."""
    assert json_type(2**63 - 1) == "integer" and json_type(-(2**63)) == "integer"
    assert json_type(2**63) == "number" and json_type(10**40) == "number"
    assert json_type(float(2**53 - 1)) == "integer" and json_type(1e40) == "number"
    assert json_type(1.5) == "number"


def test_a_warning_quoting_control_characters_stays_one_header_line() -> None:
    assert warning_text('unknown field "a\x00\n\\b"') == \
        'unknown field \\"a\\x00\\x0a\\\\b\\"'
