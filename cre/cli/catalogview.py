"""``cre catalog list`` and ``cre catalog show``: what the shipped catalog offers, as tables.

The rows are built from the loaded :class:`~cre.catalog.Catalog` by pure functions (tested
without a terminal). ``list`` prints the real matrix: one line per entry and platform it runs
on, with that platform's architectures (aws has gb200, gb300 and h100, not every architecture
CRE knows). An entry's default node count is every eligible target node, which is what the
Certification builder uses unless a category sets ``nodesPerJob`` or ``testScale:
intra-node``. :func:`resolve_target` checks ``--platform`` / ``--arch`` against the same matrix,
case-insensitively, and names what is supported rather than a catalog file.
"""

from __future__ import annotations

import attrs
from rich.console import Console
from rich.table import Table

from cre.catalog import Catalog, CatalogEntry, CatalogError, OverrideBlock, Selector
from cre.cli.columns import columns
from cre.cli.exitcodes import CliError, ExitCode

DEFAULT_NODES = "all eligible"


@attrs.frozen(kw_only=True)
class EntryRow:
    """One line of ``cre catalog list``."""

    entry: str
    kind: str
    # (platform, its architectures) for every platform the entry runs on.
    matrix: tuple[tuple[str, tuple[str, ...]], ...]
    default_nodes: str = DEFAULT_NODES

    @property
    def platforms(self) -> tuple[str, ...]:
        """The platforms the entry runs on."""
        return tuple(p for p, _ in self.matrix)

    @property
    def architectures(self) -> tuple[str, ...]:
        """Every architecture of any of those platforms."""
        return tuple(sorted({a for _, archs in self.matrix for a in archs}))


def entry_platforms(catalog: Catalog, entry: CatalogEntry) -> tuple[str, ...]:
    """The platforms an entry renders for, sorted."""
    return tuple(sorted(p for p in catalog.platforms if entry.platforms is None
                        or p in entry.platforms))


def entry_rows(catalog: Catalog) -> list[EntryRow]:
    """Every entry, sorted by name."""
    rows = []
    for name in sorted(catalog.entries):
        entry = catalog.entries[name]
        matrix = tuple((p, tuple(sorted(catalog.platforms[p].architectures)))
                       for p in entry_platforms(catalog, entry))
        rows.append(EntryRow(entry=name, kind=entry.runtime.value, matrix=matrix))
    return rows


def resolve_target(catalog: Catalog, *, entry: str, platform: str,
                   arch: str) -> tuple[str, str]:
    """``--platform`` and ``--arch`` as the catalog spells them (``AWS``/``H100`` accepted);
    a one-line error naming what the entry and platform support otherwise."""
    found = lookup(catalog, entry)
    name = platform.strip().lower()
    if name not in catalog.platforms:
        raise CliError(ExitCode.CATALOG, f"--platform {platform}: unknown platform (known: "
                       f"{', '.join(sorted(catalog.platforms))})")
    runs_on = entry_platforms(catalog, found)
    if name not in runs_on:
        raise CliError(ExitCode.CATALOG, f"--platform {platform}: {found.name} does not run on "
                       f"{name} (it runs on {', '.join(runs_on)})")
    archs = sorted(catalog.platforms[name].architectures)
    wanted = arch.strip().lower()
    if wanted not in archs:
        raise CliError(ExitCode.CATALOG, f"--arch {arch}: {name} supports {', '.join(archs)}")
    return name, wanted


def list_lines(catalog: Catalog) -> list[str]:
    """``cre catalog list``: one line per entry and platform, with its architectures."""
    table = [["ENTRY", "KIND", "PLATFORM", "ARCHITECTURES"]]
    for row in entry_rows(catalog):
        for i, (platform, archs) in enumerate(row.matrix):
            first = i == 0
            table.append([row.entry if first else "", row.kind if first else "", platform,
                          ", ".join(archs)])
    return [*columns(table), "",
            f"Default nodes: {DEFAULT_NODES} target nodes (a category's nodesPerJob or "
            "testScale changes it).", "Options of an entry: cre catalog show ENTRY"]


def lookup(catalog: Catalog, name: str) -> CatalogEntry:
    """The entry called ``name``; a one-line error listing the known entries otherwise."""
    try:
        return catalog.entry(name)
    except CatalogError as exc:
        raise CliError(ExitCode.CATALOG, str(exc)) from None


def print_list(console: Console, catalog: Catalog) -> None:
    """The entries as a table, never cut (plain columns, as ``kubectl get`` prints)."""
    console.file.write("\n".join(list_lines(catalog)) + "\n")


def print_entry(console: Console, catalog: Catalog, name: str) -> None:
    """One entry: what it runs, where, what it measures, and its options with defaults."""
    entry = lookup(catalog, name)
    console.print(f"[bold]{entry.name}[/bold]  ({entry.file})")
    console.print(entry.description)
    fabric = {"none": "no", "all": "yes"}.get(entry.fabric.value, entry.fabric.value)
    console.print(f"kind: {entry.runtime.value}    fabric overrides: {fabric}"
                  f"    default nodes: {DEFAULT_NODES}")
    if entry.measurement is not None:
        m = entry.measurement
        console.print(f"measurement: {m.test_type or m.kind.value} (log profile "
                      f"{m.log_profile}, every {m.sample_interval})")
    if entry.training is not None:
        t = entry.training
        ckpt = (f"checkpoints at {t.checkpoint.mount_path} with enableCheckpoint (up to "
                f"{t.checkpoint.max_restarts} restarts)" if t.checkpoint else "no checkpoints")
        console.print(f"training: at least {t.min_gpus} GPUs, stall multiplier "
                      f"{t.stall_multiplier}, startup stall timeout "
                      f"{t.startup_stall_timeout_seconds}s, {ckpt}")
    platforms = Table(title="platforms", title_justify="left")
    platforms.add_column("platform")
    platforms.add_column("architectures (GPUs per node)")
    for pname in entry_platforms(catalog, entry):
        archs = catalog.platforms[pname].architectures
        platforms.add_row(pname, ", ".join(f"{a} ({d.gpus_per_node})"
                                            for a, d in sorted(archs.items())))
    console.print(platforms)
    options = Table(title="options (cre render --option NAME=VALUE)", title_justify="left")
    for column in ("option", "default", "type", "description"):
        options.add_column(column, overflow="fold")
    for pname, param in sorted(entry.parameters.items()):
        options.add_row(pname, str(param.default), type(param.default).__name__,
                        param.description)
    console.print(options)
    for block in entry.overrides:
        console.print(f"override {block.label}: {describe_block(block)}")


def _selector(name: str, selector: Selector | None) -> str | None:
    if selector is None:
        return None
    values = ", ".join(sorted(selector.values))
    return f"{name} {'not in' if selector.negate else 'in'} {{{values}}}"


def describe_block(block: OverrideBlock) -> str:
    """Where a ``when:`` block applies and what it changes, in one line."""
    where = [w for w in (_selector("platform", block.platform), _selector("arch", block.arch))
             if w] or ["always"]
    changes = [f"{k}={v}" for k, v in sorted(block.parameters.items())]
    if block.spec:
        changes.append("spec: " + ", ".join(sorted(block.spec)))
    return f"when {' and '.join(where)}: {'; '.join(changes) or 'no change'}"
