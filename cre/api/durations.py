"""Go-style durations (``"90s"``, ``"1h30m"``) in specs, bounded so no consumer can overflow.

A duration string that matches the pattern can still be absurd: ``99999999999h`` is eleven
million centuries, which ``timedelta`` cannot hold and ``now + timeout`` cannot add, and a Job
carrying it used to break every reconcile. Every duration field is therefore bounded three
ways: the CRD limits its length (:data:`DURATION_MAX_LENGTH`) and its value (a CEL rule
``duration(self) <= duration('720h')``), validation reports a value over the bound with its
field path, and :func:`duration_seconds` computes in floats (never ``timedelta``) so even a
value that slipped past an older CRD is a number the caller can clamp.
"""

from __future__ import annotations

import re
from typing import Final

# Longest duration string a spec may carry ("1h30m", "720h", "2.5s" are all far shorter).
DURATION_MAX_LENGTH: Final = 32
# The longest duration any spec field accepts: 30 days. Longer timeouts or intervals are
# mistakes (a certification run holds GPUs for hours, not months).
MAX_DURATION: Final = "720h"

_PART: Final = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
                        "h": 3600.0}


def duration_seconds(text: str) -> float:
    """A Go-style duration in seconds (a float: any length of digits parses without
    overflowing); ``ValueError`` when ``text`` is not a duration."""
    pos, total = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"invalid duration {text!r}: expected e.g. '90s', '1h30m'")
    return total


MAX_DURATION_SECONDS: Final = duration_seconds(MAX_DURATION)
