"""How ``when:`` blocks combine with the base spec.

Mappings merge key by key (recursively), lists and scalars are replaced whole, and an explicit
``null`` removes the key. Lists replace rather than append because Kubernetes lists in these
fragments (mpirun args, volumes) have no reliable merge key, and a replaced list reads the same
in the YAML as in the output.

:func:`network_merge` is the other rule, for an entry that takes only the network part of a
platform's fabric blocks (``fabric: network``, the training entries): it brings its own image,
so the blocks' ``image`` and ``mpirun`` are not taken, and the worker's lists (volumes, mounts,
init containers, capabilities) and the DRA ``claims`` are appended to the entry's, because the
entry's own volumes and init containers (a workspace, a source clone) must survive the fabric's.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

# What an entry that takes only the network does not take from a fabric block.
NOT_NETWORK: Final = frozenset({"image", "mpirun"})
# The worker's lists a network fabric block appends to (an item the entry already has stays).
WORKER_LISTS: Final = ("volumes", "volumeMounts", "initContainers", "capabilities")


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """A new mapping: ``override`` laid over ``base`` (maps merge, lists replace, null deletes)."""
    out: dict[str, Any] = copy.deepcopy(dict(base))
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(_strip_nulls(value))
    return out


def _strip_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    return value


def network_merge(base: Mapping[str, Any], fabric: Mapping[str, Any]) -> dict[str, Any]:
    """``fabric`` (a platform fabric block's spec) laid over ``base`` for an entry that takes
    only the network: no ``image`` or ``mpirun``; maps merge as :func:`deep_merge`; the
    worker's lists and ``claims`` are appended (an item whose name, or for a capability whose
    value, the entry already has is the entry's)."""
    taken = {k: v for k, v in fabric.items() if k not in NOT_NETWORK}
    worker = dict(taken.pop("worker", None) or {})
    have: Mapping[str, Any] = base.get("worker") or {}
    lists = {key: _append(have.get(key) or [], worker.pop(key)) for key in WORKER_LISTS
             if key in worker}
    claims = taken.pop("claims", None)
    out = deep_merge(base, {**taken, "worker": worker} if worker or lists else taken)
    if lists:
        out["worker"] = {**out.get("worker", {}), **lists}
    if claims is not None:
        out["claims"] = _append(base.get("claims") or [], claims)
    return out


def _append(mine: list[Any], theirs: list[Any]) -> list[Any]:
    """``mine`` then the items of ``theirs`` it does not already have (by ``name``; an item
    without one by its whole value)."""
    def key(item: Any) -> Any:
        return item["name"] if isinstance(item, Mapping) and "name" in item else repr(item)
    known = {key(i) for i in mine}
    return [*copy.deepcopy(mine), *(copy.deepcopy(i) for i in theirs if key(i) not in known)]
