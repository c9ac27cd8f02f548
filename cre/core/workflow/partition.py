"""Split a Workflow's eligible nodes into the groups that each run one Job.

Three modes, all deterministic (the input order never matters: nodes are taken by name):

* simple: name-sorted chunks of ``nodesPerJob``. A short last chunk borrows the missing nodes
  from the first nodes (by name) and is marked ``overflow``: every group then has exactly
  ``nodesPerJob`` nodes, every node is tested, and launch gating (never two running groups on
  one node) makes the overflow group wait for its lenders.
* topology packing on ``topologyKey``: domains are filled largest first (ties by name) so a
  group spans as few domains as possible; full groups inside one domain come first, the
  remainders of all domains are then chunked across domains (recording the domains and their
  node counts), and a short last chunk borrows like the simple mode.
* strict domain: one group per domain at its natural size (``nodesPerJob`` is not used).

``nodesPerJob`` unset (or < 1) means all nodes in one group. More than the eligible nodes is an
error whose message says what to set.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from cre.core.common.observed import NodeView


@attrs.frozen(kw_only=True)
class Group:
    """One group of nodes (names sorted) and, with topology, the domains it spans."""

    name: str
    nodes: tuple[str, ...]
    domains: tuple[str, ...] = ()
    domain_node_counts: tuple[tuple[str, int], ...] = ()
    overflow: bool = False


class PartitionError(ValueError):
    """The nodes cannot be partitioned as asked; the message names what to change."""


def _chunks(names: Sequence[str], size: int) -> list[tuple[str, ...]]:
    return [tuple(names[i:i + size]) for i in range(0, len(names), size)]


def _borrow(short: tuple[str, ...], size: int, pool: Sequence[str]) -> tuple[str, ...]:
    lent = [n for n in pool if n not in short][: size - len(short)]
    return tuple(sorted((*short, *lent)))


def _domain_info(
    names: Iterable[str], domain_of: dict[str, str]
) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...]]:
    counts: dict[str, int] = {}
    for n in names:
        counts[domain_of[n]] = counts.get(domain_of[n], 0) + 1
    ordered = tuple(sorted(counts))
    return ordered, tuple((d, counts[d]) for d in ordered)


def partition(
    *,
    nodes: Iterable[NodeView],
    nodes_per_job: int | None,
    topology_key: str | None = None,
    strict_domain: bool = False,
) -> tuple[Group, ...]:
    """The groups of ``nodes`` (see the module docstring); ``PartitionError`` when impossible."""
    ordered = sorted(nodes, key=lambda n: n.name)
    names = [n.name for n in ordered]
    if not names:
        raise PartitionError("no eligible nodes to partition")
    if len(set(names)) != len(names):
        raise PartitionError("node names repeat")
    size = len(names) if nodes_per_job is None or nodes_per_job < 1 else nodes_per_job
    if topology_key is None:
        if size > len(names):
            raise PartitionError(_too_many(size, len(names)))
        return _simple(names, size)
    domain_of: dict[str, str] = {}
    for node in ordered:
        value = node.label(topology_key)
        if not value:
            raise PartitionError(f"node {node.name!r} has no topology label {topology_key!r}")
        domain_of[node.name] = value
    if strict_domain:
        return _strict(names, domain_of)
    if size > len(names):
        raise PartitionError(_too_many(size, len(names)))
    return _packed(names, size, domain_of)


def _too_many(size: int, found: int) -> str:
    return (f"Not enough schedulable nodes: nodesPerJob is {size}, found {found} eligible "
            f"node(s). Set nodesPerJob to {found} or less (or leave it unset to use all "
            "nodes), or add nodes to the target")


def _simple(names: list[str], size: int) -> tuple[Group, ...]:
    groups = []
    for i, chunk in enumerate(_chunks(names, size)):
        if len(chunk) < size:
            groups.append(Group(name=f"group-{i}-overflow", nodes=_borrow(chunk, size, names),
                                overflow=True))
        else:
            groups.append(Group(name=f"group-{i}", nodes=chunk))
    return tuple(groups)


def _strict(names: list[str], domain_of: dict[str, str]) -> tuple[Group, ...]:
    by_domain: dict[str, list[str]] = {}
    for n in names:
        by_domain.setdefault(domain_of[n], []).append(n)
    return tuple(
        Group(name=f"group-{i}", nodes=tuple(by_domain[d]), domains=(d,),
              domain_node_counts=((d, len(by_domain[d])),))
        for i, d in enumerate(sorted(by_domain)))


def _packed(names: list[str], size: int, domain_of: dict[str, str]) -> tuple[Group, ...]:
    by_domain: dict[str, list[str]] = {}
    for n in names:
        by_domain.setdefault(domain_of[n], []).append(n)
    order = sorted(by_domain, key=lambda d: (-len(by_domain[d]), d))
    chunks: list[tuple[str, ...]] = []
    rest: list[str] = []
    for d in order:
        members = by_domain[d]
        full = len(members) - len(members) % size
        chunks += _chunks(members[:full], size)
        rest += members[full:]
    groups: list[Group] = []
    for chunk in chunks + _chunks(rest, size):
        i = len(groups)
        overflow = len(chunk) < size
        members_t = _borrow(chunk, size, names) if overflow else tuple(sorted(chunk))
        domains, counts = _domain_info(members_t, domain_of)
        groups.append(Group(name=f"group-{i}" + ("-overflow" if overflow else ""),
                            nodes=members_t, domains=domains, domain_node_counts=counts,
                            overflow=overflow))
    return tuple(groups)
