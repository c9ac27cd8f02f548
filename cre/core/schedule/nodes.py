"""Which nodes a scheduled run certifies: idle ones, stalest first, in whole groups.

A node is *eligible* when the template's target selects it (:func:`cre.core.workflow.discovery.
candidates`), it is Ready and not cordoned (unless the target selects cordoned nodes), and it
is *idle*: no pod of anyone else that requests ``nvidia.com/gpu`` runs on it (or is bound to it
and starting). CRE's own pods are not in the view (the informer leaves out ``cre.dev/job`` and
``cre.dev/launcher`` pods). A node carrying CRE's failed-node taint stays eligible: CRE's
workloads tolerate it, and a run that passes the node is what releases it.

Eligible nodes are ordered by how stale their evidence is, over the template's categories:

1. nodes with a category never judged (no NodeCertification, or only Uncertified results) or
   whose pass expired (``validUntil`` at or before ``now``) first;
2. then the oldest latest pass (a category with no pass, a failed one, counts as oldest);
3. then the name.

A node one of the schedule's own runs pinned *after* its record's latest result goes last
(``tried``: when that run ended, or was created while it runs): the run's verdict is not folded
into the record yet (the NodeCertification controller folds a large run over many writes), and
taking the record's word would certify the same nodes again while the stalest wait.

A run takes the first ``maxNodesPerRun`` (every eligible node when unset), rounded down to
whole groups of the template's ``nodesPerJob``, so no group is left short.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import attrs

from cre.api.certification import CertificationSpec
from cre.api.nodecertification import CategoryResult, NodeCertification, NodeResult
from cre.core.common.observed import NodeView
from cre.core.workflow.discovery import admits_cordoned, candidates

GPU_RESOURCE: Final = "nvidia.com/gpu"
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
#: Phases of a pod that holds (or is about to hold) its node's GPUs.
HOLDING_PHASES: Final = frozenset({"Pending", "Running"})


@attrs.frozen(slots=True)
class GpuPodView:
    """What the schedule reads of a pod CRE did not make: its node, the GPUs it requests and
    its phase. Every pod that holds no GPU of a node shares one instance (:data:`NO_GPU`)."""

    node: str
    gpus: int
    phase: str


NO_GPU: Final = GpuPodView(node="", gpus=0, phase="")


def _quantity(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _gpus(containers: Any) -> list[int]:
    out = []
    for container in containers if isinstance(containers, list) else ():
        resources = (container.get("resources") or {}) if isinstance(container, dict) else {}
        asked = (resources.get("requests") or {}).get(GPU_RESOURCE) or \
            (resources.get("limits") or {}).get(GPU_RESOURCE)
        out.append(_quantity(asked) if asked is not None else 0)
    return out


def gpu_pod_view(raw: Mapping[str, Any]) -> GpuPodView:
    """The slim view of a served Pod: the GPUs it requests (its containers' sum, or its
    largest init container's if larger) on its node, in its phase; :data:`NO_GPU` when it
    requests none, is not bound, or has ended."""
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    node = spec.get("nodeName") or ""
    phase = status.get("phase") or "Pending"
    gpus = max(sum(_gpus(spec.get("containers"))), max(_gpus(spec.get("initContainers")),
                                                         default=0))
    if gpus <= 0 or not node or phase not in HOLDING_PHASES:
        return NO_GPU
    return GpuPodView(node=str(node), gpus=gpus, phase=str(phase))


def busy_nodes(pods: Iterable[GpuPodView]) -> frozenset[str]:
    """The nodes a pod of someone else holds GPUs of."""
    return frozenset(p.node for p in pods if p.gpus > 0 and p.node)


def group_size(spec: CertificationSpec) -> int:
    """Nodes per group of the template: ``nodesPerJob`` (the largest a category sets, when
    the global one is unset); 1 when none is set (one group of every chosen node)."""
    sizes = [spec.nodes_per_job] if spec.nodes_per_job is not None else [
        cat.options.nodes_per_job for cat in spec.categories
        if cat.options is not None and cat.options.nodes_per_job is not None]
    return max(sizes, default=1)


@attrs.frozen(kw_only=True)
class NodeChoice:
    """The nodes a run pins (sorted by name), and why the others were left."""

    chosen: tuple[str, ...] = ()
    eligible: int = 0
    busy: tuple[str, ...] = ()  # target nodes left because a foreign GPU pod holds them
    unavailable: int = 0  # target nodes not Ready, or cordoned


def staleness(record: NodeCertification | None, categories: frozenset[tuple[str, str]],
              now: datetime) -> tuple[int, datetime]:
    """The ordering key of a node's evidence: (0 if a category was never judged or its pass
    expired, else 1; the oldest of the categories' latest passes)."""
    latest: dict[tuple[str, str], CategoryResult] = {}
    for result in record.status.categories if record is not None else ():
        if (result.domain, result.variant) in categories:
            latest[(result.domain, result.variant)] = result
    judged = {k: r for k, r in latest.items() if r.result != NodeResult.UNCERTIFIED}
    expired = any(r.result == NodeResult.PASSED and r.valid_until is not None
                  and r.valid_until <= now for r in judged.values())
    if expired or set(judged) != categories:
        return (0, _EPOCH)
    passes = [r.time if r.result == NodeResult.PASSED else _EPOCH for r in judged.values()]
    return (1, min(passes, default=_EPOCH))


def _last_result(record: NodeCertification | None,
                 categories: frozenset[tuple[str, str]]) -> datetime:
    """When the latest result of the categories was folded into ``record`` (epoch: none)."""
    return max((r.time for r in record.status.categories if (r.domain, r.variant) in categories)
               if record is not None else (), default=_EPOCH)


def choose_nodes(spec: CertificationSpec, *, nodes: Iterable[NodeView],
                 records: Mapping[str, NodeCertification], busy: frozenset[str],
                 max_nodes: int | None, now: datetime,
                 tried: Mapping[str, datetime] | None = None) -> NodeChoice:
    """The nodes the next run of a template with ``spec`` certifies (module docstring);
    ``tried``: per node, when the latest of the schedule's runs that pinned it ended."""
    cordoned_ok = admits_cordoned(spec.target)
    eligible: list[NodeView] = []
    held: list[str] = []
    unavailable = 0
    for node in candidates(spec.target, nodes):
        if node.ready != "True" or (node.unschedulable and not cordoned_ok):
            unavailable += 1
        elif node.name in busy:
            held.append(node.name)
        else:
            eligible.append(node)
    categories = frozenset((c.domain, c.variant) for c in spec.categories)
    tried = tried or {}

    def order(node: NodeView) -> tuple[int, datetime, str]:
        record = records.get(node.name)
        at = tried.get(node.name)
        if at is not None and at > _last_result(record, categories):
            return (2, at, node.name)  # judged by a run whose verdict is not folded yet
        return (*staleness(record, categories, now), node.name)

    eligible.sort(key=order)
    size = group_size(spec)
    take = len(eligible) if max_nodes is None else min(max_nodes, len(eligible))
    take -= take % size
    return NodeChoice(chosen=tuple(sorted(n.name for n in eligible[:take])),
                      eligible=len(eligible), busy=tuple(held), unavailable=unavailable)
