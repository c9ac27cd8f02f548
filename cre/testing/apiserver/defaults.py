"""Server-side defaults of apps/v1 workloads, batch/v1 Jobs and PDBs, applied on every write as
decoding does; plus the selector a Job gets on create.

The real server runs each group's generated defaulting functions when it decodes a request, so a
Deployment stored without ``replicas`` or ``strategy`` reads back with them, and clients that
compare desired with live state (``kubectl diff``, controllers computing rollouts) see the same
fields as on a cluster. This module fills the top-level spec defaults of ``pkg/apis/apps/v1``
(replicas, revision history, Deployment strategy and progress deadline, StatefulSet management
and update strategies, DaemonSet update strategy) and the status counters that Go's non-pointer
int32 fields always serialize (a ReplicaSet's ``status.replicas``, a PodDisruptionBudget's
``disruptionsAllowed`` ...); a Job's ``SetDefaults_Job`` fields and its generated selector and
template labels; from 1.35 a missing ``onPodConditions[].status`` becomes ``True`` (1.33/1.34
reject it in validation instead); pods' and pod templates' ``SetDefaults_PodSpec`` /
``SetDefaults_Container`` fields (``dnsPolicy``, ``schedulerName``, ``terminationMessagePath``,
``imagePullPolicy`` ...), requests copied from limits; :func:`admit_new_pod` adds what the
default ``Priority`` and ``DefaultTolerationSeconds`` admission plugins add to a new pod. Left
out: the service-account token volume (its admission plugin needs the token controller),
priority classes, probe and volume-source defaults.
"""

from __future__ import annotations

from collections.abc import Callable
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


def _rolling(spec: Obj, field: str, rolling_defaults: Obj) -> None:
    """An update strategy whose type is unset (``{}`` included: Go sees an empty struct) is
    RollingUpdate, whose parameters get their defaults."""
    strategy = spec.get(field)
    if strategy is None:
        strategy = spec[field] = {}
    if isinstance(strategy, dict):
        _fill(strategy, {"type": "RollingUpdate"})
        if strategy.get("type") == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            if isinstance(rolling, dict):
                _fill(rolling, rolling_defaults)


