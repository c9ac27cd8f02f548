"""Transforms at the cache edge: API objects (JSON dicts) -> the slim frozen views in ``cre.core``.

A full Pod is 5-15 KiB of Python objects (managedFields alone is often half of it), and a
cluster-wide cache of them is what OOM-kills controllers. The pure core only reads a few fields,
so every watched object is projected here, once, into a frozen attrs value with slots: only
the labels CRE reads, owner references, node, phase, timestamps, conditions and container states.

Values that repeat across thousands of pods (label pairs, owner references, conditions, the
timestamps of a same-second rollout, namespaces, node names) are shared through a bounded
intern table, which is what brings a pod under 1 KiB. The table only ever holds immutable
values, so sharing is invisible to readers.

Bad input raises :class:`ProjectionError` naming the object and the field path.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Mapping
from datetime import datetime
from typing import Any, Final, TypeVar

from cre.api import labels as L
from cre.core.common.observed import (
    ContainerState,
    ContainerStatusView,
    NodeCondition,
    NodeTaint,
    NodeView,
    ObjectCondition,
    OwnerRef,
    PodCondition,
    PodView,
    TrainJobView,
)

JSON = Mapping[str, Any]
H = TypeVar("H", bound=Hashable)

#: The pod label keys CRE reads; every other pod label is dropped at the edge.
POD_LABEL_KEYS: Final = frozenset({
    L.JOB, L.LAUNCHER, L.WORKFLOW, L.CERTIFICATION, L.GROUP_LABEL, L.MANAGED_BY,
    L.JOBSET_NAME, L.REPLICATED_JOB_NAME, L.JOB_INDEX, L.RESTART_ATTEMPT, L.COMPLETION_INDEX,
    L.TRAINJOB_ANCESTOR_STEP,
})

_INTERN_LIMIT: Final = 65536


class ProjectionError(ValueError):
    """An object could not be projected: names the object and the offending field path."""


class _Interner:
    """A bounded table of shared immutable values (emptied when full, so it never grows)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._table: dict[Hashable, Hashable] = {}

    def __call__(self, value: H) -> H:
        found = self._table.get(value)
        if found is not None:
            return found  # type: ignore[return-value]
        if len(self._table) >= self._limit:
            self._table.clear()
        self._table[value] = value
        return value


_intern = _Interner(_INTERN_LIMIT)


def _s(value: str) -> str:
    return sys.intern(value)


def _where(obj: JSON) -> str:
    meta = obj.get("metadata") or {}
    kind = obj.get("kind") or "object"
    ns = meta.get("namespace")
    return f"{kind} {ns + '/' if ns else ''}{meta.get('name', '?')}"


def _str(obj: JSON, value: Any, path: str, *, required: bool = False) -> str | None:
    if value is None:
        if required:
            raise ProjectionError(f"{_where(obj)}: {path} is required")
        return None
    if not isinstance(value, str):
        raise ProjectionError(f"{_where(obj)}: {path} must be a string, got {value!r}")
    return value


