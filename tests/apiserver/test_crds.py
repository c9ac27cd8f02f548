"""CustomResourceDefinitions: install, serve, validate (schema + CEL), status split, removal."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from cre._vendor import crds as upstream_crds
from cre.testing.apiserver import Emulator, serve
from cre.testing.apiserver.emulator import load_manifests
from cre.testing.apiserver.errors import ApiError
from cre.testing.apiserver.pytest_fixtures import default_crd_sources

from .conftest import Client

pytestmark = pytest.mark.anyio

UPSTREAM = upstream_crds.HERE
TJ = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def trainjob(name: str = "tj", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": name},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec}}


@pytest.mark.parametrize("folder", sorted(p.name for p in upstream_crds.ALL))
async def test_every_upstream_crd_folder_installs(folder: str) -> None:
    """Each upstream CRD folder installs and its kinds become servable and listable."""
    crds = load_manifests([UPSTREAM / folder])
    async with serve(crds=[UPSTREAM / folder]) as emu:
        for crd in crds:
            spec = crd["spec"]
            for version in spec["versions"]:
                rt = emu.server.registry.get(spec["group"], version["name"],
                                             spec["names"]["plural"])
                assert rt is not None
                items = emu.objects.list(f"{spec['group']}/{version['name']}",
                                         spec["names"]["kind"])
                assert items == []


async def test_crd_accepts_valid_and_rejects_invalid(crd_client: Client) -> None:
    """A TrainJob passes; a bad managedBy fails its CEL rule with the 422 shape of the server."""
    status, body, _ = await crd_client.post(TJ, trainjob())
    assert status == 201, body
    assert body["spec"]["managedBy"] == "trainer.kubeflow.org/trainjob-controller"  # defaulted
    status, body, _ = await crd_client.post(TJ, trainjob("bad", managedBy="someone/else"))
    assert status == 422
    assert body["reason"] == "Invalid"
    assert body["details"]["kind"] == "TrainJob"
    assert body["details"]["group"] == "trainer.kubeflow.org"
    assert body["message"].startswith('TrainJob.trainer.kubeflow.org "bad" is invalid: ')
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.managedBy"]


async def test_transition_rule_with_old_self(crd_client: Client) -> None:
    """An immutable field (self == oldSelf) can be set on create but not changed later."""
    await crd_client.post(TJ, trainjob(activeDeadlineSeconds=10))
    status, body, _ = await crd_client.patch(TJ + "/tj", {"spec": {"activeDeadlineSeconds": 20}},
                                             "application/merge-patch+json")
    assert status == 422, body
    assert body["details"]["causes"][0]["field"] == "spec.activeDeadlineSeconds"


async def test_unknown_fields_are_pruned(crd_client: Client) -> None:
    """Fields the structural schema does not know are dropped on write."""
    body = trainjob()
    body["spec"]["surprise"] = 1
    _, created, _ = await crd_client.post(TJ, body)
    assert "surprise" not in created["spec"]


async def test_custom_resource_status_subresource(crd_client: Client) -> None:
    """Create drops status; /status writes only status and never bumps generation."""
    body = trainjob()
    body["status"] = {"conditions": []}
    _, created, _ = await crd_client.post(TJ, body)
    assert "status" not in created
    created["status"] = {"conditions": [{"type": "Complete", "status": "True", "reason": "Done",
                                         "message": "", "lastTransitionTime":
                                         "2026-01-01T00:00:00Z"}]}
    created["spec"]["suspend"] = True
    status, st, _ = await crd_client.put(TJ + "/tj/status", created)
    assert status == 200, st
    assert st["status"]["conditions"][0]["type"] == "Complete"
    assert "suspend" not in st["spec"] or st["spec"]["suspend"] is not True
    assert st["metadata"]["generation"] == 1
    status, err, _ = await crd_client.post(TJ + "/tj/status", created)
    assert status == 405
    assert err["message"] == ('create is not supported on resources of kind '
                              '"trainjobs.trainer.kubeflow.org"')


async def test_custom_resource_put_needs_resource_version(crd_client: Client) -> None:
    """Custom resources do not allow unconditional updates."""
    _, created, _ = await crd_client.post(TJ, trainjob())
    del created["metadata"]["resourceVersion"]
    status, body, _ = await crd_client.put(TJ + "/tj", created)
    assert status == 422
    assert body["details"]["kind"] == "trainjobs"


async def test_strategic_merge_patch_on_cr_is_415(crd_client: Client) -> None:
    """Custom resources refuse strategic merge patch with the CR handler's 415 text."""
    await crd_client.post(TJ, trainjob())
    status, body, _ = await crd_client.patch(TJ + "/tj", {"metadata": {"labels": {"a": "b"}}},
                                             "application/strategic-merge-patch+json")
    assert status == 415
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "the body of the request was in an unknown format - accepted "
                    "media types include: application/json-patch+json, "
                    "application/merge-patch+json, application/apply-patch+yaml",
                    "reason": "UnsupportedMediaType", "code": 415}


