"""normalise() makes run-dependent values stable; to_json() fixes the file format."""

from __future__ import annotations

from typing import Any

import pytest

from cre.testing.golden import CRE_LEGACY, Mode, Normalisation, NormaliseError, normalise, to_json

UID_A = "0f8fad5b-d9cb-469f-a165-70867728950e"
UID_B = "7c9e6679-7425-40de-944b-e07fc1f90ae7"


def _pod(name: str, uid: str, owner: str, *, started: str = "2026-01-01T00:00:05Z"
         ) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "generateName": "web-", "uid": uid, "resourceVersion": "12",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "managedFields": [{"manager": "x"}],
                     "labels": {"controller-uid": owner},
                     "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": owner}]},
        "status": {"message": f"pod {name} started", "startTime": started},
    }


def test_placeholders_keep_identity() -> None:
    """The same uid is the same placeholder in a field, a label and a reference; a generated
    name is replaced wherever it appears, in messages too; times and rvs are masked."""
    out = normalise({"pod": _pod("web-x7k2p", UID_A, UID_B),
                     "owner": {"metadata": {"name": "rs", "uid": UID_B}}})
    assert out == {
        "owner": {"metadata": {"name": "rs", "uid": "<uid-1>"}},
        "pod": {
            "metadata": {"name": "web-<gen-1>", "generateName": "web-", "uid": "<uid-2>",
                         "resourceVersion": "<rv>", "creationTimestamp": "<time>",
                         "labels": {"controller-uid": "<uid-1>"},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "rs",
                                              "uid": "<uid-1>"}]},
            "status": {"message": "pod web-<gen-1> started", "startTime": "<time>"},
        },
    }


def test_placeholder_numbers_do_not_depend_on_random_values() -> None:
    """Two runs whose uids and name suffixes differ normalise to the same document: numbers
    follow the file order of masked values, not the random values themselves."""
    def run(a: str, b: str, s1: str, s2: str) -> Any:
        return normalise({"pods": {p["metadata"]["name"]: p for p in (
            _pod(f"web-{s1}", a, b), _pod(f"web-{s2}", b, a, started="2026-01-01T00:01:00Z"))}},
            Normalisation(timestamps=Mode.KEEP))

    first = run(UID_A, UID_B, "aaaaa", "zzzzz")
    second = run(UID_B, UID_A, "zzzzz", "aaaaa")
    assert to_json(first) == to_json(second)


def test_modes() -> None:
    """mask, null, drop and keep do what they say, per kind of value."""
    obj = {"metadata": {"uid": UID_A, "resourceVersion": "3",
                        "creationTimestamp": "2026-01-01T00:00:00Z"}}
    assert normalise(obj, Normalisation(uids=Mode.MASK, resource_versions=Mode.NULL,
                                        timestamps=Mode.DROP)) == {
        "metadata": {"uid": "<uid>", "resourceVersion": None}}
    assert normalise(obj, Normalisation(uids=Mode.KEEP, resource_versions=Mode.KEEP,
                                        timestamps=Mode.KEEP)) == obj


def test_timestamps_by_key_and_by_format() -> None:
    """A listed key is a time whatever its value; an RFC 3339 string is a time under any key;
    placeholders number distinct instants."""
    out = normalise({"status": {"reapAt": "2026-01-01T00:00:00Z", "time": 17,
                                "seenAt": "2026-01-01T00:00:00Z", "note": "2026"}},
                    Normalisation(timestamps=Mode.PLACEHOLDER))
    assert out == {"status": {"reapAt": "<time-1>", "seenAt": "<time-1>", "time": "<time-2>",
                              "note": "2026"}}


def test_drop_and_sort_by_jsonpath() -> None:
    """Fields dropped by JSONPath go before anything else; a sorted list is ordered by its keys
    on masked values (generated names compare as their prefix)."""
    opts = Normalisation().merged({
        "drop": ["$..annotations['kopf.zalando.org/last-handled-configuration']"],
        "sort": [{"path": "$.events", "by": ["$.reason", "$.involvedObject.name"]}],
    }, where="test")
    out = normalise({
        "events": [{"reason": "B", "involvedObject": {"name": "a"}},
                   {"reason": "A", "involvedObject": {"name": "b"}},
                   {"reason": "A", "involvedObject": {"name": "a"}}],
        "obj": {"metadata": {"annotations": {"kopf.zalando.org/last-handled-configuration": "{}",
                                             "keep": "me"}}},
    }, opts)
    assert [(e["reason"], e["involvedObject"]["name"]) for e in out["events"]] == [
        ("A", "a"), ("A", "b"), ("B", "a")]
    assert out["obj"] == {"metadata": {"annotations": {"keep": "me"}}}


def test_merged_settings_are_checked() -> None:
    """Unknown keys, bad modes and bad JSONPaths name where they were written."""
    with pytest.raises(NormaliseError, match=r"case: unknown keys \['uid'\]"):
        Normalisation().merged({"uid": "drop"}, where="case")
    with pytest.raises(NormaliseError, match=r"case.generatedNames: 'drop' is not one of"):
        Normalisation().merged({"generatedNames": "drop"}, where="case")
    with pytest.raises(NormaliseError, match=r"case.drop\[0\]: JSONPath '\$\.a\[': expected"):
        Normalisation().merged({"drop": ["$.a["]}, where="case")


def test_cre_legacy_settings() -> None:
    """CRE's own goldens: metadata identity and creation times dropped, other times null,
    a non-uid ``uid`` value ("<set>") and generated names kept."""
    obj: dict[str, Any] = {
        "metadata": {"name": "web-x7k2p", "generateName": "web-", "uid": UID_A,
                     "resourceVersion": "7", "generation": 2,
                     "creationTimestamp": "2026-01-01T00:00:00Z", "managedFields": [{}],
                     "ownerReferences": [{"kind": "Job", "name": "j", "uid": UID_B,
                                          "controller": True}]},
        "status": {"conditions": [{"type": "Ready", "status": "True",
                                   "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                   "workloadRef": {"uid": "<set>"}, "startTime": "2026-01-01T00:00:00Z"},
    }
    assert normalise(obj, CRE_LEGACY) == {
        "metadata": {"name": "web-x7k2p", "generateName": "web-",
                     "ownerReferences": [{"kind": "Job", "name": "j", "controller": True}]},
        "status": {"conditions": [{"type": "Ready", "status": "True",
                                   "lastTransitionTime": None}],
                   "workloadRef": {"uid": "<set>"}, "startTime": None},
    }
    assert obj["metadata"]["uid"] == UID_A


def test_json_format() -> None:
    """Sorted keys, two-space indent, trailing newline."""
    assert to_json({"b": 1, "a": [1]}) == '{\n  "a": [\n    1\n  ],\n  "b": 1\n}\n'