def _time(obj: JSON, value: Any, path: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ProjectionError(f"{_where(obj)}: {path} must be an RFC 3339 string, got {value!r}")
    try:
        return _intern(datetime.fromisoformat(value))
    except ValueError:
        raise ProjectionError(f"{_where(obj)}: {path} is not an RFC 3339 time: {value!r}") from None


def _dict(obj: JSON, value: Any, path: str) -> JSON:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ProjectionError(f"{_where(obj)}: {path} must be an object, got {value!r}")
    return value


def _list(obj: JSON, value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ProjectionError(f"{_where(obj)}: {path} must be a list, got {value!r}")
    return value


def _labels(obj: JSON, raw: Any, keep: frozenset[str] | None) -> tuple[tuple[str, str], ...]:
    labels = _dict(obj, raw, "metadata.labels")
    pairs = []
    for k in sorted(labels):
        if keep is not None and k not in keep:
            continue
        v = labels[k]
        if not isinstance(v, str):
            raise ProjectionError(f"{_where(obj)}: metadata.labels[{k!r}] must be a string")
        pairs.append(_intern((_s(k), _s(v))))
    return tuple(pairs)


def _owner_refs(obj: JSON, raw: Any) -> tuple[OwnerRef, ...]:
    refs = []
    for i, ref in enumerate(_list(obj, raw, "metadata.ownerReferences")):
        path = f"metadata.ownerReferences[{i}]"
        ref = _dict(obj, ref, path)
        refs.append(_intern(OwnerRef(
            api_version=_s(_str(obj, ref.get("apiVersion"), f"{path}.apiVersion", required=True)
                           or ""),
            kind=_s(_str(obj, ref.get("kind"), f"{path}.kind", required=True) or ""),
            name=_str(obj, ref.get("name"), f"{path}.name", required=True) or "",
            uid=_str(obj, ref.get("uid"), f"{path}.uid", required=True) or "",
            controller=bool(ref.get("controller", False)),
        )))
    return _intern(tuple(refs))


def _opt_intern(value: str | None) -> str | None:
    return None if value is None else _s(value)


def _container_state(obj: JSON, raw: Any, path: str) -> ContainerState | None:
    state = _dict(obj, raw, path)
    for kind in ("terminated", "running", "waiting"):
        branch = state.get(kind)
        if branch is None:
            continue
        branch = _dict(obj, branch, f"{path}.{kind}")
        exit_code = branch.get("exitCode")
        if exit_code is not None and not isinstance(exit_code, int):
            raise ProjectionError(f"{_where(obj)}: {path}.{kind}.exitCode must be an integer")
        return _intern(ContainerState(
            kind=kind,
            reason=_opt_intern(_str(obj, branch.get("reason"), f"{path}.{kind}.reason")),
            exit_code=exit_code,
            started_at=_time(obj, branch.get("startedAt"), f"{path}.{kind}.startedAt"),
            finished_at=_time(obj, branch.get("finishedAt"), f"{path}.{kind}.finishedAt"),
            message=_str(obj, branch.get("message"), f"{path}.{kind}.message"),
        ))
    return None


def _container_statuses(obj: JSON, raw: Any, path: str, *,
                        init: bool) -> tuple[ContainerStatusView, ...]:
    out = []
    for i, cs in enumerate(_list(obj, raw, path)):
        p = f"{path}[{i}]"
        cs = _dict(obj, cs, p)
        restarts = cs.get("restartCount", 0)
        if not isinstance(restarts, int):
            raise ProjectionError(f"{_where(obj)}: {p}.restartCount must be an integer")
        out.append(_intern(ContainerStatusView(
            name=_s(_str(obj, cs.get("name"), f"{p}.name", required=True) or ""),
            state=_container_state(obj, cs.get("state"), f"{p}.state"),
            restart_count=restarts,
            init=init,
            last_state=_container_state(obj, cs.get("lastState"), f"{p}.lastState"),
            image=_opt_intern(_str(obj, cs.get("image"), f"{p}.image")),
        )))
    return tuple(out)


def _pod_conditions(obj: JSON, raw: Any) -> tuple[PodCondition, ...]:
    out = []
    for i, c in enumerate(_list(obj, raw, "status.conditions")):
        p = f"status.conditions[{i}]"
        c = _dict(obj, c, p)
        type_ = _s(_str(obj, c.get("type"), f"{p}.type", required=True) or "")
        status = _s(_str(obj, c.get("status"), f"{p}.status", required=True) or "")
        # Only the scheduler's message is read by the core (why a pod does not fit).
        unscheduled = type_ == "PodScheduled" and status == "False"
        out.append(_intern(PodCondition(
            type=type_,
            status=status,
            reason=_opt_intern(_str(obj, c.get("reason"), f"{p}.reason")),
            message=_opt_intern(_str(obj, c.get("message"), f"{p}.message"))
            if unscheduled else None,
        )))
    return _intern(tuple(out))


def _meta(obj: JSON) -> JSON:
    if not isinstance(obj, Mapping):
        raise ProjectionError(f"expected an object (a JSON mapping), got {type(obj).__name__}")
    return _dict(obj, obj.get("metadata"), "metadata")


def pod_view(obj: JSON) -> PodView:
    """The slim view of one Pod (a JSON dict as served by the API)."""
    meta = _meta(obj)
    spec = _dict(obj, obj.get("spec"), "spec")
    status = _dict(obj, obj.get("status"), "status")
    return PodView(
        name=_str(obj, meta.get("name"), "metadata.name", required=True) or "",
        namespace=_s(_str(obj, meta.get("namespace"), "metadata.namespace", required=True) or ""),
        uid=_str(obj, meta.get("uid"), "metadata.uid") or "",
        labels=_labels(obj, meta.get("labels"), POD_LABEL_KEYS),
        owner_refs=_owner_refs(obj, meta.get("ownerReferences")),
        node_name=_opt_intern(_str(obj, spec.get("nodeName"), "spec.nodeName")),
        phase=_opt_intern(_str(obj, status.get("phase"), "status.phase")),
        creation_timestamp=_time(obj, meta.get("creationTimestamp"),
                                 "metadata.creationTimestamp"),
        deletion_timestamp=_time(obj, meta.get("deletionTimestamp"),
                                 "metadata.deletionTimestamp"),
        conditions=_pod_conditions(obj, status.get("conditions")),
        init_container_statuses=_container_statuses(
            obj, status.get("initContainerStatuses"), "status.initContainerStatuses", init=True),
        container_statuses=_container_statuses(
            obj, status.get("containerStatuses"), "status.containerStatuses", init=False),
        resource_version=_str(obj, meta.get("resourceVersion"), "metadata.resourceVersion")
        or "",
        reason=_opt_intern(_str(obj, status.get("reason"), "status.reason")),
        message=_str(obj, status.get("message"), "status.message"),
    )


def _gpus(obj: JSON, raw: Any) -> int:
    if raw is None:
        return 0
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and raw.isdigit():
        return int(raw)
    raise ProjectionError(f"{_where(obj)}: status.allocatable['nvidia.com/gpu'] must be a "
                          f"whole number, got {raw!r}")


_BASIC_RESOURCES: Final = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})


