"""nccl-tests output to bandwidth rows, one line at a time, without holding the log.

A BandwidthMeasurement reads a launcher's log that can run to tens of megabytes (a long sweep,
NCCL_DEBUG=INFO chatter, several runs). The log is read as a stream, so the parser is fed one
line (or one chunk) at a time and keeps only a few counters and the per-size aggregate; it never
sees the whole text. It is pure: no I/O and no clock, the same lines always give the same rows.

The rules (the nccl-tests table, as printed by ``all_reduce_perf`` and friends)::

    #                                     out-of-place                       in-place
    #       size   count   type  redop  root   time  algbw  busbw #wrong   time  algbw  busbw #wrong
    #        (B) (elements)                    (us) (GB/s) (GB/s)          (us) (GB/s) (GB/s)
         8388608  2097152  float    sum    -1  104.2  80.50 140.87      0  103.1  81.35 142.37    0

* A line read with ``timestamps=true`` starts with the kubelet's RFC3339 stamp; it is split off
  (and remembered as the last timestamp seen, the shell's ``sinceTime`` anchor).
* Comment lines (``#`` first) are headers, banners and footers: never rows. A ``# nThread``
  banner starts a new run (rows keep their run number; several runs in one log all count).
* A row is matched with the profile's ``bandwidthResult`` regex, whose named groups ``size``,
  ``algBW`` and ``busBW`` pick the **out-of-place** columns (the shipped pattern,
  :data:`NCCL_ROW_REGEX`, also accepts the older layout without ``redop``/``root`` and an
  ``error`` check column, and ``N/A`` cells as nccl-tests prints them with ``-c 0``).
  A row whose bandwidth cell is ``N/A`` is counted as such and gives no sample.
* A row must end with the check column, so a last line cut in the middle of a number is not a
  row; a line interleaved with an NCCL warning does not match and is skipped; so is garbage.
  :class:`LineSplitter` also drops a trailing partial line (no newline) at the end of a read.
* ``NCCL INFO Using network <name>`` lines name a transport (``IB``, ``Socket``, ...).
* Aggregation (:class:`SizeAggregate`): per message size, the mean of every sample seen,
  rounded to two decimals once, sizes ascending. At most :data:`MAX_SIZES` distinct sizes are
  kept (a garbage log cannot grow memory); rows of further sizes are counted and dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Final

import attrs

#: The shipped ``nccl-bandwidth`` row pattern: out-of-place algbw/busbw, then the check column.
NCCL_ROW_REGEX: Final = (
    r"^\s*(?P<size>\d+)\s+\d+\s+[A-Za-z0-9_]+\s+(?:[A-Za-z_]+\s+-?\d+\s+)?"
    r"(?:[0-9.]+|N/A)\s+(?P<algBW>[0-9.]+|N/A)\s+(?P<busBW>[0-9.]+|N/A)"
    r"\s+(?:\d+|N/A|[0-9.]+e[+-]\d+)(?:\s|$)"
)
#: Named groups a bandwidth pattern must define.
REQUIRED_GROUPS: Final = ("size", "algBW", "busBW")
#: Distinct message sizes kept by one aggregate.
MAX_SIZES: Final = 4096
#: A line longer than this is cut before matching (a row is < 200 characters).
MAX_LINE_CHARS: Final = 4096

_TRANSPORT = re.compile(r"NCCL INFO Using network ([A-Za-z0-9_][A-Za-z0-9_ .-]*?)\s*$")
_NA = "N/A"
_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) ")


class PatternError(ValueError):
    """A bandwidth pattern that does not compile or lacks a required named group."""


def compile_row_pattern(regex: str) -> re.Pattern[str]:
    """``regex`` compiled; :class:`PatternError` naming what is wrong (syntax, missing group)."""
    try:
        pattern = re.compile(regex)
    except re.error as exc:
        raise PatternError(f"does not compile: {exc}") from None
    missing = [g for g in REQUIRED_GROUPS if g not in pattern.groupindex]
    if missing:
        raise PatternError("lacks the named group(s) " + ", ".join(f"(?P<{g}>...)"
                                                                   for g in missing))
    return pattern


NCCL_ROW_PATTERN: Final = compile_row_pattern(NCCL_ROW_REGEX)


def split_timestamp(line: str) -> tuple[str | None, str]:
    """``(timestamp, rest)`` of a line read with ``timestamps=true`` (``None``: no stamp)."""
    if len(line) > 20 and line[4] == "-" and line[10] == "T":
        found = _STAMP.match(line)
        if found:
            return found.group(1), line[found.end():]
    return None, line


@attrs.frozen(kw_only=True)
class BandwidthRow:
    """One table row: message size and out-of-place bandwidths in GB/s."""

    size_bytes: int
    alg_bw: float
    bus_bw: float
    run: int = 0
    timestamp: str | None = None


@attrs.define
class NcclLineParser:
    """Streaming state: feed lines with :meth:`feed`; counters describe what was seen."""

    pattern: re.Pattern[str] = NCCL_ROW_PATTERN
    lines: int = 0
    rows: int = 0
    na_rows: int = 0
    run: int = 0
    last_timestamp: str | None = None
    transports: set[str] = attrs.field(factory=set)
    _in_run: bool = False

    def feed(self, line: str) -> BandwidthRow | None:
        """The row ``line`` holds, if any (``line`` without its newline)."""
        self.lines += 1
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS]
        stamp, text = split_timestamp(line)
        if stamp is not None:
            self.last_timestamp = stamp
        body = text.lstrip()
        if not body:
            return None
        if body[0] == "#":
            if body.startswith("# nThread"):
                if self._in_run:
                    self.run += 1
                self._in_run = True
            return None
        if "Using network" in body:
            found = _TRANSPORT.search(body)
            if found:
                self.transports.add(found.group(1))
            return None
        match = self.pattern.match(text)
        if match is None:
            return None
        size, alg, bus = (match.group(g) for g in REQUIRED_GROUPS)
        if alg == _NA or bus == _NA or size is None or alg is None or bus is None:
            self.na_rows += 1
            return None
        try:
            row = BandwidthRow(size_bytes=int(size), alg_bw=float(alg), bus_bw=float(bus),
                               run=self.run, timestamp=stamp)
        except ValueError:
            return None
        self._in_run = True
        self.rows += 1
        return row


@attrs.define
class LineSplitter:
    """Chunks of a stream to complete lines; a trailing partial line is held, then dropped."""

    _partial: str = ""
    dropped_partial: str = ""

    def feed(self, chunk: str) -> Iterator[str]:
        """The complete lines ``chunk`` finishes (without their newlines)."""
        if not chunk:
            return
        parts = (self._partial + chunk).split("\n")
        self._partial = parts.pop()
        if len(self._partial) > MAX_LINE_CHARS:
            self._partial = self._partial[:MAX_LINE_CHARS]
        for part in parts:
            yield part[:-1] if part.endswith("\r") else part

    def finish(self) -> str:
        """End of the stream: the partial line (never a row) is dropped and returned."""
        self.dropped_partial, self._partial = self._partial, ""
        return self.dropped_partial


@attrs.frozen(kw_only=True)
class SizeResult:
    """The mean bandwidth at one size, as the status stores it."""

    size_bytes: int
    alg_bw: str
    bus_bw: str
    samples: int


@attrs.define
class SizeAggregate:
    """Per-size sums; :meth:`results` gives the means (two decimals, sizes ascending)."""

    _sums: dict[int, list[float]] = attrs.field(factory=dict)
    overflow_rows: int = 0

    def add(self, row: BandwidthRow) -> None:
        acc = self._sums.get(row.size_bytes)
        if acc is None:
            if len(self._sums) >= MAX_SIZES:
                self.overflow_rows += 1
                return
            acc = self._sums[row.size_bytes] = [0.0, 0.0, 0.0]
        acc[0] += row.alg_bw
        acc[1] += row.bus_bw
        acc[2] += 1

    def __len__(self) -> int:
        return len(self._sums)

    def results(self) -> tuple[SizeResult, ...]:
        return tuple(SizeResult(size_bytes=size, alg_bw=f"{acc[0] / acc[2]:.2f}",
                                bus_bw=f"{acc[1] / acc[2]:.2f}", samples=int(acc[2]))
                     for size, acc in sorted(self._sums.items()))


@attrs.frozen(kw_only=True)
class ParseSummary:
    """What one complete parse found."""

    results: tuple[SizeResult, ...]
    transports: tuple[str, ...]
    lines: int
    rows: int
    na_rows: int
    runs: int
    last_timestamp: str | None
    dropped_partial: bool


def parse_lines(lines: Iterable[str], *,
                pattern: re.Pattern[str] = NCCL_ROW_PATTERN) -> ParseSummary:
    """Every row of ``lines`` (complete lines, no newlines) aggregated per size."""
    parser = NcclLineParser(pattern)
    agg = SizeAggregate()
    for line in lines:
        row = parser.feed(line)
        if row is not None:
            agg.add(row)
    return _summary(parser, agg, dropped=False)


def parse_chunks(chunks: Iterable[str], *,
                 pattern: re.Pattern[str] = NCCL_ROW_PATTERN) -> ParseSummary:
    """:func:`parse_lines` over a stream cut anywhere; a trailing partial line is dropped."""
    parser = NcclLineParser(pattern)
    agg = SizeAggregate()
    splitter = LineSplitter()
    for chunk in chunks:
        for line in splitter.feed(chunk):
            row = parser.feed(line)
            if row is not None:
                agg.add(row)
    return _summary(parser, agg, dropped=bool(splitter.finish()))


def _summary(parser: NcclLineParser, agg: SizeAggregate, *, dropped: bool) -> ParseSummary:
    return ParseSummary(results=agg.results(), transports=tuple(sorted(parser.transports)),
                        lines=parser.lines, rows=parser.rows, na_rows=parser.na_rows,
                        runs=parser.run + 1 if parser.rows else 0,
                        last_timestamp=parser.last_timestamp, dropped_partial=dropped)
