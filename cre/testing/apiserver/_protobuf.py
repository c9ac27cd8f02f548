"""Request bodies in Kubernetes' protobuf encoding, decoded into the JSON a client would send.

kube-apiserver accepts ``application/vnd.kubernetes.protobuf`` bodies, and kubectl's typed
generators (``kubectl create configmap|secret|namespace|deployment|job|token ...``) send them.
The wire form is the 4-byte magic ``k8s\\0`` and a ``runtime.Unknown`` envelope whose
``typeMeta`` names the apiVersion and kind and whose ``raw`` bytes are the object's message.
:func:`decode` turns that into the object's JSON, built the way Go's encoder would write the
same typed object (the client's JSON body for it), so everything after decoding (defaulting,
validation, storage, answers) is the JSON path's.

The messages' field numbers, JSON names and Go field shapes come from
``protofields.json``, generated from the release's published ``generated.proto`` files and Go
struct tags (``tools/protofields/gen.py``): a pointer field present on the wire is set even to
a zero value; a value field's zero is left out when its tag says ``omitempty``; an inline field
joins its parent. Well-known types decode to their JSON forms: ``Time`` (RFC 3339, null for
Go's zero time), ``MicroTime``, ``Duration``, ``Quantity``, ``IntOrString``, ``RawExtension``
and ``FieldsV1`` (embedded JSON). Unknown kinds and malformed bytes raise :class:`ProtobufError`
with what is wrong; the caller answers 415 or 400 as kube-apiserver does.
"""

from __future__ import annotations

import base64
import functools
import json
import struct
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

MAGIC = b"k8s\x00"
MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
_TABLE = Path(__file__).with_name("protofields.json")
_META = "k8s.io.apimachinery.pkg.apis.meta.v1."
_GO_ZERO_TIME = -62135596800  # time.Time{}.Unix(): how Go writes a zero metav1.Time
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_INTS = {"int32": 32, "int64": 64, "uint32": 0, "uint64": 0}


class ProtobufError(ValueError):
    """The body is not a decodable Kubernetes protobuf object; the message says why."""


class UnknownKind(ProtobufError):
    """The envelope names a kind with no protobuf form here (a custom resource, say)."""

    def __init__(self, api_version: str, kind: str) -> None:
        super().__init__(f"no kind {kind!r} is registered for version {api_version!r}")
        self.api_version = api_version
        self.kind = kind


@functools.cache
def _table() -> dict[str, Any]:
    table: dict[str, Any] = json.loads(_TABLE.read_text(encoding="utf-8"))
    return table


def message_for(api_version: str, kind: str) -> str | None:
    """The protobuf message of ``kind`` in ``api_version``, if the table has it."""
    package = _table()["groups"].get(api_version)
    types = _table()["types"]
    for name in (f"{package}.{kind}" if package else None, _META + kind):
        if name in types:  # meta/v1 kinds (DeleteOptions) travel under any group's version
            return name
    return None


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint longer than 10 bytes")


