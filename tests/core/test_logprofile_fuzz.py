"""LogProfiles fuzzed at load: bad regexes, missing keys, wrong types and unknown keys.

Loading a LogProfile is what the measurement controller does with each one its informer
serves: the object is structured into the model (the informer's transform) and then checked and
compiled (:func:`cre.core.measure.logprofile.compile_profile`), one profile at a time. Each bad
profile must fail with a message naming the profile and the key at fault, with nothing but those two
errors ever raised, and the good profiles of the same batch still load.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cre.api.converter import structure, to_dict
from cre.api.errors import ValidationError
from cre.api.measurement import LogProfile
from cre.core.measure.logprofile import ProfileError, compile_profile, shipped_profiles

KEY = "spec.patterns.bandwidthResult"


def _base(name: str = "fuzzed") -> dict[str, Any]:
    raw: dict[str, Any] = to_dict(shipped_profiles()[0])
    raw["metadata"] = {"name": name}
    return raw


def load(raw: dict[str, Any]) -> str | None:
    """``None`` when the profile loads and compiles, else the error's message. Any other
    exception escapes (and fails the test)."""
    try:
        profile = structure(raw, LogProfile)
    except ValidationError as exc:
        return str(exc)
    try:
        compile_profile(profile)
    except ProfileError as exc:
        return str(exc)
    return None


def _leaves(node: Any, path: str = "") -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, f"{path}.{key}" if path else key)
    else:
        yield path


def _set(raw: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node = raw
    for key in parents:
        node = node[key]
    node[last] = value


def _drop(raw: dict[str, Any], path: str) -> None:
    *parents, last = path.split(".")
    node = raw
    for key in parents:
        node = node[key]
    del node[last]


SPEC_LEAVES = sorted(p for p in _leaves(_base()) if p.startswith("spec."))
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)


def _names(message: str, path: str) -> bool:
    """Whether ``message`` names the profile and ``path``, an ancestor or a descendant."""
    if not message.startswith("LogProfile fuzzed: "):
        return False
    parts = path.split(".")
    candidates = {".".join(parts[:i]) for i in range(min(2, len(parts)), len(parts) + 1)}
    return any(re.search(rf"(^|\W){re.escape(c)}(\W|$)", message) for c in candidates)


@pytest.mark.parametrize(("mutate", "path"), [
    (lambda r: _set(r, f"{KEY}.regex", "(?P<size>\\d+"), f"{KEY}.regex"),
    (lambda r: _set(r, f"{KEY}.regex", "[a-"), f"{KEY}.regex"),
    (lambda r: _set(r, f"{KEY}.regex", "(?P<size>\\d+) (?P<algBW>\\d+)"), f"{KEY}.regex"),
    (lambda r: _set(r, f"{KEY}.regex", ""), f"{KEY}.regex"),
    (lambda r: _set(r, f"{KEY}.example", "not a row"), f"{KEY}.regex"),
    (lambda r: _drop(r, f"{KEY}.regex"), f"{KEY}.regex"),
    (lambda r: _drop(r, KEY), KEY),
    (lambda r: _drop(r, "spec.patterns"), "spec.patterns"),
    (lambda r: _drop(r, "spec"), "spec"),
    (lambda r: _set(r, f"{KEY}.regex", 42), f"{KEY}.regex"),
    (lambda r: _set(r, f"{KEY}.regex", ["(?P<size>\\d+)"]), f"{KEY}.regex"),
    (lambda r: _set(r, KEY, "(?P<size>\\d+)"), KEY),
    (lambda r: _set(r, "spec.workerStrategy.type", "Everyone"), "spec.workerStrategy.type"),
    (lambda r: _set(r, "spec.workerStrategy", 7), "spec.workerStrategy"),
    (lambda r: _set(r, "spec.patterns.unknownPattern", {"regex": "x"}),
     "spec.patterns.unknownPattern"),
], ids=[
    "regex does not compile", "regex is an open range", "regex lacks busBW", "regex empty",
    "example does not match", "missing regex", "missing bandwidthResult", "missing patterns",
    "missing spec", "regex is a number", "regex is a list",
    "bandwidthResult is a string", "unknown worker strategy", "workerStrategy is a number",
    "unknown pattern key",
])
def test_each_bad_profile_names_itself_and_the_key(mutate: Any, path: str) -> None:
    raw = _base()
    mutate(raw)
    message = load(raw)
    assert message is not None, f"{path}: a bad profile loaded"
    assert _names(message, path), message


@settings(max_examples=300, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from(SPEC_LEAVES), value=JSON)
def test_any_value_at_any_key_loads_or_names_the_key(path: str, value: Any) -> None:
    """Whatever JSON value stands at a key, the profile loads or its error names the profile
    and that key (its field or the pattern it belongs to); nothing else is raised."""
    raw = _base()
    _set(raw, path, value)
    message = load(raw)
    if message is not None:
        pattern_key = KEY if path.startswith(KEY) else path
        assert _names(message, path) or _names(message, pattern_key), (path, value, message)


def test_bad_profiles_do_not_stop_the_good_ones() -> None:
    """A batch of bad profiles between the shipped ones: each bad one fails on its own with its
    own name, and the shipped ones load as they are."""
    batch: list[dict[str, Any]] = []
    for i, good in enumerate(shipped_profiles()):
        bad = _base(f"bad-{i}")
        _set(bad, f"{KEY}.regex", "(" * (i + 1))
        batch += [bad, to_dict(good), json.loads(json.dumps({**_base(f"worse-{i}"),
                                                            "spec": "nope"}))]
    results = {raw["metadata"]["name"]: load(copy.deepcopy(raw)) for raw in batch}
    for good in shipped_profiles():
        assert results.pop(good.metadata.name or "") is None
    assert len(results) == 4
    for name, message in results.items():
        assert message is not None and message.startswith(f"LogProfile {name}: spec"), message
