"""Discovery, OpenAPI and Table output."""

from __future__ import annotations

from typing import Any

import pytest

from cre.testing.apiserver import Emulator

from .conftest import PODS, REAL, Client, pod

pytestmark = pytest.mark.anyio
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
V2 = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
      "application/json")


async def test_version(client: Client, emu: Emulator) -> None:
    """/version reports the emulated release."""
    _, body, _ = await client.get("/version")
    assert (body["major"], body["minor"]) == ("1", "33")
    assert body["gitVersion"] == "v1.33.0"


async def test_legacy_discovery(crd_client: Client) -> None:
    """/api, /apis and resource lists describe built-ins, subresources and CRDs."""
    _, api, _ = await crd_client.get("/api")
    assert api["versions"] == ["v1"]
    _, apis, _ = await crd_client.get("/apis")
    groups = {g["name"] for g in apis["groups"]}
    assert {"batch", "coordination.k8s.io", "trainer.kubeflow.org", "jobset.x-k8s.io"} <= groups
    _, v1, _ = await crd_client.get("/api/v1")
    names = {r["name"] for r in v1["resources"]}
    assert {"pods", "pods/status", "pods/log", "pods/eviction", "nodes/status"} <= names
    _, tj, _ = await crd_client.get("/apis/trainer.kubeflow.org/v1alpha1")
    entry = next(r for r in tj["resources"] if r["name"] == "trainjobs")
    assert entry["verbs"] == ["delete", "deletecollection", "get", "list", "patch", "create",
                              "update", "watch"]
    assert entry["namespaced"] is True and entry["kind"] == "TrainJob"


async def test_aggregated_discovery(crd_client: Client) -> None:
    """Asking for APIGroupDiscoveryList v2 gets the aggregated document and content type."""
    status, body, headers = await crd_client.get("/apis", headers={"Accept": V2})
    assert status == 200
    assert headers["Content-Type"].startswith("application/json;g=apidiscovery.k8s.io;v=v2")
    assert body["kind"] == "APIGroupDiscoveryList"
    names = [i["metadata"]["name"] for i in body["items"]]
    assert "trainer.kubeflow.org" in names


async def test_openapi_v3(crd_client: Client) -> None:
    """/openapi/v3 lists group-versions; each document carries GVK-tagged PATCH operations."""
    _, root, _ = await crd_client.get("/openapi/v3")
    url = root["paths"]["apis/trainer.kubeflow.org/v1alpha1"]["serverRelativeURL"]
    _, doc, _ = await crd_client.get(url)
    path = doc["paths"]["/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/"
                        "{name}"]
    assert path["patch"]["x-kubernetes-group-version-kind"]["kind"] == "TrainJob"
    assert "fieldValidation" in [p["name"] for p in path["patch"]["parameters"]]
    assert "org.kubeflow.trainer.v1alpha1.TrainJob" in doc["components"]["schemas"]


async def test_pod_table(client: Client) -> None:
    """Table output for pods has Name/Ready/Status/Restarts/Age and metadata row objects."""
    await client.post(PODS, pod("p"))
    _, body, _ = await client.get(PODS, headers={"Accept": TABLE})
    assert body["kind"] == "Table" and body["apiVersion"] == "meta.k8s.io/v1"
    cols = [c["name"] for c in body["columnDefinitions"] if c["priority"] == 0]
    assert cols == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert body["rows"][0]["cells"][:4] == ["p", "0/1", "Pending", "0"]
    assert body["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


async def test_pod_table_wide_columns(client: Client) -> None:
    """The wide pod columns are IP (first podIPs), Node, Nominated Node and Readiness Gates."""
    body = pod("p", node="n1")
    body["spec"]["readinessGates"] = [{"conditionType": "example.com/a"},
                                      {"conditionType": "example.com/b"}]
    await client.post(PODS, body)
    await client.patch(PODS + "/p/status", {"status": {
        "podIPs": [{"ip": "10.0.0.7"}], "nominatedNodeName": "n2",
        "conditions": [{"type": "example.com/a", "status": "True"},
                       {"type": "example.com/b", "status": "False"}]}},
        "application/merge-patch+json")
    await client.post(PODS, pod("q"))
    _, table, _ = await client.get(PODS, headers={"Accept": TABLE})
    wide = [i for i, c in enumerate(table["columnDefinitions"]) if c["priority"] == 1]
    assert [table["columnDefinitions"][i]["name"] for i in wide] == [
        "IP", "Node", "Nominated Node", "Readiness Gates"]
    rows = {r["cells"][0]: [r["cells"][i] for i in wide] for r in table["rows"]}
    assert rows == {"p": ["10.0.0.7", "n1", "n2", "1/2"],
                    "q": ["<none>", "<none>", "<none>", "<none>"]}


async def test_service_table_columns(client: Client) -> None:
    """Services print Type, Cluster-IP, External-IP, Port(s), Age and (wide) Selector."""
    lb: dict[str, Any] = {
        "metadata": {"name": "lb"},
        "spec": {"type": "LoadBalancer", "selector": {"b": "2", "a": "1"},
                 "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP",
                                                             "nodePort": 30053}]}}
    status, body, _ = await client.post("/api/v1/namespaces/default/services", lb)
    assert status == 422 and [(c["reason"], c["field"]) for c in body["details"]["causes"]] == [
        ("FieldValueRequired", "spec.ports[0].name"), ("FieldValueRequired", "spec.ports[1].name")]
    lb["spec"]["ports"][0]["name"], lb["spec"]["ports"][1]["name"] = "http", "dns"
    status, body, _ = await client.post("/api/v1/namespaces/default/services", lb)
    assert status == 201, body
    _, table, _ = await client.get("/api/v1/namespaces/default/services",
                                   headers={"Accept": TABLE})
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"]
    rows = {r["cells"][0]: r["cells"] for r in table["rows"]}
    _, kube, _ = await client.get("/api/v1/namespaces/default/services/kubernetes")
    assert kube["spec"]["clusterIP"] == ("10.0.0.1" if REAL else "10.96.0.1")  # first of range
    assert rows["kubernetes"][1:5] == ["ClusterIP", kube["spec"]["clusterIP"], "<none>",
                                       "443/TCP"]
    assert rows["lb"][1] == "LoadBalancer" and rows["lb"][3:5] == [
        "<pending>", "80:30080/TCP,53:30053/UDP"]
    assert rows["lb"][6] == "a=1,b=2"
