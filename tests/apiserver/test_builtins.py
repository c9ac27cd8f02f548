"""Built-in kinds: per-release validation, events in both APIs, eviction, patches, apply."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from cre.testing.apiserver import Emulator, serve

from .conftest import PODS, REAL, Client, pod

pytestmark = pytest.mark.anyio

JOBS = "/apis/batch/v1/namespaces/default/jobs"


def job_with_condition_rule() -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"podFailurePolicy": {"rules": [{
                "action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
                "template": {"spec": {"restartPolicy": "Never",
                                      "containers": [{"name": "c", "image": "x"}]}}}}


@pytest.mark.parametrize(("version", "expected"), [("1.33", 422), ("1.36", 201)])
async def test_pod_failure_policy_status_by_version(version: str, expected: int) -> None:
    """onPodConditions without status is rejected at 1.33; at 1.36 it is defaulted to True."""
    async with serve(kubernetes_version=version) as emu, aiohttp.ClientSession() as s:
        client = Client(s, emu.url)
        status, body, _ = await client.post(JOBS, job_with_condition_rule())
        assert status == expected, body
        if expected == 422:
            fields = [c["field"] for c in body["details"]["causes"]]
            assert fields == ["spec.podFailurePolicy.rules[0].onPodConditions[0].status"]
        else:
            pattern = body["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]
            assert pattern == {"type": "DisruptionTarget", "status": "True"}


async def test_invalid_pod_is_422(client: Client) -> None:
    """A pod without containers answers 422 Invalid naming the Kind."""
    status, body, _ = await client.post(PODS, {"metadata": {"name": "p"}, "spec": {}})
    assert status == 422
    assert body["details"]["kind"] == "Pod"
    assert body["message"].startswith('Pod "p" is invalid: ')


async def test_events_in_both_apis(client: Client) -> None:
    """An events.k8s.io/v1 Event is the same stored object as its core/v1 view."""
    ev = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
          "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "cre.dev/ctl",
          "reportingInstance": "ctl-1", "action": "Run", "reason": "Started", "type": "Normal",
          "note": "started", "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}}
    status, body, _ = await client.post("/apis/events.k8s.io/v1/namespaces/default/events", ev)
    assert status == 201, body
    assert body["note"] == "started" and body["regarding"]["name"] == "p"
    _, core, _ = await client.get("/api/v1/namespaces/default/events/e1")
    assert core["message"] == "started"
    assert core["involvedObject"]["name"] == "p"
    assert core["reportingComponent"] == "cre.dev/ctl"


async def test_eviction_deletes_gracefully_with_disruption_target(client: Client) -> None:
    """POST /eviction adds DisruptionTarget, then deletes the pod gracefully; 201 Success."""
    await client.post(PODS, pod("p", node="n1"))
    status, body, _ = await client.post(PODS + "/p/eviction", {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}})
    assert status == 201
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "code": 201}
    _, held, _ = await client.get(PODS + "/p")
    assert held["metadata"]["deletionTimestamp"]
    cond = [c for c in held["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert cond[0]["reason"] == "EvictionByEvictionAPI"
    status, body, _ = await client.post(PODS + "/p/eviction", {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}})
    assert status == 400
    assert body["message"] == "name in URL does not match name in Eviction object"


async def test_strategic_merge_patch_merges_containers(client: Client) -> None:
    """SMP merges containers by name and conditions by type on built-ins."""
    await client.post(PODS, pod("p", containers=("a", "b")))
    status, body, _ = await client.patch(
        PODS + "/p", {"spec": {"containers": [{"name": "b", "image": "new"}]}},
        "application/strategic-merge-patch+json")
    assert status == 200, body
    assert [(c["name"], c["image"]) for c in body["spec"]["containers"]] == [
        ("a", "busybox"), ("b", "new")]


async def test_json_patch_failure_is_generic_422(client: Client) -> None:
    """A JSON patch op that fails answers the generic 422 without the library's text."""
    await client.post(PODS, pod("p"))
    status, body, _ = await client.patch(PODS + "/p", [{"op": "remove", "path": "/nope"}],
                                         "application/json-patch+json")
    assert status == 422
    assert body["message"] == "the server rejected our request due to an error in our request"
    status, body, _ = await client.patch(PODS + "/p", {"a": 1}, "application/json-patch+json")
    assert status == 400
    status, body, _ = await client.patch(PODS + "/p", {}, "text/plain")
    assert status == 415


