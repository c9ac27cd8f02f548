"""Container log text made safe to store: terminal escape sequences out, size bounded.

A failed container's log tail is copied into ``status.failureLog.tail``, where ``kubectl get -o
yaml``, ``kubectl describe`` and dashboards print it. A log is whatever the workload wrote:
colour codes from a progress bar, an OSC sequence that retitles or hyperlinks the reader's
terminal, a stray NUL, carriage-return redraws, megabytes without a newline. Stored as is, those
bytes reach the next person's terminal (escape-sequence injection) and grow the object without
bound. This module is the one place that decides what survives:

* ANSI/ECMA-48 sequences are removed whole: CSI (``ESC [`` ... final byte, or the 8-bit ``0x9B``),
  OSC (``ESC ]`` or ``0x9D`` up to BEL or ST), the string sequences DCS/SOS/PM/APC up to ST, and
  the short ``ESC`` + intermediates + final forms (charset selection, keypad modes, ``ESC c``);
* an unterminated string sequence loses only its introducer, so the text after it stays readable
  (a terminal would swallow it, a record must not);
* ``CR LF`` becomes ``LF`` and a lone ``CR`` (a redraw) becomes ``LF``, so each redraw reads as a
  line instead of being glued to the next;
* every other C0 control except ``\\n`` and ``\\t``, ``DEL``, the C1 controls and the Unicode
  bidirectional overrides/isolates (which reorder what a reader sees) are dropped;
* :func:`last_bytes` keeps the end of a text (the part that explains a failure) within a byte
  budget, cut on a character boundary.

Pure functions over ``str``; the byte bound is on the UTF-8 encoding, as the API server counts.
"""

from __future__ import annotations

import re
from typing import Final

# ESC [ parameters intermediates final, or the 8-bit CSI.
_CSI: Final = r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
# OSC: ESC ] or 0x9D, a payload without controls, then BEL, ST (ESC \) or the 8-bit ST.
_OSC: Final = r"(?:\x1b\]|\x9d)[^\x00-\x1f\x7f-\x9f]*(?:\x07|\x1b\\|\x9c)"
# DCS, SOS, PM, APC (7- and 8-bit introducers) up to ST.
_STRING: Final = r"(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x00-\x1f\x7f-\x9f]*(?:\x1b\\|\x9c)"
# Any other escape: ESC, intermediates (0x20-0x2F), a final byte (0x30-0x7E).
_SHORT: Final = r"\x1b[ -/]*[0-~]"
_SEQUENCE: Final = re.compile("|".join((_CSI, _OSC, _STRING, _SHORT)))
# What is left after the sequences: lone ESC, C0 but TAB/LF, DEL, C1, bidi overrides/isolates.
_CONTROL: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CR: Final = re.compile("\r\n?")

#: Characters never present in :func:`sanitize`'s result.
FORBIDDEN: Final = frozenset(
    [chr(c) for c in range(0x20) if chr(c) not in "\n\t"]
    + [chr(c) for c in range(0x7F, 0xA0)]
    + [chr(c) for c in range(0x202A, 0x202F)]
    + [chr(c) for c in range(0x2066, 0x206A)]
)


def sanitize(text: str) -> str:
    """``text`` without terminal escape sequences or control characters (``\\n``/``\\t`` kept;
    carriage returns become line feeds). Idempotent; printable text passes unchanged."""
    if text.isprintable():  # the common case: nothing to do (no controls, no escapes)
        return text
    text = _CR.sub("\n", text)
    return _CONTROL.sub("", _SEQUENCE.sub("", text))


def last_bytes(text: str, limit: int) -> str:
    """The last ``limit`` UTF-8 bytes of ``text``, cut on a character boundary."""
    if len(text) * 4 <= limit:  # cannot exceed: no encoding needed
        return text
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[len(raw) - limit:].decode("utf-8", errors="ignore") if limit > 0 else ""


def first_bytes(text: str, limit: int) -> str:
    """The first ``limit`` UTF-8 bytes of ``text``, cut on a character boundary."""
    if len(text) * 4 <= limit:
        return text
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[:max(limit, 0)].decode("utf-8", errors="ignore")


def bounded_tail(text: str, limit: int) -> str:
    """``text`` sanitized, then its last ``limit`` bytes: what a status may hold."""
    return last_bytes(sanitize(text), limit)
