"""Cell values of the built-in kinds' Table columns, as pure functions of the object.

Each function reproduces one printer of ``kubernetes/kubernetes:pkg/printers/internalversion``
(pod READY/STATUS, node STATUS/ROLES, job STATUS/COMPLETIONS, service EXTERNAL-IP/PORT(S),
workload template columns ...); :mod:`.table` assembles them into column definitions and rows.
"""

from __future__ import annotations

from typing import Any

from .selectors import selector_string

Obj = dict[str, Any]


def pod_ip(pod: Obj) -> str:
    """The first of ``status.podIPs`` (the printer reads that list, not ``podIP``)."""
    ips = (pod.get("status") or {}).get("podIPs") or []
    first = ips[0].get("ip") if ips and isinstance(ips[0], dict) else None
    return str(first) if first else "<none>"


def readiness_gates(pod: Obj) -> str:
    """``<true>/<total>`` over ``spec.readinessGates``, ``<none>`` without gates."""
    gates = (pod.get("spec") or {}).get("readinessGates") or []
    if not gates:
        return "<none>"
    conditions = (pod.get("status") or {}).get("conditions") or []
    true = 0
    for gate in gates:
        for cond in conditions:
            if cond.get("type") == gate.get("conditionType"):
                true += cond.get("status") == "True"
                break
    return f"{true}/{len(gates)}"


def field(obj: Obj, *path: str, default: Any = 0) -> Any:
    node: Any = obj
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    return default if node is None else node


def containers(obj: Obj, key: str) -> str:
    spec = field(obj, "spec", "template", "spec", default={})
    return ",".join(str(c.get(key, "")) for c in spec.get("containers") or ())


def subjects(binding: Obj, kind: str) -> str:
    names = []
    for subject in binding.get("subjects") or ():
        if subject.get("kind") != kind:
            continue
        name = str(subject.get("name", ""))
        if kind == "ServiceAccount":
            name = f"{subject.get('namespace', '')}/{name}"
        names.append(name)
    return ", ".join(names)


def selector_text(obj: Obj) -> str:
    raw = field(obj, "spec", "selector", default=None)
    if obj.get("kind") == "ReplicationController" and isinstance(raw, dict):
        raw = {"matchLabels": raw}  # a plain label map
    return selector_string(raw) or "<none>"


def apiservice_service(obj: Obj) -> str:
    """``namespace/name`` of the backing Service, or ``Local`` for a built-in group."""
    svc = field(obj, "spec", "service", default=None)
    if not isinstance(svc, dict):
        return "Local"
    return f"{svc.get('namespace', '')}/{svc.get('name', '')}"


def apiservice_available(obj: Obj) -> str:
    """The Available condition's status, with its reason when it is not True."""
    for cond in field(obj, "status", "conditions", default=None) or []:
        if isinstance(cond, dict) and cond.get("type") == "Available":
            status = str(cond.get("status", ""))
            reason = cond.get("reason")
            return status if status == "True" or not reason else f"{status} ({reason})"
    return "Unknown"


def pod_ready(pod: Obj) -> str:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    total = len(spec.get("containers") or [])
    ready = sum(1 for c in status.get("containerStatuses") or []
                if c.get("ready") and "running" in (c.get("state") or {}))
    return f"{ready}/{total}"


def pod_status(pod: Obj) -> str:
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or ""
    init = False
    for i, c in enumerate(status.get("initContainerStatuses") or []):
        state = c.get("state") or {}
        term, wait = state.get("terminated"), state.get("waiting")
        if term and term.get("exitCode") == 0:
            continue
        init = True
        if term:
            reason = "Init:" + (term.get("reason") or f"ExitCode:{term.get('exitCode')}")
        elif wait and wait.get("reason") and wait["reason"] != "PodInitializing":
            reason = "Init:" + wait["reason"]
        else:
            total = len((pod.get("spec") or {}).get("initContainers") or [])
            reason = f"Init:{i}/{total}"
        break
    if not init:
        running = False
        for c in reversed(status.get("containerStatuses") or []):
            state = c.get("state") or {}
            if (state.get("waiting") or {}).get("reason"):
                reason = state["waiting"]["reason"]
            elif state.get("terminated"):
                term = state["terminated"]
                reason = term.get("reason") or (
                    f"Signal:{term['signal']}" if term.get("signal")
                    else f"ExitCode:{term.get('exitCode')}")
            elif "running" in state and c.get("ready"):
                running = True
        if reason == "Completed" and running:
            reason = "Running"
    if pod["metadata"].get("deletionTimestamp") and status.get("phase") not in (
        "Succeeded", "Failed"
    ):
        reason = "Terminating"
    return str(reason)


def node_status(node: Obj) -> str:
    cond = next((c for c in (node.get("status") or {}).get("conditions") or []
                 if c.get("type") == "Ready"), None)
    text = "Unknown" if cond is None else ("Ready" if cond.get("status") == "True" else "NotReady")
    if (node.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def node_roles(node: Obj) -> str:
    labels = node["metadata"].get("labels") or {}
    roles = {k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")}
    if labels.get("kubernetes.io/role"):
        roles.add(labels["kubernetes.io/role"])
    return ",".join(sorted(r for r in roles if r)) or "<none>"


def job_status(job: Obj) -> str:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
            return str(c["type"])
    return "Running"


def service_external_ip(svc: Obj) -> str:
    spec = svc.get("spec") or {}
    kind = spec.get("type") or "ClusterIP"
    external = [str(ip) for ip in spec.get("externalIPs") or []]
    if kind == "ExternalName":
        return str(spec.get("externalName") or "")
    if kind == "LoadBalancer":
        ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        ips = [str(i.get("ip") or i.get("hostname")) for i in ingress
               if i.get("ip") or i.get("hostname")]
        return ",".join(ips + external) or "<pending>"
    return ",".join(external) or "<none>"


def service_ports(svc: Obj) -> str:
    out = []
    for p in (svc.get("spec") or {}).get("ports") or []:
        proto = p.get("protocol") or "TCP"
        node = p.get("nodePort")
        out.append(f"{p.get('port')}:{node}/{proto}" if node else f"{p.get('port')}/{proto}")
    return ",".join(out) or "<none>"


def service_selector(svc: Obj) -> str:
    sel = (svc.get("spec") or {}).get("selector") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(sel.items())) or "<none>"


def job_completions(job: Obj) -> str:
    """``succeeded/completions``; without completions ``succeeded/1`` (``of <parallelism>``
    when more than one pod runs at a time), as the Job printer writes it."""
    succeeded = int((job.get("status") or {}).get("succeeded") or 0)
    spec = job.get("spec") or {}
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    parallelism = int(spec.get("parallelism") or 0)
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"