def _fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) in wire order."""
    out: list[tuple[int, int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = int.from_bytes(buf[pos:pos + 8], "little"), pos + 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise ProtobufError(f"field {number}: length {length} past the end")
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        else:
            raise ProtobufError(f"field {number}: unsupported wire type {wire}")
        if number == 0 or pos > len(buf):
            raise ProtobufError("malformed field key or truncated value")
        out.append((number, wire, value))
    return out


def _signed(value: int, bits: int) -> int:
    if bits and value >= 1 << (bits - 1):
        value -= 1 << 64 if value >= 1 << 63 else 1 << bits
    return value


def _scalar(type_: str, wire: int, value: int | bytes) -> Any:
    if type_ in ("string", "bytes"):
        if not isinstance(value, bytes):
            raise ProtobufError(f"a {type_} sent as a number (wire type {wire})")
        if type_ == "bytes":
            return base64.b64encode(value).decode("ascii")
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtobufError(f"a string that is not UTF-8: {exc}") from None
    if isinstance(value, bytes):
        raise ProtobufError(f"a {type_} sent as bytes")
    if type_ == "bool":
        return value != 0
    if type_ in _INTS:
        return _signed(value, _INTS[type_])
    if type_ == "double" and wire == 1:
        return struct.unpack("<d", value.to_bytes(8, "little"))[0]
    if type_ == "float" and wire == 5:
        return struct.unpack("<f", value.to_bytes(4, "little"))[0]
    raise ProtobufError(f"unsupported scalar {type_} (wire type {wire})")


def _go_duration(nanos: int) -> str:
    """Go's ``time.Duration.String`` for the JSON of a metav1.Duration."""
    if nanos == 0:
        return "0s"
    sign, n = ("-", -nanos) if nanos < 0 else ("", nanos)
    if n < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if n >= size:
                return f"{sign}{_trim(n / size)}{unit}"
    hours, rest = divmod(n, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    seconds = _trim(rest / 1e9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}"
    return f"{sign}{minutes}m{seconds}" if minutes else f"{sign}{seconds}"


def _trim(number: float) -> str:
    return f"{number:.9f}".rstrip("0").rstrip(".")


def _well_known(type_: str, fields: dict[int, Any]) -> tuple[bool, Any]:
    """(True, JSON) for the types whose JSON is not their message's fields."""
    short = type_.rsplit(".", 1)[-1]
    if type_ in (_META + "Time", _META + "MicroTime"):
        # Go writes a zero time as an empty message; Time keeps whole seconds only.
        seconds = _signed(int(fields.get(1, 0)), 64)
        nanos = _signed(int(fields.get(2, 0)), 32) if short == "MicroTime" else 0
        if not fields or (seconds == _GO_ZERO_TIME and not nanos):
            return True, None
        moment = _EPOCH + timedelta(seconds=seconds, microseconds=nanos // 1000)
        pattern = "%Y-%m-%dT%H:%M:%S.%fZ" if short == "MicroTime" else "%Y-%m-%dT%H:%M:%SZ"
        return True, moment.strftime(pattern)
    if type_ == _META + "Duration":
        return True, _go_duration(_signed(int(fields.get(1, 0)), 64))
    if type_ == "k8s.io.apimachinery.pkg.api.resource.Quantity":
        return True, bytes(fields.get(1, b"")).decode("utf-8")
    if type_ == "k8s.io.apimachinery.pkg.util.intstr.IntOrString":
        if int(fields.get(1, 0)) == 1:
            return True, bytes(fields.get(3, b"")).decode("utf-8")
        return True, _signed(int(fields.get(2, 0)), 32)
    if type_ in ("k8s.io.apimachinery.pkg.runtime.RawExtension", _META + "FieldsV1"):
        raw = bytes(fields.get(1, b""))
        try:
            return True, json.loads(raw) if raw else None
        except ValueError as exc:
            raise ProtobufError(f"{short}: embedded JSON does not parse: {exc}") from None
    return False, None


def _message(type_: str, buf: bytes) -> Any:
    spec = _table()["types"].get(type_)
    if spec is None:
        raise ProtobufError(f"no protobuf description of {type_}")
    wire_fields = _fields(buf)
    known, value = _well_known(type_, {n: v for n, _w, v in wire_fields})
    if known:
        return value
    by_number = {f[0]: f for f in spec}
    out: dict[str, Any] = {}
    for number, wire, raw in wire_fields:
        field = by_number.get(number)
        if field is None:
            continue  # a newer client's field: Go's decoder skips it too
        _n, name, ftype, label, flags = field
        if label == "map":
            key_type, value_type = ftype[4:-1].split(",")
            assert isinstance(raw, bytes)
            entry = {n: (w, v) for n, w, v in _fields(raw)}
            key = _value(key_type, *entry.get(1, (2, b"")))
            out.setdefault(name, {})[key] = _value(value_type, *entry.get(2, (2, b"")))
        elif label == "repeated":
            out.setdefault(name, []).extend(_repeated(ftype, wire, raw))
        else:
            decoded = _value(ftype, wire, raw)
            if "i" in flags and isinstance(decoded, dict):
                out.update(decoded)
            elif "p" in flags or "o" not in flags or decoded not in ("", 0, False):
                out[name] = decoded
    return out


def _repeated(type_: str, wire: int, raw: int | bytes) -> list[Any]:
    if wire == 2 and type_ not in ("string", "bytes") and "." not in type_:
        assert isinstance(raw, bytes)  # a packed run of scalars
        values: list[Any] = []
        pos = 0
        while pos < len(raw):
            item, pos = _varint(raw, pos)
            values.append(_scalar(type_, 0, item))
        return values
    return [_value(type_, wire, raw)]


def _value(type_: str, wire: int, raw: int | bytes) -> Any:
    if "." in type_:
        if not isinstance(raw, bytes):
            raise ProtobufError(f"{type_} sent as a number")
        return _message(type_, raw)
    return _scalar(type_, wire, raw)


def decode(body: bytes) -> dict[str, Any]:
    """The object a ``k8s\\0``-prefixed ``runtime.Unknown`` body carries, as JSON."""
    if not body.startswith(MAGIC):
        raise ProtobufError("the body does not start with the Kubernetes protobuf magic k8s\\0")
    envelope = {n: v for n, _w, v in _fields(body[len(MAGIC):])}
    type_meta = {n: v for n, _w, v in _fields(bytes(envelope.get(1, b"")))}
    api_version = bytes(type_meta.get(1, b"")).decode("utf-8")
    kind = bytes(type_meta.get(2, b"")).decode("utf-8")
    if bytes(envelope.get(3, b"")):
        raise ProtobufError("content encodings are not supported")
    message = message_for(api_version, kind)
    if message is None:
        raise UnknownKind(api_version, kind)
    obj = _message(message, bytes(envelope.get(2, b"")))
    assert isinstance(obj, dict)
    return {"kind": kind, "apiVersion": api_version, **obj}
