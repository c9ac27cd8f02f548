"""The differential request scripts: what the emulator must answer exactly as kube-apiserver.

Each :class:`~.differential.Script` exercises one behaviour CRE or its tests rely on: create,
get, 404/409 bodies, list with label and field selectors, pagination, watch (initial state,
resume, streaming initial events with their bookmark), optimistic concurrency, the status
subresource, the three patch types and server-side apply with conflicts, finalizers and
deletion, owner-reference garbage collection, CRD schema and CEL rejections with their Status
messages, defaulting of pods, Jobs and Services, table output and dry runs. The scripts run in
a namespace of their own (``${ns}``); ``${var}`` values come from earlier responses.
"""

from __future__ import annotations

from typing import Any

from .differential import Script, Step

NS = "/api/v1/namespaces/${ns}"
CMS = NS + "/configmaps"
PODS = NS + "/pods"
CREJOBS = "/apis/cre.dev/v1alpha1/namespaces/${ns}/jobs"
JOBS = "/apis/batch/v1/namespaces/${ns}/jobs"
MERGE = "application/merge-patch+json"
JSONPATCH = "application/json-patch+json"
SMP = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
PARTIAL = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"


def cm(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def pod(name: str, *, labels: dict[str, str] | None = None, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def crejob(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "cre.dev/v1alpha1", "kind": "Job", "metadata": {"name": name},
            "spec": {"workload": {"trainJob": {"runtimeRef": {"name": "torch"}}}, **spec}}


DEPLOYS = "/apis/apps/v1/namespaces/${ns}/deployments"


def deployment(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {
                         "containers": [{"name": "main", "image": "busybox"}]}}}}


def kc(*args: str, stdin: Any = None, **kw: Any) -> Step:
    """A kubectl command in the script's namespace (``stdin``: an object sent as JSON)."""
    return Step("KUBECTL", "", body=stdin, kubectl=args, **kw)


def post(path: str, body: Any, **kw: Any) -> Step:
    return Step("POST", path, body=body, **kw)


def get(path: str, **kw: Any) -> Step:
    return Step("GET", path, **kw)


