"""``cre catalog list`` and ``cre catalog show``: what the shipped catalog offers, as tables.

The rows are built from the loaded :class:`~cre.catalog.Catalog` by pure functions (tested
without a terminal); rich only draws them. An entry's architectures are those of the platforms
it supports; its default node count is every eligible target node, which is what the
Certification builder uses unless a category sets ``nodesPerJob`` or ``testScale: intra-node``.
"""

from __future__ import annotations

import attrs
from rich.console import Console
from rich.table import Table

from cre.catalog import Catalog, CatalogEntry, CatalogError, OverrideBlock, Selector
from cre.cli.exitcodes import CliError, ExitCode

DEFAULT_NODES = "all eligible"


@attrs.frozen(kw_only=True)
class EntryRow:
    """One line of ``cre catalog list``."""

    entry: str
    kind: str
    platforms: tuple[str, ...]
    architectures: tuple[str, ...]
    default_nodes: str = DEFAULT_NODES


def entry_platforms(catalog: Catalog, entry: CatalogEntry) -> tuple[str, ...]:
    """The platforms an entry renders for, sorted."""
    return tuple(sorted(p for p in catalog.platforms if entry.platforms is None
                        or p in entry.platforms))


def entry_rows(catalog: Catalog) -> list[EntryRow]:
    """Every entry, sorted by name."""
    rows = []
    for name in sorted(catalog.entries):
        entry = catalog.entries[name]
        platforms = entry_platforms(catalog, entry)
        archs = sorted({a for p in platforms for a in catalog.platforms[p].architectures})
        rows.append(EntryRow(entry=name, kind=entry.runtime.value, platforms=platforms,
                             architectures=tuple(archs)))
    return rows


def lookup(catalog: Catalog, name: str) -> CatalogEntry:
    """The entry called ``name``; a one-line error listing the known entries otherwise."""
    try:
        return catalog.entry(name)
    except CatalogError as exc:
        raise CliError(ExitCode.CATALOG, str(exc)) from None


def print_list(console: Console, catalog: Catalog) -> None:
    """The entries as a table."""
    table = Table(title="CRE catalog", title_justify="left")
    table.add_column("entry", no_wrap=True)
    for column in ("kind", "platforms", "architectures", "default nodes"):
        table.add_column(column, overflow="fold")
    for row in entry_rows(catalog):
        table.add_row(row.entry, row.kind, ", ".join(row.platforms),
                      ", ".join(row.architectures), row.default_nodes)
    console.print(table)


def print_entry(console: Console, catalog: Catalog, name: str) -> None:
    """One entry: what it runs, where, what it measures, and its options with defaults."""
    entry = lookup(catalog, name)
    console.print(f"[bold]{entry.name}[/bold]  ({entry.file})")
    console.print(entry.description)
    fabric = "yes" if entry.fabric else "no"
    console.print(f"kind: {entry.runtime.value}    fabric overrides: {fabric}"
                  f"    default nodes: {DEFAULT_NODES}")
    if entry.measurement is not None:
        m = entry.measurement
        console.print(f"measurement: {m.test_type} (log profile {m.log_profile}, every "
                      f"{m.sample_interval})")
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
