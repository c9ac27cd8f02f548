"""RBAC enforcement for service-account tokens, the TokenRequest API and the audit log."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cre.testing.apiserver import Emulator, serve
from cre.testing.apiserver.rbac import Attributes, rule_matches

from .conftest import Client, pod

pytestmark = pytest.mark.anyio
RBAC = "/apis/rbac.authorization.k8s.io/v1"
SA_USER = "system:serviceaccount:team:bot"


@pytest.mark.parametrize(("rule", "attrs", "allowed"), [
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
     Attributes(verb="get", resource="pods", namespace="n", name="p"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
     Attributes(verb="list", resource="pods", namespace="n"), False),
    ({"verbs": ["*"], "apiGroups": [""], "resources": ["pods"]},
     Attributes(verb="delete", resource="pods", name="p"), True),
    ({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["pods"]},
     Attributes(verb="get", resource="pods", name="p"), False),
    ({"verbs": ["get"], "apiGroups": ["*"], "resources": ["*"]},
     Attributes(verb="get", group="x.io", resource="things", name="a"), True),
    # A subresource needs its own rule: "pods" does not grant "pods/log", nor the reverse.
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
     Attributes(verb="get", resource="pods", subresource="log", name="p"), False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]},
     Attributes(verb="get", resource="pods", subresource="log", name="p"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]},
     Attributes(verb="get", resource="pods", name="p"), False),
    ({"verbs": ["update"], "apiGroups": ["cre.dev"], "resources": ["*/status"]},
     Attributes(verb="update", group="cre.dev", resource="jobs", subresource="status",
                name="j"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/*"]},
     Attributes(verb="get", resource="pods", subresource="log", name="p"), False),
    # resourceNames: only named requests, so never a list or a create.
    ({"verbs": ["get", "list", "create"], "apiGroups": [""], "resources": ["configmaps"],
      "resourceNames": ["a"]}, Attributes(verb="get", resource="configmaps", name="a"), True),
    ({"verbs": ["get", "list", "create"], "apiGroups": [""], "resources": ["configmaps"],
      "resourceNames": ["a"]}, Attributes(verb="get", resource="configmaps", name="b"), False),
    ({"verbs": ["get", "list", "create"], "apiGroups": [""], "resources": ["configmaps"],
      "resourceNames": ["a"]}, Attributes(verb="list", resource="configmaps"), False),
    ({"verbs": ["get", "list", "create"], "apiGroups": [""], "resources": ["configmaps"],
      "resourceNames": ["a"]}, Attributes(verb="create", resource="configmaps"), False),
])
def test_rule_matching(rule: dict[str, Any], attrs: Attributes, allowed: bool) -> None:
    assert rule_matches(rule, attrs) is allowed


@pytest.fixture
async def secured() -> AsyncIterator[tuple[Emulator, Client]]:
    async with serve(rbac=True) as e, aiohttp.ClientSession(
            headers={"Authorization": "Bearer cre-emulator"}) as s:
        yield e, Client(s, e.url)


async def _token(admin: Client, ns: str, sa: str) -> str:
    status, body, _ = await admin.post(f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token",
                                       {"apiVersion": "authentication.k8s.io/v1",
                                        "kind": "TokenRequest", "spec": {}})
    assert status == 201, body
    assert body["kind"] == "TokenRequest" and body["status"]["expirationTimestamp"]
    return str(body["status"]["token"])


async def _setup(admin: Client) -> None:
    for ns in ("team", "other"):
        assert (await admin.post("/api/v1/namespaces", {"metadata": {"name": ns}}))[0] == 201
    assert (await admin.post("/api/v1/namespaces/team/serviceaccounts",
                             {"metadata": {"name": "bot"}}))[0] == 201
    for ns in ("team", "other"):
        assert (await admin.post(f"/api/v1/namespaces/{ns}/pods", pod("p", node="n1")))[0] \
            == 201
    role = {"metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}
    assert (await admin.post(f"{RBAC}/clusterroles", role))[0] == 201
    # Namespaced grant of a ClusterRole, ServiceAccount subject without a namespace.
    binding = {"metadata": {"name": "bot-reads-pods"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "pod-reader"},
               "subjects": [{"kind": "ServiceAccount", "name": "bot"}]}
    assert (await admin.post(f"{RBAC}/namespaces/team/rolebindings", binding))[0] == 201
    nodes = {"metadata": {"name": "node-reader"},
             "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]}
    assert (await admin.post(f"{RBAC}/clusterroles", nodes))[0] == 201
    cluster_binding = {"metadata": {"name": "sas-read-nodes"},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                   "kind": "ClusterRole", "name": "node-reader"},
                       "subjects": [{"kind": "Group", "name": "system:serviceaccounts:team"}]}
    assert (await admin.post(f"{RBAC}/clusterrolebindings", cluster_binding))[0] == 201


async def test_service_account_token_is_authorized_by_its_bindings(
        secured: tuple[Emulator, Client]) -> None:
    emu, admin = secured
    await _setup(admin)
    token = await _token(admin, "team", "bot")
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as s:
        bot = Client(s, emu.url)
        assert (await bot.get("/api/v1/namespaces/team/pods/p"))[0] == 200
        assert (await bot.get("/api/v1/namespaces/team/pods"))[0] == 200
        assert (await bot.get("/api/v1/nodes"))[0] == 200
        assert (await bot.get("/version"))[0] == 200  # non-resource: system:discovery
        assert (await bot.get("/api/v1"))[0] == 200

        status, body, _ = await bot.get("/api/v1/namespaces/other/pods/p")
        assert status == 403
        assert body["reason"] == "Forbidden" and body["details"] == {"name": "p",
                                                                      "kind": "pods"}
        assert body["message"] == (
            f'pods "p" is forbidden: User "{SA_USER}" cannot get resource "pods" in API '
            'group "" in the namespace "other"')
        status, body, _ = await bot.get("/api/v1/namespaces/team/pods/p/log")
        assert status == 403
        assert 'cannot get resource "pods/log" in API group "" in the namespace "team"' \
            in body["message"]
        status, body, _ = await bot.get("/api/v1/pods")
        assert status == 403
        assert body["message"] == (f'pods is forbidden: User "{SA_USER}" cannot list resource '
                                   '"pods" in API group "" at the cluster scope')
        status, body, _ = await bot.delete("/api/v1/namespaces/team/pods/p")
        assert status == 403
        status, body, _ = await bot.get("/api/v1/namespaces/team/secrets")
        assert status == 403

    async with aiohttp.ClientSession(headers={"Authorization": "Bearer forged"}) as s:
        status, body, _ = await Client(s, emu.url).get("/api/v1/namespaces/team/pods")
        assert status == 401 and body["reason"] == "Unauthorized"
    async with aiohttp.ClientSession() as s:  # anonymous: not even discovery
        assert (await Client(s, emu.url).get("/api/v1/namespaces/team/pods"))[0] == 403
        assert (await Client(s, emu.url).get("/version"))[0] == 403

    records = [r for r in emu.audit.since() if r.user == SA_USER]
    seen = {(r.verb, r.resource, r.subresource, r.namespace, r.code) for r in records}
    assert ("get", "pods", "", "team", 200) in seen
    assert ("get", "pods", "log", "team", 403) in seen
    assert ("list", "nodes", "", "", 200) in seen
    assert ("delete", "pods", "", "team", 403) in seen
    assert any(r.path == "/version" and r.code == 200 for r in records)


async def test_enforcement_is_off_by_default_and_the_audit_still_records() -> None:
    async with serve() as emu, aiohttp.ClientSession() as s:
        client = Client(s, emu.url)
        assert (await client.get("/api/v1/namespaces/default/secrets"))[0] == 200
        async with aiohttp.ClientSession(headers={"Authorization": "Bearer forged"}) as s2:
            assert (await Client(s2, emu.url).get("/api/v1/nodes"))[0] == 200
        (record,) = [r for r in emu.audit.since() if r.resource == "secrets"]
        assert (record.verb, record.namespace, record.code) == ("list", "default", 200)
        status, body, _ = await client.get("/_emulator/audit")
        assert status == 200 and body["records"][-1]["resource"] == "nodes"


@pytest.mark.emulator_only('the /_emulator/journal control API')
async def test_journal_keeps_every_version_written(client: Client) -> None:
    assert (await client.post("/_emulator/journal", None))[0] == 204
    await client.post("/api/v1/namespaces/default/configmaps",
                      {"metadata": {"name": "c"}, "data": {"k": "one"}})
    await client.put("/api/v1/namespaces/default/configmaps/c",
                     {"metadata": {"name": "c"}, "data": {"k": "two"}})
    await client.delete("/api/v1/namespaces/default/configmaps/c")
    status, body, _ = await client.get("/_emulator/journal")
    assert status == 200
    values = [o["object"].get("data", {}).get("k") for o in body["objects"]
              if o["resource"] == "configmaps"]
    assert values == ["one", "two", "two"]  # the DELETED event carries the last version
    status, body, _ = await client.get("/_emulator/objects")
    assert not any(o["resource"] == "configmaps" for o in body)


def test_kubectl_with_a_service_account_token_gets_the_real_403(tmp_path: Path) -> None:
    """Unmodified kubectl, with a service account's token, is denied with the real message."""
    import anyio

    async def main() -> None:
        # client-go sends a bearer token over HTTPS only.
        async with serve(rbac=True, tls=True, kubeconfig_path=tmp_path / "admin"):
            kc = str(tmp_path / "admin")

            def kubectl(*args: str, config: str = kc,
                        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
                return subprocess.run(["kubectl", "--kubeconfig", config, *args], input=stdin,
                                      capture_output=True, text=True, timeout=60, check=False)

            made = await anyio.to_thread.run_sync(lambda: kubectl(
                "apply", "-f", "-", stdin="{apiVersion: v1, kind: ServiceAccount, "
                                          "metadata: {name: bot}}"))
            assert made.returncode == 0, made.stderr
            # kubectl create token posts a protobuf TokenRequest (decoded as kube-apiserver does)
            minted = await anyio.to_thread.run_sync(lambda: kubectl("create", "token", "bot"))
            assert minted.returncode == 0, minted.stderr
            token = minted.stdout.strip()
            admin = json.loads(kubectl("config", "view", "--raw", "-o", "json").stdout)
            cluster = admin["clusters"][0]["cluster"]
            config = json.loads(json.dumps({
                "apiVersion": "v1", "kind": "Config", "current-context": "c",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "bot", "user": {"token": token}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "bot",
                                                       "namespace": "default"}}]}))
            bot_kc = tmp_path / "bot"
            bot_kc.write_text(json.dumps(config))
            denied = await anyio.to_thread.run_sync(
                lambda: kubectl("get", "pods", config=str(bot_kc)))
            assert denied.returncode != 0
            assert ('pods is forbidden: User "system:serviceaccount:default:bot" cannot list '
                    'resource "pods" in API group "" in the namespace "default"') \
                in denied.stderr

    anyio.run(main)

