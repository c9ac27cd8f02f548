"""Kubernetes metadata, references and conditions shared by every CRE kind.

Only the metadata fields CRE reads or writes are modelled. Servers add more (``managedFields``,
``selfLink``...): the converter ignores unknown *metadata* keys instead of rejecting them, while
unknown keys in ``spec`` and ``status`` are errors. Timestamps are timezone-aware ``datetime``s
in the model and RFC 3339 strings with a ``Z`` suffix on the wire.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import UTC, datetime

import attrs

from cre.api.fields import c

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def format_time(value: datetime) -> str:
    """An aware datetime as RFC 3339 in UTC with ``Z`` (fractional seconds only when present)."""
    if value.tzinfo is None:
        raise ValueError(f"timestamp {value.isoformat()} has no timezone")
    utc = value.astimezone(UTC)
    spec = "microseconds" if utc.microsecond else "seconds"
    return utc.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def parse_time(value: str) -> datetime:
    """An RFC 3339 string (``Z`` or an offset) as an aware UTC datetime."""
    if not isinstance(value, str):
        raise TypeError(f"expected an RFC 3339 timestamp string, got {type(value).__name__}")
    parsed = datetime.fromisoformat(value.replace("z", "Z"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no timezone (use 'Z' or an offset)")
    return parsed.astimezone(UTC)


@attrs.frozen(kw_only=True)
class OwnerReference:
    """A controller or owner of an object (garbage collection)."""

    api_version: str = attrs.field(metadata=c(min_length=1))
    kind: str = attrs.field(metadata=c(min_length=1))
    name: str = attrs.field(metadata=c(min_length=1))
    uid: str = attrs.field(metadata=c(min_length=1))
    controller: bool | None = None
    block_owner_deletion: bool | None = None


@attrs.frozen(kw_only=True)
class ObjectMeta:
    """The subset of ``metadata`` CRE uses; other server-set keys are ignored on input."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    labels: Mapping[str, str] = attrs.field(factory=dict)
    annotations: Mapping[str, str] = attrs.field(factory=dict)
    finalizers: tuple[str, ...] = ()
    owner_references: tuple[OwnerReference, ...] = ()


class ConditionStatus(enum.StrEnum):
    """The status of a condition, as Kubernetes spells it."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


@attrs.frozen(kw_only=True)
class Condition:
    """A ``metav1.Condition``. ``type`` and ``reason`` hold the values of the enums in
    ``cre.api.conditions`` (plain strings on the wire, so foreign conditions survive)."""

    type: str = attrs.field(
        converter=str,
        metadata=c(
            min_length=1,
            max_length=316,
            pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?"
            r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?"
            r"[A-Za-z0-9])$",
            doc=(
                "Condition type, e.g. InProgress, Succeeded, Failed, ValidationFailed."),
        ),
    )
    status: ConditionStatus = attrs.field(metadata=c(doc="True, False or Unknown."))
    reason: str = attrs.field(
        converter=str,
        metadata=c(
            min_length=1,
            max_length=1024,
            pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
            doc=(
                "One CamelCase word saying why the condition has its status."),
        ),
    )
    message: str = attrs.field(default="", metadata=c(max_length=32768, doc=(
        "Human-readable details.")))
    last_transition_time: datetime = attrs.field(metadata=c(doc=(
        "When the status last changed (RFC 3339).")))
    observed_generation: int | None = attrs.field(
        default=None, metadata=c(minimum=0, int_format="int64", doc=(
            "The metadata.generation the condition was set from.")))


@attrs.frozen(kw_only=True)
class LocalObjectReference:
    """A reference to an object of a known kind in the same namespace."""

    name: str = attrs.field(metadata=c(min_length=1, doc=(
        "Name of the object in the same namespace.")))


@attrs.frozen(kw_only=True)
class TypedLocalObjectReference:
    """A reference to an object of any kind in the same namespace."""

    api_group: str | None = attrs.field(default=None, metadata=c(doc=(
        "API group of the object; empty for the core group (e.g. ConfigMap).")))
    kind: str = attrs.field(metadata=c(min_length=1, doc="Kind of the object."))
    name: str = attrs.field(metadata=c(min_length=1, doc=(
        "Name of the object in the same namespace.")))


@attrs.frozen(kw_only=True)
class NamespacedName:
    """A name and an optional namespace (empty: the referrer's namespace)."""

    name: str = attrs.field(metadata=c(min_length=1, doc="Name of the object."))
    namespace: str | None = attrs.field(default=None, metadata=c(doc=(
        "Namespace of the object. Unset: the referring object's namespace.")))


@attrs.frozen(kw_only=True)
class ObjectReference:
    """A fully typed reference to one object instance (``uid`` pins the instance)."""

    api_version: str = attrs.field(metadata=c(min_length=1, doc="apiVersion of the object."))
    kind: str = attrs.field(metadata=c(min_length=1, doc="Kind of the object."))
    name: str = attrs.field(metadata=c(min_length=1, doc="Name of the object."))
    namespace: str | None = attrs.field(default=None, metadata=c(doc="Namespace of the object."))
    uid: str | None = attrs.field(default=None, metadata=c(doc=(
        "UID of the exact instance referred to.")))
