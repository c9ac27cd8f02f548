"""Server-side defaults of apps/v1 workloads and PDBs, applied on every write as decoding does.

The real server runs each group's generated defaulting functions when it decodes a request, so a
Deployment stored without ``replicas`` or ``strategy`` reads back with them, and clients that
compare desired with live state (``kubectl diff``, controllers computing rollouts) see the same
fields as on a cluster. This module fills the top-level spec defaults of ``pkg/apis/apps/v1``
(replicas, revision history, Deployment strategy and progress deadline, StatefulSet management
and update strategies, DaemonSet update strategy) and the status counters that Go's non-pointer
int32 fields always serialize (a ReplicaSet's ``status.replicas``, a PodDisruptionBudget's
``disruptionsAllowed`` ...). Left out: the pod-template defaults
(``dnsPolicy``, ``schedulerName``, per-container ``terminationMessagePath`` ...), which no CRE
path reads.
"""

from __future__ import annotations

from typing import Any

from ._shapes import clone

Obj = dict[str, Any]

_ROLLING = {"maxUnavailable": "25%", "maxSurge": "25%"}


def _fill(target: Obj, defaults: Obj) -> bool:
    """Set the missing keys of `target` from `defaults`; True when anything was set."""
    changed = False
    for key, value in defaults.items():
        if key not in target or target[key] is None:
            target[key] = clone(value)
            changed = True
    return changed


def _deployment(spec: Obj) -> None:
    _fill(spec, {"replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                 "strategy": {"type": "RollingUpdate"}})
    strategy = spec["strategy"]
    if isinstance(strategy, dict) and strategy.get("type") == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        if isinstance(rolling, dict):
            _fill(rolling, _ROLLING)


def _statefulset(spec: Obj) -> None:
    _fill(spec, {"replicas": 1, "revisionHistoryLimit": 10,
                 "podManagementPolicy": "OrderedReady",
                 "updateStrategy": {"type": "RollingUpdate"},
                 "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain",
                                                          "whenScaled": "Retain"}})
    strategy = spec["updateStrategy"]
    if isinstance(strategy, dict) and strategy.get("type") == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        if isinstance(rolling, dict):
            _fill(rolling, {"partition": 0})


def _daemonset(spec: Obj) -> None:
    _fill(spec, {"revisionHistoryLimit": 10, "updateStrategy": {"type": "RollingUpdate"}})
    strategy = spec["updateStrategy"]
    if isinstance(strategy, dict) and strategy.get("type") == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        if isinstance(rolling, dict):
            _fill(rolling, {"maxUnavailable": 1, "maxSurge": 0})


def _replicaset(spec: Obj) -> None:
    _fill(spec, {"replicas": 1})


_BY_KIND = {"Deployment": _deployment, "StatefulSet": _statefulset, "DaemonSet": _daemonset,
            "ReplicaSet": _replicaset}


# Status counters that are plain (non-pointer, non-omitempty) int32s in Go: a decoded status
# always carries them, as 0 when the client left them out.
_ZERO_STATUS: dict[tuple[str, str], tuple[str, ...]] = {
    ("apps", "ReplicaSet"): ("replicas",),
    ("apps", "StatefulSet"): ("replicas", "availableReplicas"),
    ("apps", "DaemonSet"): ("currentNumberScheduled", "numberMisscheduled",
                            "desiredNumberScheduled", "numberReady"),
    ("policy", "PodDisruptionBudget"): ("disruptionsAllowed", "currentHealthy", "desiredHealthy",
                                        "expectedPods"),
}


def apply_builtin_defaults(obj: Obj) -> Obj:
    """`obj` with the defaults of its kind filled in (a copy when anything changes)."""
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    kind = str(obj.get("kind", ""))
    fill = _BY_KIND.get(kind) if group == "apps" else None
    counters = _ZERO_STATUS.get((group, kind), ())
    out = obj
    spec = obj.get("spec")
    if fill is not None and isinstance(spec, dict):
        new_spec = clone(spec)
        fill(new_spec)
        if new_spec != spec:
            out = dict(out)
            out["spec"] = new_spec
    status = obj.get("status")
    if counters and isinstance(status, dict) and any(c not in status for c in counters):
        out = dict(out)
        out["status"] = {**{c: 0 for c in counters}, **status}
    return out