def _taints(obj: JSON, raw: Any) -> tuple[NodeTaint, ...]:
    out = []
    for i, t in enumerate(_list(obj, raw, "spec.taints")):
        p = f"spec.taints[{i}]"
        t = _dict(obj, t, p)
        out.append(_intern(NodeTaint(
            key=_s(_str(obj, t.get("key"), f"{p}.key", required=True) or ""),
            value=_opt_intern(_str(obj, t.get("value"), f"{p}.value")),
            effect=_opt_intern(_str(obj, t.get("effect"), f"{p}.effect")),
        )))
    return _intern(tuple(out))


def node_view(obj: JSON) -> NodeView:
    """The slim view of one Node (all labels kept: node selectors may name any of them)."""
    meta = _meta(obj)
    spec = _dict(obj, obj.get("spec"), "spec")
    status = _dict(obj, obj.get("status"), "status")
    ready, ready_reason = "Unknown", None
    conditions: list[NodeCondition] = []
    for i, c in enumerate(_list(obj, status.get("conditions"), "status.conditions")):
        p = f"status.conditions[{i}]"
        c = _dict(obj, c, p)
        if c.get("type") == "Ready":
            ready = _str(obj, c.get("status"), f"{p}.status") or "Unknown"
            ready_reason = _str(obj, c.get("reason"), f"{p}.reason")
        conditions.append(NodeCondition(
            type=_s(_str(obj, c.get("type"), f"{p}.type") or ""),
            status=_s(_str(obj, c.get("status"), f"{p}.status") or "Unknown"),
            reason=_opt_intern(_str(obj, c.get("reason"), f"{p}.reason")),
            message=_opt_intern(_str(obj, c.get("message"), f"{p}.message"))))
    allocatable = _dict(obj, status.get("allocatable"), "status.allocatable")
    return NodeView(
        name=_str(obj, meta.get("name"), "metadata.name", required=True) or "",
        uid=_str(obj, meta.get("uid"), "metadata.uid") or "",
        labels=_labels(obj, meta.get("labels"), None),
        provider_id=_str(obj, spec.get("providerID"), "spec.providerID"),
        unschedulable=bool(spec.get("unschedulable", False)),
        ready=_s(ready),
        ready_reason=_opt_intern(ready_reason),
        allocatable_gpus=_gpus(obj, allocatable.get("nvidia.com/gpu")),
        resource_version=_str(obj, meta.get("resourceVersion"), "metadata.resourceVersion")
        or "",
        taints=_taints(obj, spec.get("taints")),
        extended_resources=_intern(tuple(
            _s(k) for k in sorted(allocatable) if k not in _BASIC_RESOURCES
            and not k.startswith("hugepages-"))),
        conditions=tuple(conditions),
    )