async def test_server_side_apply_conflict_and_force(client: Client) -> None:
    """Apply by a second manager on a field another owns is 409 unless force=true."""
    cms = "/api/v1/namespaces/default/configmaps"
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                            "data": {"k": "1"}}
    status, _, _ = await client.patch(cms + "/c?fieldManager=one", body,
                                      "application/apply-patch+yaml")
    assert status == 201
    body["data"]["k"] = "2"
    status, err, _ = await client.patch(cms + "/c?fieldManager=two", body,
                                        "application/apply-patch+yaml")
    assert status == 409
    assert err["message"] == 'Apply failed with 1 conflict: conflict with "one": .data.k'
    assert err["details"]["causes"] == [{"reason": "FieldManagerConflict",
                                         "message": 'conflict with "one"', "field": ".data.k"}]
    status, ok, _ = await client.patch(cms + "/c?fieldManager=two&force=true", body,
                                       "application/apply-patch+yaml")
    assert status == 200 and ok["data"]["k"] == "2"
    status, err, _ = await client.patch(cms + "/c", body, "application/apply-patch+yaml")
    assert status == 422
    assert err["message"] == ('PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required '
                              "value: is required for apply patch")


async def test_node_status_and_cluster_scope(client: Client, emu: Emulator) -> None:
    """Nodes are cluster-scoped; their status is written through /status."""
    status, node, _ = await client.post("/api/v1/nodes", {"metadata": {"name": "n1"}})
    assert status == 201, node
    assert "namespace" not in node["metadata"]
    node["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    status, body, _ = await client.put("/api/v1/nodes/n1/status", node)
    assert status == 200, body
    assert body["status"]["conditions"][0]["type"] == "Ready"


async def test_job_defaults_and_generated_selector(client: Client) -> None:
    """A created Job reads back with SetDefaults_Job fields, the template's labels, and a
    selector on its uid matched by the labels added to its pod template."""
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"template": {"metadata": {"labels": {"app": "x"}},
                                  "spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "c", "image": "x"}]}}}}
    status, job, _ = await client.post(JOBS, body)
    assert status == 201, job
    uid = job["metadata"]["uid"]
    spec = job["spec"]
    assert {k: spec[k] for k in ("completions", "parallelism", "backoffLimit", "completionMode",
                                 "suspend", "podReplacementPolicy")} == {
        "completions": 1, "parallelism": 1, "backoffLimit": 6, "completionMode": "NonIndexed",
        "suspend": False, "podReplacementPolicy": "TerminatingOrFailed"}
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert spec["template"]["metadata"]["labels"] == {
        "app": "x", "job-name": "j", "batch.kubernetes.io/job-name": "j",
        "controller-uid": uid, "batch.kubernetes.io/controller-uid": uid}
    # a Job without labels takes its template's, generated ones included (one Go map)
    assert job["metadata"]["labels"] == spec["template"]["metadata"]["labels"]
    status, other, _ = await client.post(JOBS, {
        **job_with_condition_rule(), "metadata": {"name": "k"},
        "spec": {**job_with_condition_rule()["spec"], "parallelism": 3,
                 "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {
                     "operator": "In", "values": [42]}}]}}})
    assert status == 201, other
    assert "completions" not in other["spec"]
    assert other["spec"]["podReplacementPolicy"] == "Failed"
    assert other["metadata"]["labels"] == {
        "job-name": "k", "batch.kubernetes.io/job-name": "k",
        "controller-uid": other["metadata"]["uid"],
        "batch.kubernetes.io/controller-uid": other["metadata"]["uid"]}


