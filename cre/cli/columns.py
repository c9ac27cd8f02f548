"""Plain text columns, as ``kubectl get`` prints them: padded to the widest cell, never cut.

rich tables fit the terminal by folding or cutting cells (``aws-h100-no…``); a name a person
copies into the next command must stay whole, so the listings print plain columns and let a
narrow terminal wrap the line.
"""

from __future__ import annotations

from collections.abc import Sequence


def columns(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as lines of left-aligned columns two spaces apart; nothing is ever cut."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]