def trainjob_view(obj: JSON) -> TrainJobView:
    """The slim view of one Kubeflow TrainJob (labels CRE uses, suspend, conditions)."""
    meta = _meta(obj)
    spec = _dict(obj, obj.get("spec"), "spec")
    status = _dict(obj, obj.get("status"), "status")
    conditions = []
    for i, c in enumerate(_list(obj, status.get("conditions"), "status.conditions")):
        p = f"status.conditions[{i}]"
        c = _dict(obj, c, p)
        conditions.append(ObjectCondition(
            type=_s(_str(obj, c.get("type"), f"{p}.type", required=True) or ""),
            status=_s(_str(obj, c.get("status"), f"{p}.status", required=True) or ""),
            reason=_opt_intern(_str(obj, c.get("reason"), f"{p}.reason")),
            message=_str(obj, c.get("message"), f"{p}.message"),
            last_transition_time=_time(obj, c.get("lastTransitionTime"),
                                       f"{p}.lastTransitionTime"),
        ))
    return TrainJobView(
        name=_str(obj, meta.get("name"), "metadata.name", required=True) or "",
        namespace=_s(_str(obj, meta.get("namespace"), "metadata.namespace", required=True) or ""),
        uid=_str(obj, meta.get("uid"), "metadata.uid") or "",
        labels=_labels(obj, meta.get("labels"), POD_LABEL_KEYS),
        owner_refs=_owner_refs(obj, meta.get("ownerReferences")),
        creation_timestamp=_time(obj, meta.get("creationTimestamp"),
                                 "metadata.creationTimestamp"),
        deletion_timestamp=_time(obj, meta.get("deletionTimestamp"),
                                 "metadata.deletionTimestamp"),
        suspended=bool(spec.get("suspend", False)),
        conditions=tuple(conditions),
        resource_version=_str(obj, meta.get("resourceVersion"), "metadata.resourceVersion")
        or "",
        # Trainer mirrors its JobSet's replicated jobs here once it built them.
        jobs_built=bool(status.get("jobsStatus")),
        finalizers=tuple(_s(_str(obj, f, f"metadata.finalizers[{i}]") or "") for i, f in
                         enumerate(_list(obj, meta.get("finalizers"), "metadata.finalizers"))),
    )


def object_key(obj: JSON) -> str:
    """The store key of a served object: ``namespace/name``, or ``name`` if cluster-scoped."""
    meta = _meta(obj)
    name = _str(obj, meta.get("name"), "metadata.name", required=True) or ""
    ns = meta.get("namespace")
    return f"{ns}/{name}" if ns else name
