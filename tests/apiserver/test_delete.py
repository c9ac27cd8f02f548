"""Deletion: finalizers, graceful pod deletion, propagation policies, GC, preconditions."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from cre.testing.apiserver import Emulator
from cre.testing.apiserver.meta import parse_time

from .conftest import PODS, Client, pod

pytestmark = pytest.mark.anyio
CMS = "/api/v1/namespaces/default/configmaps"


def cm(name: str, *, owner: dict[str, Any] | None = None, block: bool = False,
       finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap",
                                    "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"],
                                    "blockOwnerDeletion": block}]
    if finalizers:
        meta["finalizers"] = finalizers
    return {"metadata": meta}


async def test_finalizer_holds_object(client: Client) -> None:
    """DELETE on an object with finalizers only sets deletionTimestamp; removing them deletes."""
    await client.post(CMS, cm("c", finalizers=["example.com/hold"]))
    status, body, _ = await client.delete(CMS + "/c")
    assert status == 200
    assert body["metadata"]["deletionTimestamp"]
    assert body["metadata"]["deletionGracePeriodSeconds"] == 0
    body["metadata"]["finalizers"].append("example.com/more")
    status, err, _ = await client.put(CMS + "/c", body)
    assert status == 422
    assert "no new finalizers can be added if the object is being deleted" in err["message"]
    status, _, _ = await client.patch(CMS + "/c", {"metadata": {"finalizers": None}},
                                      "application/merge-patch+json")
    assert status == 200
    status, _, _ = await client.get(CMS + "/c")
    assert status == 404


async def test_delete_returns_status_for_configmaps_and_object_for_pods(client: Client) -> None:
    """Immediate deletion answers a Success Status, except for ReturnDeletedObject kinds."""
    _, c, _ = await client.post(CMS, cm("c"))
    _, body, _ = await client.delete(CMS + "/c")
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": "c", "kind": "configmaps", "uid": c["metadata"]["uid"]}}
    await client.post(PODS, pod("p"))
    _, body, _ = await client.delete(PODS + "/p")
    assert body["kind"] == "Pod"


async def test_graceful_pod_deletion(client: Client) -> None:
    """A scheduled pod gets deletionTimestamp + grace; a second delete with 0 removes it."""
    await client.post(PODS, pod("p", node="n1"))
    _, body, _ = await client.delete(PODS + "/p", {"gracePeriodSeconds": 30})
    assert body["metadata"]["deletionGracePeriodSeconds"] == 30
    assert body["metadata"]["generation"] == 2
    status, _, _ = await client.get(PODS + "/p")
    assert status == 200
    _, body, _ = await client.delete(PODS + "/p?gracePeriodSeconds=0")
    status, _, _ = await client.get(PODS + "/p")
    assert status == 404


async def test_final_delete_of_pod_with_finalizer_stores_zero_grace(client: Client) -> None:
    """The kubelet's grace-0 delete of a finalized pod stores 0; dropping the finalizer deletes."""
    body = pod("p", node="n1")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    await client.post(PODS, body)
    _, first, _ = await client.delete(PODS + "/p", {"gracePeriodSeconds": 30})
    assert first["metadata"]["deletionGracePeriodSeconds"] == 30
    await client.patch(PODS + "/p/status", {"status": {"phase": "Failed"}},
                       "application/merge-patch+json")
    _, again, _ = await client.delete(PODS + "/p")
    assert again["metadata"]["deletionGracePeriodSeconds"] == 30
    _, final, _ = await client.delete(PODS + "/p", {"gracePeriodSeconds": 0})
    assert final["metadata"]["deletionGracePeriodSeconds"] == 0
    first_ts = parse_time(first["metadata"]["deletionTimestamp"])
    final_ts = parse_time(final["metadata"]["deletionTimestamp"])
    assert first_ts - final_ts == timedelta(seconds=30)
    status, _, _ = await client.get(PODS + "/p")
    assert status == 200
    status, _, _ = await client.patch(PODS + "/p", {"metadata": {"finalizers": None}},
                                      "application/merge-patch+json")
    assert status == 200
    status, _, _ = await client.get(PODS + "/p")
    assert status == 404


async def test_unscheduled_pod_is_deleted_at_once(client: Client) -> None:
    """A pod without nodeName has grace 0 and disappears immediately."""
    await client.post(PODS, pod("p"))
    await client.delete(PODS + "/p")
    status, _, _ = await client.get(PODS + "/p")
    assert status == 404


async def test_preconditions(client: Client) -> None:
    """A uid precondition that does not match answers 409 naming the Kind."""
    _, c, _ = await client.post(CMS, cm("c"))
    status, body, _ = await client.delete(CMS + "/c", {"preconditions": {"uid": "other"}})
    assert status == 409
    assert body["message"] == (
        'Operation cannot be fulfilled on ConfigMap "c": the UID in the precondition (other) '
        f'does not match the UID in record ({c["metadata"]["uid"]}). The object might have been '
        "deleted and then recreated")
    status, _, _ = await client.delete(CMS + "/c", {"preconditions": {
        "uid": c["metadata"]["uid"], "resourceVersion": c["metadata"]["resourceVersion"]}})
    assert status == 200


