"""Catalog entries fuzzed at load: each bad file fails with its file and key path, and every
other entry still loads (``parse_catalog_report``); ``parse_catalog`` raises the first."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from cre.catalog import CatalogError, default_catalog_dir, parse_catalog, read_catalog_files
from cre.catalog.parse import parse_catalog_report

FILES = read_catalog_files(default_catalog_dir())
ENTRY_FILES = sorted(p for p in FILES if not p.startswith("_"))


def _load(text: str) -> Any:
    return YAML(typ="safe", pure=True).load(text)


def _dump(doc: Any) -> str:
    out = io.StringIO()
    YAML(typ="safe", pure=True).dump(doc, out)
    return out.getvalue()


def _edit(change: Callable[[dict[str, Any]], None]) -> Callable[[str], str]:
    def apply(text: str) -> str:
        doc = _load(text)
        change(doc)
        return _dump(doc)
    return apply


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        node = doc
        *parents, last = key.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    return change


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        node = doc
        *parents, last = key.split(".")
        for part in parents:
            node = node[part]
        del node[last]
    return change


# name -> (mutation, the key path the error must name; None: a YAML line/column)
MUTATIONS: dict[str, tuple[Callable[[str], str], str | None]] = {
    "broken YAML": (lambda text: text + "\nbroken: [unclosed\n", None),
    "not a mapping": (lambda text: "- just\n- a list\n", "(top level)"),
    "unknown key": (_edit(_set("bogus", 1)), "bogus"),
    "missing description": (_edit(_drop("description")), "description"),
    "runtime of the wrong type": (_edit(_set("runtime", 5)), "runtime"),
    "unknown runtime shape": (_edit(_set("runtime", "kubeflow-magic")), "runtime"),
    "fabric not a boolean": (_edit(_set("fabric", "yes please")), "fabric"),
    "spec not a mapping": (_edit(_set("spec", ["image"])), "spec"),
    "undeclared parameter": (_edit(_set("spec.image", "${noSuchParameter}")), "spec"),
    "unknown platform in a block": (_edit(_set("when", [{"platform": "no-such-cloud",
                                                         "parameters": {}}])), "when"),
    "parameters not a mapping": (_edit(_set("parameters", "none")), "parameters"),
}


@settings(max_examples=40, derandomize=True, deadline=None)
@given(st.dictionaries(st.sampled_from(ENTRY_FILES), st.sampled_from(sorted(MUTATIONS)),
                       min_size=1, max_size=4))
def test_each_bad_entry_fails_with_file_and_key_and_the_others_load(
        broken: dict[str, str]) -> None:
    files = dict(FILES)
    for path, mutation in broken.items():
        files[path] = MUTATIONS[mutation][0](files[path])
    report = parse_catalog_report(files)
    by_file = {e.file: e for e in report.errors}
    assert len(by_file) == len(report.errors), "one error per bad file"
    assert set(by_file) == set(broken), report.errors
    for path, mutation in broken.items():
        error = by_file[path]
        key = MUTATIONS[mutation][1]
        if key is None:
            assert error.path.startswith("line "), error
        else:
            assert error.path.split(".")[0].split("[")[0] == key, (mutation, str(error))
        assert str(error).startswith(f"{path}: ")
    loaded = {f"{p.removesuffix('.yaml')}" for p in ENTRY_FILES if p not in broken}
    assert set(report.catalog.entries) == loaded
    with pytest.raises(CatalogError) as first:
        parse_catalog(files)
    assert first.value.file == sorted(broken)[0] or first.value.file in broken


def test_a_bad_platform_file_is_reported_and_entries_still_load() -> None:
    files = dict(FILES)
    platform = sorted(p for p in FILES if p.startswith("_lib/platforms/"))[0]
    files[platform] = "name: [oops\n"
    report = parse_catalog_report(files)
    assert [e.file for e in report.errors] == [platform] or all(
        e.file == platform or "platform" in e.problem for e in report.errors)
    assert report.catalog.entries
