"""apps/v1, rbac.authorization.k8s.io/v1 and policy/v1 served as real built-ins.

Raw HTTP pins the server semantics (discovery, scope, status and scale subresources, generation,
validation, strategic merge of the pod template, tables); kubectl and the official Python
client prove that unmodified clients drive them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from kubernetes import client as kclient
from kubernetes import config as kconfig
from kubernetes.client.exceptions import ApiException

from cre.testing.apiserver import Emulator

from .conftest import Client
from .test_kubectl import Kubectl

pytestmark = pytest.mark.anyio

DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
MERGE = "application/merge-patch+json"
SMP = "application/strategic-merge-patch+json"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}


def deployment(name: str = "web", *, replicas: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx:1"},
                                        {"name": "side", "image": "busybox:1"}]},
            },
        },
    }


async def test_discovery_lists_the_new_groups_with_scope_and_subresources(
        client: Client) -> None:
    """Legacy and aggregated discovery serve apps, rbac and policy with the real scopes."""
    _, groups, _ = await client.get("/apis")
    names = [g["name"] for g in groups["groups"]]
    assert {"apps", "rbac.authorization.k8s.io", "policy"} <= set(names)
    _, rbac, _ = await client.get(RBAC)
    scoped = {r["name"]: r["namespaced"] for r in rbac["resources"]}
    assert scoped == {"clusterroles": False, "clusterrolebindings": False, "roles": True,
                      "rolebindings": True}
    _, apps, _ = await client.get("/apis/apps/v1")
    by_name = {r["name"]: r for r in apps["resources"]}
    assert by_name["deployments"]["shortNames"] == ["deploy"]
    assert by_name["deployments/scale"]["kind"] == "Scale"
    assert by_name["deployments/scale"]["group"] == "autoscaling"
    assert "deployments/status" in by_name and "daemonsets/scale" not in by_name
    accept = {"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}
    _, agg, _ = await client.get("/apis", headers=accept)
    apps_v1 = next(g for g in agg["items"] if g["metadata"]["name"] == "apps")["versions"][0]
    deploy = next(r for r in apps_v1["resources"] if r["resource"] == "deployments")
    assert {s["subresource"]: s["responseKind"]["kind"] for s in deploy["subresources"]} == {
        "scale": "Scale", "status": "Deployment"}
    _, pdb, _ = await client.get("/apis/policy/v1")
    assert [r["name"] for r in pdb["resources"]] == ["poddisruptionbudgets",
                                                     "poddisruptionbudgets/status"]


async def test_deployment_generation_and_status_subresource(client: Client) -> None:
    """Create resets status; spec edits bump generation, label edits and /status do not."""
    body = deployment()
    body["status"] = {"replicas": 9}
    code, created, _ = await client.post(DEPLOYS, body)
    assert code == 201
    assert created["metadata"]["generation"] == 1 and created["status"] == {}
    _, labelled, _ = await client.patch(f"{DEPLOYS}/web", {"metadata": {"labels": {"x": "1"}}},
                                        MERGE)
    assert labelled["metadata"]["generation"] == 1
    _, ignored, _ = await client.patch(f"{DEPLOYS}/web", {"status": {"replicas": 3}}, MERGE)
    assert ignored["status"] == {}
    code, bad, _ = await client.patch(f"{DEPLOYS}/web/status", {"status": {"readyReplicas": 2}},
                                      MERGE)
    assert code == 422 and bad["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "status.readyReplicas",
        "message": "Invalid value: 2: cannot be greater than status.replicas"}]
    _, status, _ = await client.patch(
        f"{DEPLOYS}/web/status", {"status": {"replicas": 2, "readyReplicas": 2},
                                  "spec": {"replicas": 7}}, MERGE)
    assert status["status"] == {"replicas": 2, "readyReplicas": 2}
    assert status["spec"]["replicas"] == 2 and status["metadata"]["generation"] == 1
    _, scaled, _ = await client.patch(f"{DEPLOYS}/web", {"spec": {"replicas": 4}}, MERGE)
    assert scaled["metadata"]["generation"] == 2


async def test_workload_defaults_are_filled_on_every_write(client: Client) -> None:
    """Missing replicas/strategy/status counters are defaulted on create and on a bare PUT."""
    body = deployment()
    del body["spec"]["replicas"]
    _, created, _ = await client.post(DEPLOYS, body)
    spec = created["spec"]
    assert spec["replicas"] == 1 and spec["revisionHistoryLimit"] == 10
    assert spec["progressDeadlineSeconds"] == 600
    assert spec["strategy"] == {"type": "RollingUpdate",
                                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    bare = deployment()
    del bare["spec"]["replicas"]
    bare["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    code, replaced, _ = await client.put(f"{DEPLOYS}/web", bare)
    assert code == 200
    assert replaced["spec"] == spec and replaced["metadata"]["generation"] == 1
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
           "spec": {"selector": {"matchLabels": {"a": "b"}}, "serviceName": "s",
                    "template": {"metadata": {"labels": {"a": "b"}},
                                 "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    _, stored, _ = await client.post("/apis/apps/v1/namespaces/default/statefulsets", sts)
    assert stored["spec"]["updateStrategy"] == {"type": "RollingUpdate",
                                                "rollingUpdate": {"partition": 0}}
    assert stored["spec"]["podManagementPolicy"] == "OrderedReady"
    assert stored["status"] == {"replicas": 0, "availableReplicas": 0}

async def test_strategic_merge_patch_merges_template_containers_by_name(client: Client) -> None:
    """A strategic patch of one container's image and env leaves the other container alone."""
    await client.post(DEPLOYS, deployment())
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "side", "image": "busybox:2", "env": [{"name": "A", "value": "1"}]}]}}}}
    code, patched, _ = await client.patch(f"{DEPLOYS}/web", patch, SMP)
    assert code == 200
    containers = patched["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("main", "nginx:1"),
                                                             ("side", "busybox:2")]
    assert containers[1]["env"] == [{"name": "A", "value": "1"}]
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "side", "env": [{"name": "B", "value": "2"}]}]}}}}
    _, again, _ = await client.patch(f"{DEPLOYS}/web", patch, SMP)
    env = again["spec"]["template"]["spec"]["containers"][1]["env"]
    assert sorted(e["name"] for e in env) == ["A", "B"]


