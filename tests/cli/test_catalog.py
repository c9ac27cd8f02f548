"""``cre catalog list`` and ``cre catalog show``: the shipped catalog as tables."""

from __future__ import annotations

from cre.catalog import load_catalog
from cre.cli.catalogview import entry_rows

from .conftest import RunCli


def test_list_has_one_row_per_entry(cre: RunCli) -> None:
    """Every entry with its kind, platforms, architectures and default nodes."""
    catalog = load_catalog()
    rows = entry_rows(catalog)
    assert [r.entry for r in rows] == sorted(catalog.entries)
    loopback = next(r for r in rows if r.entry == "communication/nccl-loopback")
    assert loopback.kind == "single-pod" and "aws" in loopback.platforms
    assert "gb200" in loopback.architectures and loopback.default_nodes == "all eligible"
    run = cre("catalog", "list")
    assert run.code == 0
    for name in catalog.entries:
        assert name in run.out


def test_show_lists_options_with_defaults_and_descriptions(cre: RunCli) -> None:
    """Parameters, per-platform architectures with GPU counts, and the override blocks."""
    run = cre("catalog", "show", "communication/nccl-all-reduce")
    assert run.code == 0
    out = run.out
    assert "iterations" in out and "100" in out and "iterations per size (-n)" in out
    assert "h100 (8)" in out and "gb200 (4)" in out
    assert "when platform in {aws}: binary=/opt/nccl-tests/build/all_reduce_perf" in out
    assert "measurement: all_reduce (log profile nccl-bandwidth, every 30s)" in out
