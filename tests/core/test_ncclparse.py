"""The nccl-tests parser on the output shapes the real binaries print (table-driven)."""

# The fixtures are nccl-tests lines at their real width (up to 150 columns).
# ruff: noqa: E501

from __future__ import annotations

import pytest

from cre.core.measure.ncclparse import (
    MAX_SIZES,
    BandwidthRow,
    LineSplitter,
    NcclLineParser,
    PatternError,
    SizeAggregate,
    compile_row_pattern,
    parse_chunks,
    parse_lines,
    split_timestamp,
)

BANNER = """\
# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1000 on     node-0 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   1001 on     node-0 device  1 [0x2a] NVIDIA H100 80GB HBM3
#
"""
HEADER = """\
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""
# nccl-tests 2.x: out-of-place first, in-place second (in-place deliberately different).
CURRENT = BANNER + HEADER + """\
           8             2     float     sum      -1    58.31    0.00    0.00      0    58.40    0.00    0.00      0
     1048576        262144     float     sum      -1    61.20   17.13   32.12      0    60.10   17.45   32.71      0
  8589934592    2147483648     float     sum      -1  18660.0  460.33  863.12      0  18550.0  463.07  868.26      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 298.413
#
"""
# nccl-tests 1.x / all_gather of that era: no redop/root columns, a float ``error`` column.
OLD_LAYOUT = """\
#                                                     out-of-place                       in-place
#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)             (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144   float    71.23   14.72   27.60  0e+00    70.98   14.77   27.69  0e+00
    16777216       4194304   float    302.1   55.54  104.13  0e+00    301.8   55.59  104.23  0e+00
"""
# ``-c 0``: no data check, the #wrong cells are N/A; alltoall's in-place columns are N/A.
NA_CELLS = HEADER + """\
     1048576        131072     float    none      -1    80.11   13.09   12.27    N/A    80.05   13.10   12.28    N/A
    33554432       4194304     float    none      -1    410.2   81.80   76.69    N/A      N/A     N/A     N/A    N/A
"""
NA_BANDWIDTH = HEADER + """\
     1048576        131072     float    none      -1      N/A     N/A     N/A    N/A      N/A     N/A     N/A    N/A
"""
# ``-G 10``: CUDA graph launches; the banner says graph: 10, the table is the same.
GRAPH = BANNER.replace("graph: 0", "graph: 10") + HEADER + """\
     2097152        524288     float     sum      -1    40.12   52.27   98.01      0    39.90   52.56   98.55      0
"""
STAMPED = """\
2026-12-01T10:00:00.100000000Z # nThread 1 nGpus 8 minBytes 8 maxBytes 1024
2026-12-01T10:00:01.200000000Z      1048576        262144     float     sum      -1    61.20   17.13   32.12      0    60.10   17.45   32.71      0
2026-12-01T10:00:02.300000000Z     16777216       4194304     float     sum      -1    302.1   55.54  104.13      0    301.8   55.59  104.23      0
"""
INTERLEAVED = HEADER + """\
node-0:1234:1290 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>
node-0:1234:1290 [0] NCCL INFO Using network IB
node-1:1240:1301 [3] NCCL WARN Call to ibv_modify_qp failed with error Connection timed out
     1048576        262144     float     sum      -1    61.20   17.13   32.12      0    60.10   17.45   32.71      0
    16777216   node-1:1240:1301 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/IPC
     4194304       1048576     float     sum      -1   102.11   41.08   77.02      0   101.90   41.16   77.18      0
[1,3]<stderr>:node-1:1240:1301 [3] NCCL INFO Using network AWS Libfabric
"""
GARBAGE = """\
\x00\x01\x02 binary noise \xff
ssh: connect to host node-1 port 2222: Connection refused
12 apples and 3 oranges
     1048576   twelve     float     sum      -1    61.20   17.13   32.12      0
-1048576 262144 float sum -1 61.20 17.13 32.12 0
"""
SEVERAL_RUNS = (BANNER + HEADER + """\
     1048576        262144     float     sum      -1    61.20   10.00   20.00      0    60.10   10.50   20.50      0
""" + BANNER + HEADER + """\
     1048576        262144     float     sum      -1    61.20   30.00   40.00      0    60.10   30.50   40.50      0
