"""The differential's wire records: body forms and masks that keep everything else as sent."""

from __future__ import annotations

from cre.testing.apiserver.errors import Qualified, already_exists
from cre.testing.controlplane.differential import compare
from cre.testing.controlplane.wire import body_form, go_compact, mask_raw

STATUS_409 = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
              b'"message":"pods \\"p\\" already exists","reason":"AlreadyExists",'
              b'"details":{"name":"p","kind":"pods"},"code":409}')


def test_body_form_tells_the_layouts_apart() -> None:
    """A body is Go-compact with or without the newline, indented, other JSON or text."""
    assert body_form(STATUS_409 + b"\n") == "go-json+newline"
    assert body_form(STATUS_409) == "go-json"
    assert body_form(b'{\n  "kind": "Status"\n}') == "json-indented"
    assert body_form(b'{"a": 1}') == "json-other"
    assert body_form(b'{"a":"<"}\n') == "json-other"  # Go writes \u003c
    assert body_form(b"404 page not found\n") == "text"
    assert body_form(b"") == "empty"


def test_go_compact_escapes_as_go() -> None:
    """HTML characters and the two line separators are escaped, other UTF-8 kept."""
    assert go_compact({"a": "<&>\u2028é"}) == b'{"a":"\\u003c\\u0026\\u003e\\u2028\xc3\xa9"}'


def test_emulator_error_bodies_are_go_compact_with_newline() -> None:
    """The emulator's own Status encoding is the form the real server sends."""
    body = already_exists(Qualified(group="", resource="pods", kind="Pod"), "p").encode()
    assert body == STATUS_409 + b"\n"
    assert body_form(body) == "go-json+newline"


def test_mask_raw_keeps_order_and_masks_run_values() -> None:
    """Run-specific values are masked in place; keys, order and escapes are untouched."""
    raw = ('{"kind":"Status","metadata":{"name":"g-x1y2z","generateName":"g-",'
           '"uid":"0b8f0c1e-1111-2222-3333-444455556666","resourceVersion":"42",'
           '"creationTimestamp":"2026-01-01T00:00:00Z",'
           '"managedFields":[{"m":"]}\\""},{"t":"2026-01-01T00:00:00Z"}],"z":"\\u003c"},'
           '"message":"rv 42 \\"q\\"","code":410}\n')
    assert mask_raw(raw) == (
        '{"kind":"Status","metadata":{"name":"g-<suffix>","generateName":"g-","uid":"<uid>",'
        '"resourceVersion":"<rv>","creationTimestamp":"<ts>","managedFields":"<masked>",'
        '"z":"\\u003c"},"message":"<see body>","code":410}\n')


def test_a_missing_newline_is_a_difference() -> None:
    """Two error records equal when parsed but not on the wire differ at ``wire.form``."""
    def record(form: str) -> dict[str, object]:
        return {"status": 409, "body": {"code": 409},
                "wire": {"line": "HTTP/1.1 409 Conflict", "type": "application/json",
                         "form": form, "bytes": "x"}}

    outcome = compare("s", [record("go-json")], [record("go-json+newline")], ())
    assert [d.path for d in outcome.differences] == ["step[0].wire.form"]
    assert outcome.verdict == "differing"