async def test_wrongly_typed_fields_fail_the_go_decoding_with_400(client: Client) -> None:
    """A value of the wrong JSON type fails decoding into the Go struct, before validation:
    400 naming the Go struct holding the field, the JSON path and the Go type."""
    body = deployment()
    body["spec"]["replicas"] = "two"
    code, status, _ = await client.post(DEPLOYS, body)
    assert (code, status["reason"], status["message"]) == (
        400, "BadRequest", 'Deployment in version "v1" cannot be handled as a Deployment: json: '
        "cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32")
    body = deployment()
    body["spec"]["template"]["spec"]["containers"][0]["image"] = 1
    code, status, _ = await client.post(DEPLOYS, body)
    assert code == 400 and status["message"].endswith(
        "json: cannot unmarshal number into Go struct field Container.spec.template.spec."
        "containers.image of type string")
    code, status, _ = await client.post("/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": 1}}})
    assert code == 400 and status["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal '
        "number into Go struct field ObjectMeta.metadata.labels of type string")


@pytest.mark.parametrize(("mutate", "field", "reason"), [
    (lambda d: d["spec"]["template"]["metadata"].update(labels={"app": "other"}),
     "spec.template.metadata.labels", "FieldValueInvalid"),
    (lambda d: d["spec"].pop("selector"), "spec.selector", "FieldValueRequired"),
    (lambda d: d["spec"]["template"]["spec"].update(restartPolicy="Never"),
     "spec.template.spec.restartPolicy", "FieldValueNotSupported"),
    (lambda d: d["spec"].update(replicas=-1), "spec.replicas", "FieldValueInvalid"),
    (lambda d: d["spec"]["template"]["spec"]["containers"][0].pop("image"),
     "spec.template.spec.containers[0].image", "FieldValueRequired"),
])
async def test_invalid_deployments_are_rejected_with_field_causes(
        client: Client, mutate: Any, field: str, reason: str) -> None:
    """Invalid Deployments answer 422 Invalid naming the offending field."""
    body = deployment()
    mutate(body)
    code, status, _ = await client.post(DEPLOYS, body)
    assert code == 422, status
    assert status["reason"] == "Invalid"
    assert (reason, field) in {(c["reason"], c["field"]) for c in status["details"]["causes"]}


