"""The patch formats the Kubernetes API accepts, as pure functions over JSON objects.

The emulator's PATCH handler picks one of these by Content-Type:

* `apply_merge_patch` — RFC 7386 JSON merge patch (`application/merge-patch+json`);
* `apply_json_patch` — RFC 6902 JSON patch (`application/json-patch+json`);
* `apply_strategic_merge_patch` — strategic merge patch for built-in kinds (`_smp`);
* `server_side_apply` / `record_update` — server-side apply and the `managedFields` bookkeeping
  of every other write (`_ssa`).

All functions return new objects and leave their inputs untouched, so the storage layer can keep
the previous version for watch history and conflict checks. Errors raise `PatchError` whose
`code` is the HTTP status the real server answers with (422 for a patch that cannot be applied,
400 for a body that is not a patch at all).
"""

from __future__ import annotations

from typing import Any

import jsonpatch

from cre.testing.apiserver._shapes import PatchError, clone
from cre.testing.apiserver._smp import apply_strategic_merge_patch
from cre.testing.apiserver._ssa import ApplyConflict, record_update, server_side_apply

__all__ = [
    "ApplyConflict",
    "PatchError",
    "apply_json_patch",
    "apply_merge_patch",
    "apply_strategic_merge_patch",
    "record_update",
    "server_side_apply",
]

MAX_JSON_PATCH_OPERATIONS = 10000


def apply_merge_patch(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Apply an RFC 7386 merge patch: maps merge, `null` deletes, everything else replaces."""
    if not isinstance(patch, dict):
        raise PatchError("merge patch must be a JSON object", code=400)
    result = _merge(obj, patch)
    assert isinstance(result, dict)
    return result


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return clone(patch)
    base = target if isinstance(target, dict) else {}
    result: dict[str, Any] = {}
    for key, value in base.items():
        if key not in patch:
            result[key] = clone(value)
        elif patch[key] is not None:
            result[key] = _merge(value, patch[key])
    for key, value in patch.items():
        if key not in base and value is not None:
            result[key] = _merge(None, value)
    return result


def apply_json_patch(obj: dict[str, Any], ops: list[Any]) -> dict[str, Any]:
    """Apply an RFC 6902 JSON patch (add, remove, replace, move, copy, test; `-` appends)."""
    if not isinstance(ops, list):
        raise PatchError("json patch must be a JSON array of operations", code=400)
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise PatchError(
            f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, "
            f"got: {len(ops)}", code=413)
    for index, op in enumerate(ops):
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"json patch operation {index} needs \"op\" and \"path\"")
    try:
        result = jsonpatch.JsonPatch(ops).apply(clone(obj), in_place=True)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
        raise PatchError(str(exc)) from exc
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise PatchError(f"json patch could not be applied: {exc}") from exc
    if not isinstance(result, dict):
        raise PatchError("json patch must leave a JSON object")
    return result