async def test_crd_lifecycle_over_http(client: Client, emu: Emulator) -> None:
    """Creating a CRD serves its resource with Established status; deleting removes both."""
    crd = copy.deepcopy(load_manifests([UPSTREAM / "trainer-latest" /
                                        "trainer.kubeflow.org_trainjobs.yaml"])[0])
    status, created, _ = await client.post(CRDS, crd)
    assert status == 201
    conds = {c["type"]: c["status"] for c in created["status"]["conditions"]}
    assert conds == {"NamesAccepted": "True", "Established": "True"}
    status, _, _ = await client.post(TJ, trainjob())
    assert status == 201
    _, disc, _ = await client.get("/apis/trainer.kubeflow.org/v1alpha1")
    assert "trainjobs" in [r["name"] for r in disc["resources"]]
    await client.delete(CRDS + "/trainjobs.trainer.kubeflow.org")
    await emu.settle()
    status, _, _ = await client.get(TJ)
    assert status == 404
    status, _, _ = await client.get(CRDS + "/trainjobs.trainer.kubeflow.org")
    assert status == 404


async def test_invalid_crd_is_rejected(client: Client) -> None:
    """A CRD whose schema is not structural answers 422."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {
                                      "type": "object",
                                      "properties": {"spec": {"properties": {
                                          "x": {"type": "string"}}}}}}}]}}
    status, body, _ = await client.post(CRDS, crd)
    assert status == 422, body
    assert body["details"]["kind"] == "CustomResourceDefinition"


def test_default_sources_exist() -> None:
    """The fixture's upstream CRD folders are present in this checkout."""
    assert all(Path(p).exists() for p in default_crd_sources())


async def test_field_validation_modes(crd_client: Client) -> None:
    """Unknown fields: Strict answers 400, Warn (default) adds a Warning header, both prune."""
    body = trainjob()
    body["spec"]["surprise"] = 1
    status, err, _ = await crd_client.post(TJ + "?fieldValidation=Strict", body)
    assert status == 400
    assert err["message"] == ('TrainJob in version "v1alpha1" cannot be handled as a TrainJob: '
                              'strict decoding error: unknown field "spec.surprise"')
    status, _, headers = await crd_client.post(TJ, body)
    assert status == 201
    assert headers.getall("Warning") == ['299 - "unknown field \\"spec.surprise\\""']


ACCEPTED = {
    "jobset.x-k8s.io": ("jobsets", {"replicatedJobs": [{"name": "w", "template": {"spec": {
        "template": {"spec": {"restartPolicy": "Never",
                              "containers": [{"name": "c", "image": "x"}]}}}}}]}),
    "trainer.kubeflow.org": ("trainjobs", {"runtimeRef": {"name": "torch-distributed"}}),
}


@pytest.mark.parametrize("folder", sorted(p.name for p in upstream_crds.ALL))
async def test_every_upstream_crd_accepts_and_rejects(folder: str) -> None:
    """Each folder's kinds reject a non-object spec; its main kind accepts a minimal object."""
    crds = load_manifests([UPSTREAM / folder])
    async with serve(crds=[UPSTREAM / folder]) as emu:
        for crd in crds:
            spec = crd["spec"]
            version = next(v["name"] for v in spec["versions"] if v.get("storage"))
            api_version = f"{spec['group']}/{version}"
            kind = spec["names"]["kind"]
            bad = {"apiVersion": api_version, "kind": kind, "metadata": {
                "name": "bad", "namespace": "default"}, "spec": "not-an-object"}
            with pytest.raises(ApiError) as exc:
                emu.objects.put(bad)
            assert exc.value.code == 422
            assert exc.value.details is not None
            assert exc.value.details["causes"][0]["field"] == "spec"
            plural, good_spec = ACCEPTED[spec["group"]]
            if spec["names"]["plural"] == plural:
                good = {"apiVersion": api_version, "kind": kind,
                        "metadata": {"name": "good", "namespace": "default"}, "spec": good_spec}
                stored = emu.objects.put(good)
                assert stored["metadata"]["uid"]