async def test_job_table_columns(client: Client, emu: Emulator) -> None:
    """The Job table has Status, Completions (with "of N" for work queues), Duration, Age and
    the wide template columns."""
    await client.post(JOBS, {**job_with_condition_rule(), "metadata": {"name": "k"},
                             "spec": {**job_with_condition_rule()["spec"], "parallelism": 3,
                                      "podFailurePolicy": None}})
    await client.patch(JOBS + "/k/status", {"status": {
        "startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:01:30Z",
        "succeeded": 1, "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {"type": "Complete", "status": "True"}]}}, "application/merge-patch+json")
    table_type = "application/json;as=Table;v=v1;g=meta.k8s.io"
    _, table, _ = await client.get(JOBS, headers={"Accept": table_type})
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names == ["Name", "Status", "Completions", "Duration", "Age", "Containers", "Images",
                     "Selector"]
    cells = table["rows"][0]["cells"]
    assert cells[:4] == ["k", "Complete", "1/1 of 3", "90s"]
    assert cells[5:7] == ["c", "x"]


async def test_pod_and_template_spec_defaults(client: Client) -> None:
    """Pods and pod templates read back with the PodSpec and container defaults filled in."""
    body = pod("p")
    body["spec"]["containers"] = [
        {"name": "a", "image": "nginx", "ports": [{"containerPort": 80}]},
        {"name": "b", "image": "registry.local:5000/x:1.2"},
        {"name": "c", "image": "x@sha256:" + "0" * 64}]
    del body["apiVersion"], body["kind"]
    status, created, _ = await client.post(PODS, body)
    assert status == 201, created
    spec = created["spec"]
    assert {k: spec[k] for k in ("dnsPolicy", "restartPolicy", "terminationGracePeriodSeconds",
                                 "securityContext", "schedulerName", "enableServiceLinks")} == {
        "dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30, "securityContext": {},
        "schedulerName": "default-scheduler", "enableServiceLinks": True}
    a, b, c = spec["containers"]
    assert a == {"name": "a", "image": "nginx", "ports": [{"containerPort": 80, "protocol": "TCP"}],
                 "terminationMessagePath": "/dev/termination-log",
                 "terminationMessagePolicy": "File", "imagePullPolicy": "Always",
                 "resources": {}}
    assert (b["imagePullPolicy"], c["imagePullPolicy"]) == ("IfNotPresent", "IfNotPresent")
    _, job, _ = await client.post(JOBS, {**job_with_condition_rule(), "metadata": {"name": "t"},
                                         "spec": {**job_with_condition_rule()["spec"],
                                                  "podFailurePolicy": None}})
    tspec = job["spec"]["template"]["spec"]
    assert tspec["schedulerName"] == "default-scheduler" and "enableServiceLinks" not in tspec
    assert tspec["containers"][0]["imagePullPolicy"] == "Always"


async def test_default_kubernetes_service_exists(client: Client) -> None:
    """Like kube-apiserver, the emulator publishes itself as the default/kubernetes Service."""
    status, svc, _ = await client.get("/api/v1/namespaces/default/services/kubernetes")
    assert status == 200, svc
    assert svc["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}
    # targetPort is the server's own secure port: the emulator says 6443 whatever it listens
    # on; kube-apiserver its --secure-port (the real plane's is a free loopback port)
    target = urlsplit(client.base).port if REAL else 6443
    assert svc["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP",
                                     "targetPort": target}]


async def test_service_defaults_and_allocation(client: Client) -> None:
    """A Service gets its defaults, a cluster IP and node ports; a headless one keeps None."""
    svcs = "/api/v1/namespaces/default/services"
    status, np, _ = await client.post(svcs, {"metadata": {"name": "np"}, "spec": {
        "type": "NodePort", "selector": {"a": "1"}, "ports": [{"port": 80}]}})
    assert status == 201, np
    spec = np["spec"]
    # kube-apiserver picks a random free node port and cluster IP; the emulator hands them out
    # in order (30000, then 10.96.0.10 up) so runs repeat. Both stay in the service ranges.
    node_port = spec["ports"][0]["nodePort"]
    assert 30000 <= node_port <= 32767 and (REAL or node_port == 30000)
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80,
                              "nodePort": node_port}]
    _, kube, _ = await client.get(svcs + "/kubernetes")
    subnet = kube["spec"]["clusterIP"].rsplit(".", 1)[0] + "."
    assert spec["clusterIP"] == spec["clusterIPs"][0] and spec["clusterIP"].startswith(subnet)
    assert (spec["sessionAffinity"], spec["internalTrafficPolicy"],
            spec["externalTrafficPolicy"], spec["ipFamilies"], spec["ipFamilyPolicy"]) == (
        "None", "Cluster", "Cluster", ["IPv4"], "SingleStack")
    _, headless, _ = await client.post(svcs, {"metadata": {"name": "h"}, "spec": {
        "clusterIP": "None", "selector": {"a": "1"}, "ports": [{"port": 22}]}})
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["clusterIPs"] == ["None"] and headless["spec"]["type"] == "ClusterIP"
    assert "nodePort" not in headless["spec"]["ports"][0]
