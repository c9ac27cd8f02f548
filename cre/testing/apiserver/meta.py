"""Object metadata rules shared by every write: names, timestamps, generation, owner refs.

The registry strategies of the real server wipe and restore server-owned metadata, generate
names, validate names and owner references, and decide when ``metadata.generation`` moves.
These helpers keep those rules in one place for :mod:`.objects`.
"""

from __future__ import annotations

import math
import random
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ._labels import validate_annotations, validate_labels
from .errors import StatusCause

Obj = dict[str, Any]
Clock = Callable[[], datetime]

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
LABEL_NAMED_KINDS = frozenset({"Namespace", "Service"})
NO_GENERATION_KINDS = frozenset(
    {"ConfigMap", "Secret", "ServiceAccount", "Event", "Lease", "Namespace", "Node", "Service"}
)


_RFC3339_LAST: list[Any] = [None, ""]  # (whole second, text): writes share their second


def rfc3339(t: datetime) -> str:
    second = math.floor(t.timestamp())
    if _RFC3339_LAST[0] != second:
        _RFC3339_LAST[:] = [second, t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")]
    return str(_RFC3339_LAST[1])


def micro_time(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def generate_name(prefix: str, rng: random.Random) -> str:
    return prefix[:58] + "".join(rng.choice(_NAME_ALPHABET) for _ in range(5))


class NameStreams:
    """Seeded uids and generateName suffixes, one stream per (resource, namespace, name/prefix).

    A real API server draws them at random; the emulator must be reproducible, and a draw that
    depends on every earlier one would move whenever anything unrelated is created first (one
    more CRD installed shifted every generated pod name in the goldens). Here the n-th draw for a
    key depends only on the seed, the key and n.
    """

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._used: dict[tuple[str, str, str, str], int] = {}

    def _stream(self, *key: str) -> random.Random:
        k = (key[0], key[1], key[2], key[3])
        n = self._used.get(k, 0)
        self._used[k] = n + 1
        return random.Random("/".join((str(self._seed), *k, str(n))))

    def next(self, bucket: tuple[str, str], namespace: str | None, prefix: str) -> str:
        """The next generated name for ``prefix``."""
        return generate_name(prefix, self._stream("name", "/".join(bucket), namespace or "",
                                                  prefix))

    def uid(self, bucket: tuple[str, str], namespace: str | None, name: str) -> str:
        """A fresh uid for an object created under ``name`` (its generateName when it has one)."""
        rng = self._stream("uid", "/".join(bucket), namespace or "", name)
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def quote(value: Any) -> str:
    """Go-style rendering of a value inside a field error (v1.34+ form)."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    import json

    return json.dumps(value, separators=(",", ":"))


def validate_name(name: str, kind: str, *, field: str = "metadata.name") -> list[StatusCause]:
    if kind in LABEL_NAMED_KINDS:
        if len(name) > 63 or not _LABEL.match(name):
            msg = f"Invalid value: {quote(name)}: {_LABEL_MSG}"
            if len(name) > 63:
                msg = f"Invalid value: {quote(name)}: must be no more than 63 characters"
            return [StatusCause("FieldValueInvalid", msg, field)]
        return []
    if len(name) > 253:
        return [
            StatusCause(
                "FieldValueInvalid",
                f"Invalid value: {quote(name)}: must be no more than 253 characters",
                field,
            )
        ]
    if kind != "Event" and not _SUBDOMAIN.match(name):
        return [StatusCause("FieldValueInvalid", f"Invalid value: {quote(name)}: {_SUBDOMAIN_MSG}",
                            field)]
    return []


def validate_metadata(obj: Obj, *, namespaced: bool) -> list[StatusCause]:
    """Generic ObjectMeta validation (``k8s.io/apimachinery/pkg/api/validation/objectmeta.go``)."""
    meta = obj.get("metadata") or {}
    causes: list[StatusCause] = []
    name = meta.get("name") or ""
    kind = str(obj.get("kind", ""))
    if not name:
        causes.append(
            StatusCause(
                "FieldValueRequired",
                "Required value: name or generateName is required",
                "metadata.name",
            )
        )
    else:
        causes.extend(validate_name(name, kind))
    if namespaced and not meta.get("namespace"):
        causes.append(StatusCause("FieldValueRequired", "Required value", "metadata.namespace"))
    if not namespaced and meta.get("namespace"):
        causes.append(
            StatusCause(
                "FieldValueForbidden", "Forbidden: not allowed on this type", "metadata.namespace"
            )
        )
    causes.extend(validate_labels(meta.get("labels")))
    causes.extend(validate_annotations(meta.get("annotations")))
    controllers: list[str] = []
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        path = f"metadata.ownerReferences[{i}]"
        if not ref.get("apiVersion"):
            causes.append(
                StatusCause("FieldValueInvalid", 'Invalid value: "": version must not be empty',
                            f"{path}.apiVersion")
            )
        for f in ("kind", "name", "uid"):
            if not ref.get(f):
                causes.append(
                    StatusCause("FieldValueInvalid", f'Invalid value: "": {f} must not be empty',
                                f"{path}.{f}")
                )
        if ref.get("controller"):
            controllers.append(f"{ref.get('kind')}/{ref.get('name')}")
    if len(controllers) > 1:
        causes.append(
            StatusCause(
                "FieldValueInvalid",
                "Invalid value: []: Only one reference can have Controller set to true. Found "
                f'"true" in references for {controllers[0]} and {controllers[1]}',
                "metadata.ownerReferences",
            )
        )
    for field in ("labels", "annotations"):
        value = meta.get(field)
        if value is not None and not isinstance(value, dict):
            causes.append(
                StatusCause("FieldValueTypeInvalid", "Invalid value: must be a map",
                            f"metadata.{field}")
            )
    return causes


def spec_changed(old: Obj, new: Obj, *, ignore_status: bool) -> bool:
    """Whether anything outside ``metadata`` (and ``status`` when it has its own endpoint) moved."""
    skip = {"metadata", "apiVersion", "kind"}
    if ignore_status:
        skip.add("status")
    keys = (set(old) | set(new)) - skip
    return any(old.get(k) != new.get(k) for k in keys)


def dedup_owner_refs(meta: dict[str, Any]) -> None:
    refs = meta.get("ownerReferences")
    if not refs:
        return
    seen: set[str] = set()
    kept = []
    for ref in refs:
        uid = ref.get("uid", "")
        if uid in seen:
            continue
        seen.add(uid)
        kept.append(ref)
    meta["ownerReferences"] = kept
