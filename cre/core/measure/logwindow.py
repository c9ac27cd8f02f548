"""Which log lines a read has not counted yet: kubelet timestamps as keys, and the window filter.

A log is read with ``timestamps=true`` and ``sinceTime`` at whole-second resolution (the API's),
so consecutive reads overlap. The anchor of a read is the kubelet timestamp of the last line
counted plus how many lines carried exactly that timestamp; :class:`WindowFilter` drops every
line before the anchor and the first N at it, comparing timestamps as (seconds, nanoseconds),
never as strings. Pure; used by the BandwidthMeasurement core and shell (docs/design/015).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs

from cre.core.measure.ncclparse import split_timestamp


def stamp_key(stamp: str) -> tuple[str, int]:
    """An RFC3339(Nano) UTC kubelet timestamp as a sortable key (whole seconds, nanoseconds)."""
    dot = stamp.find(".", 19)
    if dot < 0:
        return stamp[:19], 0
    end = stamp.find("Z", dot)
    digits = stamp[dot + 1:end if end > 0 else len(stamp)][:9]
    return stamp[:19], int(digits.ljust(9, "0")) if digits.isdigit() else 0


def parse_stamp(stamp: str) -> datetime:
    """The timestamp as an aware datetime (microsecond precision)."""
    head, nanos = stamp_key(stamp)
    return datetime.fromisoformat(head + "+00:00") + timedelta(microseconds=nanos // 1000)


@attrs.define
class WindowFilter:
    """Skips lines already counted: before the anchor, and the first ``skip_lines`` lines at
    it. Remembers the last timestamp passed and how many lines carried it (the next anchor)."""

    anchor: str | None = None
    skip_lines: int = 0
    last_stamp: str | None = None
    lines_at_last: int = 0
    _anchor_key: tuple[str, int] | None = None
    _skipped_at_anchor: int = 0
    _past_anchor: bool = False

    def __attrs_post_init__(self) -> None:
        self._anchor_key = stamp_key(self.anchor) if self.anchor else None
        if self.anchor:
            self.last_stamp, self.lines_at_last = self.anchor, self.skip_lines

    def admit(self, line: str) -> bool:
        """Whether ``line`` is new (not counted by an earlier read)."""
        stamp, _ = split_timestamp(line)
        if stamp is None:
            return self._anchor_key is None
        if self._anchor_key is not None and not self._past_anchor:
            # A log is in time order: once a line is past the anchor, every later one is.
            key = stamp_key(stamp)
            if key < self._anchor_key:
                return False
            if key == self._anchor_key and self._skipped_at_anchor < self.skip_lines:
                self._skipped_at_anchor += 1
                return False
            self._past_anchor = key > self._anchor_key
        if stamp == self.last_stamp:
            self.lines_at_last += 1
        else:
            self.last_stamp, self.lines_at_last = stamp, 1
        return True
