"""Table output (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``) for ``kubectl get``.

kubectl prints whatever columns the server sends. Custom resources get ``Name`` plus the
version's ``additionalPrinterColumns`` (or ``Age`` when there are none), evaluated with
JSONPath; pods and nodes get the printer columns of ``pkg/printers/internalversion``; other
built-ins (apps/v1 workloads, RBAC roles and bindings, PodDisruptionBudgets included) a short,
faithful subset of theirs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import _cells as cells
from .jsonpath import JsonPathError, evaluate
from .meta import parse_time
from .resources import ResourceType

if TYPE_CHECKING:
    from .context import ServerContext

Obj = dict[str, Any]
NAME_DESC = (
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
AGE_DESC = (
    "CreationTimestamp is a timestamp representing the server time when this object was created."
)


def requested(request: web.Request) -> str:
    """``v1`` / ``v1beta1`` when the client asked for a Table, else ``""``."""
    accept = request.headers.get("Accept", "")
    if "as=Table" not in accept:
        return ""
    for part in accept.split(","):
        if "as=Table" in part and "g=meta.k8s.io" in part:
            return "v1beta1" if "v=v1beta1" in part else "v1"
    return ""


def human_duration(seconds: float) -> str:
    """``k8s.io/apimachinery/pkg/util/duration.HumanDuration``."""
    s = int(seconds)
    if s < 0:
        return "<invalid>"
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        rem = s % 60
        return f"{m}m{rem}s" if rem else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = s // 3600
    if h < 8:
        rem_m = m % 60
        return f"{h}h{rem_m}m" if rem_m else f"{h}h"
    if h < 48:
        return f"{h}h"
    if h < 192:
        rem_h = h % 24
        return f"{h // 24}d{rem_h}h" if rem_h else f"{h // 24}d"
    if h < 24 * 365 * 2:
        return f"{h // 24}d"
    y = h // (24 * 365)
    if y < 8:
        d = (h // 24) % 365
        return f"{y}y{d}d" if d else f"{y}y"
    return f"{y}y"


def _age(server: ServerContext, ts: Any) -> str:
    if not ts:
        return "<unknown>"
    try:
        then = parse_time(str(ts))
    except ValueError:
        return "<invalid>"
    now = server.clock()
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    delta = (now - then).total_seconds()
    if delta < -1:
        return "<invalid>"
    return human_duration(max(delta, 0))


def _col(name: str, *, type_: str = "string", fmt: str = "", desc: str = "", priority: int = 0
         ) -> dict[str, Any]:
    return {"name": name, "type": type_, "format": fmt, "description": desc, "priority": priority}


Column = tuple[dict[str, Any], Any]  # definition, cell function (server, obj) -> value


def _builtin_columns(rt: ResourceType) -> list[Column]:
    name = (_col("Name", fmt="name", desc=NAME_DESC), lambda s, o: o["metadata"].get("name", ""))
    age = (_col("Age", desc=AGE_DESC),
           lambda s, o: _age(s, o["metadata"].get("creationTimestamp")))
    if rt.kind == "Pod" and rt.group == "":
        return [
            name,
            (_col("Ready", desc="The aggregate readiness state of this pod for accepting "
                  "traffic."), lambda s, o: cells.pod_ready(o)),
            (_col("Status", desc="The aggregate status of the containers in this pod."),
             lambda s, o: cells.pod_status(o)),
            (_col("Restarts", desc="The number of times the containers in this pod have been "
                  "restarted and when the last container in this pod has restarted."),
             lambda s, o: str(sum(int(c.get("restartCount", 0)) for c in
                                  (o.get("status") or {}).get("containerStatuses") or []))),
            age,
            (_col("IP", desc="IP address allocated to the pod. Routable at least within the "
                  "cluster. Empty if not yet allocated.", priority=1),
             lambda s, o: cells.pod_ip(o)),
            (_col("Node", desc="Name of the node this pod is assigned to.", priority=1),
             lambda s, o: (o.get("spec") or {}).get("nodeName") or "<none>"),
            (_col("Nominated Node", desc="The node a preempting pod expects to be scheduled "
                  "on once its victims are gone; not a guarantee.", priority=1),
             lambda s, o: (o.get("status") or {}).get("nominatedNodeName") or "<none>"),
            (_col("Readiness Gates", desc="Extra pod conditions that must be True for the pod "
                  "to be ready.", priority=1),
             lambda s, o: cells.readiness_gates(o)),
        ]
    if rt.kind == "Node" and rt.group == "":
        return [
            name,
            (_col("Status", desc="The status of the node"), lambda s, o: cells.node_status(o)),
            (_col("Roles", desc="The roles of the node"), lambda s, o: cells.node_roles(o)),
            age,
            (_col("Version", desc="Kubelet Version reported by the node."),
             lambda s, o: ((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion",
                                                                              "")),
        ]
    if rt.kind == "Namespace":
        return [name, (_col("Status", desc="The status of the namespace"),
                       lambda s, o: (o.get("status") or {}).get("phase", "")), age]
    if rt.kind == "Job" and rt.group == "batch":
        return [name, (_col("Status", desc="Status of the job."), lambda s, o: cells.job_status(o)),
                (_col("Completions", desc="The completion status of the job."),
                 lambda s, o: cells.job_completions(o)),
                (_col("Duration", desc="Time required to complete the job."),
                 _job_duration), age, *_TEMPLATE_COLUMNS]
    if rt.kind == "Service" and rt.group == "":
        return [name, *_SERVICE_COLUMNS, age,
                (_col("Selector", desc="Labels of the pods this service routes to.",
                      priority=1), lambda s, o: cells.service_selector(o))]
    if rt.kind == "ConfigMap" and rt.group == "":
        return [name, (_col("Data", desc="How many keys the config map holds (data and "
                            "binaryData)."),
                       lambda s, o: len(o.get("data") or {}) + len(o.get("binaryData") or {})),
                age]
    if rt.kind == "Lease":
        return [name, (_col("Holder", desc="The holder of the lease."),
                       lambda s, o: (o.get("spec") or {}).get("holderIdentity", "")), age]
    if rt.kind == "Event" and rt.group == "":
        return [
            (_col("Last Seen"), lambda s, o: _age(s, o.get("lastTimestamp")
                                                 or o.get("eventTime"))),
            (_col("Type"), lambda s, o: o.get("type", "")),
            (_col("Reason"), lambda s, o: o.get("reason", "")),
            (_col("Object"), lambda s, o: f"{(o.get('involvedObject') or {}).get('kind', '')}"
             f"/{(o.get('involvedObject') or {}).get('name', '')}".lower()),
            (_col("Message"), lambda s, o: o.get("message", "")),
        ]
    if rt.kind == "CustomResourceDefinition":
        return [name, (_col("Created At", type_="date"),
                       lambda s, o: o["metadata"].get("creationTimestamp", ""))]
    if rt.group == "apps" and rt.kind in _WORKLOAD_COLUMNS:
        return [name, *_WORKLOAD_COLUMNS[rt.kind], age, *_TEMPLATE_COLUMNS]
    if rt.group == "rbac.authorization.k8s.io":
        if rt.kind.endswith("Binding"):
            return [name, _ROLE_REF, age, *_SUBJECT_COLUMNS]
        return [name, (_col("Created At", type_="date"),
                       lambda s, o: o["metadata"].get("creationTimestamp", ""))]
    if rt.kind == "ReplicationController" and rt.group == "":
        return [name, *_RC_COLUMNS, age, *_TEMPLATE_COLUMNS]
    if rt.kind == "APIService" and rt.group == "apiregistration.k8s.io":
        return [name, (_col("Service", desc="The reference to the service that hosts this "
                            "API endpoint."), lambda s, o: cells.apiservice_service(o)),
                (_col("Available", desc="Whether this service is available."),
                 lambda s, o: cells.apiservice_available(o)), age]
    if rt.kind == "PodDisruptionBudget" and rt.group == "policy":
        return [name, *_PDB_COLUMNS, age]
    return [name, age]


def _status_col(name: str, desc: str, field: str) -> Column:
    return (_col(name, type_="integer", desc=desc), lambda s, o: cells.field(o, "status", field))


# apps/v1 columns of pkg/printers/internalversion (wide columns have priority 1).
_TEMPLATE_COLUMNS: list[Column] = [
    (_col("Containers", desc="Names of each container in the template.", priority=1),
     lambda s, o: cells.containers(o, "name")),
    (_col("Images", desc="Images referenced by each container in the template.", priority=1),
     lambda s, o: cells.containers(o, "image")),
    (_col("Selector", desc="Label selector for pods. Existing ReplicaSets whose pods are "
          "selected by this will be the ones affected by this deployment.", priority=1),
     lambda s, o: cells.selector_text(o)),
]
_RC_COLUMNS: list[Column] = [
    (_col("Desired", type_="integer", desc="Number of desired pods."),
     lambda s, o: cells.field(o, "spec", "replicas", default=1)),
    _status_col("Current", "Number of actual replicas.", "replicas"),
    _status_col("Ready", "The number of ready replicas for this replication controller.",
                "readyReplicas"),
]
_WORKLOAD_COLUMNS: dict[str, list[Column]] = {
    "Deployment": [
        (_col("Ready", desc="Number of the pod with ready state"),
         lambda s, o: f"{cells.field(o, 'status', 'readyReplicas')}/"
         f"{cells.field(o, 'spec', 'replicas', default=1)}"),
        _status_col("Up-to-date", "Total number of non-terminated pods targeted by this "
                    "deployment that have the desired template spec.", "updatedReplicas"),
        _status_col("Available", "Total number of available pods (ready for at least "
                    "minReadySeconds) targeted by this deployment.", "availableReplicas"),
    ],
    "ReplicaSet": [
        (_col("Desired", type_="integer", desc="Number of desired pods."),
         lambda s, o: cells.field(o, "spec", "replicas", default=1)),
        _status_col("Current", "Number of actual replicas.", "replicas"),
        _status_col("Ready", "The number of ready replicas for this replica set.",
                    "readyReplicas"),
    ],
    "StatefulSet": [
        (_col("Ready", desc="Number of the pod with ready state"),
         lambda s, o: f"{cells.field(o, 'status', 'readyReplicas')}/"
         f"{cells.field(o, 'spec', 'replicas', default=1)}"),
    ],
    "DaemonSet": [
        _status_col("Desired", "The desired number of daemon pods.", "desiredNumberScheduled"),
        _status_col("Current", "The current number of daemon pods.", "currentNumberScheduled"),
        _status_col("Ready", "The number of daemon pods that are ready.", "numberReady"),
        _status_col("Up-to-date", "The number of nodes that are running the updated daemon "
                    "pod.", "updatedNumberScheduled"),
        _status_col("Available", "The number of nodes that should be running the daemon pod "
                    "and have one or more running and available.", "numberAvailable"),
        (_col("Node Selector", desc="NodeSelector is a selector which must be true for the pod "
              "to fit on a node."),
         lambda s, o: ",".join(f"{k}={v}" for k, v in sorted(
             cells.field(o, "spec", "template", "spec", "nodeSelector", default={}).items()))
         or "<none>"),
    ],
}
_ROLE_REF: Column = (
    _col("Role", desc="RoleRef is the reference to the role granted by this binding."),
    lambda s, o: f"{cells.field(o, 'roleRef', 'kind', default='')}/"
    f"{cells.field(o, 'roleRef', 'name', default='')}")
_SUBJECT_COLUMNS: list[Column] = [
    (_col("Users", desc="Users in the binding.", priority=1),
     lambda s, o: cells.subjects(o, "User")),
    (_col("Groups", desc="Groups in the binding.", priority=1),
     lambda s, o: cells.subjects(o, "Group")),
    (_col("ServiceAccounts", desc="ServiceAccounts in the binding.", priority=1),
     lambda s, o: cells.subjects(o, "ServiceAccount")),
]
_PDB_COLUMNS: list[Column] = [
    (_col("Min Available", desc="The minimum number of pods that must be available."),
     lambda s, o: str(cells.field(o, "spec", "minAvailable", default="N/A"))),
    (_col("Max Unavailable", desc="The maximum number of pods that may be unavailable."),
     lambda s, o: str(cells.field(o, "spec", "maxUnavailable", default="N/A"))),
    _status_col("Allowed Disruptions", "Calculated number of pods that may be disrupted at "
                "this time.", "disruptionsAllowed"),
]


def _crd_columns(server: ServerContext, rt: ResourceType) -> list[Column]:
    crd = server.store.get(("apiextensions.k8s.io", "customresourcedefinitions"),
                           ("", rt.crd_name))
    cols: list[dict[str, Any]] = []
    if crd is not None:
        for v in (crd.get("spec") or {}).get("versions") or []:
            if v.get("name") == rt.version:
                cols = list(v.get("additionalPrinterColumns") or [])
    out: list[Column] = [(_col("Name", fmt="name", desc=NAME_DESC),
                          lambda s, o: o["metadata"].get("name", ""))]
    if not cols:
        out.append((_col("Age", type_="date", desc=AGE_DESC),
                    lambda s, o: _age(s, o["metadata"].get("creationTimestamp"))))
        return out
    for c in cols:
        path = str(c.get("jsonPath", ""))
        ctype = str(c.get("type", "string"))
        desc = c.get("description") or (
            f"Custom resource definition column (in JSONPath format): {path}"
        )
        defn = _col(str(c.get("name", "")), type_=ctype, fmt=str(c.get("format", "")),
                    desc=str(desc), priority=int(c.get("priority", 0)))
        out.append((defn, _cell_fn(path, ctype)))
    return out


def _cell_fn(path: str, ctype: str) -> Any:
    def cell(server: ServerContext, obj: Obj) -> Any:
        try:
            values = evaluate(path, obj)
        except JsonPathError:
            return None
        if not values:
            return None
        v = values[0]
        if ctype == "date":
            return _age(server, v) if isinstance(v, str) else None
        if ctype == "integer":
            return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
        if ctype == "number":
            return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
        if ctype == "boolean":
            return v if isinstance(v, bool) else None
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, dict | list):
            import json

            return json.dumps(v, separators=(",", ":"))
        return str(v)

    return cell


def build(
    server: ServerContext,
    rt: ResourceType,
    items: list[Obj],
    meta: dict[str, Any],
    version: str,
    request: web.Request,
    *,
    headers: bool = True,
) -> dict[str, Any]:
    columns = _crd_columns(server, rt) if rt.is_custom else _builtin_columns(rt)
    include = request.query.get("includeObject", "Metadata")
    rows = []
    for obj in items:
        row: dict[str, Any] = {"cells": [fn(server, obj) for _, fn in columns]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        rows.append(row)
    if not meta.get("continue"):
        meta = {k: v for k, v in meta.items() if k != "continue"}  # a Table omits it empty
    out: dict[str, Any] = {"kind": "Table", "apiVersion": f"meta.k8s.io/{version}",
                           "metadata": meta}
    out["columnDefinitions"] = [d for d, _ in columns] if headers else None
    out["rows"] = rows
    return out


_SERVICE_COLUMNS: list[Column] = [
    (_col("Type", desc="How the service is exposed."),
     lambda s, o: str((o.get("spec") or {}).get("type") or "ClusterIP")),
    (_col("Cluster-IP", desc="The service's address inside the cluster."),
     lambda s, o: str((o.get("spec") or {}).get("clusterIP") or "<none>")),
    (_col("External-IP", desc="Addresses outside the cluster (load balancer, external IPs)."),
     lambda s, o: cells.service_external_ip(o)),
    (_col("Port(s)", desc="The ports the service exposes."), lambda s, o: cells.service_ports(o)),
]


def _job_duration(server: ServerContext, job: Obj) -> str:
    """From ``startTime`` to ``completionTime`` (or now); empty before the job started."""
    status = job.get("status") or {}
    if not status.get("startTime"):
        return ""
    try:
        start = parse_time(str(status["startTime"]))
        end = (parse_time(str(status["completionTime"])) if status.get("completionTime")
               else server.clock())
    except ValueError:
        return ""
    if end.tzinfo is None:
        end = end.replace(tzinfo=UTC)
    return human_duration(max((end - start).total_seconds(), 0))


def now_utc() -> datetime:
    return datetime.now(UTC)
