"""How the fields of built-in kinds merge: list merge keys, list types and map types.

Strategic merge patch and server-side apply both need to know, per field, whether a list is
merged by key, treated as a set, or replaced as a whole. The real server reads that from the Go
struct tags (`patchStrategy`, `patchMergeKey`, `+listType`, `+listMapKey`) of `k8s.io/api`; this
module keeps the subset of those tags a controller touches, as a small tree per kind, and a
second implementation answers the same questions from a CRD's OpenAPI schema
(`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`).

Fields not listed here behave as untagged Go fields do: SMP replaces such lists wholesale and SSA
treats them as atomic.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Protocol

import attrs


class PatchError(Exception):
    """A patch cannot be applied; `code` is the HTTP status the server answers with."""

    def __init__(self, message: str, *, code: int = 422) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class ListType(enum.Enum):
    """Server-side apply granularity of a list."""

    ATOMIC = "atomic"
    SET = "set"
    MAP = "map"


@attrs.frozen
class ListRule:
    """Merge behaviour of one list field."""

    smp_merge: bool = False
    smp_key: str | None = None
    retain_keys: bool = False
    ssa_type: ListType = ListType.ATOMIC
    ssa_keys: tuple[str, ...] = ()
    items: Shape | None = None


class Shape(Protocol):
    """The merge-relevant structure of one object node."""

    def field(self, name: str) -> Shape | None:
        """The shape of a map field (None when nothing special is known)."""

    def list_rule(self, name: str) -> ListRule | None:
        """The rule of the list stored in field `name` (None: untagged list)."""

    def values(self) -> Shape | None:
        """The shape of the values of a map with arbitrary keys."""

    def atomic(self) -> bool:
        """True when the node is replaced as a whole by server-side apply."""


@attrs.frozen
class TreeShape:
    """A shape given as an explicit tree of field names (used for built-in kinds)."""

    fields: Mapping[str, TreeShape] = attrs.field(factory=dict)
    lists: Mapping[str, ListRule] = attrs.field(factory=dict)
    is_atomic: bool = False

    def field(self, name: str) -> Shape | None:
        return self.fields.get(name)

    def list_rule(self, name: str) -> ListRule | None:
        return self.lists.get(name)

    def values(self) -> Shape | None:
        return None

    def atomic(self) -> bool:
        return self.is_atomic


EMPTY = TreeShape()


def _merge_list(key: str, *, items: TreeShape | None = None, ssa_keys: tuple[str, ...] = (),
                retain: bool = False) -> ListRule:
    return ListRule(smp_merge=True, smp_key=key, retain_keys=retain, ssa_type=ListType.MAP,
                    ssa_keys=ssa_keys or (key,), items=items)


_CONDITIONS = _merge_list("type")
_SET = ListRule(smp_merge=True, ssa_type=ListType.SET)

_METADATA = TreeShape(
    lists={"ownerReferences": _merge_list("uid"), "finalizers": _SET},
)

_CONTAINER = TreeShape(
    lists={
        "env": _merge_list("name"),
        "ports": _merge_list("containerPort", ssa_keys=("containerPort", "protocol")),
        "volumeMounts": _merge_list("mountPath"),
        "volumeDevices": _merge_list("devicePath"),
        "resizePolicy": ListRule(ssa_type=ListType.ATOMIC),
    },
)

_POD_SPEC = TreeShape(
    lists={
        "containers": _merge_list("name", items=_CONTAINER),
        "initContainers": _merge_list("name", items=_CONTAINER),
        "ephemeralContainers": _merge_list("name", items=_CONTAINER),
        "volumes": _merge_list("name", retain=True),
        "imagePullSecrets": _merge_list("name"),
        "hostAliases": _merge_list("ip"),
        "topologySpreadConstraints": _merge_list(
            "topologyKey", ssa_keys=("topologyKey", "whenUnsatisfiable")),
        "schedulingGates": _merge_list("name"),
        "resourceClaims": _merge_list("name", retain=True),
    },
)

_POD_TEMPLATE = TreeShape(fields={"metadata": _METADATA, "spec": _POD_SPEC})

_POD_STATUS = TreeShape(
    lists={
        "conditions": _CONDITIONS,
        "podIPs": _merge_list("ip"),
        "hostIPs": _merge_list("ip"),
    },
)


def _kind(**fields: TreeShape) -> TreeShape:
    return TreeShape(fields={"metadata": _METADATA, **fields})


def _workload() -> TreeShape:
    return _kind(spec=TreeShape(fields={"template": _POD_TEMPLATE}),
                 status=TreeShape(lists={"conditions": _CONDITIONS}))


BUILTIN_SHAPES: Mapping[str, TreeShape] = {
    "Pod": _kind(spec=_POD_SPEC, status=_POD_STATUS),
    "Job": _kind(
        spec=TreeShape(fields={"template": _POD_TEMPLATE}),
        # batch/v1 JobStatus.conditions: patchStrategy merge on type, but +listType=atomic.
        status=TreeShape(lists={"conditions": ListRule(smp_merge=True, smp_key="type")}),
    ),
    "Node": _kind(
        spec=TreeShape(),
        status=TreeShape(lists={"conditions": _CONDITIONS, "addresses": _merge_list("type")}),
    ),
    "Service": _kind(
        spec=TreeShape(lists={"ports": _merge_list("port", ssa_keys=("port", "protocol"))}),
    ),
    "ServiceAccount": TreeShape(
        fields={"metadata": _METADATA},
        lists={"secrets": _merge_list("name"), "imagePullSecrets": _merge_list("name")},
    ),
    # apps/v1 workloads embed a pod template; their status conditions merge on type.
    "Deployment": _workload(),
    "ReplicaSet": _workload(),
    "StatefulSet": _workload(),
    "DaemonSet": _workload(),
    "ReplicationController": _workload(),
    "APIService": _kind(status=TreeShape(lists={"conditions": _CONDITIONS})),
    "PodDisruptionBudget": _kind(status=TreeShape(lists={"conditions": _CONDITIONS})),
    "Namespace": _kind(status=TreeShape(lists={"conditions": _CONDITIONS})),
    "ConfigMap": _kind(),
    "Secret": _kind(),
    "Event": _kind(),
    "Lease": _kind(),
}


_OTHER = _kind()


def builtin_shape(kind: str) -> Shape:
    """The shape of a built-in kind; unknown kinds only get the ObjectMeta rules."""
    return BUILTIN_SHAPES.get(kind, _OTHER)


# Defaults the real server fills into list-map key fields before apply computes identities.
KEY_DEFAULTS: Mapping[str, Any] = {"protocol": "TCP"}


@attrs.frozen
class SchemaShape:
    """A shape read from a CRD's structural OpenAPI v3 schema node."""

    node: Mapping[str, Any]

    def _child(self, name: str) -> Mapping[str, Any] | None:
        props = self.node.get("properties")
        if isinstance(props, Mapping) and name in props:
            child = props[name]
            return child if isinstance(child, Mapping) else None
        extra = self.node.get("additionalProperties")
        return extra if isinstance(extra, Mapping) else None

    def field(self, name: str) -> Shape | None:
        child = self._child(name)
        return SchemaShape(child) if child is not None else None

    def list_rule(self, name: str) -> ListRule | None:
        child = self._child(name)
        if child is None:
            return None
        items = child.get("items")
        item_shape = SchemaShape(items) if isinstance(items, Mapping) else None
        list_type = child.get("x-kubernetes-list-type", "atomic")
        if list_type == "map":
            keys = tuple(child.get("x-kubernetes-list-map-keys") or ())
            return ListRule(ssa_type=ListType.MAP, ssa_keys=keys, items=item_shape)
        if list_type == "set":
            return ListRule(ssa_type=ListType.SET, items=item_shape)
        return ListRule(ssa_type=ListType.ATOMIC, items=item_shape)

    def values(self) -> Shape | None:
        extra = self.node.get("additionalProperties")
        return SchemaShape(extra) if isinstance(extra, Mapping) else None

    def atomic(self) -> bool:
        return self.node.get("x-kubernetes-map-type") == "atomic"


def clone(value: Any) -> Any:
    """A deep copy of a JSON value (several times faster than `copy.deepcopy`)."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value