def _deployment(spec: Obj) -> None:
    _fill(spec, {"replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600})
    _rolling(spec, "strategy", _ROLLING)


def _statefulset(spec: Obj) -> None:
    _fill(spec, {"replicas": 1, "revisionHistoryLimit": 10,
                 "podManagementPolicy": "OrderedReady",
                 "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain",
                                                          "whenScaled": "Retain"}})
    _rolling(spec, "updateStrategy", {"partition": 0})


def _daemonset(spec: Obj) -> None:
    _fill(spec, {"revisionHistoryLimit": 10})
    _rolling(spec, "updateStrategy", {"maxUnavailable": 1, "maxSurge": 0})


def _replicaset(spec: Obj) -> None:
    _fill(spec, {"replicas": 1})


def _replication_controller(spec: Obj) -> None:
    """``SetDefaults_ReplicationController``: one replica; the selector defaults to the pod
    template's labels."""
    _fill(spec, {"replicas": 1})
    tlabels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
    if isinstance(tlabels, dict) and tlabels and not spec.get("selector"):
        spec["selector"] = dict(tlabels)


def _pod_failure_status(spec: Obj) -> None:
    """From 1.35 ``onPodConditions[].status`` is optional and defaults to ``True``."""
    policy = spec.get("podFailurePolicy")
    for rule in (policy.get("rules") or []) if isinstance(policy, dict) else []:
        for pattern in (rule.get("onPodConditions") or []) if isinstance(rule, dict) else []:
            if isinstance(pattern, dict) and not pattern.get("status"):
                pattern["status"] = "True"


def _job(spec: Obj) -> None:
    """``SetDefaults_Job``: both counts 1 when both are unset, otherwise parallelism 1;
    backoffLimit 6 (MaxInt32 with backoffLimitPerIndex); NonIndexed; not suspended; pods
    replaced once terminating unless a podFailurePolicy asks to wait for them to fail."""
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    limit = _MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else 6
    replacement = "Failed" if spec.get("podFailurePolicy") is not None else "TerminatingOrFailed"
    _fill(spec, {"parallelism": 1, "backoffLimit": limit, "completionMode": "NonIndexed",
                 "suspend": False, "podReplacementPolicy": replacement})


_MAX_INT32 = 2**31 - 1
JOB_NAME_LABELS = ("job-name", "batch.kubernetes.io/job-name")
JOB_UID_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")


def generate_job_selector(job: Obj) -> None:
    """On create, unless ``spec.manualSelector`` is true: label the pod template with the job's
    name and uid (legacy and ``batch.kubernetes.io/`` keys, user values kept) and select on
    ``batch.kubernetes.io/controller-uid`` (``pkg/registry/batch/job/strategy.go``)."""
    spec = job.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector") is True:
        return
    spec.setdefault("manualSelector", False)  # kube-apiserver 1.34 stores it explicitly
    meta = job.get("metadata") or {}
    template = spec.get("template")
    if not isinstance(template, dict):
        return
    tmeta = template.setdefault("metadata", {})
    if not isinstance(tmeta, dict):
        return
    labels = tmeta.get("labels")
    # Decoding the request set the Job's labels to its template's labels, the same Go map, so
    # the generated labels added to the template below show on the Job too (kube-apiserver
    # 1.34 answers with all five); a Job whose template had none gets the generated ones when
    # it is read back (apply_builtin_defaults).
    share = isinstance(labels, dict) and bool(labels) and not meta.get("labels")
    if not isinstance(labels, dict):
        labels = tmeta["labels"] = {}
    for key in JOB_NAME_LABELS:
        labels.setdefault(key, str(meta.get("name", "")))
    for key in JOB_UID_LABELS:
        labels.setdefault(key, str(meta.get("uid", "")))
    if share:
        meta["labels"] = dict(labels)
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        selector = spec["selector"] = {}
    match = selector.get("matchLabels")
    if not isinstance(match, dict):
        match = selector["matchLabels"] = {}
    match.setdefault(JOB_UID_LABELS[1], str(meta.get("uid", "")))


def _container(c: Obj) -> None:
    """``SetDefaults_Container``: termination message, pull policy (``Always`` for ``:latest``
    or an untagged name without digest), ``resources: {}``, TCP ports."""
    image = str(c.get("image") or "")
    name_part = image.rsplit("/", 1)[-1]
    tag = "" if "@" in image else (name_part.rpartition(":")[2] if ":" in name_part else "latest")
    _fill(c, {"terminationMessagePath": "/dev/termination-log",
              "terminationMessagePolicy": "File",
              "imagePullPolicy": "Always" if tag == "latest" else "IfNotPresent",
              "resources": {}})
    for port in c.get("ports") or []:
        if isinstance(port, dict):
            _fill(port, {"protocol": "TCP"})


def _pod_spec(spec: Obj) -> None:
    """``SetDefaults_PodSpec`` and the containers' defaults (pods and pod templates alike)."""
    _fill(spec, {"dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
                 "terminationGracePeriodSeconds": 30, "securityContext": {},
                 "schedulerName": "default-scheduler"})
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            if isinstance(c, dict):
                _container(c)


def _pod(spec: Obj) -> None:
    _pod_spec(spec)
    _fill(spec, {"enableServiceLinks": True})  # SetDefaults_Pod: pods only, not templates
    for key in ("initContainers", "containers"):  # SetDefaults_Pod: requests from limits
        for c in spec.get(key) or []:
            resources = c.get("resources") if isinstance(c, dict) else None
            limits = resources.get("limits") if isinstance(resources, dict) else None
            if isinstance(limits, dict) and limits:
                requests = resources.setdefault("requests", {})  # type: ignore[union-attr]
                for name, value in limits.items():
                    requests.setdefault(name, value)


_UNTOLERATED_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def admit_new_pod(pod: Obj) -> None:
    """What the default admission plugins add to a pod being created: ``Priority`` (priority 0
    and ``PreemptLowerPriority`` when no class is named and none is the default) and
    ``DefaultTolerationSeconds`` (NoExecute tolerations of the not-ready and unreachable
    taints for 300 s, unless the pod tolerates them already)."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    if not spec.get("priorityClassName"):
        spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    tolerations = spec.get("tolerations") or []
    for taint in _UNTOLERATED_TAINTS:
        if not any(isinstance(t, dict) and (t.get("key") == taint or (
                not t.get("key") and t.get("operator") == "Exists"))
                and t.get("effect") in (None, "", "NoExecute") for t in tolerations):
            tolerations.append({"key": taint, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": 300})
    if tolerations:
        spec["tolerations"] = tolerations


def _with_template(fill: Callable[[Obj], None], *,
                   restart_default: bool = True) -> Callable[[Obj], None]:
    def both(spec: Obj) -> None:
        fill(spec)
        template = spec.get("template")
        tspec = template.get("spec") if isinstance(template, dict) else None
        if isinstance(tspec, dict):
            had_restart = "restartPolicy" in tspec
            _pod_spec(tspec)
            if not restart_default and not had_restart:
                del tspec["restartPolicy"]
    return both


def _service(spec: Obj) -> None:
    """``SetDefaults_Service``: ClusterIP type, no session affinity, TCP ports whose target is
    the port itself, cluster-wide internal traffic (not for ExternalName)."""
    _fill(spec, {"type": "ClusterIP", "sessionAffinity": "None"})
    if spec["type"] != "ExternalName":
        _fill(spec, {"internalTrafficPolicy": "Cluster"})
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            _fill(port, {"protocol": "TCP"})
            if "targetPort" not in port and "port" in port:
                port["targetPort"] = port["port"]


class ServiceAllocator:
    """Cluster IPs (from 10.96.0.10, in order) and node ports (from 30000) for new Services, as
    the API server's allocators hand them out; deterministic so test runs repeat."""

    def __init__(self) -> None:
        self._next_ip = 10
        self._next_port = 30000

    def allocate(self, svc: Obj) -> None:
        spec = svc.get("spec")
        if not isinstance(spec, dict):
            return
        kind = spec.get("type") or "ClusterIP"
        if kind == "ExternalName":
            return
        if spec.get("clusterIP") == "None" and not spec.get("selector"):
            # A headless Service without a selector asks for both families (kube-apiserver
            # 1.34 answers so even on a single-stack cluster).
            _fill(spec, {"clusterIPs": ["None"], "ipFamilies": ["IPv4", "IPv6"],
                         "ipFamilyPolicy": "RequireDualStack"})
        if not spec.get("clusterIP"):
            n, self._next_ip = self._next_ip, self._next_ip + 1
            spec["clusterIP"] = f"10.96.{n // 256 % 256}.{n % 256}"
        if not spec.get("clusterIPs"):
            spec["clusterIPs"] = [spec["clusterIP"]]
        _fill(spec, {"ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"})
        if kind in ("NodePort", "LoadBalancer"):
            _fill(spec, {"externalTrafficPolicy": "Cluster"})
            for port in spec.get("ports") or []:
                if isinstance(port, dict) and not port.get("nodePort"):
                    port["nodePort"], self._next_port = self._next_port, self._next_port + 1


_BY_KIND = {"Deployment": _deployment, "StatefulSet": _statefulset, "DaemonSet": _daemonset,
            "ReplicaSet": _replicaset}
_BY_GROUP_KIND = {**{("apps", k): _with_template(fn) for k, fn in _BY_KIND.items()},
                  ("batch", "Job"): _with_template(_job, restart_default=False), ("", "Pod"): _pod,
                  ("", "Service"): _service,
                  ("", "ReplicationController"): _with_template(_replication_controller)}


# Status counters that are plain (non-pointer, non-omitempty) int32s in Go: a decoded status
# always carries them, as 0 when the client left them out.
_ZERO_STATUS: dict[tuple[str, str], tuple[str, ...]] = {
    ("apps", "ReplicaSet"): ("replicas",),
    ("", "ReplicationController"): ("replicas",),
    ("apps", "StatefulSet"): ("replicas", "availableReplicas"),
    ("apps", "DaemonSet"): ("currentNumberScheduled", "numberMisscheduled",
                            "desiredNumberScheduled", "numberReady"),
    ("policy", "PodDisruptionBudget"): ("disruptionsAllowed", "currentHealthy", "desiredHealthy",
                                        "expectedPods"),
}


def _drop_zero_times(node: Any) -> None:
    """A template's ``metadata.creationTimestamp: null`` (what Go's JSON and protobuf encoders
    write for the zero time a client leaves there) decodes to the zero time, which the server's
    encoder omits."""
    if isinstance(node, dict):
        meta = node.get("metadata")
        if isinstance(meta, dict) and "creationTimestamp" in meta \
                and meta["creationTimestamp"] is None:
            del meta["creationTimestamp"]
        for value in node.values():
            _drop_zero_times(value)
    elif isinstance(node, list):
        for value in node:
            _drop_zero_times(value)


def apply_builtin_defaults(obj: Obj, *, release: tuple[int, int] = (1, 33)) -> Obj:
    """`obj` with the defaults of its kind at Kubernetes `release` filled in (a copy when
    anything changes)."""
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    kind = str(obj.get("kind", ""))
    fill = _BY_GROUP_KIND.get((group, kind))
    counters = _ZERO_STATUS.get((group, kind), ())
    out = obj
    spec = obj.get("spec")
    if fill is not None and isinstance(spec, dict):
        new_spec = clone(spec)
        fill(new_spec)
        _drop_zero_times(new_spec)
        if kind == "Job" and release >= (1, 35):
            _pod_failure_status(new_spec)
        if new_spec != spec:
            out = dict(out)
            out["spec"] = new_spec
    if (group, kind) in (("batch", "Job"), ("", "ReplicationController")) and isinstance(
            spec, dict):
        # A Job or ReplicationController without labels takes its pod template's (as decoded,
        # before selector generation).
        tlabels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
        meta = obj.get("metadata") or {}
        if isinstance(tlabels, dict) and tlabels and not meta.get("labels"):
            out = dict(out)
            out["metadata"] = {**meta, "labels": dict(tlabels)}
    if (group, kind) == ("", "Secret") and not obj.get("type"):
        out = {**out, "type": "Opaque"}  # SetDefaults_Secret
    status = obj.get("status")
    if counters and isinstance(status, dict) and any(c not in status for c in counters):
        out = dict(out)
        out["status"] = {**{c: 0 for c in counters}, **status}
    return out
