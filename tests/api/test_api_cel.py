"""CEL strings are bounded, and the CEL library's panic never escapes as a BaseException."""

from __future__ import annotations

from typing import Any

import pytest
from ruamel.yaml import YAML

from cre.api.cel import CelError, compile_cel
from cre.api.converter import from_dict
from cre.api.crdgen import render_all
from cre.api.validate import validate
from cre.core.job.reconcile import spec_errors

# A syntax error past column 65,535: the Rust CEL parser panics (pyo3 PanicException).
PANICKING = "value > " + "(" * 65_600


def _job(thresholds: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "cre.dev/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": {"workload": {"trainJob": {}}, "thresholds": thresholds}}


def test_compile_turns_the_library_panic_into_a_cel_error() -> None:
    """The expression that makes the library panic raises CelError (a ValueError) naming the
    failure, not a BaseException that would escape ``except Exception``."""
    with pytest.raises(CelError, match="the CEL library failed"):
        compile_cel(PANICKING)


def test_compile_reports_a_syntax_error_and_caches_good_programs() -> None:
    """A syntax error is a CelError with the parser's first line; a good program compiles once."""
    with pytest.raises(CelError, match="Syntax error"):
        compile_cel("node.((")
    assert compile_cel("value > 1.0") is compile_cel("value > 1.0")
    assert compile_cel("value > 1.0").run({"value": 2.0}) is True


def test_run_turns_evaluation_errors_into_cel_errors() -> None:
    """A missing key or a division by zero during evaluation is a CelError."""
    with pytest.raises(CelError):
        compile_cel("node.spec.unschedulable").run({"node": {}})
    with pytest.raises(CelError):
        compile_cel("1 / 0 == 1").run({})


@pytest.mark.parametrize("where", ["validate", "core"])
def test_huge_threshold_is_a_field_error_not_a_crash(where: str) -> None:
    """Validation (and the core's spec check) of a ~65,600-character threshold returns an error
    naming the field path and the bound; it never raises."""
    raw = _job({"busBandwidthGBps": PANICKING})
    if where == "validate":
        errors = [str(e) for e in validate(raw)]
    else:
        errors = list(spec_errors(from_dict(raw)))
    assert errors == ["spec.thresholds[busBandwidthGBps]: must have at most 2048 characters"]


@pytest.mark.parametrize("path,wrap", [
    ("spec.thresholds[busBandwidthGBps]", lambda e: _job({"busBandwidthGBps": e})),
    ("spec.validation.performance.thresholds.thresholds[goodputRatio]", lambda e: {
        "apiVersion": "cre.dev/v1alpha1", "kind": "Workflow",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"jobTemplate": {"spec": {"workload": {"trainJob": {}}}}, "orchestration": {},
                 "validation": {"performance": {"thresholds": {
                     "thresholds": {"goodputRatio": e}}}}}}),
])
def test_every_threshold_map_is_bounded(path: str, wrap: Any) -> None:
    """Each thresholds map bounds its expressions at 2048 characters (2048 is accepted)."""
    ok = "value > 1.0" + " " * (2048 - len("value > 1.0"))
    assert [e for e in validate(wrap(ok)) if e.path == path] == []
    assert [str(e) for e in validate(wrap(ok + " ")) if e.path == path] == [
        f"{path}: must have at most 2048 characters"]


def test_crd_bounds_every_threshold_map() -> None:
    """Every ``thresholds`` map in the generated CRDs carries maxLength on its values."""
    def walk(node: Any, found: list[Any]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "thresholds" and isinstance(value, dict) and "additionalProperties" in (
                        value):
                    found.append(value["additionalProperties"])
                walk(value, found)
        elif isinstance(node, list):
            for item in node:
                walk(item, found)

    found: list[Any] = []
    for text in render_all().values():
        walk(YAML(typ="safe").load(text), found)
    assert len(found) >= 5
    assert all(schema.get("maxLength") == 2048 for schema in found)
