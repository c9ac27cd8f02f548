"""Strategic merge patch (`application/strategic-merge-patch+json`) for built-in kinds.

Follows `k8s.io/apimachinery/pkg/util/strategicpatch`: maps merge recursively and `null`
deletes; lists with a merge key merge item by item; lists of scalars with the merge strategy
(finalizers) are unions; all other lists are replaced. Directives: `$patch` (replace / delete /
merge) on maps and list items, `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>` and
`$retainKeys`.

Merged lists are ordered as the real server orders them (`normalizeElementOrder`): patched items
in patch order, interleaved with live-only items by live position, so a newly added container
lands before the existing ones. Left out: `$patch` directives on lists of lists, which no
built-in type has.
"""

from __future__ import annotations

from typing import Any

from cre.testing.apiserver._shapes import EMPTY, ListRule, PatchError, Shape, builtin_shape, clone

_PATCH = "$patch"
_RETAIN = "$retainKeys"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"


def apply_strategic_merge_patch(obj: dict[str, Any], patch: dict[str, Any], *,
                                kind: str) -> dict[str, Any]:
    """Apply a strategic merge patch to a built-in object of `kind`; the inputs are not changed."""
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object", code=400)
    merged = _merge_map(clone(obj), patch, builtin_shape(kind))
    if merged is None:
        raise PatchError(f"{_PATCH}: delete is not allowed on the whole object")
    return merged


def _directive(patch: dict[str, Any]) -> str | None:
    value = patch.get(_PATCH)
    if value is None:
        return None
    if value not in ("replace", "delete", "merge"):
        raise PatchError(f"invalid value for special key: {_PATCH}")
    return str(value)


def _strip(value: Any, shape: Shape | None) -> Any:
    """A patch value with no original: directives are resolved against an empty original."""
    if isinstance(value, dict):
        return _merge_map({}, value, shape or EMPTY)
    return clone(value)


def _merge_map(original: dict[str, Any], patch: dict[str, Any],
               shape: Shape) -> dict[str, Any] | None:
    """Merge `patch` into `original` (owned by the caller, changed in place)."""
    directive = _directive(patch)
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: _strip(v, shape.field(k)) for k, v in patch.items() if not k.startswith("$")}
    retain = patch.get(_RETAIN)
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError(f"invalid value for special key: {_RETAIN}")
        for key in list(original):
            if key not in retain:
                del original[key]
    orders: list[tuple[str, Any]] = []
    originals = {k[len(_SET_ORDER):]: list(original.get(k[len(_SET_ORDER):]) or ())
                 for k in patch if k.startswith(_SET_ORDER)}
    for key, value in patch.items():
        if key.startswith(_DELETE_PRIMITIVE):
            _delete_primitives(original, key[len(_DELETE_PRIMITIVE):], value)
    for key, value in patch.items():
        if key in (_PATCH, _RETAIN) or key.startswith(_DELETE_PRIMITIVE):
            continue
        if key.startswith(_SET_ORDER):
            orders.append((key[len(_SET_ORDER):], value))
            continue
        if key.startswith("$"):
            raise PatchError(f"unknown special key: {key}")
        if value is None:
            original.pop(key, None)
            continue
        current = original.get(key)
        if isinstance(value, dict):
            base = current if isinstance(current, dict) else {}
            merged = _merge_map(base, value, shape.field(key) or EMPTY)
            if merged is None:
                original.pop(key, None)
            else:
                original[key] = merged
        elif isinstance(value, list):
            rule = shape.list_rule(key)
            base_list = current if isinstance(current, list) else []
            original[key] = _merge_list(base_list, value, rule)
        else:
            original[key] = value
    for key, order in orders:
        if not isinstance(order, list):
            raise PatchError(f"invalid value for special key: {_SET_ORDER}{key}")
        if isinstance(original.get(key), list):
            rule = shape.list_rule(key)
            original[key] = _normalise_order(original[key], order, originals[key],
                                             rule.smp_key if rule else None)
    return original


def _delete_primitives(original: dict[str, Any], key: str, values: Any) -> None:
    if not isinstance(values, list):
        raise PatchError(f"invalid value for special key: {_DELETE_PRIMITIVE}{key}")
    current = original.get(key)
    if isinstance(current, list):
        kept = [v for v in current if v not in values]
        if kept:
            original[key] = kept
        else:
            del original[key]


def _merge_list(original: list[Any], patch: list[Any], rule: ListRule | None) -> list[Any]:
    item_shape = (rule.items if rule else None) or EMPTY
    if rule is None or not rule.smp_merge:
        return [_strip(v, item_shape) for v in patch]
    if rule.smp_key is None:
        merged = list(original)
        for value in patch:
            if value not in merged:
                merged.append(clone(value))
        return _normalise_order(merged, patch, original, None)
    key = rule.smp_key
    if any(isinstance(v, dict) and _directive(v) == "replace" for v in patch):
        return [_strip(v, item_shape) for v in patch
                if not (isinstance(v, dict) and v.get(_PATCH) == "replace")]
    merged = list(original)
    for value in patch:
        if not isinstance(value, dict):
            raise PatchError(f"cannot merge a non-object item into a list merged by {key!r}")
        if key not in value:
            raise PatchError(f"map: {value} does not contain declared merge key: {key}")
        index = next((i for i, item in enumerate(merged)
                      if isinstance(item, dict) and item.get(key) == value[key]), None)
        if _directive(value) == "delete":
            merged = [item for item in merged
                      if not (isinstance(item, dict) and item.get(key) == value[key])]
            continue
        if index is None:
            result = _merge_map({}, value, item_shape)
            if result is not None:
                merged.append(result)
        else:
            result = _merge_map(merged[index], value, item_shape)
            if result is None:
                del merged[index]
            else:
                merged[index] = result
    order = [v for v in patch if isinstance(v, dict) and v.get(_PATCH) != "delete"]
    return _normalise_order(merged, order, original, key)


def _normalise_order(merged: list[Any], order: list[Any], server: list[Any],
                     key: str | None) -> list[Any]:
    """Order a merged list as apimachinery's `normalizeElementOrder` does.

    Items named by `order` (the patch, or `$setElementOrder`) come in that order; the others
    keep the live order; the two runs are interleaved by their live positions, an item the live
    list does not know going before the remaining live-only items.
    """

    def ident(value: Any) -> str:
        return repr(value.get(key) if key is not None and isinstance(value, dict) else value)

    wanted = {ident(v): i for i, v in enumerate(order)}
    live = {ident(v): i for i, v in enumerate(server)}
    patched = sorted((v for v in merged if ident(v) in wanted), key=lambda v: wanted[ident(v)])
    server_only = sorted((v for v in merged if ident(v) not in wanted),
                         key=lambda v: live.get(ident(v), len(live)))
    result: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patched):
        if j >= len(patched):
            result.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            result.append(patched[j])
            j += 1
        else:
            left, right = live.get(ident(server_only[i])), live.get(ident(patched[j]))
            if left is not None and right is not None and left < right:
                result.append(server_only[i])
                i += 1
            else:
                result.append(patched[j])
                j += 1
    return result
