"""Which nodes a Workflow certifies: target matching, exclusions and the one-platform rule.

``discover(target=..., nodes=..., gpus_per_node=...)`` is pure over the node cache's slim views.
The rules, in order (each excluded node is reported with why, never dropped silently):

1. Match: ``nodeSelector`` (label equality, AND), ``matchExpressions`` (In / NotIn / Exists /
   DoesNotExist), ``nodeNames`` (only those), ``taintSelectors`` (the node carries *every*
   listed taint; an unset value or effect matches any). Only GPU nodes
   (``nvidia.com/gpu.present=true``) are candidates; others are not reported.
2. Cordoned (``spec.unschedulable``) nodes are excluded, unless the target selects the
   ``node.kubernetes.io/unschedulable`` taint (then cordoned nodes are what was asked for).
   NotReady nodes (Ready not True) are excluded.
3. One platform: every remaining node maps to the same platform (providerID family), else the
   Workflow fails ``HeterogeneousPlatform`` naming one node of each.
4. GPU architecture by majority vote over ``nvidia.com/gpu.product`` (unlabelled nodes do not
   vote and stay; a tie goes to the architecture of the earliest node by name); nodes of other
   architectures are excluded.
5. GPU capacity: a node whose allocatable ``nvidia.com/gpu`` is positive but below the rendered
   per-node request is excluded. A missing or zero count is kept: the device plugin may be
   restarting. If every node is under capacity the Workflow fails naming the best available.
6. ``maxNodes`` (``capped``): only the first that many eligible nodes by name are taken; the
   rest are excluded with reason ``MaxNodes``.

Order is by node name throughout, so the same cluster always gives the same groups.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import attrs

from cre.api.common import NodeSelectorOperator, NodeSelectorRequirement, TargetSpec
from cre.api.conditions import WorkflowReason
from cre.api.labels import GPU_PRESENT, GPU_PRODUCT
from cre.catalog.detect import UNKNOWN_ARCH, architecture_from_product, detect_platform
from cre.core.common.observed import NodeView

UNSCHEDULABLE_TAINT: Final = "node.kubernetes.io/unschedulable"


class ExclusionReason(enum.StrEnum):
    """Why a node that matched the target is not certified."""

    CORDONED = "Cordoned"
    NOT_READY = "NotReady"
    MINORITY_ARCHITECTURE = "MinorityArchitecture"
    INSUFFICIENT_GPUS = "InsufficientGPUs"
    MAX_NODES = "MaxNodes"  # beyond the run's maxNodes cap


@attrs.frozen(kw_only=True)
class Exclusion:
    """A matched node left out, and why."""

    name: str
    reason: ExclusionReason
    detail: str = ""


@attrs.frozen(kw_only=True)
class Discovery:
    """The eligible nodes (sorted by name), what they are, and what was left out."""

    nodes: tuple[NodeView, ...]
    platform: str
    architecture: str
    excluded: tuple[Exclusion, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """The eligible node names, in order."""
        return tuple(n.name for n in self.nodes)

    def excluded_by(self, reason: ExclusionReason) -> tuple[str, ...]:
        """The names excluded for ``reason``, in order."""
        return tuple(e.name for e in self.excluded if e.reason == reason)

    @property
    def summary(self) -> str:
        """One sentence per exclusion reason, joined with ". " (empty: nothing excluded)."""
        parts = []
        for reason in ExclusionReason:
            names = self.excluded_by(reason)
            if names:
                detail = next(e.detail for e in self.excluded if e.reason == reason)
                parts.append(f"{len(names)} {_WORDS[reason]} excluded ({_shown(names)})"
                             + (f": {detail}" if detail else ""))
        return ". ".join(parts)


_WORDS: Final = {
    ExclusionReason.CORDONED: "cordoned node(s)",
    ExclusionReason.NOT_READY: "NotReady node(s)",
    ExclusionReason.MINORITY_ARCHITECTURE: "node(s) of another GPU architecture",
    ExclusionReason.INSUFFICIENT_GPUS: "node(s) with too few allocatable GPUs",
    ExclusionReason.MAX_NODES: "node(s) beyond maxNodes",
}


@attrs.frozen(kw_only=True)
class DiscoveryFailure:
    """Discovery cannot give a runnable set: the Workflow fails with this reason."""

    reason: WorkflowReason
    message: str
    excluded: tuple[Exclusion, ...] = ()


def _shown(names: Sequence[str], limit: int = 5) -> str:
    head = ", ".join(names[:limit])
    return head + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def _labels(node: NodeView) -> Mapping[str, str]:
    return dict(node.labels)


def _requirement_holds(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    if req.operator == NodeSelectorOperator.IN:
        return labels.get(req.key) in req.values
    if req.operator == NodeSelectorOperator.NOT_IN:
        return req.key not in labels or labels[req.key] not in req.values
    if req.operator == NodeSelectorOperator.EXISTS:
        return req.key in labels
    return req.key not in labels


def matches(target: TargetSpec, node: NodeView) -> bool:
    """Whether ``node`` is selected by every filter of ``target`` (cordon/readiness aside)."""
    labels = _labels(node)
    if any(labels.get(k) != v for k, v in target.node_selector.items()):
        return False
    if not all(_requirement_holds(r, labels) for r in target.match_expressions):
        return False
    if target.node_names and node.name not in target.node_names:
        return False
    for sel in target.taint_selectors:
        if not any(t.key == sel.key and (sel.value is None or t.value == sel.value)
                   and (sel.effect is None or t.effect == sel.effect) for t in node.taints):
            return False
    return True


def admits_cordoned(target: TargetSpec) -> bool:
    """Whether the target asks for cordoned nodes (selects the unschedulable taint)."""
    return any(sel.key == UNSCHEDULABLE_TAINT for sel in target.taint_selectors)


def candidates(target: TargetSpec, nodes: Iterable[NodeView]) -> tuple[NodeView, ...]:
    """The GPU nodes the target selects, by name (before cordon and readiness)."""
    found = [n for n in nodes if _labels(n).get(GPU_PRESENT) == "true" and matches(target, n)]
    return tuple(sorted(found, key=lambda n: n.name))


def describe_target(target: TargetSpec) -> str:
    """A short human description of the target for messages."""
    parts = []
    if target.node_selector:
        parts.append("nodeSelector " + ",".join(f"{k}={v}" for k, v in
                                                sorted(target.node_selector.items())))
    if target.match_expressions:
        parts.append(f"{len(target.match_expressions)} matchExpressions")
    if target.node_names:
        parts.append(f"nodeNames {_shown(target.node_names)}")
    if target.taint_selectors:
        parts.append("taintSelectors " + ",".join(s.key for s in target.taint_selectors))
    return "; ".join(parts) or "all GPU nodes"


def platform_of(node: NodeView) -> str:
    """The platform name of one node (providerID family)."""
    allocatable = {r: "1" for r in node.extended_resources}
    return detect_platform(node.provider_id or "", _labels(node), allocatable=allocatable).value


def majority_architecture(nodes: Sequence[NodeView], *, fallback: str | None = None) -> str:
    """The most common architecture among labelled nodes (tie: the earliest node's by name);
    ``fallback`` (e.g. from the nodeSelector's product) or ``unknown`` when none is labelled."""
    ordered = sorted(nodes, key=lambda n: n.name)
    archs = [(n.name, architecture_from_product(p)) for n in ordered
             if (p := n.label(GPU_PRODUCT))]
    if not archs:
        return fallback or UNKNOWN_ARCH
    votes = Counter(a for _, a in archs)
    first_seen = {a: i for i, (_, a) in reversed(list(enumerate(archs)))}
    return min(votes, key=lambda a: (-votes[a], first_seen[a]))


def discover(
    *, target: TargetSpec, nodes: Iterable[NodeView], gpus_per_node: int | None = None
) -> Discovery | DiscoveryFailure:
    """The eligible nodes of ``target`` among ``nodes`` (see the module docstring)."""
    matched = candidates(target, nodes)
    excluded: list[Exclusion] = []
    keep: list[NodeView] = []
    cordon_ok = admits_cordoned(target)
    for node in matched:
        if node.unschedulable and not cordon_ok:
            excluded.append(Exclusion(name=node.name, reason=ExclusionReason.CORDONED))
        elif node.ready != "True":
            excluded.append(Exclusion(name=node.name, reason=ExclusionReason.NOT_READY,
                                      detail=""))
        else:
            keep.append(node)
    if not keep:
        why = f" ({len(excluded)} matched but excluded)" if excluded else ""
        return DiscoveryFailure(
            reason=WorkflowReason.NODE_DISCOVERY_ERROR,
            message=f"No target nodes found for {describe_target(target)}{why}",
            excluded=tuple(excluded))
    platforms: dict[str, str] = {}
    for node in keep:
        platforms.setdefault(platform_of(node), node.name)
    if len(platforms) > 1:
        shown = ", ".join(f"{p} (e.g. {n})" for p, n in sorted(platforms.items()))
        return DiscoveryFailure(
            reason=WorkflowReason.HETEROGENEOUS_PLATFORM,
            message=f"Target nodes span {len(platforms)} platforms: {shown}; "
                    "select nodes of one platform per Workflow",
            excluded=tuple(excluded))
    platform = next(iter(platforms))
    product = target.node_selector.get(GPU_PRODUCT)
    arch = majority_architecture(
        keep, fallback=architecture_from_product(product) if product else None)
    minority = [n for n in keep if (p := n.label(GPU_PRODUCT))
                and architecture_from_product(p) != arch]
    if minority:
        detail = f"majority architecture is {arch}"
        excluded += [Exclusion(name=n.name, reason=ExclusionReason.MINORITY_ARCHITECTURE,
                               detail=detail) for n in minority]
        gone = {n.name for n in minority}
        keep = [n for n in keep if n.name not in gone]
    if gpus_per_node is not None and gpus_per_node > 0:
        short = [n for n in keep if 0 < n.allocatable_gpus < gpus_per_node]
        if short and len(short) == len(keep):
            best = max(n.allocatable_gpus for n in short)
            return DiscoveryFailure(
                reason=WorkflowReason.PARTITION_ERROR,
                message=f"No node can supply the {gpus_per_node} nvidia.com/gpu the workload "
                        f"requests per node; best available is {best}",
                excluded=tuple(excluded))
        if short:
            detail = f"the workload requests {gpus_per_node} nvidia.com/gpu per node"
            excluded += [Exclusion(name=n.name, reason=ExclusionReason.INSUFFICIENT_GPUS,
                                   detail=detail) for n in short]
            gone = {n.name for n in short}
            keep = [n for n in keep if n.name not in gone]
    return Discovery(nodes=tuple(keep), platform=platform, architecture=arch,
                     excluded=tuple(excluded))


def capped(found: Discovery, max_nodes: int | None) -> Discovery:
    """``found`` with at most ``max_nodes`` nodes (the first by name); the rest are excluded
    (``MaxNodes``). ``None``: unchanged."""
    if max_nodes is None or len(found.nodes) <= max_nodes:
        return found
    detail = f"maxNodes is {max_nodes}"
    rest = tuple(Exclusion(name=n.name, reason=ExclusionReason.MAX_NODES, detail=detail)
                 for n in found.nodes[max_nodes:])
    return attrs.evolve(found, nodes=found.nodes[:max_nodes], excluded=found.excluded + rest)


def waiting_detail(found: DiscoveryFailure, *, target: TargetSpec | None = None,
                   nodes: Iterable[NodeView] = ()) -> str:
    """Why no node is eligible yet, for a WaitingForNodes message: how many GPU nodes match
    the target and, per reason, which are excluded. When none matches, ``nodes`` (the GPU node
    cache) says how many GPU nodes there are, and a target that pins ``nvidia.com/gpu.product``
    names the architectures they have instead."""
    if found.excluded:
        parts = []
        for reason in ExclusionReason:
            names = [e.name for e in found.excluded if e.reason == reason]
            if names:
                parts.append(f"{len(names)} {reason.value} ({_shown(names)})")
        return (f"{len(found.excluded)} GPU node(s) match but none is eligible: "
                f"{', '.join(parts)}")
    gpu = [n for n in nodes if _labels(n).get(GPU_PRESENT) == "true"]
    if not gpu:
        return "0 GPU nodes match"
    text = f"0 of {len(gpu)} GPU node(s) match"
    wanted = target.node_selector.get(GPU_PRODUCT) if target is not None else None
    if wanted:
        archs = Counter(architecture_from_product(p) for n in gpu if (p := n.label(GPU_PRODUCT)))
        have = ", ".join(f"{a} ({c})" for a, c in sorted(archs.items())) or "unlabelled"
        text += (f"; the target asks for {architecture_from_product(wanted)} ({wanted}), the "
                 f"GPU nodes are {have}")
    return text
