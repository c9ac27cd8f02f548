"""The differential's own machinery: normalisation, comparison and the allowlist.

Without a real server: two emulators started with different seeds must come out equal on
every script (so what the normalisation masks is exactly what varies between runs), and a
planted difference is reported, explained only when an allowlist entry matches it.
"""

from __future__ import annotations

import json

import anyio

from cre.testing.controlplane import default_crds
from cre.testing.controlplane.allowlist import ALLOWED
from cre.testing.controlplane.differential import (
    Allowed,
    Target,
    compare,
    normalise,
    run_all,
    summary,
)
from cre.testing.controlplane.scripts import SCRIPTS
from cre.testing.procs import Stack


def test_normalise_masks_run_specific_values() -> None:
    obj = {"metadata": {"name": "gen-abcde", "generateName": "gen-", "uid": "u1",
                        "resourceVersion": "12", "creationTimestamp": "2026-01-01T00:00:00Z",
                        "managedFields": [{"time": "2026-01-01T00:00:00Z", "manager": "m"}],
                        "ownerReferences": [{"uid": "u2", "name": "o"}]},
           "status": {"conditions": [{"lastTransitionTime": "t", "type": "Ready"}]}}
    out = normalise(obj)
    assert out["metadata"] == {
        "name": "gen-<suffix>", "generateName": "gen-", "uid": "<uid>", "resourceVersion": "<rv>",
        "creationTimestamp": "<ts>", "managedFields": [{"time": "<ts>", "manager": "m"}],
        "ownerReferences": [{"uid": "<uid>", "name": "o"}]}
    assert out["status"]["conditions"] == [{"lastTransitionTime": "<ts>", "type": "Ready"}]
    gone = {"kind": "Status", "reason": "Expired", "message": "too old resource version: 5 (91)"}
    assert normalise(gone)["message"] == "too old resource version: 5 (<n>)"


def test_compare_reports_paths_and_applies_the_allowlist() -> None:
    a = [{"status": 200, "body": {"spec": {"x": 1, "y": [1, 2]}}}]
    b = [{"status": 200, "body": {"spec": {"x": 2, "y": [1, 2], "z": True}}}]
    outcome = compare("s", a, b, ())
    assert [(d.path, d.emulator, d.real) for d in outcome.differences] == [
        ("step[0].body.spec.x", 1, 2), ("step[0].body.spec.z", "<absent>", True)]
    assert outcome.verdict == "differing"
    allowed = compare("s", a, b, (Allowed("s", "step[[]0].body.spec.*", "because"),))
    assert allowed.verdict == "allowed"
    assert {d.reason for d in allowed.differences} == {"because"}
    assert compare("other", a, b, (Allowed("s", "*", "r"),)).verdict == "differing"
    assert compare("s", a, a, ()).verdict == "equal"


def test_allowlist_entries_have_reasons_and_match_a_script() -> None:
    names = [s.name for s in SCRIPTS]
    assert len(set(names)) == len(names)
    import fnmatch

    for entry in ALLOWED:
        assert len(entry.reason) > 20, entry
        assert any(fnmatch.fnmatchcase(n, entry.script) for n in names), entry


def test_two_emulators_with_different_seeds_are_equal_after_normalisation() -> None:
    with Stack() as one, Stack() as two:
        one.start_emulator(crds=default_crds(), args=["--seed", "1"])
        two.start_emulator(crds=default_crds(), args=["--seed", "2"])
        outcomes = anyio.run(run_all, Target.from_kubeconfig("one", one.kubeconfig),
                             Target.from_kubeconfig("two", two.kubeconfig), SCRIPTS, ())
    table = summary(outcomes)
    assert table["equal"] == len(SCRIPTS), json.dumps(table["unexplained"], default=str)[:3000]


def test_kubectl_table_rows_mask_ages_and_padding() -> None:
    from cre.testing.controlplane.differential import _table_line

    assert _table_line("NAME   DATA   AGE") == "NAME | DATA | AGE"
    assert _table_line("a      2      0s ") == "a | 2 | <age>"
    assert _table_line("long-name   1      3m20s") == "long-name | 1 | <age>"
    assert _table_line("p   1/1   Running   0   2d4h   10.0.0.1") == (
        "p | 1/1 | Running | 0 | <age> | 10.0.0.1")
    assert _table_line("configmap/a created") == "configmap/a created"
