"""DELETE semantics: preconditions, finalizers, graceful pod deletion, propagation policy.

Follows ``k8s.io/apiserver/pkg/registry/rest/delete.go`` and the generic store: preconditions
answer 409 naming the Kind; an object with finalizers (or a policy finalizer ``orphan`` /
``foregroundDeletion``) only gets ``deletionTimestamp``; pods are deleted gracefully
(``CheckGracefulDelete``: the request's period, else ``terminationGracePeriodSeconds``, 0 when
unscheduled or finished) and a later, shorter delete shortens the grace period, storing 0 as
0 so a pod held only by finalizers goes when the last one is removed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import attrs

from . import errors
from .convert import from_storage
from .meta import parse_time, rfc3339
from .resources import ResourceType
from .store import Key, Obj

if TYPE_CHECKING:
    from .writectx import WriteContext

SYSTEM_FINALIZERS = ("orphan", "foregroundDeletion")
CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
TERMINAL_PHASES = ("Succeeded", "Failed")


@attrs.frozen
class DeleteOptions:
    grace_period: int | None = None
    propagation: str | None = None
    orphan_dependents: bool | None = None
    precondition_uid: str | None = None
    precondition_rv: str | None = None
    dry_run: bool = False


def delete(
    objs: WriteContext, rt: ResourceType, namespace: str, name: str, opts: DeleteOptions
) -> tuple[Obj, bool]:
    """DELETE: returns (object, removed-now)."""
    key = objs.key_of(rt, namespace, name)
    old = objs.store.get(rt.bucket, key)
    if old is None:
        raise errors.not_found(rt.qualified, name)
    old_meta = old["metadata"]
    if opts.precondition_uid and opts.precondition_uid != old_meta.get("uid"):
        raise errors.precondition_conflict(
            rt.qualified,
            name,
            f"the UID in the precondition ({opts.precondition_uid}) does not match the UID in "
            f"record ({old_meta.get('uid')}). The object might have been deleted and then "
            "recreated",
        )
    if opts.precondition_rv and opts.precondition_rv != old_meta.get("resourceVersion"):
        raise errors.precondition_conflict(
            rt.qualified,
            name,
            f"the ResourceVersion in the precondition ({opts.precondition_rv}) does not match "
            f"the ResourceVersion in record ({old_meta.get('resourceVersion')}). The object "
            "might have been modified",
        )
    finalizers = list(old_meta.get("finalizers") or [])
    policy = opts.propagation
    if policy is None and opts.orphan_dependents is not None:
        policy = "Orphan" if opts.orphan_dependents else "Foreground"
    if policy is not None:
        finalizers = [f for f in finalizers if f not in SYSTEM_FINALIZERS]
        if policy == "Orphan":
            finalizers.append("orphan")
        elif policy == "Foreground":
            finalizers.append("foregroundDeletion")
    if (
        rt.kind == "CustomResourceDefinition"
        and rt.group == "apiextensions.k8s.io"
        and CRD_CLEANUP_FINALIZER not in finalizers
    ):
        finalizers.append(CRD_CLEANUP_FINALIZER)
    if rt.kind == "Namespace" and rt.group == "":
        if not old_meta.get("deletionTimestamp"):
            return start_deleting(objs, rt, key, old, finalizers, 0, opts), False
        return from_storage(rt, old), False
    if old_meta.get("deletionTimestamp"):
        # Already being deleted: CheckGracefulDelete is not consulted again; only a shorter
        # requested period counts, and it is stored as given (0 included), so the object goes
        # as soon as its last finalizer is removed.
        current = old_meta.get("deletionGracePeriodSeconds") or 0
        requested = opts.grace_period
        if requested is not None and requested < 0:
            requested = 1
        if rt.graceful_delete and current and requested is not None and requested < current:
            if requested == 0 and not finalizers:
                return remove(objs, rt, key, old, opts), True
            return start_deleting(objs, rt, key, old, finalizers, requested, opts), False
        if not finalizers and not current:
            return remove(objs, rt, key, old, opts), True
        return from_storage(rt, old), False
    grace = grace_period(objs, rt, old, opts.grace_period)
    if finalizers or (grace or 0) > 0:
        return start_deleting(objs, rt, key, old, finalizers, grace or 0, opts), False
    return remove(objs, rt, key, old, opts), True


def grace_period(objs: WriteContext, rt: ResourceType, obj: Obj,
                 requested: int | None) -> int | None:
    if not rt.graceful_delete:
        return None
    spec = obj.get("spec") or {}
    grace = requested
    if grace is None:
        grace = spec.get("terminationGracePeriodSeconds", 30)
    if grace is None:
        grace = 0
    if not spec.get("nodeName") or (obj.get("status") or {}).get("phase") in TERMINAL_PHASES:
        grace = 0
    if grace < 0:
        grace = 1
    return int(grace)

def start_deleting(
    objs: WriteContext,
    rt: ResourceType,
    key: Key,
    old: Obj,
    finalizers: list[str],
    grace: int,
    opts: DeleteOptions,
) -> Obj:
    meta = dict(old["metadata"])
    if meta.get("deletionTimestamp"):
        # Shortening (delete.go BeforeDelete): move the timestamp back by the old period and
        # forward by the new one.
        previous = int(meta.get("deletionGracePeriodSeconds") or 0)
        moved = parse_time(meta["deletionTimestamp"]) + timedelta(seconds=grace - previous)
        meta["deletionTimestamp"] = rfc3339(moved)
    else:
        meta["deletionTimestamp"] = rfc3339(objs.clock() + timedelta(seconds=grace))
    meta["deletionGracePeriodSeconds"] = grace
    if finalizers:
        meta["finalizers"] = finalizers
    else:
        meta.pop("finalizers", None)
    if not old["metadata"].get("deletionTimestamp") and meta.get("generation"):
        meta["generation"] = int(meta["generation"]) + 1
    new = {**old, "metadata": meta}
    if rt.kind == "Namespace" and rt.group == "":
        new["status"] = {**(old.get("status") or {}), "phase": "Terminating"}
    if rt.kind == "CustomResourceDefinition" and rt.group == "apiextensions.k8s.io":
        new["status"] = _with_condition(
            old.get("status") or {},
            {
                "type": "Terminating",
                "status": "True",
                "reason": "InstanceDeletionInProgress",
                "message": "CustomResource deletion is in progress",
                "lastTransitionTime": objs.now(),
            },
        )
    if opts.dry_run:
        return from_storage(rt, new)
    return from_storage(rt, objs.store.put(rt.bucket, key, new))

def remove(objs: WriteContext, rt: ResourceType, key: Key, old: Obj, opts: DeleteOptions) -> Obj:
    if opts.dry_run:
        return from_storage(rt, old)
    final = objs.store.remove(rt.bucket, key)
    assert final is not None
    after_remove(objs, rt, final)
    return from_storage(rt, final)

def after_remove(objs: WriteContext, rt: ResourceType, final: Obj) -> None:
    if rt.kind == "CustomResourceDefinition" and rt.group == "apiextensions.k8s.io":
        for fn in objs.crd_listeners:
            fn(final, False)


def _with_condition(status: dict[str, Any], cond: dict[str, Any]) -> dict[str, Any]:
    conds = [c for c in status.get("conditions") or [] if c.get("type") != cond["type"]]
    conds.append(cond)
    return {**status, "conditions": conds}


