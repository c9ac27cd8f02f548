"""Node lifecycle and taint-eviction controllers, as a pure step over nodes and their pods.

Follows ``kubernetes/kubernetes`` ``pkg/controller/nodelifecycle`` and
``pkg/controller/tainteviction``: a registered kubelet reports ``Ready=True``; a node whose
``Ready`` condition is not True gets the ``node.kubernetes.io/not-ready`` taint (``False``) or
``node.kubernetes.io/unreachable`` (``Unknown``) with effects NoSchedule and NoExecute, and the
``Ready`` condition of its pods is flipped to False; each pod there is evicted when its
shortest matching ``tolerationSeconds`` runs out (the DefaultTolerationSeconds admission value,
300 s, when the pod declares no toleration for the taint; at once if a NoExecute taint is not
tolerated at all): ``DisruptionTarget=True`` reason ``DeletionByTaintManager`` message ``Taint
manager: deleting due to NoExecute taint``, then a graceful delete. The taints go away when the
node is Ready again.

Left out: heartbeats / Lease objects and the 50 s grace period (scenarios flip ``Ready``
directly), zone-level eviction rate limits, PodGC of deleted nodes, the out-of-service taint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cre.kube.client import NODES, PODS
from cre.testing.cluster.clock import fmt_time
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.model import (
    Delete,
    Mark,
    Obj,
    Patch,
    Step,
    StepBuilder,
    World,
    condition,
    deleting,
    name_of,
    ns_of,
    uid_of,
)

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
OWN_TAINTS = (NOT_READY, UNREACHABLE)


def step(world: World, now: float, cfg: SimConfig) -> Step:
    """Register kubelets, taint not-ready nodes, evict pods whose tolerations ran out."""
    b = StepBuilder()
    for node in world.all(NODES):
        ready = condition(node, "Ready")
        if ready is None:
            b.add(Patch(NODES, None, name_of(node), {"status": {"conditions": [{
                "type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": fmt_time(now), "lastTransitionTime": fmt_time(now)}]}},
                        subresource="status"))
            continue
        taints = [t for t in (node.get("spec") or {}).get("taints") or []
                  if t.get("key") not in OWN_TAINTS]
        if ready.get("status") == "True":
            if len(taints) != len((node.get("spec") or {}).get("taints") or []):
                b.add(Patch(NODES, None, name_of(node), {"spec": {"taints": taints or None}}))
            continue
        key = NOT_READY if ready.get("status") == "False" else UNREACHABLE
        since = world.marks.get(f"tainted/{name_of(node)}")
        if since is None:
            since = now
            b.add(Mark(f"tainted/{name_of(node)}", now))
            added = [{"key": key, "effect": e, "timeAdded": fmt_time(now)}
                     for e in ("NoSchedule", "NoExecute")]
            b.add(Patch(NODES, None, name_of(node), {"spec": {"taints": taints + added}}))
        _evict(world, node, key, float(since), now, cfg, b)
    for node in world.all(NODES):  # forget the taint time once the node is back
        if (condition(node, "Ready") or {}).get("status") == "True" and \
                f"tainted/{name_of(node)}" in world.marks:
            b.add(Mark(f"tainted/{name_of(node)}", None))
    return b.build()


def toleration_seconds(pod: Mapping[str, Any], taint_key: str, default: int) -> float | None:
    """Seconds the pod tolerates a NoExecute ``taint_key`` (None = forever, 0 = not at all)."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    matching = [t for t in tolerations
                if t.get("effect") in (None, "", "NoExecute")
                and (t.get("key") == taint_key or (not t.get("key")
                                                   and t.get("operator") == "Exists"))]
    if not matching:
        declared = any(t.get("key") == taint_key for t in tolerations)
        return 0.0 if declared else float(default)
    secs = [t.get("tolerationSeconds") for t in matching]
    if any(s is None for s in secs):
        return None
    return float(min(int(s) for s in secs if s is not None))


def _evict(world: World, node: Obj, key: str, since: float, now: float, cfg: SimConfig,
           b: StepBuilder) -> None:
    for pod in world.all(PODS):
        if (pod.get("spec") or {}).get("nodeName") != name_of(node) or deleting(pod):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        conds = list((pod.get("status") or {}).get("conditions") or [])
        ready = condition(pod, "Ready")
        if ready and ready.get("status") == "True":
            conds = [dict(c, status="False") if c.get("type") == "Ready" else c for c in conds]
            b.add(Patch(PODS, ns_of(pod), name_of(pod), {"status": {"conditions": conds}},
                        subresource="status"))
        secs = toleration_seconds(pod, key, cfg.default_toleration_seconds)
        if secs is None:
            continue
        due = since + secs
        if now < due:
            b.wake(due)
            continue
        conds = [c for c in conds if c.get("type") != "DisruptionTarget"]
        conds.append({"type": "DisruptionTarget", "status": "True",
                      "reason": "DeletionByTaintManager",
                      "message": "Taint manager: deleting due to NoExecute taint",
                      "lastTransitionTime": fmt_time(now)})
        b.add(Patch(PODS, ns_of(pod), name_of(pod), {"status": {"conditions": conds}},
                    subresource="status"),
              Delete(PODS, ns_of(pod), name_of(pod), uid=uid_of(pod)))
