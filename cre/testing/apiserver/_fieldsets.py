"""FieldsV1 field sets: the paths a write sets, their trie encoding and the structured merge.

Server-side apply and the managedFields bookkeeping of other writes both reason about sets of
field paths in the structured-merge-diff form: `f:<field>` for map and struct fields,
`k:<key json>` for items of `map` lists, `v:<value json>` for items of `set` lists and `i:<n>` for
positions in atomic lists. This module computes those sets from objects (all leaves; only what
changed between two versions), encodes and decodes the FieldsV1 trie (`".": {}` marks a node that
is itself a member), renders paths as conflict messages print them
(`.spec.containers[name="c"].image`), and merges an applied configuration into a live object
following each list's type.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from cre.testing.apiserver._shapes import EMPTY, ListRule, ListType, Shape, clone

Path = tuple[str, ...]
_SCALARS = frozenset({str, int, float, bool, type(None)})

# Go map-typed fields: when an update adds one, the map node itself is owned (".": {}).
_MAP_FIELDS = frozenset({
    "labels", "annotations", "nodeSelector", "data", "binaryData", "stringData", "limits",
    "requests", "capacity", "allocatable", "matchLabels",
})


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


class Walker:
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
                if type(child) in _SCALARS:  # a leaf: owned, nothing below it
                    out[f"f:{key}"] = {}
                    continue
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
