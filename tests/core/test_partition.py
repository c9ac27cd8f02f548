"""Partitioning: sizes, overflow, topology packing, strict domains; hypothesis properties
(disjoint, covering, sized, domain-true, order-independent)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cre.core.common.observed import NodeView
from cre.core.workflow.partition import Group, PartitionError, partition
from tests.core.tierworld import gpu_node, nodes

KEY = "nvidia.com/gpu.clique"


def _names(groups: tuple[Group, ...]) -> list[tuple[str, ...]]:
    return [g.nodes for g in groups]


def test_default_is_one_group_of_all_nodes() -> None:
    """nodesPerJob unset: every node in one group."""
    groups = partition(nodes=nodes(5), nodes_per_job=None)
    assert _names(groups) == [tuple(f"gpu-{i:02d}" for i in range(5))]
    assert groups[0].name == "group-0"


def test_chunks_by_name() -> None:
    """Name-sorted chunks of nodesPerJob."""
    groups = partition(nodes=nodes(4), nodes_per_job=2)
    assert _names(groups) == [("gpu-00", "gpu-01"), ("gpu-02", "gpu-03")]


def test_short_last_chunk_borrows_and_is_overflow() -> None:
    """A short last chunk borrows the first nodes by name and is marked overflow."""
    groups = partition(nodes=nodes(5), nodes_per_job=2)
    assert groups[-1] == Group(name="group-2-overflow", nodes=("gpu-00", "gpu-04"),
                               overflow=True)


def test_too_many_says_what_to_set() -> None:
    """nodesPerJob above the eligible nodes fails with a message naming the fix."""
    with pytest.raises(PartitionError, match="Set nodesPerJob to 3 or less"):
        partition(nodes=nodes(3), nodes_per_job=4)


def _racks(counts: dict[str, int]) -> list[NodeView]:
    return [gpu_node(f"{rack}-n{i}", labels=[(KEY, rack)])
            for rack, n in counts.items() for i in range(n)]


def test_strict_domain_one_group_per_domain() -> None:
    """strictDomain: one group per domain at its natural size."""
    groups = partition(nodes=_racks({"r1": 3, "r2": 1}), nodes_per_job=None,
                       topology_key=KEY, strict_domain=True)
    assert _names(groups) == [("r1-n0", "r1-n1", "r1-n2"), ("r2-n0",)]
    assert groups[0].domains == ("r1",) and groups[0].domain_node_counts == (("r1", 3),)


def test_packing_fills_domains_largest_first() -> None:
    """Full groups come from inside one domain; remainders span domains and say so."""
    groups = partition(nodes=_racks({"a": 3, "b": 5}), nodes_per_job=2, topology_key=KEY)
    single = [g for g in groups if len(g.domains) == 1]
    assert len(single) == 3
    mixed = [g for g in groups if len(g.domains) == 2]
    assert mixed == [Group(name="group-3", nodes=("a-n2", "b-n4"), domains=("a", "b"),
                           domain_node_counts=(("a", 1), ("b", 1)))]


def test_missing_topology_label_names_the_node() -> None:
    """A node without the topology label fails naming the node and the key."""
    with pytest.raises(PartitionError, match="'x' has no topology label"):
        partition(nodes=[*_racks({"a": 1}), gpu_node("x")], nodes_per_job=1,
                  topology_key=KEY)


@st.composite
def pools(draw: st.DrawFn) -> tuple[list[NodeView], int | None, bool, bool]:
    count = draw(st.integers(1, 24))
    racks = draw(st.integers(1, 5))
    pool = [gpu_node(f"n{i:02d}", labels=[(KEY, f"r{draw(st.integers(0, racks - 1))}")])
            for i in range(count)]
    size = draw(st.one_of(st.none(), st.integers(1, count)))
    topo = draw(st.booleans())
    strict = topo and draw(st.booleans())
    return draw(st.permutations(pool)), size, topo, strict


@settings(max_examples=200, deadline=None)
@given(pools())
def test_partition_properties(case: tuple[list[NodeView], int | None, bool, bool]) -> None:
    """Groups cover every node; non-overflow groups are disjoint; sizes are nodesPerJob
    (strict: the domain's size); domains are the nodes' own; order does not matter."""
    pool, size, topo, strict = case
    key = KEY if topo else None
    groups = partition(nodes=pool, nodes_per_job=size, topology_key=key, strict_domain=strict)
    names = {n.name for n in pool}
    assert set().union(*(set(g.nodes) for g in groups)) == names
    owned = [n for g in groups if not g.overflow for n in g.nodes]
    assert len(owned) == len(set(owned))
    assert sum(1 for g in groups if g.overflow) <= 1
    domain = {n.name: n.label(KEY) for n in pool}
    for g in groups:
        assert len(set(g.nodes)) == len(g.nodes)
        if strict:
            assert len({domain[n] for n in g.nodes}) == 1
        else:
            assert len(g.nodes) == (size or len(pool))
        if topo:
            assert g.domains == tuple(sorted({domain[n] for n in g.nodes}))
            assert sum(c for _, c in g.domain_node_counts) == len(g.nodes)
    again = partition(nodes=sorted(pool, key=lambda n: n.name, reverse=True),
                      nodes_per_job=size, topology_key=key, strict_domain=strict)
    assert again == groups
