"""Which of a group's nodes a (re-)launch may use, decided when the group is launched.

Discovery filters the target once; a group is launched later (an overflow group waits, an
infra re-run or a retry comes after a failure, the next iteration after the last). At every
launch the group's nodes are checked again, on the node cache's slim views, and a node is left
out when:

* it is recorded ``Failed`` earlier in this Workflow (the failed-nodes ConfigMap or this pass's
  records): a node named broken never gets work again;
* it is NotReady (its Ready condition is not True);
* it is cordoned, unless the target deliberately selects cordoned nodes;
* it carries a ``NoSchedule`` / ``NoExecute`` taint that no toleration of the workload (the
  rendered Job and its dependencies' pod templates) tolerates.

A re-run (a group whose last attempt ended) holds back for up to a minute while one of its
nodes is NotReady (``cre.core.workflow.run``): a node that blinks comes back and is tested, one
that stays away is then left out. A node missing from the cache is not left out on that
alone (no evidence; the Job tier judges what happens to its pods). The group runs on the
rest. When too few remain (none for a single-node group, fewer than two for a multi-node one)
the group does not launch: it ends ``InfraAborted`` and its nodes are Uncertified with the
reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from cre.api.common import TargetSpec
from cre.api.workflow import ExcludedNode, ExcludedNodeReason
from cre.core.common.observed import NodeTaint, NodeView
from cre.core.workflow.discovery import admits_cordoned

BLOCKING_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})


@attrs.frozen(kw_only=True)
class Usable:
    """The nodes a launch uses (in group order) and the ones it leaves out."""

    nodes: tuple[str, ...]
    excluded: tuple[ExcludedNode, ...] = ()


def tolerations_in(obj: Any) -> tuple[Mapping[str, Any], ...]:
    """Every toleration found anywhere in ``obj`` (a manifest or a part of one)."""
    found: list[Mapping[str, Any]] = []

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                if k == "tolerations" and isinstance(v, list | tuple):
                    found.extend(t for t in v if isinstance(t, Mapping))
                else:
                    walk(v)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    walk(obj)
    return tuple(found)


def tolerates(toleration: Mapping[str, Any], taint: NodeTaint) -> bool:
    """Kubernetes' rule: the effect matches (empty: all), and the key matches with
    ``Exists`` (an empty key with ``Exists`` tolerates every taint) or equals with its value."""
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.effect or ""):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return not key or key == taint.key
    return key == taint.key and (toleration.get("value") or "") == (taint.value or "")


def blocking_taint(node: NodeView, tolerations: Sequence[Mapping[str, Any]]) -> NodeTaint | None:
    """The first NoSchedule/NoExecute taint of ``node`` no toleration tolerates."""
    for taint in node.taints:
        if (taint.effect or "") in BLOCKING_EFFECTS and \
                not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def _why(node: NodeView, *, target: TargetSpec,
         tolerations: Sequence[Mapping[str, Any]]) -> tuple[ExcludedNodeReason, str] | None:
    if node.ready != "True":
        because = f" ({node.ready_reason})" if node.ready_reason else ""
        return ExcludedNodeReason.NOT_READY, f"node Ready is {node.ready}{because}"
    if node.unschedulable and not admits_cordoned(target):
        return ExcludedNodeReason.CORDONED, "node is cordoned (spec.unschedulable)"
    taint = blocking_taint(node, tolerations)
    if taint is not None:
        shown = taint.key + (f"={taint.value}" if taint.value else "")
        return (ExcludedNodeReason.TAINTED,
                f"taint {shown}:{taint.effect} is not tolerated by the workload")
    return None


def usable_nodes(*, nodes: Sequence[str], views: Iterable[NodeView],
                 failed: Mapping[str, str], target: TargetSpec,
                 tolerations: Sequence[Mapping[str, Any]]) -> Usable:
    """Split a group's ``nodes`` into the ones its launch uses and the ones left out.
    ``failed``: node -> why it was recorded Failed in this Workflow."""
    by_name = {v.name: v for v in views}
    keep: list[str] = []
    out: list[ExcludedNode] = []
    for name in nodes:
        if name in failed:
            out.append(ExcludedNode(name=name, reason=ExcludedNodeReason.FAILED,
                                    message=f"recorded Failed earlier in this Workflow: "
                                            f"{failed[name]}"))
            continue
        view = by_name.get(name)
        why = None if view is None else _why(view, target=target, tolerations=tolerations)
        if why is None:
            keep.append(name)
        else:
            out.append(ExcludedNode(name=name, reason=why[0], message=why[1]))
    return Usable(nodes=tuple(keep), excluded=tuple(out))


def too_few(*, planned: int, left: int) -> bool:
    """Whether ``left`` nodes cannot run a group planned for ``planned`` (a multi-node test
    needs two, a single-node one needs its node)."""
    return left < (2 if planned > 1 else 1)
