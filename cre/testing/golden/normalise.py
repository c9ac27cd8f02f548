"""Make a captured output stable enough to compare byte for byte with a reviewed golden.

Server-assigned identity and clocks change on every run and say nothing about behaviour:
uids, resourceVersions, timestamps and the random suffix of a ``generateName``. Each has a
mode (:class:`Mode`): ``placeholder`` replaces a value by a numbered stand-in that keeps
identity (the same uid is ``<uid-1>`` wherever it appears, in a field, a label or a message),
``mask`` by one constant (``<uid>``), ``null`` keeps the key with ``null`` (presence shows),
``drop`` removes the key, ``keep`` leaves it. Fields a golden should not hold at all are
dropped by JSONPath, and lists whose order the API does not define are sorted by JSONPath keys.

Placeholders are numbered in the order the golden file shows them (sorted keys, list order).
That order must not itself depend on random values, so it is taken on a *masked* copy: every
dict is walked by its keys with identity masked, and a sorted list compares masked elements.

The passes, in order: drop, sort, identity. Serialisation is fixed too: sorted keys, 2-space
indent, trailing newline (:func:`to_json`).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from cre.testing.golden import jsonpath


class NormaliseError(ValueError):
    """A normalisation setting is invalid; the message names where it came from and the key."""


class Mode(enum.StrEnum):
    """What happens to one kind of run-dependent value."""

    PLACEHOLDER = "placeholder"
    MASK = "mask"
    NULL = "null"
    DROP = "drop"
    KEEP = "keep"


#: Keys whose value is a point in time wherever they appear (Kubernetes' own field names).
DEFAULT_TIMESTAMP_KEYS: Final = frozenset({
    "creationTimestamp", "deletionTimestamp", "lastTransitionTime", "lastUpdateTime",
    "lastProbeTime", "lastHeartbeatTime", "startTime", "completionTime", "startedAt",
    "finishedAt", "firstTimestamp", "lastTimestamp", "eventTime", "time", "renewTime",
    "acquireTime",
})

UUID: Final = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                         r"[0-9a-fA-F]{12}")
RFC3339: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")

_NAME_MODES: Final = frozenset({Mode.PLACEHOLDER, Mode.MASK, Mode.KEEP})


@attrs.frozen(kw_only=True)
class SortRule:
    """Sort every list ``path`` matches by the values of ``by`` (JSONPaths on each element;
    elements with equal keys keep their order), or without ``by`` by the whole element. Keys
    compare on masked values, so the order does not depend on random values."""

    path: str
    by: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class Normalisation:
    """The normalisation settings of one case (project defaults merged with the case's own)."""

    uids: Mode = Mode.PLACEHOLDER
    resource_versions: Mode = Mode.MASK
    timestamps: Mode = Mode.MASK
    generated_names: Mode = Mode.PLACEHOLDER
    timestamp_keys: frozenset[str] = DEFAULT_TIMESTAMP_KEYS
    drop: tuple[str, ...] = ("$..metadata.managedFields",)
    sort: tuple[SortRule, ...] = ()

    def merged(self, data: Mapping[str, Any] | None, *, where: str) -> Normalisation:
        """These settings overridden by ``data`` (camelCase keys, as written in input.yaml or
        pyproject). Modes and ``timestampKeys`` replace; ``drop`` and ``sort`` add to the
        inherited lists; ``extraTimestampKeys`` adds keys."""
        if not data:
            return self
        if not isinstance(data, Mapping):
            raise NormaliseError(f"{where}: expected a mapping, got {type(data).__name__}")
        unknown = sorted(set(data) - set(_KEYS))
        if unknown:
            raise NormaliseError(f"{where}: unknown keys {unknown} (known: {sorted(_KEYS)})")
        out = self
        for key, value in data.items():
            out = _KEYS[key](out, value, f"{where}.{key}")
        return out

    def apply(self, value: Any) -> Any:
        """A normalised copy of ``value`` (a JSON-able structure); ``value`` is not changed."""
        return normalise(value, self)


def _mode(field: str, allowed: frozenset[Mode] = frozenset(Mode)) -> Callable[
        [Normalisation, Any, str], Normalisation]:
    def set_mode(n: Normalisation, value: Any, where: str) -> Normalisation:
        try:
            mode = Mode(str(value).lower() if value is not None else "null")
        except ValueError:
            mode = None
        if mode is None or mode not in allowed:
            raise NormaliseError(f"{where}: {value!r} is not one of "
                                 f"{sorted(m.value for m in allowed)}")
        changes: dict[str, Any] = {field: mode}
        return attrs.evolve(n, **changes)
    return set_mode


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise NormaliseError(f"{where}: expected a list of strings")
    return tuple(value)


def _set_drop(n: Normalisation, value: Any, where: str) -> Normalisation:
    paths = _strings(value, where)
    for i, p in enumerate(paths):
        _parse(p, f"{where}[{i}]")
    return attrs.evolve(n, drop=(*n.drop, *[p for p in paths if p not in n.drop]))


def _set_sort(n: Normalisation, value: Any, where: str) -> Normalisation:
    if not isinstance(value, list | tuple):
        raise NormaliseError(f"{where}: expected a list of {{path, by}} mappings")
    rules = []
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        if isinstance(item, str):
            item = {"path": item}
        if not isinstance(item, Mapping) or not isinstance(item.get("path"), str) \
                or set(item) - {"path", "by"}:
            raise NormaliseError(f"{at}: expected {{path: <JSONPath>, by: [<JSONPath>, ...]}}")
        by = item.get("by", [])
        by = _strings([by] if isinstance(by, str) else by, f"{at}.by")
        _parse(item["path"], f"{at}.path")
        for j, b in enumerate(by):
            _parse(b, f"{at}.by[{j}]")
        rules.append(SortRule(path=item["path"], by=by))
    return attrs.evolve(n, sort=(*n.sort, *rules))


def _set_time_keys(n: Normalisation, value: Any, where: str) -> Normalisation:
    return attrs.evolve(n, timestamp_keys=frozenset(_strings(value, where)))


def _add_time_keys(n: Normalisation, value: Any, where: str) -> Normalisation:
    return attrs.evolve(n, timestamp_keys=n.timestamp_keys | frozenset(_strings(value, where)))


_KEYS: Final[dict[str, Callable[[Normalisation, Any, str], Normalisation]]] = {
    "uids": _mode("uids"),
    "resourceVersions": _mode("resource_versions"),
    "timestamps": _mode("timestamps"),
    "generatedNames": _mode("generated_names", _NAME_MODES),
    "timestampKeys": _set_time_keys,
    "extraTimestampKeys": _add_time_keys,
    "drop": _set_drop,
    "sort": _set_sort,
}


def _parse(path: str, where: str) -> jsonpath.JsonPath:
    try:
        return jsonpath.parse(path)
    except jsonpath.JsonPathError as exc:
        raise NormaliseError(f"{where}: {exc}") from None


#: What CRE's own goldens were written with (before placeholders existed): identity dropped,
#: times null, generated names kept. ``[tool.cre.golden.normalise]`` in CRE's pyproject says
#: the same; this constant is for callers that normalise without a project.
CRE_LEGACY: Final = Normalisation(
    uids=Mode.DROP, resource_versions=Mode.DROP, timestamps=Mode.NULL,
    generated_names=Mode.KEEP,
    timestamp_keys=frozenset({
        "lastTransitionTime", "lastUpdateTime", "lastProbeTime", "lastHeartbeatTime",
        "startTime", "completionTime", "startedAt", "finishedAt", "firstTimestamp",
        "lastTimestamp", "eventTime", "workloadStartTime", "schedulingBlockedSince", "time"}),
    drop=tuple(f"$..metadata.{k}" for k in (
        "generation", "creationTimestamp", "managedFields", "selfLink", "deletionTimestamp",
        "deletionGracePeriodSeconds")),
)


# --- the passes ------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A deep copy as plain dicts and lists (tuples and other mappings converted)."""
    if isinstance(value, Mapping):
        return {str(k) if not isinstance(k, str) else k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@attrs.define
class _Identity:
    """The run-dependent values found in a document, and their placeholders once numbered."""

    opts: Normalisation
    uids: set[str] = attrs.field(factory=set)
    names: dict[str, str] = attrs.field(factory=dict)  # generated name -> its prefix
    numbers: dict[tuple[str, str], str] = attrs.field(factory=dict)
    counters: dict[str, int] = attrs.field(factory=dict)
    _name_re: re.Pattern[str] | None = None

    def scan(self, value: Any) -> None:
        if isinstance(value, dict):
            uid = value.get("uid")
            if isinstance(uid, str) and UUID.fullmatch(uid):
                self.uids.add(uid)
            prefix, name = value.get("generateName"), value.get("name")
            if isinstance(prefix, str) and prefix and isinstance(name, str) \
                    and name.startswith(prefix) and len(name) > len(prefix):
                self.names[name] = prefix
            for item in value.values():
                self.scan(item)
        elif isinstance(value, list):
            for item in value:
                self.scan(item)

    @property
    def name_re(self) -> re.Pattern[str] | None:
        if self._name_re is None and self.names:
            alts = "|".join(re.escape(n) for n in sorted(self.names, key=len, reverse=True))
            self._name_re = re.compile(rf"(?<![A-Za-z0-9\-])(?:{alts})(?![A-Za-z0-9\-])")
        return self._name_re

    def number(self, kind: str, raw: str) -> int:
        key = (kind, raw)
        if key not in self.numbers:
            self.counters[kind] = self.counters.get(kind, 0) + 1
            self.numbers[key] = str(self.counters[kind])
        return int(self.numbers[key])

    def stand_in(self, kind: str, raw: str, mode: Mode, *, masked: bool) -> str:
        if mode is Mode.MASK or masked:
            return f"<{kind}>"
        return f"<{kind}-{self.number(kind, raw)}>"

    def text(self, s: str, *, masked: bool) -> str:
        """``s`` with known uids and generated names replaced (whole value or inside text).

        Inside text a uid whose field is dropped or nulled is masked (``<uid>``): a label or a
        message cannot lose it without losing the rest."""
        if self.uids and self.opts.uids is not Mode.KEEP:
            mode = Mode.PLACEHOLDER if self.opts.uids is Mode.PLACEHOLDER else Mode.MASK
            s = UUID.sub(lambda m: self.stand_in("uid", m.group(0), mode, masked=masked)
                         if m.group(0) in self.uids else m.group(0), s)
        pattern = self.name_re if self.opts.generated_names is not Mode.KEEP else None
        if pattern is not None:
            mode = self.opts.generated_names
            s = pattern.sub(lambda m: self.names[m.group(0)] + self.stand_in(
                "gen", m.group(0), mode, masked=masked), s)
        return s


_DROPPED: Final = object()


def _field(idn: _Identity, key: str, value: Any, *, masked: bool) -> Any:
    """The normalised value of ``key: value`` in a mapping, or ``_DROPPED``."""
    opts = idn.opts
    if key == "uid" and isinstance(value, str) and value in idn.uids:
        return _by_mode(idn, "uid", value, opts.uids, masked=masked)
    if key == "resourceVersion" and isinstance(value, str):
        return _by_mode(idn, "rv", value, opts.resource_versions, masked=masked)
    if value is not None and opts.timestamps is not Mode.KEEP and (
            key in opts.timestamp_keys or (isinstance(value, str) and RFC3339.fullmatch(value))):
        raw = value if isinstance(value, str) else json.dumps(value)
        return _by_mode(idn, "time", raw, opts.timestamps, masked=masked)
    return _walk(idn, value, masked=masked)


def _by_mode(idn: _Identity, kind: str, raw: str, mode: Mode, *, masked: bool) -> Any:
    """``masked``: the value as the output will show it, placeholders without their number."""
    if mode is Mode.DROP:
        return _DROPPED
    if mode is Mode.NULL:
        return None
    if mode is Mode.KEEP:
        return raw
    return idn.stand_in(kind, raw, mode, masked=masked)


def _ordered_keys(idn: _Identity, value: dict[str, Any]) -> list[str]:
    """The keys of ``value`` in the order the golden shows them, judged on masked keys (ties:
    on masked values), so that placeholder numbers do not depend on random values."""
    masked = {k: idn.text(k, masked=True) for k in value}
    groups: dict[str, list[str]] = {}
    for k in value:
        groups.setdefault(masked[k], []).append(k)
    out: list[str] = []
    for mk in sorted(groups):
        ties = groups[mk]
        if len(ties) > 1:
            ties.sort(key=lambda k: (_canonical(_field(idn, k, value[k], masked=True)), k))
        out.extend(ties)
    return out


def _canonical(value: Any) -> str:
    return json.dumps(None if value is _DROPPED else value, sort_keys=True, default=str)


def _walk(idn: _Identity, value: Any, *, masked: bool) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key in _ordered_keys(idn, value):
            item = _field(idn, key, value[key], masked=masked)
            if item is not _DROPPED:
                out[idn.text(key, masked=masked)] = item
        return out
    if isinstance(value, list):
        return [_walk(idn, v, masked=masked) for v in value]
    if isinstance(value, str):
        return idn.text(value, masked=masked)
    return value


def _sort(doc: Any, rule: SortRule, idn: _Identity) -> None:
    path = jsonpath.parse(rule.path)
    by = [jsonpath.parse(b) for b in rule.by]

    def key(item: Any) -> str:
        masked = _walk(idn, item, masked=True)
        # With keys, ties keep their order (a controller's events for one object stay in the
        # order they were written); without, the whole masked element decides.
        return _canonical([p.values(masked) for p in by] if by else masked)

    for _, found in path.find(doc):
        if isinstance(found, list):
            found.sort(key=key)


def normalise(value: Any, options: Normalisation | None = None) -> Any:
    """A normalised copy of ``value`` (default settings: :class:`Normalisation`'s)."""
    opts = options or Normalisation()
    doc = _plain(value)
    for path in opts.drop:
        jsonpath.delete(doc, jsonpath.parse(path))
    idn = _Identity(opts)
    idn.scan(doc)
    for rule in opts.sort:
        _sort(doc, rule, idn)
    return _walk(idn, doc, masked=False)


def to_json(value: Any) -> str:
    """The golden file text: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


__all__ = [
    "CRE_LEGACY",
    "DEFAULT_TIMESTAMP_KEYS",
    "Mode",
    "Normalisation",
    "NormaliseError",
    "SortRule",
    "normalise",
    "to_json",
]