async def test_background_gc_deletes_dependents(client: Client, emu: Emulator) -> None:
    """Background deletion removes the owner now and the GC removes its dependents."""
    _, owner, _ = await client.post(CMS, cm("owner"))
    await client.post(CMS, cm("dep", owner=owner))
    await client.delete(CMS + "/owner")
    await emu.settle()
    assert emu.objects.get("v1", "ConfigMap", "dep", "default") is None


async def test_dangling_reference_with_another_owner_is_removed(client: Client,
                                                                emu: Emulator) -> None:
    """With one live owner left, the GC only strips the dangling reference."""
    _, a, _ = await client.post(CMS, cm("a"))
    _, b, _ = await client.post(CMS, cm("b"))
    body = cm("dep", owner=a)
    body["metadata"]["ownerReferences"].append({"apiVersion": "v1", "kind": "ConfigMap",
                                               "name": "b", "uid": b["metadata"]["uid"]})
    await client.post(CMS, body)
    await client.delete(CMS + "/a")
    await emu.settle()
    dep = emu.objects.get("v1", "ConfigMap", "dep", "default")
    assert dep is not None
    assert [r["name"] for r in dep["metadata"]["ownerReferences"]] == ["b"]


async def test_foreground_waits_for_blocking_dependents(client: Client, emu: Emulator) -> None:
    """Foreground deletion keeps the owner until blocking dependents are gone."""
    _, owner, _ = await client.post(CMS, cm("owner"))
    await client.post(CMS, cm("dep", owner=owner, block=True, finalizers=["example.com/x"]))
    _, body, _ = await client.delete(CMS + "/owner", {"propagationPolicy": "Foreground"})
    assert body["metadata"]["finalizers"] == ["foregroundDeletion"]
    await emu.settle()
    held = emu.objects.get("v1", "ConfigMap", "owner", "default")
    assert held is not None and held["metadata"]["deletionTimestamp"]
    await client.patch(CMS + "/dep", {"metadata": {"finalizers": None}},
                       "application/merge-patch+json")
    await emu.settle()
    assert emu.objects.get("v1", "ConfigMap", "owner", "default") is None
    assert emu.objects.get("v1", "ConfigMap", "dep", "default") is None


async def test_orphan_keeps_dependents(client: Client, emu: Emulator) -> None:
    """Orphan deletion strips the owner reference and keeps the dependent."""
    _, owner, _ = await client.post(CMS, cm("owner"))
    await client.post(CMS, cm("dep", owner=owner))
    await client.delete(CMS + "/owner?propagationPolicy=Orphan")
    await emu.settle()
    dep = emu.objects.get("v1", "ConfigMap", "dep", "default")
    assert dep is not None and "ownerReferences" not in dep["metadata"]
    assert emu.objects.get("v1", "ConfigMap", "owner", "default") is None


async def test_delete_collection(client: Client) -> None:
    """deletecollection deletes the selected objects and returns them as a list."""
    await client.post(PODS, pod("a", labels={"x": "1"}))
    await client.post(PODS, pod("b", labels={"x": "2"}))
    status, body, _ = await client.delete(PODS + "?labelSelector=x%3D1")
    assert status == 200 and body["kind"] == "PodList"
    assert [p["metadata"]["name"] for p in body["items"]] == ["a"]
    _, lst, _ = await client.get(PODS)
    assert [p["metadata"]["name"] for p in lst["items"]] == ["b"]


async def test_namespace_deletion_removes_contents(client: Client, emu: Emulator) -> None:
    """Deleting a namespace marks it Terminating, deletes its objects, then removes it."""
    await client.post("/api/v1/namespaces", {"metadata": {"name": "tmp"}})
    await client.post("/api/v1/namespaces/tmp/configmaps", cm("c"))
    await client.post("/api/v1/namespaces/tmp/configmaps", cm("held", finalizers=["x.io/y"]))
    _, ns, _ = await client.delete("/api/v1/namespaces/tmp")
    assert ns["status"]["phase"] == "Terminating"
    await emu.settle()
    status, body, _ = await client.post("/api/v1/namespaces/tmp/configmaps", cm("d"))
    assert status == 403
    assert "because it is being terminated" in body["message"]
    assert emu.objects.get("v1", "Namespace", "tmp") is not None
    await client.patch("/api/v1/namespaces/tmp/configmaps/held", {"metadata": {"finalizers": None}},
                       "application/merge-patch+json")
    await emu.settle()
    assert emu.objects.get("v1", "Namespace", "tmp") is None
    assert emu.objects.get("v1", "ConfigMap", "c", "tmp") is None
