"""Create, read, update and the status subresource, checked against the API conventions."""

from __future__ import annotations

import pytest

from cre.testing.apiserver import Emulator

from .conftest import PODS, Client, pod

pytestmark = pytest.mark.anyio


async def test_create_sets_server_fields(client: Client) -> None:
    """POST answers 201 with uid, creationTimestamp, generation and a fresh resourceVersion."""
    status, body, _ = await client.post(PODS, pod("p1"))
    assert status == 201
    meta = body["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert meta["generation"] == 1
    assert int(meta["resourceVersion"]) > 0
    assert body["status"]["phase"] == "Pending"


async def test_resource_version_is_global_and_monotonic(client: Client) -> None:
    """Every write across resource types takes the next revision of one counter."""
    _, a, _ = await client.post(PODS, pod("a"))
    _, cm, _ = await client.post("/api/v1/namespaces/default/configmaps",
                                 {"metadata": {"name": "c"}, "data": {"k": "v"}})
    _, b, _ = await client.post(PODS, pod("b"))
    rvs = [int(x["metadata"]["resourceVersion"]) for x in (a, cm, b)]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3
    assert "generation" not in cm["metadata"]


async def test_not_found_status_body(client: Client) -> None:
    """A missing object answers the exact 404 Status of the real server."""
    status, body, _ = await client.get(PODS + "/web-0")
    assert status == 404
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": 'pods "web-0" not found', "reason": "NotFound",
                    "details": {"name": "web-0", "kind": "pods"}, "code": 404}


async def test_already_exists(client: Client) -> None:
    """Creating an existing name answers 409 AlreadyExists."""
    await client.post(PODS, pod("p1"))
    status, body, _ = await client.post(PODS, pod("p1"))
    assert status == 409
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'pods "p1" already exists'


async def test_missing_namespace_is_404(client: Client) -> None:
    """Creating into a namespace that does not exist answers 404 for the namespace."""
    status, body, _ = await client.post("/api/v1/namespaces/nope/pods", pod("p1"))
    assert status == 404
    assert body["message"] == 'namespaces "nope" not found'


async def test_generate_name(client: Client) -> None:
    """generateName appends five characters from the server's alphabet."""
    body = pod("")
    body["metadata"] = {"generateName": "worker-"}
    status, created, _ = await client.post(PODS, body)
    assert status == 201
    name = created["metadata"]["name"]
    assert name.startswith("worker-") and len(name) == len("worker-") + 5
    assert set(name[7:]) <= set("bcdfghjklmnpqrstvwxz2456789")


async def test_put_with_stale_resource_version_conflicts(client: Client) -> None:
    """A PUT carrying an old resourceVersion answers 409 Conflict with the optimistic-lock text."""
    _, created, _ = await client.post("/api/v1/namespaces/default/configmaps",
                                      {"metadata": {"name": "c"}, "data": {"k": "1"}})
    created["data"]["k"] = "2"
    status, _, _ = await client.put("/api/v1/namespaces/default/configmaps/c", created)
    assert status == 200
    created["data"]["k"] = "3"
    status, body, _ = await client.put("/api/v1/namespaces/default/configmaps/c", created)
    assert status == 409
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on configmaps "c": the object has been modified; please '
        "apply your changes to the latest version and try again")


async def test_lease_requires_resource_version_and_allows_create_on_put(client: Client) -> None:
    """Leases: PUT may create, but updating without resourceVersion is a 422."""
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases/l1"
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "l1"}, "spec": {"holderIdentity": "a"}}
    status, _, _ = await client.put(path, lease)
    assert status == 201
    status, body, _ = await client.put(path, lease)
    assert status == 422
    assert body["message"] == ('leases.coordination.k8s.io "l1" is invalid: '
                               "metadata.resourceVersion: Invalid value: 0: must be specified "
                               "for an update")


async def test_noop_update_keeps_resource_version(client: Client) -> None:
    """Re-sending the stored object changes nothing and keeps the revision."""
    _, created, _ = await client.post("/api/v1/namespaces/default/configmaps",
                                      {"metadata": {"name": "c"}, "data": {"k": "1"}})
    status, again, _ = await client.put("/api/v1/namespaces/default/configmaps/c", created)
    assert status == 200
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_status_subresource_split(client: Client) -> None:
    """The main endpoint ignores status; /status ignores spec but (for pods) keeps labels."""
    _, created, _ = await client.post(PODS, pod("p1"))
    created["status"] = {"phase": "Running"}
    created["spec"]["activeDeadlineSeconds"] = 5
    _, main, _ = await client.put(PODS + "/p1", created)
    assert main["status"]["phase"] == "Pending"
    assert main["metadata"]["generation"] == 2
    main["status"] = {"phase": "Running"}
    main["spec"]["activeDeadlineSeconds"] = 9
    main["metadata"]["labels"] = {"x": "y"}
    status, st, _ = await client.put(PODS + "/p1/status", main)
    assert status == 200
    assert st["status"]["phase"] == "Running"
    assert st["spec"]["activeDeadlineSeconds"] == 5
    assert st["metadata"]["labels"] == {"x": "y"}
    assert st["metadata"]["generation"] == 2


async def test_generation_ignores_metadata_changes(client: Client) -> None:
    """Label changes do not bump generation; spec changes do."""
    _, created, _ = await client.post("/apis/batch/v1/namespaces/default/jobs", {
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "x"}]}}}})
    assert created["metadata"]["generation"] == 1
    status, patched, _ = await client.patch("/apis/batch/v1/namespaces/default/jobs/j",
                                            {"metadata": {"labels": {"a": "b"}}},
                                            "application/merge-patch+json")
    assert status == 200, patched
    assert patched["metadata"]["generation"] == 1
    _, patched, _ = await client.patch("/apis/batch/v1/namespaces/default/jobs/j",
                                       {"spec": {"parallelism": 3}},
                                       "application/merge-patch+json")
    assert patched["metadata"]["generation"] == 2