""")

CASES = [
    # name, text, expected (size, algBW, busBW, samples) per size, transports, na_rows
    ("out-of-place columns taken, in-place ignored", CURRENT,
     [(8, "0.00", "0.00", 1), (1048576, "17.13", "32.12", 1),
      (8589934592, "460.33", "863.12", 1)], (), 0),
    ("multi-line header of the old layout, error column", OLD_LAYOUT,
     [(1048576, "14.72", "27.60", 1), (16777216, "55.54", "104.13", 1)], (), 0),
    ("#wrong N/A and in-place N/A still give the out-of-place sample", NA_CELLS,
     [(1048576, "13.09", "12.27", 1), (33554432, "81.80", "76.69", 1)], (), 0),
    ("N/A bandwidth gives no sample", NA_BANDWIDTH, [], (), 1),
    ("-G graph runs", GRAPH, [(2097152, "52.27", "98.01", 1)], (), 0),
    ("kubelet timestamps are split off", STAMPED,
     [(1048576, "17.13", "32.12", 1), (16777216, "55.54", "104.13", 1)], (), 0),
    ("interleaved warnings and transports", INTERLEAVED,
     [(1048576, "17.13", "32.12", 1), (4194304, "41.08", "77.02", 1)],
     ("AWS Libfabric", "IB"), 0),
    ("garbage gives nothing", GARBAGE, [], (), 0),
    ("several runs in one log are averaged per size", SEVERAL_RUNS,
     [(1048576, "20.00", "30.00", 2)], (), 0),
]


@pytest.mark.parametrize(("name", "text", "expected", "transports", "na_rows"), CASES,
                         ids=[c[0] for c in CASES])
def test_table(name: str, text: str, expected: list[tuple[int, str, str, int]],
               transports: tuple[str, ...], na_rows: int) -> None:
    """Each real output shape parses to the out-of-place bandwidth per size."""
    summary = parse_lines(text.splitlines())
    got = [(r.size_bytes, r.alg_bw, r.bus_bw, r.samples) for r in summary.results]
    assert got == expected
    assert summary.transports == transports
    assert summary.na_rows == na_rows


@pytest.mark.parametrize("cut", range(1, 120, 7))
def test_truncated_last_line_is_never_a_row(cut: int) -> None:
    """A last line cut anywhere (a read that hit its byte limit) gives no (wrong) sample."""
    row = ("  8589934592    2147483648     float     sum      -1  18660.0  460.33  863.12      0"
           "  18550.0  463.07  868.26      0")
    text = HEADER + row[:cut]
    summary = parse_chunks([text])
    assert summary.results == ()
    assert summary.dropped_partial is (cut > 0)
    # Even fed as a complete line, a cut inside the first three bandwidth columns is no row.
    fed = parse_lines([row[:cut]])
    if fed.results:
        assert fed.results[0].bus_bw == "863.12" and fed.results[0].alg_bw == "460.33"


def test_chunk_boundaries_do_not_matter() -> None:
    """The same log cut into chunks of any size gives the same summary as whole lines."""
    whole = parse_lines(INTERLEAVED.splitlines())
    for size in (1, 3, 17, 64, 4096):
        chunks = [INTERLEAVED[i:i + size] for i in range(0, len(INTERLEAVED), size)]
        assert parse_chunks(chunks).results == whole.results


def test_runs_counted() -> None:
    """A second ``# nThread`` banner starts run 1."""
    parser = NcclLineParser()
    rows = [r for line in SEVERAL_RUNS.splitlines() if (r := parser.feed(line))]
    assert [r.run for r in rows] == [0, 1]


def test_last_timestamp_is_the_anchor() -> None:
    """The last kubelet timestamp seen is remembered (the next sinceTime anchor)."""
    assert parse_lines(STAMPED.splitlines()).last_timestamp == "2026-12-01T10:00:02.300000000Z"


@pytest.mark.parametrize(("line", "stamp"), [
    ("2026-12-01T10:00:00Z hello", "2026-12-01T10:00:00Z"),
    ("2026-12-01T10:00:00.5+02:00 hello", "2026-12-01T10:00:00.5+02:00"),
    ("2026-12-01 not a stamp", None),
    ("     8  2 float", None),
])
def test_split_timestamp(line: str, stamp: str | None) -> None:
    """Only an RFC3339 stamp followed by a space is split off."""
    assert split_timestamp(line)[0] == stamp


@pytest.mark.parametrize(("regex", "message"), [
    ("(?P<size>\\d+", "does not compile"),
    ("(?P<size>\\d+) (?P<algBW>[0-9.]+)", "(?P<busBW>...)"),
])
def test_bad_pattern_named(regex: str, message: str) -> None:
    """A profile regex that does not compile or lacks a group is refused with the reason."""
    with pytest.raises(PatternError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("?", r"\?").replace(".", r"\.")):
        compile_row_pattern(regex)


def test_custom_pattern() -> None:
    """A profile's own regex decides what a row is."""
    pattern = compile_row_pattern(r"^size=(?P<size>\d+) alg=(?P<algBW>[\d.]+) bus=(?P<busBW>[\d.]+)")
    summary = parse_lines(["size=64 alg=1.5 bus=2.25", "size=64 alg=2.5 bus=3.75"],
                          pattern=pattern)
    assert [(r.size_bytes, r.alg_bw, r.bus_bw, r.samples) for r in summary.results] == [
        (64, "2.00", "3.00", 2)]


def test_sizes_bounded() -> None:
    """A log with more distinct sizes than MAX_SIZES keeps the first ones and counts the rest."""
    agg = SizeAggregate()
    for size in range(MAX_SIZES + 10):
        agg.add(BandwidthRow(size_bytes=size, alg_bw=1.0, bus_bw=1.0))
    assert len(agg) == MAX_SIZES and agg.overflow_rows == 10


def test_splitter_handles_crlf_and_long_partials() -> None:
    """CRLF endings are stripped; a huge partial line is bounded."""
    splitter = LineSplitter()
    assert list(splitter.feed("a\r\nb\n")) == ["a", "b"]
    assert list(splitter.feed("x" * 100_000)) == []
    assert len(splitter.finish()) <= 4096