async def test_deployment_selector_is_immutable(client: Client) -> None:
    """Changing spec.selector of an existing Deployment is 422 'field is immutable'."""
    await client.post(DEPLOYS, deployment())
    patch = {"spec": {"selector": {"matchLabels": {"app": "web", "tier": "x"}},
                      "template": {"metadata": {"labels": {"tier": "x"}}}}}
    code, status, _ = await client.patch(f"{DEPLOYS}/web", patch, SMP)
    assert code == 422
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.selector"]
    assert "field is immutable" in status["message"]


async def test_scale_subresource_reads_and_writes_replicas(client: Client) -> None:
    """GET/PATCH/PUT deployments/scale project and update spec.replicas with preconditions."""
    await client.post(DEPLOYS, deployment(replicas=2))
    code, scale, _ = await client.get(f"{DEPLOYS}/web/scale")
    assert code == 200
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 0, "selector": "app=web"}
    code, scaled, _ = await client.patch(f"{DEPLOYS}/web/scale", {"spec": {"replicas": 5}},
                                         MERGE)
    assert code == 200 and scaled["spec"]["replicas"] == 5
    _, live, _ = await client.get(f"{DEPLOYS}/web")
    assert live["spec"]["replicas"] == 5 and live["metadata"]["generation"] == 2
    stale = copy.deepcopy(scale)
    stale["spec"]["replicas"] = 1
    code, status, _ = await client.put(f"{DEPLOYS}/web/scale", stale)
    assert code == 409 and status["reason"] == "Conflict"
    code, status, _ = await client.patch(f"{DEPLOYS}/web/scale", {"spec": {"replicas": -2}},
                                         MERGE)
    assert code == 422 and status["details"]["causes"][0]["field"] == "spec.replicas"


async def test_rbac_scopes(client: Client) -> None:
    """ClusterRoles live at cluster scope only; Roles need an existing namespace."""
    role: dict[str, Any] = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    code, created, _ = await client.post(f"{RBAC}/clusterroles", role)
    assert code == 201 and "namespace" not in created["metadata"]
    code, _, _ = await client.get(f"{RBAC}/namespaces/default/clusterroles/reader")
    assert code == 404
    ns_role = dict(role, kind="Role")
    code, status, _ = await client.post(f"{RBAC}/namespaces/missing/roles", ns_role)
    assert code == 404 and status["details"]["kind"] == "namespaces"
    code, _, _ = await client.post(f"{RBAC}/namespaces/default/roles", ns_role)
    assert code == 201
    binding: dict[str, Any] = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "b"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                           "name": "reader"},
               "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]}
    code, _, _ = await client.post(f"{RBAC}/namespaces/default/rolebindings", binding)
    assert code == 201
    code, table, _ = await client.get(f"{RBAC}/namespaces/default/rolebindings", headers=TABLE)
    assert code == 200
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns[:3] == ["Name", "Role", "Age"]
    assert table["rows"][0]["cells"][1] == "Role/reader"
    assert table["rows"][0]["cells"][5] == "default/sa"


async def test_deployment_table_columns(client: Client) -> None:
    """kubectl get deployments columns: Ready (ready/desired), Up-to-date, Available, Age."""
    await client.post(DEPLOYS, deployment(replicas=3))
    await client.patch(f"{DEPLOYS}/web/status", {"status": {"replicas": 3, "readyReplicas": 1,
                                                            "updatedReplicas": 3}}, MERGE)
    _, table, _ = await client.get(DEPLOYS, headers=TABLE)
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names == ["Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images",
                     "Selector"]
    cells = table["rows"][0]["cells"]
    assert cells[:4] == ["web", "1/3", 3, 0]
    assert cells[5:] == ["main,side", "nginx:1,busybox:1", "app=web"]


