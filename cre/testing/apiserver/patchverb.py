"""PATCH semantics: JSON, merge, strategic-merge and server-side apply writes.

Follows the generic registry's patch handler (``k8s.io/apiserver/pkg/endpoints/handlers/
patch.go``): the patch is applied to the live object, a ``resourceVersion`` in the patch is a
precondition (409 when stale), the name cannot change, and the result goes through the same
update path as PUT (status split, admission, ``managedFields``). Server-side apply may create
the object, keeping the applier's ownership rather than an ``Update`` entry. Patch failures map
to the real status codes: 422 Invalid for an unappliable patch, 400 for a body that is not a
patch, 413 for too many JSON-patch operations, 409 with causes for apply conflicts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import errors, patching
from .convert import from_storage
from .errors import ApiError
from .resources import ResourceType
from .store import Key, Obj

if TYPE_CHECKING:
    from .writectx import WriteContext, WriteOptions


def patch(
    objs: WriteContext,
    rt: ResourceType,
    namespace: str,
    name: str,
    patch_type: str,
    patch: Any,
    opts: WriteOptions,
    *,
    subresource: str | None = None,
) -> tuple[Obj, bool]:
    """PATCH by content type: ``json``, ``merge``, ``strategic`` or ``apply``."""
    key = objs.key_of(rt, namespace, name)
    old = objs.store.get(rt.bucket, key)
    if patch_type == "apply":
        return _apply(objs, rt, namespace, name, key, old, patch, opts, subresource)
    if old is None:
        raise errors.not_found(rt.qualified, name)
    current = from_storage(rt, old)
    try:
        if patch_type == "json":
            patched = patching.apply_json_patch(current, patch)
        elif patch_type == "merge":
            patched = patching.apply_merge_patch(current, patch)
        else:
            patched = patching.apply_strategic_merge_patch(current, patch, kind=rt.kind)
    except patching.PatchError as exc:
        raise _patch_error(exc, patch_type) from exc
    meta = patched.get("metadata")
    if not isinstance(meta, dict):
        meta = patched["metadata"] = {}
    rv = meta.get("resourceVersion")
    if rv and rv != old["metadata"].get("resourceVersion"):
        raise errors.conflict(rt.qualified, name)
    if meta.get("name") != name:
        raise errors.bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL "
            f"({name})"
        )
    objs.check_body_identity(rt, namespace, patched)
    new = objs.merge_for_write(rt, old, patched, subresource)
    new = patching.record_update(
        current, new, manager=opts.manager, operation="Update", subresource=subresource,
        now=objs.now(), schema=objs.admission.schema_of(rt),
    )
    return objs.commit(rt, key, old, new, opts), False

def _apply(
    objs: WriteContext,
    rt: ResourceType,
    namespace: str,
    name: str,
    key: Key,
    old: Obj | None,
    applied: Any,
    opts: WriteOptions,
    subresource: str | None,
) -> tuple[Obj, bool]:
    if not isinstance(applied, dict):
        raise errors.bad_request("error decoding patch: apply patch must be an object")
    objs.check_body_identity(rt, namespace, applied)
    meta = applied["metadata"]
    if meta.get("name") not in (None, name):
        raise errors.bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL "
            f"({name})"
        )
    meta["name"] = name
    live = None if old is None else from_storage(rt, old)
    try:
        if subresource == "status":
            reset = tuple(k for k in applied if k not in ("status", "metadata", "apiVersion",
                                                          "kind"))
        else:
            reset = ("status",) if "status" in rt.subresources else ()
        result = patching.server_side_apply(
            live, applied, manager=opts.manager, force=opts.force, subresource=subresource,
            now=objs.now(), schema=objs.admission.schema_of(rt), reset_fields=reset,
        )
    except patching.ApplyConflict as exc:
        raise _apply_conflict(exc) from exc
    except patching.PatchError as exc:
        raise _patch_error(exc, "apply") from exc
    if old is None:
        if subresource is not None:
            raise errors.not_found(rt.qualified, name)
        result["metadata"].pop("resourceVersion", None)
        managed = result["metadata"].get("managedFields")
        created = objs.create(rt, namespace, result, opts)
        if managed is not None and created["metadata"].get("managedFields") != managed:
            # keep the apply ownership, not the Update entry that create records
            created = _restore_managed(objs, rt, key, created, managed, opts)
        return created, True
    rv = meta.get("resourceVersion")
    if rv and rv != old["metadata"].get("resourceVersion"):
        raise errors.conflict(rt.qualified, name)
    new = objs.merge_for_write(rt, old, result, subresource)
    return objs.commit(rt, key, old, new, opts), False

def _restore_managed(
    objs: WriteContext, rt: ResourceType, key: Key, created: Obj, managed: Any, opts: WriteOptions
) -> Obj:
    fixed = {**created, "metadata": {**created["metadata"], "managedFields": managed}}
    if opts.dry_run:
        return fixed
    stored = objs.store.get(rt.bucket, key)
    assert stored is not None
    # Same revision: the create and its ownership record are one write.
    stored["metadata"]["managedFields"] = managed
    return fixed


def _patch_error(exc: patching.PatchError, patch_type: str) -> ApiError:
    if exc.code == 413:
        return errors.ApiError(
            code=413,
            reason=errors.Reason.REQUEST_ENTITY_TOO_LARGE,
            message=f"Request entity too large: {exc.message}",
        )
    if exc.code == 400:
        return errors.bad_request(f"error decoding patch: {exc.message}")
    if patch_type == "json":
        return errors.generic_invalid()
    return errors.ApiError(code=exc.code, reason=errors.Reason.INVALID, message=exc.message,
                           details={})


def _apply_conflict(exc: patching.ApplyConflict) -> ApiError:
    return ApiError(
        code=409,
        reason=errors.Reason.CONFLICT,
        message=exc.message,
        details={"causes": exc.causes()},
    )
