"""Fleet-relative thresholds: a node far slower than its peers is an ``Outlier``.

A static bound (``busBandwidthGBps: value >= 300``) fails every node of a new SKU that is a bit
slower than the bound's author assumed, and passes a node at 60 % of its identical neighbours
as long as 60 % is above the bound. The relative rule compares each node with its peers in the
same measurement instead, pure and deterministic:

* The values are the nodes' own peak busBW of a final per-node measurement (what a static
  ``busBandwidthGBps`` threshold judges, cre.core.job.thresholds). A node without a value is never
  an outlier and is nobody's peer: no number is no evidence (whatever the static rule makes of
  it, this rule adds nothing).
* **Peers** of a node are the *other* measured nodes. With a topology key, the peers that share
  the node's domain (its value of that label) are used when there are at least ``min_peers`` of
  them: the reference is their **median** (``PeerMedian``). Otherwise (no key, the node has no
  such label, or its domain is too small) the reference is the **10th percentile** of all its
  peers in the measurement (``FleetP10``), which needs at least ``min_peers`` peers; with
  fewer the node is not judged (too few to say what normal is).
* The node is an outlier when ``value < percent / 100 * reference`` (strictly below: a node at
  the bound is not flagged).
* Percentiles interpolate linearly between closest ranks (the "type 7" rule of Hyndman & Fan,
  the default of numpy and R): for sorted ``x[0..n-1]`` and ``q`` in ``[0, 1]``, position
  ``h = q (n - 1)``, result ``x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h])``. The
  median is ``q = 0.5`` (the mean of the two middle values for an even count).

**Groups** (``scope: Group``, :func:`find_group_outliers`): the same comparison one level up.
Each group of a Workflow has one busBW (its Job's peak); its peers are the *other* measured
groups of the same iteration, at least ``min_peers`` of them, and the reference is their
**median** (``GroupMedian``); no topology, no fleet fallback (a group is already a domain's
worth of nodes). A group is an outlier when ``value < percent / 100 * median``.

Consequences the property tests hold (tests/core/test_fleet_properties.py): a node at or above
every other node is never an outlier; scaling every value by the same power of two changes
nothing (the rule is relative, and such a scaling is exact in floating point); without a
topology key, adding a node at least as fast as every other never clears an outlier; a
fleet of equal values has none; the same four hold for groups.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import attrs

from cre.api.conditions import OutlierBasis


def _quantile(at: Callable[[int], float], n: int, q: float) -> float:
    """The ``q`` quantile of ``n`` sorted values read through ``at`` (type 7)."""
    h = q * (n - 1)
    lo = math.floor(h)
    if lo + 1 >= n:
        return at(n - 1)
    return at(lo) + (h - lo) * (at(lo + 1) - at(lo))


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (``0 <= q <= 1``) of ``values`` by linear interpolation between
    closest ranks (type 7); ``values`` must not be empty."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} outside [0, 1]")
    return _quantile(sorted(values).__getitem__, len(values), q)


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (the mean of the two middle values for an even count)."""
    return percentile(values, 0.5)


def _quantile_without(ordered: Sequence[float], skip: int, q: float) -> float:
    """The ``q`` quantile of sorted ``ordered`` with the value at index ``skip`` left out:
    a node's peers without sorting them again (one sort per domain, not one per node)."""
    return _quantile(lambda k: ordered[k if k < skip else k + 1], len(ordered) - 1, q)


@attrs.frozen(kw_only=True)
class Outlier:
    """A node below ``percent`` % of its reference."""

    node: str
    value: float
    reference: float
    basis: OutlierBasis
    peers: int
    domain: str | None
    percent: int

    @property
    def message(self) -> str:
        if self.basis == OutlierBasis.PEER_MEDIAN:
            stat, where = "median", f"its {self.peers} peers in {self.domain}"
        else:
            stat, where = "p10", f"the {self.peers} other measured nodes"
        return (f"Outlier: node {self.node} busBW {self.value:.2f} GB/s is below {self.percent}%"
                f" of the {stat} of {where} ({self.reference:.2f} GB/s)")


def find_outliers(values: Mapping[str, float], *, domains: Mapping[str, str | None],
                  percent: int, min_peers: int) -> tuple[Outlier, ...]:
    """The outliers among ``values`` (node -> measured value), sorted by node; ``domains`` maps
    a node to its topology domain (missing or ``None``: no domain). O(n log n): each group of
    nodes is sorted once and a node's peers are that order without the node."""
    groups: dict[str | None, list[str]] = {None: list(values)}
    for node in values:
        domain = domains.get(node)
        if domain is not None:
            groups.setdefault(domain, []).append(node)
    ordered: dict[str | None, list[float]] = {}
    rank: dict[tuple[str | None, str], int] = {}
    for key, members in groups.items():
        members.sort(key=lambda n: (values[n], n))
        ordered[key] = [values[n] for n in members]
        rank.update({(key, n): i for i, n in enumerate(members)})
    out: list[Outlier] = []
    for node in sorted(values):
        value, domain = values[node], domains.get(node)
        peers = len(groups[domain]) - 1 if domain is not None else 0
        if domain is not None and peers >= min_peers:
            basis = OutlierBasis.PEER_MEDIAN
            reference = _quantile_without(ordered[domain], rank[(domain, node)], 0.5)
        elif len(values) - 1 >= min_peers:
            basis, peers, domain = OutlierBasis.FLEET_P10, len(values) - 1, None
            reference = _quantile_without(ordered[None], rank[(None, node)], 0.1)
        else:
            continue
        if value < percent / 100 * reference:
            out.append(Outlier(node=node, value=value, reference=reference, basis=basis,
                               peers=peers, domain=domain, percent=percent))
    return tuple(out)


@attrs.frozen(kw_only=True)
class GroupOutlier:
    """A group below ``percent`` % of the median of the other groups."""

    group: str
    value: float
    reference: float
    peers: int
    percent: int

    @property
    def message(self) -> str:
        return (f"Outlier: group {self.group} busBW {self.value:.2f} GB/s is below "
                f"{self.percent}% of the median of the {self.peers} other groups "
                f"({self.reference:.2f} GB/s)")


def find_group_outliers(values: Mapping[str, float], *, percent: int,
                        min_peers: int) -> tuple[GroupOutlier, ...]:
    """The outliers among ``values`` (group -> its busBW), sorted by group: a group below
    ``percent`` % of the median of the other groups, when there are at least ``min_peers``
    of them (fewer: nobody is judged). O(n log n): one sort."""
    peers = len(values) - 1
    if peers < max(1, min_peers):
        return ()
    members = sorted(values, key=lambda g: (values[g], g))
    ordered = [values[g] for g in members]
    out = []
    for i, group in enumerate(members):
        reference = _quantile_without(ordered, i, 0.5)
        if values[group] < percent / 100 * reference:
            out.append(GroupOutlier(group=group, value=values[group], reference=reference,
                                    peers=peers, percent=percent))
    return tuple(sorted(out, key=lambda o: o.group))
