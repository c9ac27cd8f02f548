"""kube-scheduler (and, simply, KAI), as a pure step that binds pending pods to nodes.

Follows ``kubernetes/kubernetes`` ``pkg/scheduler`` for the filters a GPU workload meets:
NodeUnschedulable (cordon), NodeName, TaintToleration (NoSchedule / NoExecute), NodeAffinity
(nodeSelector and required node affinity with In / NotIn / Exists / DoesNotExist / Gt / Lt,
terms ORed, expressions ANDed) and NodeResourcesFit on ``status.allocatable`` (requests of
non-terminal pods bound to the node; requests default to limits; pod request =
max(sum of containers, largest init container)). The first failing filter per node is its
reason; an unschedulable pod stays Pending with ``PodScheduled=False`` reason
``Unschedulable`` and the real ``0/N nodes are available: ...`` message (histogram sorted as
strings, the default preemption post-filter sentence). Binding goes through the ``pods/binding``
subresource (``spec.nodeName``) and sets ``PodScheduled=True``. Feasible nodes are taken in
name order (no scoring).

Pods with ``schedulerName: kai-scheduler`` are bound the same way but all-or-nothing per JobSet
(every pending pod of the gang must fit in the same pass), as KAI's gang scheduling does;
queues and PodGroup objects are left out. Also left out: scoring, preemption, inter-pod
affinity, topology spread, ports, scheduling gates beyond "not scheduled", Events.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cre.kube.client import NODES, PODS
from cre.testing.cluster.clock import fmt_time
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.model import (
    Bind,
    Obj,
    Patch,
    Step,
    StepBuilder,
    World,
    condition,
    deleting,
    labels_of,
    name_of,
    ns_of,
)

SCHEDULERS = ("default-scheduler", "kai-scheduler")
TERMINAL = ("Succeeded", "Failed")


def quantity(raw: Any) -> float:
    """A resource quantity as a number (``8``, ``500m``, ``2Gi``)."""
    text = str(raw).strip()
    suffixes = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 1024.0,
                "Mi": 1024.0**2, "Gi": 1024.0**3, "Ti": 1024.0**4}
    for suf in sorted(suffixes, key=len, reverse=True):
        if text.endswith(suf):
            return float(text[: -len(suf)]) * suffixes[suf]
    return float(text)


def pod_requests(pod: Mapping[str, Any]) -> dict[str, float]:
    """Effective requests: max(sum over containers, each init container); limits as default."""
    spec = pod.get("spec") or {}

    def one(c: Mapping[str, Any]) -> dict[str, float]:
        res = c.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return {k: quantity(v) for k, v in merged.items()}

    total: dict[str, float] = {}
    for c in spec.get("containers") or []:
        for k, v in one(c).items():
            total[k] = total.get(k, 0.0) + v
    for c in spec.get("initContainers") or []:
        for k, v in one(c).items():
            total[k] = max(total.get(k, 0.0), v)
    return total


def _tolerated(taint: Mapping[str, Any], tolerations: list[Mapping[str, Any]]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator", "Equal") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _expr_ok(expr: Mapping[str, Any], node_labels: Mapping[str, str]) -> bool:
    key, op, values = expr.get("key"), expr.get("operator"), list(expr.get("values") or [])
    present = key in node_labels
    val = node_labels.get(str(key), "")
    if op == "In":
        return present and val in values
    if op == "NotIn":
        return not present or val not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:
        try:
            return int(val) > int(values[0]) if op == "Gt" else int(val) < int(values[0])
        except ValueError:
            return False
    return False


def affinity_ok(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """nodeSelector and required node affinity (terms ORed, expressions ANDed)."""
    spec = pod.get("spec") or {}
    node_labels = labels_of(node)
    for k, v in (spec.get("nodeSelector") or {}).items():
        if node_labels.get(k) != v:
            return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    for term in terms:
        exprs = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        ok = all(_expr_ok(e, node_labels) for e in exprs) and all(
            _expr_ok(f, {"metadata.name": name_of(node)}) for f in fields)
        if ok and (exprs or fields):
            return True
    return False


def filter_node(pod: Mapping[str, Any], node: Mapping[str, Any],
                used: Mapping[str, float]) -> str | None:
    """None when ``pod`` fits ``node``; else the scheduler's reason for this node."""
    spec = pod.get("spec") or {}
    if (node.get("spec") or {}).get("unschedulable"):
        return "node(s) were unschedulable"
    tolerations = list(spec.get("tolerations") or [])
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(taint,
                                                                                 tolerations):
            return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    if not affinity_ok(pod, node):
        return "node(s) didn't match Pod's node affinity/selector"
    alloc = (node.get("status") or {}).get("allocatable") or {}
    for res, want in sorted(pod_requests(pod).items()):
        have = quantity(alloc.get(res, 0))
        if want > 0 and used.get(res, 0.0) + want > have:
            return f"Insufficient {res}"
    return None


def unschedulable_message(reasons: list[str], total: int) -> str:
    """``0/N nodes are available: <histogram>. preemption: ...`` (histogram sorted as strings)."""
    counts: dict[str, int] = {}
    for r in reasons:
        counts[r] = counts.get(r, 0) + 1
    hist = ", ".join(sorted(f"{n} {r}" for r, n in counts.items()))
    return (f"0/{total} nodes are available: {hist}. preemption: 0/{total} nodes are available: "
            f"{total} Preemption is not helpful for scheduling.")


