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

from cre.testing.apiserver._shapes import (
    EMPTY,
    KEY_DEFAULTS,
    ListRule,
    ListType,
    SchemaShape,
    Shape,
    builtin_shape,
    clone,
)

Path = tuple[str, ...]

_SERVER_METADATA = frozenset({
    "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "managedFields",
})
_ROOT_SKIP = frozenset({"apiVersion", "kind"})
# Go map-typed fields: when an update adds one, the map node itself is owned (".": {}).
_MAP_FIELDS = frozenset({
    "labels", "annotations", "nodeSelector", "data", "binaryData", "stringData", "limits",
    "requests", "capacity", "allocatable", "matchLabels",
})
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


# --- field-set encoding ------------------------------------------------------------------


def decode_fields(fields: Mapping[str, Any], prefix: Path = ()) -> set[Path]:
    """The set of paths a FieldsV1 trie names."""
    out: set[Path] = set()
    for key, child in fields.items():
        if key == ".":
            continue
        path = (*prefix, key)
        if not isinstance(child, Mapping) or not child or "." in child:
            out.add(path)
        if isinstance(child, Mapping):
            out |= decode_fields(child, path)
    return out


def encode_fields(paths: Iterable[Path]) -> dict[str, Any]:
    """The FieldsV1 trie of a set of paths (keys sorted as the real server writes them)."""
    root: dict[str, Any] = {}
    members = set(paths)
    for path in sorted(members):
        node = root
        for element in path:
            node = node.setdefault(element, {})
    _mark_members(root, (), members)
    return root


def _mark_members(node: dict[str, Any], prefix: Path, members: set[Path]) -> None:
    for key, child in list(node.items()):
        path = (*prefix, key)
        if child:
            _mark_members(child, path, members)
            if path in members:
                node[key] = {".": {}, **child}


def path_string(path: Path) -> str:
    """The structured-merge-diff rendering of a path: `.spec.containers[name="c"].image`."""
    parts: list[str] = []
    for element in path:
        tag, body = element[:2], element[2:]
        if tag == "f:":
            parts.append(f".{body}")
        elif tag == "k:":
            key = json.loads(body)
            parts.append("[" + ",".join(
                f"{name}={json.dumps(key[name], separators=(',', ':'))}"
                for name in sorted(key)) + "]")
        elif tag == "v:":
            parts.append(f"[={body}]")
        else:
            parts.append(f"[{body}]")
    return "".join(parts)


# --- walking objects ---------------------------------------------------------------------


def _item_key(item: Any, rule: ListRule, defaults: Mapping[str, Any]) -> str | None:
    if not isinstance(item, dict):
        return None
    key = {}
    for name in rule.ssa_keys:
        if name in item:
            key[name] = item[name]
        elif name in defaults:
            key[name] = defaults[name]
    return "k:" + json.dumps(key, sort_keys=True, separators=(",", ":"))


def _value_key(value: Any) -> str:
    return "v:" + json.dumps(value, sort_keys=True, separators=(",", ":"))


