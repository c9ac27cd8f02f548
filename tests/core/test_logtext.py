"""cre.core.job.logtext: what of a container log may reach a status (table and properties)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cre.core.common.observed import LogTail
from cre.core.job import failurelog as fl
from cre.core.job.logtext import FORBIDDEN, bounded_tail, first_bytes, last_bytes, sanitize

ESC = "\x1b"


@pytest.mark.parametrize(("raw", "clean"), [
    ("plain text\n", "plain text\n"),
    ("tab\tkept\n", "tab\tkept\n"),
    (f"{ESC}[31mred{ESC}[0m\n", "red\n"),
    (f"{ESC}[1;38;5;196mbold{ESC}[m", "bold"),
    (f"{ESC}[?25l{ESC}[2K{ESC}[1Gprogress", "progress"),
    (f"{ESC}]0;owned title\x07after", "after"),
    (f"{ESC}]8;;http://evil/\x1b\\link{ESC}]8;;{ESC}\\", "link"),
    (f"{ESC}]52;c;Y2xpcGJvYXJk\x07x", "x"),  # clipboard write
    (f"{ESC}P1$r0m{ESC}\\dcs", "dcs"),
    (f"{ESC}_apc payload{ESC}\\z", "z"),
    (f"{ESC}(Bcharset{ESC}=keypad{ESC}c", "charsetkeypad"),
    ("\x9b31m8bit\x9bm", "8bit"),
    ("\x9d0;t\x9cok", "ok"),
    ("10%\r20%\r30%\n", "10%\n20%\n30%\n"),
    ("dos line\r\nnext\r\n", "dos line\nnext\n"),
    ("nul\x00bel\x07bs\x08del\x7fend", "nulbelbsdelend"),
    ("vt\x0bff\x0c", "vtff"),
    ("bidi \u202egnp.exe\u202c \u2066iso\u2069", "bidi gnp.exe iso"),
    (f"unterminated {ESC}]0;title no end\n", "unterminated 0;title no end\n"),
    (f"dangling {ESC}", "dangling "),
    (f"{ESC}{ESC}[31mx", "x"),
    ("unicode ✓ 日本語 🚀\n", "unicode ✓ 日本語 🚀\n"),
    ("", ""),
])
def test_sanitize_table(raw: str, clean: str) -> None:
    assert sanitize(raw) == clean


_printable = st.text(st.characters(blacklist_characters=sorted(FORBIDDEN)))
_sequences = st.sampled_from([
    f"{ESC}[31m", f"{ESC}[0m", f"{ESC}[?1049h", f"{ESC}]0;title\x07", f"{ESC}]8;;u{ESC}\\",
    f"{ESC}P+q{ESC}\\", f"{ESC}(0", f"{ESC}c", "\x9b2J", "\x00", "\x07", "\x7f", "\x85",
    "\u202e",
])


@settings(max_examples=300, derandomize=True)
@given(st.text())
def test_sanitize_leaves_nothing_forbidden_and_is_idempotent(text: str) -> None:
    out = sanitize(text)
    assert not FORBIDDEN & set(out)
    assert sanitize(out) == out


@settings(max_examples=300, derandomize=True)
@given(st.lists(st.tuples(_printable, _sequences)))
def test_sanitize_removes_sequences_whole_and_keeps_the_text(
        parts: list[tuple[str, str]]) -> None:
    raw = "".join(text + seq for text, seq in parts)
    assert sanitize(raw) == "".join(text for text, _ in parts)


@settings(max_examples=300, derandomize=True)
@given(_printable)
def test_printable_text_passes_unchanged(text: str) -> None:
    assert sanitize(text) == text


@settings(max_examples=300, derandomize=True)
@given(st.text(), st.integers(min_value=0, max_value=64))
def test_last_and_first_bytes_bound_and_cut_on_characters(text: str, limit: int) -> None:
    for cut, keep in ((last_bytes, str.endswith), (first_bytes, str.startswith)):
        out = cut(text, limit)
        assert len(out.encode("utf-8")) <= limit
        assert keep(text, out)
        if len(text.encode("utf-8")) <= limit:
            assert out == text
        else:  # at most one character (4 bytes) short of the limit
            assert len(out.encode("utf-8")) > limit - 4


@settings(max_examples=200, derandomize=True)
@given(st.text(), st.integers(min_value=0, max_value=200))
def test_bounded_tail_is_idempotent(text: str, limit: int) -> None:
    once = bounded_tail(text, limit)
    assert bounded_tail(once, limit) == once
    assert not FORBIDDEN & set(once)


def test_a_log_without_newlines_is_cut_to_the_limit() -> None:
    text = "x" * (5 * 1024 * 1024) + "END"
    out = fl.trim_tail(text)
    assert len(out.encode()) == fl.LIMIT_BYTES
    assert out.endswith("END")


def test_kubelet_gone_body_and_read_errors_are_sanitized_and_bounded() -> None:
    body = fl.KUBELET_LOG_GONE + f" pod {ESC}]0;x\x07" + "y" * 10_000
    tail = LogTail(namespace="n", pod="p", container="c", text=body)
    error = fl.tail_error(tail)
    assert error is not None
    assert error.startswith(fl.KUBELET_LOG_GONE)
    assert ESC not in error and len(error.encode()) <= fl.ERROR_BYTES
    bad = LogTail(namespace="n", pod="p", container="c", error=f"boom {ESC}[31m" + "z" * 5000)
    error = fl.tail_error(bad)
    assert error is not None and ESC not in error and len(error.encode()) <= fl.ERROR_BYTES