async def test_pod_disruption_budget_is_served(client: Client) -> None:
    """policy/v1 PodDisruptionBudgets store, validate against the schema and print a table."""
    path = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
    pdb: dict[str, Any] = {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
    code, created, _ = await client.post(path, pdb)
    assert code == 201 and created["metadata"]["generation"] == 1
    bad = copy.deepcopy(pdb)
    bad["metadata"]["name"] = "q"
    bad["spec"]["selector"] = "app=web"
    code, status, _ = await client.post(path, bad)
    assert code == 400 and status["message"] == (
        'PodDisruptionBudget in version "v1" cannot be handled as a PodDisruptionBudget: json: '
        "cannot unmarshal string into Go struct field PodDisruptionBudgetSpec.spec.selector of "
        "type v1.LabelSelector")
    _, table, _ = await client.get(path, headers=TABLE)
    assert table["rows"][0]["cells"][:4] == ["p", "1", "N/A", 0]


DEPLOYMENT_YAML = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: main, image: "nginx:1"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reader}
subjects:
- {kind: ServiceAccount, name: default, namespace: default}
"""


@pytest.fixture
async def kubectl(emu_crds: Emulator, tmp_path: Path) -> Kubectl:
    return Kubectl(emu_crds, tmp_path)


async def test_kubectl_apply_scale_set_image_and_explain(kubectl: Kubectl) -> None:
    """kubectl apply (client and server side), scale, set image, get -o wide and explain work."""
    out = await kubectl.apply(DEPLOYMENT_YAML)
    assert "deployment.apps/web created" in out
    assert "clusterrolebinding.rbac.authorization.k8s.io/reader created" in out
    assert "deployment.apps/web unchanged" in await kubectl.apply(DEPLOYMENT_YAML)
    changed = DEPLOYMENT_YAML.replace("replicas: 2", "replicas: 3")
    assert "deployment.apps/web serverside-applied" in await kubectl.apply(
        changed, "--server-side", "--force-conflicts")
    await kubectl.run("scale", "deployment/web", "--replicas=4")
    await kubectl.run("set", "image", "deployment/web", "main=nginx:2")
    live = await kubectl.json("get", "deployment", "web")
    assert live["spec"]["replicas"] == 4
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    assert live["metadata"]["generation"] == 4
    _, wide, _ = await kubectl.run("get", "deployments", "-o", "wide")
    assert wide.split("\n")[1].split()[:2] == ["web", "0/4"]
    assert "nginx:2" in wide
    _, explained, _ = await kubectl.run("explain", "deployment.spec.strategy")
    assert "KIND:       Deployment" in explained and "rollingUpdate" in explained
    await kubectl.run("delete", "clusterrolebinding", "reader")
    code, _, err = await kubectl.run("get", "clusterrolebinding", "reader", ok=False)
    assert code != 0 and "NotFound" in err


async def test_kubectl_generators_send_protobuf(kubectl: Kubectl) -> None:
    """kubectl's typed generators post protobuf bodies, which the emulator decodes: the objects
    are what the same command's JSON (``--dry-run=client -o json | create -f -``) makes."""
    _, out, _ = await kubectl.run("create", "namespace", "gen")
    assert "namespace/gen created" in out
    _, out, _ = await kubectl.run("create", "deployment", "web", "--image=nginx", "--replicas=2",
                                  "-n", "gen")
    assert "deployment.apps/web created" in out
    _, manifest, _ = await kubectl.run("create", "deployment", "web2", "--image=nginx",
                                       "--replicas=2", "-n", "gen", "--dry-run=client",
                                       "-o", "json")
    await kubectl.run("create", "-f", "-", stdin=manifest)
    _, by_proto, _ = await kubectl.run("get", "deployment", "web", "-n", "gen", "-o", "json")
    _, by_json, _ = await kubectl.run("get", "deployment", "web2", "-n", "gen", "-o", "json")

    def spec(text: str) -> Any:
        obj = json.loads(text)
        obj["spec"]["selector"]["matchLabels"] = obj["spec"]["template"]["metadata"]["labels"] = {}
        obj["spec"]["template"]["spec"]["containers"][0]["name"] = ""
        return obj["spec"]

    assert spec(by_proto) == spec(by_json)
    assert spec(by_proto)["strategy"]["type"] == "RollingUpdate"
    code, _, err = await kubectl.run("create", "namespace", "gen", ok=False)
    assert code != 0 and "AlreadyExists" in err

