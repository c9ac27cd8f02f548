"""Protobuf request bodies (what kubectl's typed generators send), decoded into JSON.

The bodies are built here with a small encoder from the proto field numbers, so the decoder is
checked against the wire format itself, not against its own table; kubectl's real bodies are
covered by the ``kubectl_create_typed`` differential script and the kubectl tests.
"""

from __future__ import annotations

import struct

import pytest

from cre.testing.apiserver import _protobuf
from cre.testing.apiserver._protobuf import ProtobufError, UnknownKind, decode

from .conftest import Client


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def vint(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def ld(number: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def entry(number: int, key: str, value: bytes | str) -> bytes:
    return ld(number, ld(1, key) + ld(2, value))


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return _protobuf.MAGIC + ld(1, ld(1, api_version) + ld(2, kind)) + ld(2, raw)


META = ld(1, ld(1, "cm") + ld(3, "") + ld(8, b"") + entry(11, "app", "x"))


def test_configmap_with_maps_pointer_and_omitempty_fields() -> None:
    body = envelope("v1", "ConfigMap", META + entry(2, "k", "v") + entry(3, "b", b"\x00\xff")
                    + vint(4, 0))
    assert decode(body) == {
        "kind": "ConfigMap", "apiVersion": "v1",
        # namespace "" (omitempty) dropped; the zero time (an empty message) is null
        "metadata": {"name": "cm", "creationTimestamp": None, "labels": {"app": "x"}},
        "data": {"k": "v"}, "binaryData": {"b": "AP8="},
        "immutable": False,  # a pointer on the wire is set, even to false
    }


def test_deployment_ints_quantities_int_or_string_and_negative_numbers() -> None:
    container = (ld(1, "main") + ld(2, "nginx")
                 + ld(8, entry(1, "cpu", ld(1, "500m")))  # resources.limits
                 + ld(6, vint(3, 80)))  # ports[0].containerPort
    spec = (vint(1, 2)  # replicas
            + ld(4, ld(1, "RollingUpdate") + ld(2, ld(1, vint(1, 1) + ld(3, "25%"))
                                    + ld(2, vint(1, 0) + vint(2, 1))))
            + ld(3, ld(1, META) + ld(2, ld(2, container) + vint(4, (1 << 64) - 5))))
    obj = decode(envelope("apps/v1", "Deployment", META + ld(2, spec)))
    assert obj["spec"]["replicas"] == 2
    assert obj["spec"]["strategy"]["type"] == "RollingUpdate"
    assert obj["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": "25%", "maxSurge": 1}
    pod = obj["spec"]["template"]["spec"]
    assert pod["containers"] == [{"name": "main", "image": "nginx",
                                  "resources": {"limits": {"cpu": "500m"}},
                                  "ports": [{"containerPort": 80}]}]
    assert pod["terminationGracePeriodSeconds"] == -5  # int64 two's complement


def test_inline_fields_join_their_parent_and_times_format() -> None:
    volume = ld(1, "data") + ld(2, ld(1, ld(1, "/srv")))  # VolumeSource.hostPath.path, inline
    seconds = 1_700_000_000
    stamped = ld(1, ld(1, "p") + ld(9, vint(1, seconds) + vint(2, 5)))
    pod = decode(envelope("v1", "Pod", stamped + ld(2, ld(1, volume))))
    assert pod["spec"]["volumes"] == [{"name": "data", "hostPath": {"path": "/srv"}}]
    assert pod["metadata"]["deletionTimestamp"] == "2023-11-14T22:13:20Z"


def test_double_and_packed_repeated_scalars_decode() -> None:
    assert _protobuf._repeated("int32", 2, _varint(1) + _varint(300)) == [1, 300]
    raw = int.from_bytes(struct.pack("<d", 0.5), "little")
    assert _protobuf._scalar("double", 1, raw) == 0.5
    assert _protobuf._go_duration(90_000_000_000) == "1m30s"
    assert _protobuf._go_duration(1_500_000) == "1.5ms"
    assert _protobuf._go_duration(3_600_000_000_000) == "1h0m0s"


@pytest.mark.parametrize(("body", "error", "words"), [
    (b"{}", ProtobufError, "magic"),
    (envelope("example.com/v1", "Widget", b""), UnknownKind, "'Widget'"),
    (_protobuf.MAGIC + ld(1, ld(1, "v1") + ld(2, "ConfigMap")) + b"\x12\x05ab", ProtobufError,
     "past the end"),
    (envelope("v1", "ConfigMap", b"\x0b"), ProtobufError, "wire type 3"),
    (envelope("v1", "ConfigMap", ld(1, vint(1, 7))), ProtobufError, "string sent as a number"),
])
def test_malformed_and_unknown_bodies_say_what_is_wrong(body: bytes, error: type[Exception],
                                                        words: str) -> None:
    with pytest.raises(error, match=words):
        decode(body)


@pytest.mark.anyio
async def test_protobuf_create_over_http(client: Client) -> None:
    """201 with the decoded object; another kind or bad bytes: 400 in kube-apiserver's words."""
    path = "/api/v1/namespaces/default/configmaps"
    status, body, _ = await client.post(path, None, content_type=_protobuf.MEDIA_TYPE,
                                        raw=envelope("v1", "ConfigMap", META + entry(2, "k", "v")))
    assert status == 201, body
    assert (body["metadata"]["name"], body["data"]) == ("cm", {"k": "v"})
    status, body, _ = await client.post(path, None, content_type=_protobuf.MEDIA_TYPE,
                                        raw=_protobuf.MAGIC + b"\x0a\x7f")
    assert status == 400, body
    assert body["message"].startswith(
        "the object provided is unrecognized (must be of type ConfigMap): ")
    status, body, _ = await client.post(path, None, content_type=_protobuf.MEDIA_TYPE,
                                        raw=envelope("example.com/v1", "Widget", b""))
    assert (status, body["message"]) == (400, (
        'Widget in version "v1" cannot be handled as a ConfigMap: no kind "Widget" is '
        'registered for version "example.com/v1" in scheme "pkg/runtime/scheme.go:110"'))
    status, body, _ = await client.post(path, None, content_type=_protobuf.MEDIA_TYPE,
                                        raw=envelope("v1", "Secret", META))
    assert (status, body["message"]) == (400, (
        'Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret) to '
        "(core.ConfigMap): unknown conversion"))


@pytest.mark.anyio
@pytest.mark.emulator_only("kube-apiserver 1.34 closes the connection on a custom resource's "
                           "protobuf body instead of answering")
async def test_protobuf_for_a_custom_resource_is_415(crd_client: Client) -> None:
    status, body, _ = await crd_client.post(
        "/apis/cre.dev/v1alpha1/namespaces/default/jobs", None,
        content_type=_protobuf.MEDIA_TYPE, raw=envelope("v1", "ConfigMap", META))
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")