class _Walker:
    """Field-set computations over one object, under one shape."""

    def __init__(self, shape: Shape, *, key_defaults: Mapping[str, Any]) -> None:
        self.shape = shape
        self.defaults = key_defaults
        # Update operations own added Go map fields themselves (".": {}); apply does not.
        self.mark_maps = False

    def fields(self, value: Any, shape: Shape | None, prefix: Path, out: set[Path],
               *, rule: ListRule | None = None) -> None:
        """Add the paths a value sets (leaves, list items) under `prefix`."""
        if isinstance(value, dict) and value and rule is None and not (shape and shape.atomic()):
            for key, child in value.items():
                self.add_field(key, child, shape, prefix, out)
            return
        if (isinstance(value, list) and value and rule is not None
                and rule.ssa_type is not ListType.ATOMIC):
            for item in value:
                element = self._element(item, rule)
                out.add((*prefix, element))
                if rule.ssa_type is ListType.MAP and isinstance(item, dict):
                    self.fields(item, rule.items or EMPTY, (*prefix, element), out)
            return
        out.add(prefix)

    def add_field(self, key: str, child: Any, shape: Shape | None, prefix: Path,
               out: set[Path]) -> None:
        path = (*prefix, f"f:{key}")
        if self.mark_maps and key in _MAP_FIELDS and isinstance(child, dict) and child:
            out.add(path)
        if isinstance(child, list):
            lrule = shape.list_rule(key) if shape else None
            self.fields(child, None, path, out, rule=lrule or ListRule())
        else:
            self.fields(child, self._sub(shape, key), path, out)

    def trie(self, value: Any, shape: Shape | None, *,
             rule: ListRule | None = None) -> dict[str, Any]:
        """The FieldsV1 trie below a value, built directly (the same set `fields` computes)."""
        out: dict[str, Any] = {}
        if isinstance(value, dict) and value and rule is None and not (shape and shape.atomic()):
            for key, child in value.items():
                if isinstance(child, list):
                    lrule = (shape.list_rule(key) if shape else None) or ListRule()
                    sub = self.trie(child, None, rule=lrule)
                else:
                    sub = self.trie(child, self._sub(shape, key))
                if self.mark_maps and key in _MAP_FIELDS and isinstance(child, dict) and child:
                    sub = {".": {}, **sub}
                out[f"f:{key}"] = sub
        elif (isinstance(value, list) and rule is not None
              and rule.ssa_type is not ListType.ATOMIC):
            for item in value:
                element = self._element(item, rule)
                sub = {}
                if rule.ssa_type is ListType.MAP and isinstance(item, dict):
                    sub = self.trie(item, rule.items or EMPTY)
                out[element] = {".": {}, **sub} if sub else {}
        return dict(sorted(out.items())) if len(out) > 1 else out

    @staticmethod
    def _sub(shape: Shape | None, key: str) -> Shape | None:
        if shape is None:
            return None
        return shape.field(key) or shape.values()

    def _element(self, item: Any, rule: ListRule) -> str:
        if rule.ssa_type is ListType.MAP:
            key = _item_key(item, rule, self.defaults)
            if key is not None:
                return key
        return _value_key(item)

    def diff(self, old: Any, new: Any, shape: Shape | None, prefix: Path,
             changed: set[Path], removed: set[Path], *, rule: ListRule | None = None,
             name: str = "") -> None:
        """Collect paths added or modified from `old` to `new`, and prefixes that disappeared."""
        if old == new:
            return
        if (isinstance(old, dict) and isinstance(new, dict) and rule is None
                and not (shape and shape.atomic())):
            for key, child in new.items():
                path = (*prefix, f"f:{key}")
                if key not in old:
                    self.add_field(key, child, shape, prefix, changed)
                    continue
                if isinstance(child, list):
                    lrule = (shape.list_rule(key) if shape else None) or ListRule()
                    self.diff(old[key], child, None, path, changed, removed, rule=lrule)
                else:
                    self.diff(old[key], child, self._sub(shape, key), path, changed, removed)
            for key in old:
                if key not in new:
                    removed.add((*prefix, f"f:{key}"))
            return
        if (isinstance(old, list) and isinstance(new, list) and rule is not None
                and rule.ssa_type is not ListType.ATOMIC):
            old_items = {self._element(item, rule): item for item in old}
            new_items = {self._element(item, rule): item for item in new}
            for element, item in new_items.items():
                path = (*prefix, element)
                if element not in old_items:
                    changed.add(path)
                    if rule.ssa_type is ListType.MAP and isinstance(item, dict):
                        self.fields(item, rule.items or EMPTY, path, changed)
                elif rule.ssa_type is ListType.MAP:
                    self.diff(old_items[element], item, rule.items or EMPTY, path,
                              changed, removed)
            removed.update((*prefix, e) for e in old_items if e not in new_items)
            if not new:
                changed.add(prefix)
            return
        self.fields(new, shape, prefix, changed, rule=rule)

    def merge(self, live: Any, config: Any, shape: Shape | None, *,
              rule: ListRule | None = None) -> Any:
        """Structured merge of an applied configuration into the live value."""
        if (isinstance(live, dict) and isinstance(config, dict) and rule is None
                and not (shape and shape.atomic())):
            result = dict(live)
            for key, value in config.items():
                if isinstance(value, list):
                    lrule = (shape.list_rule(key) if shape else None) or ListRule()
                    result[key] = self.merge(live.get(key), value, None, rule=lrule)
                else:
                    result[key] = self.merge(live.get(key), value, self._sub(shape, key))
            return result
        if (isinstance(live, list) and isinstance(config, list) and rule is not None
                and rule.ssa_type is not ListType.ATOMIC):
            merged = list(live)
            index = {self._element(item, rule): i for i, item in enumerate(merged)}
            for item in config:
                element = self._element(item, rule)
                if element not in index:
                    index[element] = len(merged)
                    merged.append(clone(item))
                elif rule.ssa_type is ListType.MAP:
                    at = index[element]
                    merged[at] = self.merge(merged[at], item, rule.items or EMPTY)
            return merged
        return clone(config)

    def remove(self, obj: dict[str, Any], path: Path, *, prune_empty: bool) -> None:
        """Remove the field or list item at `path` (missing paths are ignored)."""
        trail: list[tuple[Any, Any]] = []
        node: Any = obj
        for element in path[:-1]:
            found = self._step(node, element)
            if found is None:
                return
            trail.append((node, found[0]))
            node = found[1]
        last = path[-1]
        found = self._step(node, last)
        if found is None:
            return
        del node[found[0]]
        if prune_empty:
            for parent, key in reversed(trail):
                child = parent[key]
                if child in ({}, []):
                    del parent[key]
                else:
                    break

    def _step(self, node: Any, element: str) -> tuple[Any, Any] | None:
        tag, body = element[:2], element[2:]
        if tag == "f:" and isinstance(node, dict) and body in node:
            return body, node[body]
        if tag in ("k:", "v:") and isinstance(node, list):
            for i, item in enumerate(node):
                if tag == "v:" and _value_key(item) == element:
                    return i, item
                if tag == "k:" and isinstance(item, dict):
                    key = json.loads(body)
                    if all(item.get(k, self.defaults.get(k)) == v for k, v in key.items()):
                        return i, item
        return None


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


def _walker(obj: Mapping[str, Any], schema: Mapping[str, Any] | None) -> _Walker:
    if schema is not None:
        return _Walker(SchemaShape(schema), key_defaults={})
    return _Walker(builtin_shape(str(obj.get("kind", ""))), key_defaults=KEY_DEFAULTS)


def _fields_of(walker: _Walker, stripped: Mapping[str, Any]) -> set[Path]:
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
