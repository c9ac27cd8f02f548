"""LIST: selectors, pagination, and resourceVersion / resourceVersionMatch semantics."""

from __future__ import annotations

import pytest

from .conftest import PODS, Client, pod

pytestmark = pytest.mark.anyio


async def _names(client: Client, query: str) -> list[str]:
    status, body, _ = await client.get(f"{PODS}?{query}")
    assert status == 200, body
    return [p["metadata"]["name"] for p in body["items"]]


async def test_label_selector_operators(client: Client) -> None:
    """=, ==, !=, in, notin, exists and !exists select as the label grammar defines."""
    await client.post(PODS, pod("a", labels={"app": "x", "tier": "1"}))
    await client.post(PODS, pod("b", labels={"app": "y"}))
    await client.post(PODS, pod("c"))
    assert await _names(client, "labelSelector=app%3Dx") == ["a"]
    assert await _names(client, "labelSelector=app%3D%3Dy") == ["b"]
    assert await _names(client, "labelSelector=app!%3Dx") == ["b", "c"]
    assert await _names(client, "labelSelector=app+in+(x,y)") == ["a", "b"]
    assert await _names(client, "labelSelector=app+notin+(x)") == ["b", "c"]
    assert await _names(client, "labelSelector=tier") == ["a"]
    assert await _names(client, "labelSelector=!tier") == ["b", "c"]
    assert await _names(client, "labelSelector=app,!tier") == ["b"]


async def test_bad_label_selector_is_400(client: Client) -> None:
    """A selector that does not parse answers 400 with the parser's message."""
    status, body, _ = await client.get(PODS + "?labelSelector=a+b")
    assert status == 400
    assert body["message"] == ("unable to parse requirement: found 'b', expected: in, notin, =, "
                               "==, !=, gt, lt")


async def test_field_selectors(client: Client) -> None:
    """Pods select on spec.nodeName and status.phase; unknown fields answer 400."""
    await client.post(PODS, pod("a", node="n1"))
    await client.post(PODS, pod("b"))
    assert await _names(client, "fieldSelector=spec.nodeName%3Dn1") == ["a"]
    assert await _names(client, "fieldSelector=spec.nodeName!%3Dn1") == ["b"]
    assert await _names(client, "fieldSelector=metadata.name%3Db,status.phase%3DPending") == ["b"]
    status, body, _ = await client.get(PODS + "?fieldSelector=spec.bogus%3D1")
    assert status == 400 and body["message"] == "field label not supported: spec.bogus"
    status, body, _ = await client.get(
        "/api/v1/namespaces/default/configmaps?fieldSelector=data.x%3D1")
    assert status == 400
    assert body["message"] == ('"data.x" is not a known field selector: only "metadata.name", '
                               '"metadata.namespace"')