def _usage(world: World) -> dict[str, dict[str, float]]:
    used: dict[str, dict[str, float]] = {}
    for pod in world.all(PODS):
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in TERMINAL:
            continue
        bucket = used.setdefault(node, {})
        for k, v in pod_requests(pod).items():
            bucket[k] = bucket.get(k, 0.0) + v
    return used


HOSTNAME = "kubernetes.io/hostname"


def hostname_candidates(pod: Mapping[str, Any]) -> set[str] | None:
    """The hostnames ``pod`` can only land on (a hostname nodeSelector, or every required
    affinity term naming hostnames with ``In``), or None when any node may match.

    A shortcut, not a filter: candidates still go through :func:`filter_node`, and a pod none
    of them takes is scanned against every node so its Unschedulable message is the real one.
    """
    spec = pod.get("spec") or {}
    pinned = (spec.get("nodeSelector") or {}).get(HOSTNAME)
    if pinned is not None:
        return {str(pinned)}
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return None
    out: set[str] = set()
    for term in terms:
        names = [e.get("values") or [] for e in term.get("matchExpressions") or []
                 if e.get("key") == HOSTNAME and e.get("operator") == "In"]
        if not names:
            return None
        allowed = set(map(str, names[0]))
        for more in names[1:]:
            allowed &= set(map(str, more))
        out |= allowed
    return out


def _place(pod: Obj, nodes: list[Obj], by_host: Mapping[str, list[int]],
           trial: Mapping[str, Mapping[str, float]]) -> tuple[str | None, list[str]]:
    """The first node (in name order) ``pod`` fits, else every node's reason."""
    wanted = hostname_candidates(pod)
    if wanted is not None:
        for i in sorted(i for host in wanted for i in by_host.get(host, ())):
            node = nodes[i]
            if filter_node(pod, node, trial.get(name_of(node), {})) is None:
                return name_of(node), []
    reasons: list[str] = []
    for node in nodes:
        why = filter_node(pod, node, trial.get(name_of(node), {}))
        if why is None:
            return name_of(node), []
        reasons.append(why)
    return None, reasons


def step(world: World, now: float, cfg: SimConfig) -> Step:
    """Bind every pending pod that fits; mark the rest Unschedulable with the real message."""
    del cfg
    b = StepBuilder()
    nodes = world.all(NODES)
    total = len(nodes)
    by_host: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        host = labels_of(node).get(HOSTNAME)
        if host is not None:
            by_host.setdefault(str(host), []).append(i)
    used = _usage(world)
    pending = [p for p in world.all(PODS)
               if not (p.get("spec") or {}).get("nodeName") and not deleting(p)
               and (p.get("spec") or {}).get("schedulerName", "default-scheduler") in SCHEDULERS
               and (p.get("status") or {}).get("phase", "Pending") == "Pending"]
    pending.sort(key=lambda p: (str((p.get("metadata") or {}).get("creationTimestamp", "")),
                                name_of(p)))
    gangs: dict[str, list[Obj]] = {}
    for pod in pending:
        if (pod.get("spec") or {}).get("schedulerName") == "kai-scheduler":
            gang = labels_of(pod).get("jobset.sigs.k8s.io/jobset-name", name_of(pod))
            gangs.setdefault(f"{ns_of(pod)}/{gang}", []).append(pod)
        else:
            gangs[f"pod/{ns_of(pod)}/{name_of(pod)}"] = [pod]
    for members in gangs.values():
        trial = {k: dict(v) for k, v in used.items()}
        placed: list[tuple[Obj, str]] = []
        failures: dict[str, list[str]] = {}
        for pod in members:
            chosen, reasons = _place(pod, nodes, by_host, trial)
            if chosen is None:
                failures[name_of(pod)] = reasons
                continue
            placed.append((pod, chosen))
            bucket = trial.setdefault(chosen, {})
            for k, v in pod_requests(pod).items():
                bucket[k] = bucket.get(k, 0.0) + v
        if failures:
            for pod in members:
                reasons = failures.get(name_of(pod)) or ["pod group is not ready"] * total
                _mark_unschedulable(b, pod, unschedulable_message(reasons, total), now)
            continue
        used = trial
        for pod, node_name in placed:
            b.add(Bind(ns_of(pod), name_of(pod), node_name),
                  Patch(PODS, ns_of(pod), name_of(pod), {"status": {
                      "phase": "Pending", "conditions": _set(pod, {
                          "type": "PodScheduled", "status": "True",
                          "lastTransitionTime": fmt_time(now)})}}, subresource="status"))
    return b.build()


def _set(pod: Mapping[str, Any], cond: Obj) -> list[Obj]:
    conds = [c for c in (pod.get("status") or {}).get("conditions") or []
             if c.get("type") != cond["type"]]
    return [*conds, cond]


def _mark_unschedulable(b: StepBuilder, pod: Obj, message: str, now: float) -> None:
    current = condition(pod, "PodScheduled")
    if current and current.get("reason") == "Unschedulable" and current.get("message") == message:
        return
    b.add(Patch(PODS, ns_of(pod), name_of(pod), {"status": {"phase": "Pending", "conditions": _set(
        pod, {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
              "message": message, "lastTransitionTime": fmt_time(now)})}},
                subresource="status"))