async def test_official_client_apps_rbac_policy(emu: Emulator) -> None:
    """The official client creates, reads, patches, scales and deletes the new kinds."""
    def scenario() -> dict[str, Any]:
        # the generated API classes want model objects; plain dicts are what users pass
        api = kconfig.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(emu.kubeconfig_path))
        apps: Any = kclient.AppsV1Api(api)
        rbac: Any = kclient.RbacAuthorizationV1Api(api)
        policy: Any = kclient.PolicyV1Api(api)
        out: dict[str, Any] = {}
        apps.create_namespaced_deployment("default", deployment())
        apps.patch_namespaced_deployment(
            "web", "default", {"spec": {"template": {"spec": {"containers": [
                {"name": "main", "image": "nginx:9"}]}}}})
        read = apps.read_namespaced_deployment("web", "default")
        out["images"] = [c.image for c in read.spec.template.spec.containers]
        read.spec.replicas = 6
        out["replaced"] = apps.replace_namespaced_deployment("web", "default", read).spec.replicas
        scale = apps.patch_namespaced_deployment_scale("web", "default",
                                                       {"spec": {"replicas": 1}})
        out["scale"] = (scale.spec.replicas, scale.status.selector)
        rbac.create_cluster_role({"metadata": {"name": "r"}, "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
        rbac.create_namespaced_role_binding("default", {
            "metadata": {"name": "rb"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "r"},
            "subjects": [{"kind": "User", "name": "alice",
                          "apiGroup": "rbac.authorization.k8s.io"}]})
        out["roles"] = [r.metadata.name for r in rbac.list_cluster_role().items]
        out["bindings"] = [b.role_ref.name for b in
                           rbac.list_namespaced_role_binding("default").items]
        policy.create_namespaced_pod_disruption_budget("default", {
            "metadata": {"name": "pdb"},
            "spec": {"maxUnavailable": "50%", "selector": {"matchLabels": {"app": "web"}}}})
        apps.delete_namespaced_deployment("web", "default")
        try:
            apps.read_namespaced_deployment("web", "default")
        except ApiException as exc:
            out["after_delete"] = exc.status
        return out

    out = await anyio.to_thread.run_sync(scenario)
    assert out["images"] == ["nginx:9", "busybox:1"]
    assert out["replaced"] == 6
    assert out["scale"] == (1, "app=web")
    assert out["roles"] == ["r"] and out["bindings"] == ["r"]
    assert out["after_delete"] == 404


async def test_custom_resource_scale_uses_the_crd_paths(client: Client) -> None:
    """A CRD's scale subresource maps Scale onto specReplicasPath and labelSelectorPath."""
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
        "status": {"type": "object", "properties": {"count": {"type": "integer"},
                                                    "sel": {"type": "string"}}}}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "pools.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "pools", "singular": "pool", "kind": "Pool"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": schema},
                                  "subresources": {"status": {}, "scale": {
                                      "specReplicasPath": ".spec.size",
                                      "statusReplicasPath": ".status.count",
                                      "labelSelectorPath": ".status.sel"}}}]}}
    code, _, _ = await client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                   crd)
    assert code == 201
    pools = "/apis/example.com/v1/namespaces/default/pools"
    # kube-apiserver serves a new CRD once it is Established, a moment after the create
    for _ in range(100):
        if (await client.get(pools))[0] == 200:
            break
        await anyio.sleep(0.1)
    await client.post(pools, {"apiVersion": "example.com/v1", "kind": "Pool",
                              "metadata": {"name": "p"}, "spec": {"size": 2}})
    await client.patch(f"{pools}/p/status", {"status": {"count": 1, "sel": "a=b"}}, MERGE)
    _, scale, _ = await client.get(f"{pools}/p/scale")
    assert (scale["spec"], scale["status"]) == ({"replicas": 2}, {"replicas": 1, "selector": "a=b"})
    code, _, _ = await client.patch(f"{pools}/p/scale", {"spec": {"replicas": 7}}, MERGE)
    assert code == 200
    _, live, _ = await client.get(f"{pools}/p")
    assert live["spec"] == {"size": 7} and live["metadata"]["generation"] == 2