SCRIPTS: tuple[Script, ...] = (
    Script("create_get", about="create, get, 404 and 409 AlreadyExists bodies", steps=(
        post(CMS, cm("a", x="1"), wire=True),
        get(CMS + "/a", wire=True),
        get(CMS + "/missing"),
        post(CMS, cm("a", x="2")),
        get("/api/v1/namespaces/no-such-ns/configmaps/a"),
        post("/api/v1/namespaces/no-such-ns/configmaps", cm("a")),
        get(NS + "/nosuchresource"),
    )),
    Script("generate_name_and_dry_run", about="generateName, dryRun=All writes nothing", steps=(
        post(CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"generateName": "gen-"}}),
        post(CMS + "?dryRun=All", cm("dry")),
        get(CMS + "/dry"),
    )),
    Script("validation_422", about="invalid names, labels and missing fields", steps=(
        post(CMS, cm("Bad_Name")),
        post(CMS, cm("ok", labels={"bad key!": "v"})),
        post(CMS, cm("ok2", labels={"k": "-bad-value-"})),
        post(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                    "spec": {"containers": []}}),
        post(CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
        Step("PUT", CMS + "/other", body=cm("nomatch")),
    )),
    Script("label_selectors", about="every label selector operator and a bad selector", steps=(
        post(CMS, cm("a", labels={"app": "x", "tier": "1"})),
        post(CMS, cm("b", labels={"app": "y", "tier": "2"})),
        post(CMS, cm("c", labels={"app": "x"})),
        get(CMS + "?labelSelector=app%3Dx"),
        get(CMS + "?labelSelector=app!%3Dx"),
        get(CMS + "?labelSelector=tier%20in%20(1,2)"),
        get(CMS + "?labelSelector=tier%20notin%20(1)"),
        get(CMS + "?labelSelector=tier"),
        get(CMS + "?labelSelector=!tier"),
        get(CMS + "?labelSelector=app%3Dx,tier%3D1"),
        get(CMS + "?labelSelector=app%3D%3D"),
    )),
    Script("field_selectors", about="metadata.name, spec.nodeName, status.phase; unknown field",
           steps=(
        post(PODS, pod("p1", node="n1")),
        post(PODS, pod("p2")),
        get(PODS + "?fieldSelector=spec.nodeName%3Dn1"),
        get(PODS + "?fieldSelector=metadata.name!%3Dp1"),
        get(PODS + "?fieldSelector=status.phase%3DPending"),
        get(PODS + "?fieldSelector=spec.nodeName%3D"),
        get(PODS + "?fieldSelector=spec.bogus%3Dx"),
        get(CMS + "?fieldSelector=metadata.namespace%3D${ns}"),
    )),
    Script("pagination", about="limit/continue pages and a bad continue token", steps=(
        *(post(CMS, cm(f"c{i}")) for i in range(5)),
        get(CMS + "?limit=2", save={"next": "metadata.continue"}, wire=True),
        get(CMS + "?limit=2&continue=${next}", save={"next": "metadata.continue"}),
        get(CMS + "?limit=2&continue=${next}"),
        get(CMS + "?limit=2&continue=garbage"),
        get(CMS + "?limit=0"),
    )),
    Script("watch_resume", about="watch from a list resourceVersion replays later changes",
           steps=(
        post(CMS, cm("a", x="1")),
        get(CMS, save={"rv": "metadata.resourceVersion"}),
        post(CMS, cm("b")),
        Step("PATCH", CMS + "/a", body={"data": {"x": "2"}}, content_type=MERGE),
        Step("DELETE", CMS + "/b"),
        get(CMS + "?watch=true&resourceVersion=${rv}", watch=3),
    )),
    Script("watch_initial_state", about="a watch without resourceVersion starts with ADDED",
           steps=(
        post(CMS, cm("a")),
        post(CMS, cm("b")),
        get(CMS + "?watch=true", watch=2),
        get(CMS + "?watch=true&allowWatchBookmarks=true", watch=3, wait=2.0),
        get(CMS + "?watch=true&labelSelector=nomatch%3D1", watch=1, wait=1.0),
    )),
    Script("watch_initial_events_bookmark", about="sendInitialEvents ends with a bookmark",
           steps=(
        post(CMS, cm("a")),
        get(CMS + "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
            "&allowWatchBookmarks=true", watch=2),
        get(CMS + "?watch=true&sendInitialEvents=true"),
    )),
    Script("watch_too_old", about="a watch from before the server's history: 410 Expired",
           steps=(
        post(CMS, cm("a")),
        get(CMS + "?watch=true&resourceVersion=1", watch=1),
    )),
    Script("list_after_compaction", about="lists and continue tokens below a compacted "
           "revision: 410; a watch from there still replays from the watch cache", steps=(
        *(post(CMS, cm(f"c{i}")) for i in range(5)),
        get(CMS + "?limit=2", save={"next": "metadata.continue",
                                    "rv": "metadata.resourceVersion"}),
        post(CMS, cm("c5")),
        Step("POST", "", compact=True),
        # the real watch cache drops its list snapshots on a 15 s poll of the compaction
        get(CMS + "?limit=2&continue=${next}", until=410, wait=30.0,
            save={"inconsistent": "metadata.continue"}),
        get(CMS + "?limit=2&continue=${inconsistent}"),
        get(CMS + "?resourceVersion=${rv}&resourceVersionMatch=Exact"),
        get(CMS + "?resourceVersion=${rv}&limit=2"),
        get(CMS + "?resourceVersion=${rv}&resourceVersionMatch=NotOlderThan"),
        get(CMS + "?watch=true&resourceVersion=${rv}", watch=1),
    )),
    Script("conflict_409", about="optimistic concurrency on PUT", steps=(
        post(CMS, cm("a", x="1"), save={"rv": "metadata.resourceVersion"}),
        Step("PUT", CMS + "/a", body={**cm("a", x="2"),
                                      "metadata": {"name": "a", "resourceVersion": "${rv}"}}),
        Step("PUT", CMS + "/a", body={**cm("a", x="3"),
                                      "metadata": {"name": "a", "resourceVersion": "${rv}"}}),
        Step("PUT", CMS + "/a", body=cm("a", x="4")),
        get(CMS + "/a"),
    )),
    Script("status_subresource", about="status and main resource writes stay apart", steps=(
        post(CREJOBS, crejob("j")),
        Step("PATCH", CREJOBS + "/j/status", body={"status": {"phase": "Running"}},
             content_type=MERGE),
        Step("PATCH", CREJOBS + "/j", body={"status": {"phase": "Failed"},
                                            "metadata": {"labels": {"a": "b"}}},
             content_type=MERGE),
        get(CREJOBS + "/j"),
        get(CREJOBS + "/j/status"),
    )),
    Script("crd_defaulting_generation", about="schema defaults; generation on spec change",
           steps=(
        post(CREJOBS, crejob("j", timeoutPerJob="10m"), wire=True),
        Step("PATCH", CREJOBS + "/j", body={"metadata": {"annotations": {"a": "b"}}},
             content_type=MERGE, wire=True),
        Step("PATCH", CREJOBS + "/j", body={"spec": {"timeoutPerJob": "20m"}},
             content_type=MERGE),
    )),
    Script("crd_schema_rejections", about="structural schema and CEL Status messages", steps=(
        post(CREJOBS, crejob("bad-type", stallMultiplier="x")),
        post(CREJOBS, crejob("bad-min", stallMultiplier=0)),
        post(CREJOBS, crejob("bad-pattern", timeoutPerJob="soon")),
        post(CREJOBS, crejob("bad-cel", timeoutPerJob="1000h")),
        post(CREJOBS, {"apiVersion": "cre.dev/v1alpha1", "kind": "Job",
                       "metadata": {"name": "no-spec"}}),
        post(CREJOBS, crejob("bad-labels", workloadMetadata={"labels": {"cre.dev/x": "1"}})),
        post(CREJOBS, crejob("ok")),
        Step("PATCH", CREJOBS + "/ok", body={"spec": {"workload": {"trainJob": {"x": 1}}}},
             content_type=MERGE),
        Step("PATCH", CREJOBS + "/ok", body={"spec": {"nodeHealthMonitor": {
            "cel": {"expression": "true"}}}}, content_type=MERGE),
        post(CREJOBS + "?fieldValidation=Strict", {**crejob("strict"), "spec": {
            "workload": {"trainJob": {}}, "unknownField": 1}}),
    )),
    Script("patch_types", about="merge, JSON and strategic merge patches; SMP on a CR", steps=(
        post(PODS, pod("p", labels={"a": "1", "b": "2"})),
        Step("PATCH", PODS + "/p", body={"metadata": {"labels": {"a": None, "c": "3"}}},
             content_type=MERGE),
        Step("PATCH", PODS + "/p", body=[{"op": "add", "path": "/metadata/labels/d",
                                          "value": "4"}], content_type=JSONPATCH),
        Step("PATCH", PODS + "/p", body=[{"op": "test", "path": "/metadata/labels/d",
                                          "value": "5"}], content_type=JSONPATCH),
        Step("PATCH", PODS + "/p", body=[{"op": "remove", "path": "/metadata/labels/zz"}],
             content_type=JSONPATCH),
        Step("PATCH", PODS + "/p", body={"spec": {"containers": [
            {"name": "main", "image": "busybox:2"}]}}, content_type=SMP),
        Step("PATCH", PODS + "/p", body={"metadata": {"labels": {"$patch": "replace",
                                                                 "z": "1"}}},
             content_type=SMP),
        post(CREJOBS, crejob("j")),
        Step("PATCH", CREJOBS + "/j", body={"metadata": {"labels": {"a": "b"}}},
             content_type=SMP),
        Step("PATCH", CMS + "/missing", body={"data": {"a": "b"}}, content_type=MERGE),
        Step("PATCH", PODS + "/p", body="{not json", content_type=MERGE),
    )),
    Script("server_side_apply", about="apply, conflict between managers, force", steps=(
        Step("PATCH", CMS + "/a?fieldManager=alice", content_type=APPLY,
             body=cm("a", x="1", y="1")),
        Step("PATCH", CMS + "/a?fieldManager=bob", content_type=APPLY, body=cm("a", x="2")),
        Step("PATCH", CMS + "/a?fieldManager=bob&force=true", content_type=APPLY,
             body=cm("a", x="2")),
        Step("PATCH", CMS + "/a?fieldManager=alice", content_type=APPLY, body=cm("a", y="1")),
        get(CMS + "/a"),
        Step("PATCH", CMS + "/b", content_type=APPLY, body=cm("b")),
    )),
    Script("finalizers_deletion", about="finalizer holds deletion; removal completes it",
           steps=(
        post(CMS, {**cm("a"), "metadata": {"name": "a", "finalizers": ["cre.dev/hold"]}}),
        Step("DELETE", CMS + "/a"),
        get(CMS + "/a"),
        Step("PATCH", CMS + "/a", body={"metadata": {"labels": {"x": "1"}}},
             content_type=MERGE),
        Step("PATCH", CMS + "/a", body={"metadata": {"finalizers": ["cre.dev/other"]}},
             content_type=MERGE),
        Step("PATCH", CMS + "/a", body={"metadata": {"finalizers": None}},
             content_type=MERGE),
        get(CMS + "/a"),
        Step("DELETE", CMS + "/a"),
    )),
    Script("delete_options", about="preconditions, dryRun and deletecollection", steps=(
        post(CMS, cm("a", labels={"k": "v"})),
        post(CMS, cm("b", labels={"k": "v"})),
        post(CMS, cm("c")),
        Step("DELETE", CMS + "/a", body={"kind": "DeleteOptions", "apiVersion": "v1",
                                         "preconditions": {"uid": "not-the-uid"}}),
        Step("DELETE", CMS + "/a?dryRun=All"),
        get(CMS + "/a"),
        Step("DELETE", CMS + "?labelSelector=k%3Dv", wire=True),
        get(CMS, wire=True),
    )),
    Script("garbage_collection", about="dependents of a deleted owner are collected", steps=(
        post(CMS, cm("owner"), save={"uid": "metadata.uid"}),
        post(CMS, {**cm("dep"), "metadata": {"name": "dep", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "${uid}"}]}}),
        Step("DELETE", CMS + "/owner", wire=True),
        get(CMS + "/dep", until=404, wait=20.0),
    )),
    Script("pod_defaulting", about="what the server fills in on a minimal pod", steps=(
        post(PODS, pod("p"), wire=True),
        post(PODS, {**pod("q"), "spec": {"containers": [{
            "name": "main", "image": "busybox",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
            "ports": [{"containerPort": 80}]}]}}),
    )),
    Script("pod_binding", about="nodeName is set through pods/binding only, once", steps=(
        post(PODS, pod("p")),
        Step("PATCH", PODS + "/p", body={"spec": {"nodeName": "n1"}}, content_type=MERGE),
        post(PODS + "/p/binding", {"apiVersion": "v1", "kind": "Binding",
                                   "metadata": {"name": "p"},
                                   "target": {"apiVersion": "v1", "kind": "Node",
                                              "name": "n1"}}),
        get(PODS + "/p"),
        post(PODS + "/p/binding", {"apiVersion": "v1", "kind": "Binding",
                                   "metadata": {"name": "p"},
                                   "target": {"apiVersion": "v1", "kind": "Node",
                                              "name": "n2"}}),
    )),
    Script("job_defaulting", about="a batch/v1 Job's server-filled fields", steps=(
        post(JOBS, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                    "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                        {"name": "main", "image": "busybox"}]}}}}),
        post(JOBS, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bad"},
                    "spec": {"template": {"spec": {"containers": [
                        {"name": "main", "image": "busybox"}]}}}}),
    )),
    Script("service_defaulting", about="a ClusterIP Service's defaults", steps=(
        post(NS + "/services", {"apiVersion": "v1", "kind": "Service",
                                "metadata": {"name": "s"},
                                "spec": {"selector": {"a": "b"}, "ports": [{"port": 80}]}}),
        post(NS + "/services", {"apiVersion": "v1", "kind": "Service",
                                "metadata": {"name": "h"},
                                "spec": {"clusterIP": "None", "ports": [{"port": 80}]}}),
    )),
    Script("table_output", about="Table rendering of pods and a CR", steps=(
        post(PODS, pod("p", node="n1")),
        get(PODS, headers={"Accept": TABLE}),
        post(CREJOBS, crejob("j")),
        get(CREJOBS, headers={"Accept": TABLE}),
        get(CMS, headers={"Accept": TABLE}),
    )),
    Script("builtin_decoding_and_status", about="wrongly typed built-in fields (400 from the Go "
           "decoder), Service port names, Deployment status bounds, a Job's labels", steps=(
        post(CMS, {**cm("t"), "metadata": {"name": "t", "labels": {"a": 1}}}),
        post(CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": "x"}),
        post(NS + "/services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                                "spec": {"clusterIP": "None", "ports": [{"port": 80},
                                                                        {"port": 81}]}}),
        post(DEPLOYS, {**deployment("d"), "spec": {**deployment("d")["spec"],
                                                   "replicas": "two"}}),
        post(DEPLOYS, deployment("d")),
        Step("PATCH", DEPLOYS + "/d/status", body={"status": {"readyReplicas": 2,
                                                              "availableReplicas": 3}},
             content_type=MERGE),
        Step("PATCH", DEPLOYS + "/d/status", body={"status": {"replicas": -1}},
             content_type=MERGE),
        post(JOBS, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                    "spec": {"template": {"metadata": {"labels": {"app": "x"}}, "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "busybox"}]}}}}),
    )),
    Script("error_bodies", about="405, 406 (written indented), the mux's plain-text 404 and "
           "metadata-only responses, byte for byte", steps=(
        post(CMS, cm("a", labels={"k": "v"}, x="1")),
        Step("PUT", CMS, body=cm("a")),
        get(CMS, headers={"Accept": PARTIAL}),
        get(CMS + "/a", headers={"Accept": PARTIAL_LIST}),
        get(CMS, headers={"Accept": PARTIAL_LIST}, wire=True),
        get(CMS + "/a", headers={"Accept": PARTIAL}, wire=True),
        get("/apis/no.such.group/v1"),
        Step("DELETE", CMS + "/missing"),
    )),
    Script("kubectl_get_create", about="kubectl create, get (tables, -o json/name/wide, a "
           "CR's printer columns) and a NotFound", steps=(
        kc("create", "-f", "-", stdin=cm("a", x="1", y="2")),
        kc("create", "-f", "-", stdin=cm("a", x="1")),
        post(PODS, pod("p", labels={"app": "x"}, node="n1")),
        kc("get", "configmaps"),
        kc("get", "configmap", "a", "-o", "json"),
        kc("get", "configmaps", "-o", "name"),
        kc("get", "pods", "-o", "wide"),
        kc("get", "pods", "--show-labels", "-l", "app=x"),
        kc("get", "pods", "-l", "app=y"),
        post(CREJOBS, crejob("j")),
        kc("get", "jobs.cre.dev"),
        kc("get", "configmap", "nope"),
        kc("get", "configmaps", "-o", "custom-columns=NAME:.metadata.name,X:.data.x"),
    )),
    Script("kubectl_create_typed", about="kubectl's typed generators post protobuf "
           "(application/vnd.kubernetes.protobuf); the created objects as JSON", steps=(
        kc("create", "configmap", "typed", "--from-literal=x=1", "--from-literal=y=two"),
        kc("create", "secret", "generic", "pw", "--from-literal=user=admin"),
        kc("create", "serviceaccount", "robot"),
        kc("create", "deployment", "web", "--image=nginx", "--replicas=2", "--port=80"),
        kc("create", "job", "once", "--image=busybox", "--", "echo", "hi"),
        kc("create", "service", "clusterip", "front", "--tcp=80:8080"),
        kc("create", "role", "reader", "--verb=get,list", "--resource=pods"),
        kc("create", "rolebinding", "reader", "--role=reader", "--serviceaccount=ns:robot"),
        kc("create", "poddisruptionbudget", "guard", "--selector=app=web", "--min-available=1"),
        kc("create", "configmap", "typed", "--from-literal=x=1"),
        kc("get", "configmap/typed", "secret/pw", "serviceaccount/robot", "deployment/web",
           "job/once", "role/reader", "rolebinding/reader", "poddisruptionbudget/guard", "-o",
           "json"),
    )),
    Script("kubectl_apply", about="kubectl apply client-side (created/configured/unchanged, "
           "the last-applied annotation) and --server-side with a conflict and force", steps=(
        kc("apply", "-f", "-", stdin=cm("a", x="1")),
        kc("apply", "-f", "-", stdin=cm("a", x="2")),
        kc("apply", "-f", "-", stdin=cm("a", x="2")),
        kc("get", "configmap", "a", "-o", "json"),
        kc("apply", "--server-side", "-f", "-", stdin=cm("b", x="1")),
        kc("apply", "--server-side", "--field-manager=other", "-f", "-", stdin=cm("b", x="2")),
        kc("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-",
           stdin=cm("b", x="2")),
        kc("get", "configmap", "b", "-o", "json"),
        kc("apply", "--dry-run=server", "-f", "-", stdin=cm("c", x="1")),
        kc("get", "configmap", "c"),
    )),
    Script("kubectl_patch", about="kubectl patch: strategic, merge, json, no change, errors",
           steps=(
        post(PODS, pod("p", labels={"a": "1"})),
        kc("patch", "pod", "p", "-p", '{"metadata":{"labels":{"b":"2"}}}'),
        kc("patch", "pod", "p", "--type=merge", "-p", '{"metadata":{"labels":{"a":null}}}'),
        kc("patch", "pod", "p", "--type=json", "-p",
           '[{"op":"add","path":"/metadata/labels/c","value":"3"}]'),
        kc("patch", "pod", "p", "--type=merge", "-p", '{"metadata":{"labels":{"c":"3"}}}'),
        kc("patch", "pod", "p", "--type=json", "-p",
           '[{"op":"remove","path":"/metadata/labels/zz"}]'),
        kc("patch", "pod", "p", "-p", '{"spec":{"nodeName":"n1"}}'),
        kc("get", "pod", "p", "-o", "json"),
    )),
    Script("kubectl_delete", about="kubectl delete: background, foreground and orphan "
           "propagation, --ignore-not-found, a label selector", steps=(
        post(CMS, cm("fg"), save={"fg": "metadata.uid"}),
        post(CMS, {**cm("fg-dep"), "metadata": {"name": "fg-dep", "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "fg", "uid": "${fg}",
            "blockOwnerDeletion": True}]}}),
        kc("delete", "configmap", "fg", "--cascade=foreground", "--timeout=30s"),
        get(CMS + "/fg-dep", until=404, wait=20.0),
        post(CMS, cm("or"), save={"or": "metadata.uid"}),
        post(CMS, {**cm("or-dep"), "metadata": {"name": "or-dep", "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "or", "uid": "${or}"}]}}),
        kc("delete", "configmap", "or", "--cascade=orphan"),
        get(CMS + "/or-dep"),
        post(CMS, cm("bg"), save={"bg": "metadata.uid"}),
        post(CMS, {**cm("bg-dep"), "metadata": {"name": "bg-dep", "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "bg", "uid": "${bg}"}]}}),
        kc("delete", "configmap", "bg"),
        get(CMS + "/bg-dep", until=404, wait=20.0),
        kc("delete", "configmap", "nope"),
        kc("delete", "configmap", "nope", "--ignore-not-found"),
        post(CMS, cm("l1", labels={"k": "v"})),
        post(CMS, cm("l2", labels={"k": "v"})),
        kc("delete", "configmaps", "-l", "k=v"),
        kc("get", "configmaps"),
    )),
)
