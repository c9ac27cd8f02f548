"""Error and object responses byte for byte as kube-apiserver sends them.

Some clients keep the raw body (the official client's ``ApiException.body``) and their tests
compare it as text, so the emulator answers with the real server's bytes: Go's reason phrase on
the status line, ``application/json``, compact JSON in Go's key order and escaping, and the
newline Go's ``json.Encoder`` ends every body with. Run with ``CRE_BACKEND=real`` these tests
check the same bytes on a real kube-apiserver.
"""

from __future__ import annotations

import json

import pytest

from cre.testing.apiserver import errors
from cre.testing.apiserver.store import dumps

from .conftest import PODS, Client, pod

pytestmark = pytest.mark.anyio

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


async def test_not_found_bytes(client: Client) -> None:
    """A missing object's 404 is the real server's status line, type and exact body."""
    line, ctype, body = await client.wire("GET", PODS + "/web-0")
    assert (line, ctype) == ("HTTP/1.1 404 Not Found", "application/json")
    assert body == (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                    b'"message":"pods \\"web-0\\" not found","reason":"NotFound",'
                    b'"details":{"name":"web-0","kind":"pods"},"code":404}\n')


async def test_already_exists_bytes(client: Client) -> None:
    """A second create of one name answers the 409 body byte for byte, final newline too."""
    await client.post(PODS, pod("p1"))
    line, ctype, body = await client.wire("POST", PODS, pod("p1"))
    assert (line, ctype) == ("HTTP/1.1 409 Conflict", "application/json")
    assert body == (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                    b'"message":"pods \\"p1\\" already exists","reason":"AlreadyExists",'
                    b'"details":{"name":"p1","kind":"pods"},"code":409}\n')


async def test_invalid_escapes_html_characters(client: Client) -> None:
    """A 422 naming ``a&b`` writes the ampersand as Go does (``\\u0026``) and says
    'Unprocessable Entity' on the status line."""
    line, ctype, body = await client.wire(
        "POST", CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a&b"}})
    assert (line, ctype) == ("HTTP/1.1 422 Unprocessable Entity", "application/json")
    assert body.startswith(b'{"kind":"Status","apiVersion":"v1","metadata":{},'
                           b'"status":"Failure","message":"ConfigMap \\"a\\u0026b\\" is invalid: ')
    assert b"&" not in body
    assert body.endswith(b',"code":422}\n')


async def test_object_bytes_end_with_newline(client: Client) -> None:
    """A successful read is compact JSON with the encoder's newline at the end."""
    await client.post(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "c"}, "data": {"k": "<v> & é"}})
    line, ctype, body = await client.wire("GET", CONFIGMAPS + "/c")
    assert (line, ctype) == ("HTTP/1.1 200 OK", "application/json")
    assert body.endswith(b"}\n") and b"\n" not in body[:-1]
    assert b'"data":{"k":"\\u003cv\\u003e \\u0026 \xc3\xa9"}' in body


async def test_builtin_order_is_go_struct_order(client: Client) -> None:
    """A built-in comes back with kind, apiVersion, then metadata in ObjectMeta's declared order
    with labels sorted, whatever order the client sent."""
    line, _, body = await client.wire("POST", CONFIGMAPS, {
        "data": {"k": "v"}, "metadata": {"labels": {"b": "1", "a": "2"}, "name": "o"},
        "apiVersion": "v1", "kind": "ConfigMap"})
    assert line == "HTTP/1.1 201 Created"
    assert body.startswith(b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"o",'
                           b'"namespace":"default","uid":')
    assert b'"labels":{"a":"2","b":"1"}' in body


async def test_custom_resource_keys_are_sorted(crd_client: Client) -> None:
    """A custom resource is an unstructured map, written with every key sorted."""
    _, _, body = await crd_client.wire("POST", "/apis/cre.dev/v1alpha1/namespaces/default/jobs", {
        "kind": "Job", "apiVersion": "cre.dev/v1alpha1", "metadata": {"name": "j"},
        "spec": {"workload": {"trainJob": {"runtimeRef": {"name": "torch"}}},
                 "timeoutPerJob": "10m"}})
    value = json.loads(body)
    assert value["metadata"]["name"] == "j"
    assert body == json.dumps(value, sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False).encode() + b"\n"


def test_dumps_escapes_like_go() -> None:
    """``dumps`` escapes what Go's encoding/json escapes and writes other UTF-8 as is."""
    assert dumps({"a&b": "<\u2028\u2029>\b\x01é"}) == (
        b'{"a\\u0026b":"\\u003c\\u2028\\u2029\\u003e\\b\\u0001\xc3\xa9"}')


def test_encode_appends_newline() -> None:
    """An ApiError's body is the compact Status followed by exactly one newline."""
    body = errors.bad_request("x < y").encode()
    assert body == (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                    b'"message":"x \\u003c y","reason":"BadRequest","code":400}\n')


PARTIAL = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"


async def test_partial_object_metadata_list(client: Client) -> None:
    """A list asked for as PartialObjectMetadataList holds each item's metadata alone, each
    item typed PartialObjectMetadata (what metadata informers read)."""
    await client.post(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "m", "labels": {"a": "b"}},
                                   "data": {"k": "v"}})
    status, body, _ = await client.get(CONFIGMAPS, headers={"Accept": PARTIAL_LIST})
    assert status == 200
    assert (body["kind"], body["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert "resourceVersion" in body["metadata"]
    (item,) = body["items"]
    assert set(item) == {"kind", "apiVersion", "metadata"}
    assert (item["kind"], item["metadata"]["labels"]) == ("PartialObjectMetadata", {"a": "b"})


async def test_partial_object_metadata_one(client: Client) -> None:
    """One object asked for as PartialObjectMetadata is its metadata alone."""
    await client.post(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "m"}, "data": {"k": "v"}})
    status, body, _ = await client.get(CONFIGMAPS + "/m", headers={"Accept": PARTIAL})
    assert status == 200
    assert set(body) == {"kind", "apiVersion", "metadata"}
    assert (body["kind"], body["metadata"]["name"]) == ("PartialObjectMetadata", "m")


async def test_partial_form_mismatch_is_an_indented_406(client: Client) -> None:
    """The single form of a list is refused with kube-apiserver's 406, written indented and
    without a final newline (it bypasses the serializer), naming the internal list type."""
    async with client.session.get(client.base + CONFIGMAPS,
                                  headers={"Accept": PARTIAL}) as resp:
        raw = await resp.read()
        assert (resp.status, resp.reason, resp.headers["Content-Type"]) == (
            406, "Not Acceptable", "application/json")
    assert raw == (
        b'{\n  "kind": "Status",\n  "apiVersion": "v1",\n  "metadata": {},\n'
        b'  "status": "Failure",\n  "message": "you requested PartialObjectMetadata, but the '
        b'requested object is a list (*core.ConfigMapList)",\n  "reason": "NotAcceptable",\n'
        b'  "code": 406\n}')
