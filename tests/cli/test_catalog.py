"""``cre catalog list`` and ``cre catalog show``: the shipped catalog as tables."""

from __future__ import annotations

import pytest

from cre.catalog import load_catalog
from cre.cli.catalogview import entry_rows
from cre.cli.exitcodes import ExitCode

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


def test_list_prints_the_real_platform_by_architecture_matrix(cre: RunCli) -> None:
    """One line per entry and platform with that platform's own architectures: aws lists
    gb200, gb300 and h100 only, never l40s or a100."""
    catalog = load_catalog()
    run = cre("catalog", "list")
    lines = run.out.splitlines()
    assert lines[0].split() == ["ENTRY", "KIND", "PLATFORM", "ARCHITECTURES"]
    start = next(i for i, line in enumerate(lines)
                 if line.startswith("communication/nccl-all-reduce "))
    block = lines[start:start + len(catalog.platforms)]
    assert block[0].split() == ["communication/nccl-all-reduce", "mpi", "aws", "gb200,",
                                "gb300,", "h100"]
    cells = {line.split()[0]: line.split(None, 1)[1] for line in block[1:]}
    for name, platform in catalog.platforms.items():
        if name != "aws":
            assert cells[name] == ", ".join(sorted(platform.architectures))
    assert "…" not in run.out and "┃" not in run.out


@pytest.mark.parametrize(("platform", "arch", "code", "err"), [
    ("aws", "l40s", ExitCode.CATALOG, "cre: --arch l40s: aws supports gb200, gb300, h100\n"),
    ("mars", "h100", ExitCode.CATALOG,
     "cre: --platform mars: unknown platform (known: aws, azure, gcp, nscale, oci, onprem)\n"),
    ("AWS", "H100", ExitCode.OK, ""),
], ids=["arch-not-on-platform", "unknown-platform", "upper-case"])
def test_render_checks_platform_and_arch_against_the_matrix(
        cre: RunCli, platform: str, arch: str, code: ExitCode, err: str) -> None:
    """``--arch`` not on the platform names what the platform supports (never a catalog
    file); upper-case names render the same bytes as lower-case ones."""
    args = ("render", "communication/nccl-all-reduce", "--node-count", "2")
    run = cre(*args, "--platform", platform, "--arch", arch)
    assert (run.code, run.err) == (code, err)
    if code == ExitCode.OK:
        assert run.out == cre(*args, "--platform", "aws", "--arch", "h100").out