async def test_dry_run_writes_nothing(client: Client, emu: Emulator) -> None:
    """dryRun=All returns the would-be object without a resourceVersion and stores nothing."""
    rv = emu.resource_version
    status, body, _ = await client.post(PODS + "?dryRun=All", pod("p1"))
    assert status == 201
    assert body["metadata"]["uid"] and not body["metadata"].get("resourceVersion")
    assert emu.resource_version == rv
    assert emu.objects.get("v1", "Pod", "p1", "default") is None
    status, body, _ = await client.post(PODS + "?dryRun=Some", pod("p1"))
    assert status == 422
    assert 'supported values: "All"' in body["message"]


async def test_name_mismatch_is_400(client: Client) -> None:
    """A PUT whose body names another object answers 400 BadRequest."""
    await client.post(PODS, pod("p1"))
    status, body, _ = await client.put(PODS + "/p1", pod("p2"))
    assert status == 400
    assert body["message"] == ("the name of the object (p2) does not match the name on the URL "
                               "(p1)")


async def test_unknown_resource_status(client: Client) -> None:
    """An unserved resource under a served group answers the generic NotFound Status."""
    status, body, _ = await client.get("/api/v1/namespaces/default/widgets")
    assert status == 404
    assert body["message"] == "the server could not find the requested resource"
    status, text, _ = await client.get("/apis/nope.example.com/v1/things")
    assert status == 404 and "404 page not found" in text


async def test_injected_clock_sets_timestamps(client: Client, emu: Emulator) -> None:
    """creationTimestamp comes from the emulator's clock, which tests can set."""
    from datetime import UTC, datetime

    emu.clock.set(datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC))
    _, created, _ = await client.post(PODS, pod("p"))
    assert created["metadata"]["creationTimestamp"] == "2030-01-02T03:04:05Z"
    emu.clock.advance(60)
    _, state, _ = await client.get("/_emulator/state")
    assert state["now"] == "2030-01-02T03:05:05Z"


async def test_bad_label_values_and_keys_are_422_with_the_real_causes(client: Client) -> None:
    """A label value over 63 characters or with a space, and a key with two slashes, are
    refused with apimachinery's wording on ``metadata.labels``; valid ones pass."""
    long = "v" * 64
    status, body, _ = await client.post(PODS, pod("bad", labels={"a": long, "b": "x y"}))
    assert status == 422 and body["reason"] == "Invalid"
    # kube-apiserver walks the labels in Go map order (random): compare the causes as a set
    causes = sorted((c["reason"], c["field"], c["message"]) for c in body["details"]["causes"])
    assert causes == [
        ("FieldValueInvalid", "metadata.labels",
         f'Invalid value: "{long}": must be no more than 63 characters'),
        ("FieldValueInvalid", "metadata.labels",
         'Invalid value: "x y": a valid label must be an empty string or consist of alphanumeric '
         "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
         "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
         "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
    ]
    assert body["message"].startswith('Pod "bad" is invalid: [metadata.labels: Invalid value: ')
    status, body, _ = await client.post(PODS, pod("bad", labels={"a/b/c": "v", "Ex.com/n": ""}))
    assert status == 422
    fields = sorted(c["message"].split(":")[1].strip() for c in body["details"]["causes"])
    assert fields == ['"Ex.com/n"', '"a/b/c"']
    ok = {"app.kubernetes.io/name": "x", "empty": "", "v": "A-b_c.9" * 9}
    assert (await client.post(PODS, pod("good", labels=ok)))[0] == 201


async def test_annotations_over_256_kib_in_total_are_422(client: Client) -> None:
    """Annotations may hold 262144 bytes of keys plus values in total, not one more."""
    path = "/api/v1/namespaces/default/configmaps"
    fits = {"metadata": {"name": "fits", "annotations": {"a": "x" * (256 * 1024 - 1)}}}
    assert (await client.post(path, fits))[0] == 201
    over = {"metadata": {"name": "over", "annotations": {"a": "x" * (128 * 1024),
                                                         "b": "y" * (128 * 1024)}}}
    status, body, _ = await client.post(path, over)
    assert status == 422
    assert body["message"] == ('ConfigMap "over" is invalid: metadata.annotations: Too long: '
                               "may not be more than 262144 bytes")
    assert body["details"]["causes"] == [{"reason": "FieldValueTooLong",
                                          "field": "metadata.annotations",
                                          "message": "Too long: may not be more than 262144 "
                                                     "bytes"}]


@pytest.mark.parametrize(("rv", "status"), [("v1", 201), ("0", 201), ("", 201), ("-3", 201),
                                             ("99999999999999999999", 201), ("42", 500)])
async def test_create_ignores_a_resource_version_that_is_not_a_number(
        client: Client, rv: str, status: int) -> None:
    """Only a resourceVersion that parses as a non-zero uint64 fails a create (500, as etcd3's
    store); anything else is dropped and the object gets the server's revision."""
    body = pod("p")
    body["metadata"]["resourceVersion"] = rv
    got, obj, _ = await client.post(PODS, body)
    assert got == status
    if status == 201:
        assert obj["metadata"]["resourceVersion"].isdigit()
        assert obj["metadata"]["resourceVersion"] != "0"
    else:
        assert obj["message"] == "resourceVersion should not be set on objects to be created"
