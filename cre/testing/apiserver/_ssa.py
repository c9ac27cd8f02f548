"""Server-side apply and the `metadata.managedFields` bookkeeping of ordinary writes.

Follows `sigs.k8s.io/structured-merge-diff` as the API server uses it: every write records which
field manager set which fields (FieldsV1 sets in the `f:` / `k:` / `v:` / `i:` encoding); an apply
merges the applied configuration into the live object (maps granularly, `map` lists per key, `set`
lists per value, everything else atomically), fails with a conflict when another manager owns a
field the apply would change (unless forced, which moves ownership), and removes fields the
manager applied before but no longer applies when no other manager owns them. Create, update and
non-apply patches (`record_update`) give the writer ownership of every field they added or
changed and take it away from everyone else.

Left out: conversion between API versions (field sets are kept per apiVersion string as given),
the `ancient-changes` compaction beyond ten Update entries is kept but approximate, and the
ordering of merged list items (existing items keep their place, new ones are appended).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from cre.testing.apiserver._fieldsets import (
    Path,
    Walker,
    decode_fields,
    encode_fields,
    path_string,
)
from cre.testing.apiserver._shapes import KEY_DEFAULTS, SchemaShape, builtin_shape, clone

_SERVER_METADATA = frozenset({
    "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "managedFields",
})
_ROOT_SKIP = frozenset({"apiVersion", "kind"})
_MAX_UPDATE_ENTRIES = 10


class ApplyConflict(Exception):
    """An apply would change fields another manager owns; the server answers 409 Conflict."""

    def __init__(self, conflicts: list[tuple[str, str]]) -> None:
        self.conflicts = conflicts
        self.message = _conflict_message(conflicts)
        super().__init__(self.message)

    def causes(self) -> list[dict[str, str]]:
        """The `details.causes` of the 409 Status."""
        return [{"reason": "FieldManagerConflict", "message": f"conflict with {mgr}",
                 "field": path} for mgr, path in self.conflicts]


def _conflict_message(conflicts: list[tuple[str, str]]) -> str:
    if len(conflicts) == 1:
        mgr, path = conflicts[0]
        return f"Apply failed with 1 conflict: conflict with {mgr}: {path}"
    grouped: dict[str, list[str]] = {}
    for mgr, path in conflicts:
        grouped.setdefault(mgr, []).append(path)
    lines: list[str] = []
    for mgr in sorted(grouped):
        lines.append(f"conflicts with {mgr}:")
        lines.extend(f"- {path}" for path in grouped[mgr])
    return f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)


# --- managedFields entries ----------------------------------------------------------------


class _Entry:
    """One managedFields entry; its FieldsV1 trie is only decoded when a write touches it."""

    __slots__ = ("_fresh", "_paths", "_trie", "api_version", "manager", "operation",
                 "subresource", "time")

    def __init__(self, raw: Mapping[str, Any], *, fresh: bool = False) -> None:
        self._fresh = fresh  # the trie was built for this entry: no copy needed on output
        self.manager = str(raw.get("manager", ""))
        self.operation = str(raw.get("operation", "Update"))
        self.api_version = str(raw.get("apiVersion", ""))
        self.time = raw.get("time")
        self.subresource = raw.get("subresource") or None
        fields = raw.get("fieldsV1")
        self._trie: Mapping[str, Any] | None = fields if isinstance(fields, Mapping) else None
        self._paths: set[Path] | None = None if self._trie is not None else set()

    @property
    def paths(self) -> set[Path]:
        if self._paths is None:
            self._paths = decode_fields(self._trie or {})
            self._trie = None
        return self._paths

    @paths.setter
    def paths(self, value: set[Path]) -> None:
        self._paths = value
        self._trie = None

    def empty(self) -> bool:
        if self._paths is None:
            return not self._trie
        return not self._paths

    def touches(self, members: set[Path], prefixes: set[Path]) -> bool:
        """True when one of `members` is owned, or something under one of `prefixes`."""
        if self._paths is not None:
            return bool(self._paths & members) or bool(
                prefixes and _drop_removed(self._paths, prefixes) != self._paths)
        trie = self._trie or {}
        for path in members:
            node = _trie_node(trie, path)
            if node is not None and (not node or "." in node):
                return True
        return any(_trie_node(trie, path) is not None for path in prefixes)

    def identity(self) -> tuple[str, str, str | None, str]:
        version = self.api_version if self.operation == "Update" else ""
        return self.manager, self.operation, self.subresource, version

    def printed(self) -> str:
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text

    def to_json(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"manager": self.manager, "operation": self.operation,
                               "apiVersion": self.api_version}
        if self.time is not None:
            raw["time"] = self.time
        raw["fieldsType"] = "FieldsV1"
        if self._paths is not None:
            raw["fieldsV1"] = encode_fields(self._paths)
        else:
            raw["fieldsV1"] = self._trie if self._fresh else clone(self._trie)
        if self.subresource:
            raw["subresource"] = self.subresource
        return raw


def _trie_node(trie: Mapping[str, Any], path: Path) -> Mapping[str, Any] | None:
    node: Any = trie
    for element in path:
        node = node.get(element) if isinstance(node, Mapping) else None
        if node is None:
            return None
    return node if isinstance(node, Mapping) else None


def _entries(obj: Mapping[str, Any] | None) -> list[_Entry]:
    if not obj:
        return []
    raw = (obj.get("metadata") or {}).get("managedFields") or []
    return [_Entry(e) for e in raw if isinstance(e, Mapping) and e.get("manager") is not None]


def _finish(obj: dict[str, Any], entries: list[_Entry]) -> dict[str, Any]:
    kept = [e for e in entries if not e.empty()]
    updates = [e for e in kept if e.operation == "Update"]
    if len(updates) > _MAX_UPDATE_ENTRIES:
        ancient = _Entry({"manager": "ancient-changes", "operation": "Update",
                          "apiVersion": updates[0].api_version})
        spill = updates[: len(updates) - _MAX_UPDATE_ENTRIES + 1]
        for entry in spill:
            ancient.paths |= entry.paths
            ancient.time = entry.time
        kept = [ancient, *(e for e in kept if e not in spill)]
    meta = obj.setdefault("metadata", {})
    if kept:
        meta["managedFields"] = [e.to_json() for e in kept]
    else:
        meta.pop("managedFields", None)
    return obj


def _walker(obj: Mapping[str, Any], schema: Mapping[str, Any] | None) -> Walker:
    if schema is not None:
        return Walker(SchemaShape(schema), key_defaults={})
    return Walker(builtin_shape(str(obj.get("kind", ""))), key_defaults=KEY_DEFAULTS)


def _fields_of(walker: Walker, stripped: Mapping[str, Any]) -> set[Path]:
    out: set[Path] = set()
    for key, value in stripped.items():
        walker.add_field(key, value, walker.shape, (), out)
    return out


def _strip_server_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object as field sets see it: no identity, no server-set metadata."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if key in _ROOT_SKIP:
            continue
        if key == "metadata" and isinstance(value, dict):
            meta = {k: v for k, v in value.items() if k not in _SERVER_METADATA}
            if meta:
                out[key] = meta
        else:
            out[key] = value
    return out


def _drop_removed(paths: set[Path], removed: set[Path]) -> set[Path]:
    if not removed:
        return paths
    return {p for p in paths if not any(p[: len(r)] == r for r in removed)}


def record_update(old: dict[str, Any] | None, new: dict[str, Any], *, manager: str,
                  operation: str = "Update", subresource: str | None, now: str,
                  schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Return `new` with managedFields updated for a create, update or non-apply patch.

    The writer owns every field it added or changed; other managers lose those fields, and
    fields that disappeared are dropped from every manager. A request that sets managedFields
    itself (different from the stored ones) replaces them; `[{}]` clears them. The result is a
    new top-level dict and metadata dict; other subtrees are shared with `new`.
    """
    # only metadata is rewritten: the rest of the result shares its subtrees with `new`
    result = {**new, "metadata": dict(new.get("metadata") or {})}
    walker = _walker(result, schema)
    walker.mark_maps = True
    old_entries = _entries(old)
    requested = (new.get("metadata") or {}).get("managedFields")
    stored = ((old or {}).get("metadata") or {}).get("managedFields")
    if requested is not None and requested != stored:
        entries = _entries(new)
        if requested == [{}]:
            entries = []
    else:
        entries = old_entries
    api_version = str(new.get("apiVersion", ""))
    if old is None and requested is None:
        # a create: the writer owns everything it sent; build the trie without path sets
        trie = walker.trie(_strip_server_fields(new), walker.shape)
        if not trie:
            return _finish(result, [])
        entry = _Entry({"manager": manager, "operation": operation, "apiVersion": api_version,
                        "subresource": subresource, "time": now, "fieldsV1": trie},
                       fresh=True)
        return _finish(result, [entry])
    changed: set[Path] = set()
    removed: set[Path] = set()
    walker.diff(_strip_server_fields(old or {}), _strip_server_fields(new), walker.shape, (),
                changed, removed)
    mine = _Entry({"manager": manager, "operation": operation, "apiVersion": api_version,
                   "subresource": subresource})
    found = next((e for e in entries if e.identity() == mine.identity()), None)
    for entry in entries:
        if entry is not found and entry.touches(changed, removed):
            entry.paths = _drop_removed(entry.paths - changed, removed)
    if found is None and changed:
        found = mine
        entries.append(found)
    if found is not None:
        found.paths = _drop_removed(found.paths | changed, removed)
        if changed:
            found.time = now
    return _finish(result, entries)