async def test_event_involved_object_field_selector(client: Client) -> None:
    """Events select on involvedObject.* fields."""
    for name, obj in (("e1", "p1"), ("e2", "p2")):
        await client.post("/api/v1/namespaces/default/events", {
            "metadata": {"name": name}, "involvedObject": {"kind": "Pod", "name": obj,
                                                           "namespace": "default"},
            "reason": "Started", "message": "m", "type": "Normal"})
    status, body, _ = await client.get(
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dp2")
    assert status == 200
    assert [e["metadata"]["name"] for e in body["items"]] == ["e2"]


async def test_pagination_is_a_consistent_snapshot(client: Client) -> None:
    """limit/continue pages share the first page's RV and ignore later writes."""
    for i in range(5):
        await client.post(PODS, pod(f"p{i}"))
    _, first, _ = await client.get(PODS + "?limit=2")
    assert [p["metadata"]["name"] for p in first["items"]] == ["p0", "p1"]
    assert first["metadata"]["remainingItemCount"] == 3
    token = first["metadata"]["continue"]
    await client.post(PODS, pod("p2a"))
    await client.delete(PODS + "/p3")
    _, second, _ = await client.get(PODS + f"?limit=10&continue={token}")
    assert [p["metadata"]["name"] for p in second["items"]] == ["p2", "p3", "p4"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert "continue" not in second["metadata"]


async def test_bad_continue_token_is_400(client: Client) -> None:
    """A continue token that does not decode answers 400."""
    status, body, _ = await client.get(PODS + "?continue=garbage!")
    assert status == 400
    assert body["message"].startswith("invalid continue token: continue key is not valid")


async def test_list_rv_is_the_global_revision(client: Client) -> None:
    """An empty list still carries the current revision; items is [] not null."""
    _, cm, _ = await client.post("/api/v1/namespaces/default/configmaps",
                                 {"metadata": {"name": "c"}})
    _, lst, _ = await client.get(PODS)
    assert lst["items"] == []
    assert lst["metadata"]["resourceVersion"] == cm["metadata"]["resourceVersion"]


async def test_exact_resource_version_list(client: Client) -> None:
    """resourceVersionMatch=Exact serves the state at that revision."""
    _, a, _ = await client.post(PODS, pod("a"))
    rv = a["metadata"]["resourceVersion"]
    await client.post(PODS, pod("b"))
    names = await _names(client, f"resourceVersion={rv}&resourceVersionMatch=Exact")
    assert names == ["a"]
    assert sorted(await _names(client, f"resourceVersion={rv}&resourceVersionMatch=NotOlderThan")
                  ) == ["a", "b"]


async def test_resource_version_match_validation(client: Client) -> None:
    """resourceVersionMatch without resourceVersion is a 422 on ListOptions."""
    status, body, _ = await client.get(PODS + "?resourceVersionMatch=Exact")
    assert status == 422
    assert body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "resourceVersionMatch is forbidden unless resourceVersion is provided")
    assert body["details"] == {"group": "meta.k8s.io", "kind": "ListOptions", "causes": [
        {"reason": "FieldValueForbidden",
         "message": "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is "
                    "provided", "field": "resourceVersionMatch"}]}


async def test_too_large_resource_version(client: Client) -> None:
    """Asking for a revision the server has not reached answers 504 Timeout."""
    status, body, headers = await client.get(PODS + "?resourceVersion=999999")
    assert status == 504
    assert body["reason"] == "Timeout"
    assert headers["Retry-After"] == "1"


async def test_all_namespaces_list(client: Client) -> None:
    """A cluster-wide list returns objects from every namespace."""
    await client.post("/api/v1/namespaces", {"metadata": {"name": "other"}})
    await client.post("/api/v1/namespaces/other/pods", pod("x"))
    await client.post(PODS, pod("y"))
    _, body, _ = await client.get("/api/v1/pods")
    assert sorted(p["metadata"]["name"] for p in body["items"]) == ["x", "y"]


async def test_compaction_expires_lists_not_watches(emu: object, client: Client) -> None:
    """After etcd-style compaction a continue token from before it answers 410 with a token
    that goes on at the current revision, an exact list below it answers 410, and a watch from
    there still replays (the watch cache's window is not etcd's). Emulator-only: it compacts
    through the control API; the differential's ``list_after_compaction`` script checks the
    same on kube-apiserver, compacting etcd."""
    for i in range(3):
        await client.post(PODS, pod(f"p{i}"))
    _, first, _ = await client.get(PODS + "?limit=2")
    rv, token = first["metadata"]["resourceVersion"], first["metadata"]["continue"]
    await client.post(PODS, pod("p3"))
    status, body, _ = await client.post("/_emulator/compact", None)
    assert status == 200 and int(body["revision"]) > int(rv)
    status, gone, _ = await client.get(PODS + f"?limit=2&continue={token}")
    assert (status, gone["reason"]) == (410, "Expired")
    assert gone["message"].startswith("The provided continue parameter is too old")
    status, rest, _ = await client.get(PODS + f"?limit=2&continue={gone['metadata']['continue']}")
    assert status == 200
    assert [p["metadata"]["name"] for p in rest["items"]] == ["p2", "p3"]
    assert int(rest["metadata"]["resourceVersion"]) > int(rv)
    for query in (f"resourceVersion={rv}&resourceVersionMatch=Exact",
                  f"resourceVersion={rv}&limit=1"):
        status, body, _ = await client.get(PODS + "?" + query)
        assert (status, body["message"]) == (
            410, "The resourceVersion for the provided list is too old."), query
    assert await _names(client, f"resourceVersion={rv}&resourceVersionMatch=NotOlderThan") == [
        "p0", "p1", "p2", "p3"]
    async with client.session.get(client.base + PODS + f"?watch=true&resourceVersion={rv}") as w:
        line = await w.content.readline()
    assert b'"ADDED"' in line and b'"p3"' in line
