"""Counting words in status messages: "1 group failed", "3 groups failed", never "1 groups".

Messages are read by people (``kubectl describe``, ``cre status``) and compared by goldens, so
the same count is always spelled the same way. Pure: strings in, strings out.
"""

from __future__ import annotations


def plural(n: int, noun: str) -> str:
    """``noun`` as it reads after the number ``n``: group / groups."""
    if n == 1:
        return noun
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u", ""):
        return f"{noun[:-1]}ies"  # category -> categories, infra retry -> infra retries
    return f"{noun}s"


def count(n: int, noun: str) -> str:
    """``n`` and its noun: "1 group", "2 groups", "0 nodes"."""
    return f"{n} {plural(n, noun)}"


def every(n: int, noun: str) -> str:
    """The subject of "... succeeded" over all ``n``: "All 3 iterations", "1 iteration"."""
    return count(n, noun) if n == 1 else f"All {count(n, noun)}"