def server_side_apply(live: dict[str, Any] | None, applied: dict[str, Any], *, manager: str,
                      force: bool, subresource: str | None = None, now: str,
                      schema: Mapping[str, Any] | None = None,
                      reset_fields: Iterable[str] = ()) -> dict[str, Any]:
    """Apply `applied` for `manager` over `live` (None: create) and return the new object.

    `schema` is a CRD version's openAPIV3Schema (list types from its x-kubernetes markers);
    without it the built-in rules of the applied kind are used. `reset_fields` names top-level
    fields the endpoint ignores (e.g. `status` on the main endpoint of a kind with a status
    subresource); they are neither merged nor owned. Raises `ApplyConflict`.
    """
    reset = set(reset_fields)
    config = _without_nulls({k: v for k, v in applied.items() if k not in reset})
    config_meta = config.get("metadata")
    if isinstance(config_meta, dict):
        config_meta.pop("managedFields", None)
    base: dict[str, Any] = clone(live) if live is not None else {
        "apiVersion": applied.get("apiVersion"), "kind": applied.get("kind"), "metadata": {}}
    walker = _walker(applied if live is None else live, schema)
    entries = _entries(live)
    base.get("metadata", {}).pop("managedFields", None)
    applied_set = _fields_of(walker, _strip_server_fields(config))
    merged = walker.merge(base, config, walker.shape)
    changed: set[Path] = set()
    walker.diff(_strip_server_fields(base), _strip_server_fields(merged), walker.shape, (),
                changed, set())
    api_version = str(applied.get("apiVersion") or base.get("apiVersion") or "")
    mine = _Entry({"manager": manager, "operation": "Apply", "apiVersion": api_version,
                   "subresource": subresource})
    found = next((e for e in entries if e.identity() == mine.identity()), None)
    conflicts: list[tuple[_Entry, Path]] = []
    for entry in entries:
        if entry is found:
            continue
        conflicts.extend((entry, p) for p in sorted(entry.paths & changed))
    if conflicts and not force:
        raise ApplyConflict(sorted((e.printed(), path_string(p)) for e, p in conflicts))
    for entry, path in conflicts:
        entry.paths.discard(path)
    previous = found.paths if found is not None else set()
    others = set().union(*(e.paths for e in entries if e is not found))
    for path in sorted(previous - applied_set, key=len, reverse=True):
        if any(o[: len(path)] == path for o in others):
            continue
        if any(a[: len(path)] == path for a in applied_set):
            continue
        walker.remove(merged, path, prune_empty=schema is None)
    if found is None:
        found = mine
        entries.append(found)
    found.paths = applied_set
    found.api_version = api_version
    found.time = now
    if live is None:
        merged_meta = merged.setdefault("metadata", {})
        for key in ("name", "namespace", "generateName"):
            if isinstance(config_meta, dict) and key in config_meta:
                merged_meta[key] = config_meta[key]
    return _finish(merged, entries)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value
