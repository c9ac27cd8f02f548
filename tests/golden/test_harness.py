"""The harness runs a case by type, compares it with its golden and rewrites on request."""

from __future__ import annotations

from pathlib import Path

import pytest

from cre.testing.golden import (
    CaseError,
    UnknownRunnerError,
    compare,
    golden_path,
    run_case,
)
from cre.testing.golden.__main__ import main

CASE = "type: render\nentry: diagnostics/dcgm-level1\nplatform: aws\narch: h100\nnodeCount: 1\n"


def _case(root: Path, text: str = CASE) -> Path:
    case = root / "integration" / "cases" / "suite" / "one"
    case.mkdir(parents=True)
    (case / "input.yaml").write_text(text)
    return case


def test_golden_path_mirrors_the_case(tmp_path: Path) -> None:
    """integration/cases/<suite>/<case> maps to goldens/<suite>/<case>.json at the root."""
    assert golden_path(_case(tmp_path)) == tmp_path / "goldens" / "suite" / "one.json"


def test_update_then_compare_then_mismatch_diff(tmp_path: Path) -> None:
    """--update writes the golden; a later edit to it produces a unified diff."""
    case = _case(tmp_path)
    assert compare(case).startswith("goldens/suite/one.json: golden missing")  # type: ignore[union-attr]
    assert compare(case, update=True) is None
    assert compare(case) is None
    path = golden_path(case)
    path.write_text(path.read_text().replace('"dcgmi"', '"dcgmx"'))
    diff = compare(case)
    assert diff is not None
    removed = [
        line.strip() for line in diff.splitlines() if line.startswith("-") and "dcgm" in line
    ]
    added = [line.strip() for line in diff.splitlines() if line.startswith("+") and "dcgm" in line]
    assert removed[-1].endswith('"dcgmx"')
    assert added[-1].endswith('"dcgmi"')


def test_unknown_type_and_missing_input(tmp_path: Path) -> None:
    """A case needs an input.yaml with a type that has a registered runner."""
    with pytest.raises(CaseError, match="missing"):
        run_case(tmp_path)
    case = _case(tmp_path, "type: nope\n")
    with pytest.raises(UnknownRunnerError, match="no golden runner for type 'nope'"):
        run_case(case)


def test_render_runner_rejects_unknown_keys(tmp_path: Path) -> None:
    """A typo in a render case's input fails instead of being ignored."""
    case = _case(tmp_path, CASE + "kia: true\n")
    with pytest.raises(ValueError, match="unknown keys \\['kia'\\]"):
        run_case(case)


def test_cli_prints_normalised_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m cre.testing.golden run CASE`` prints exactly what the golden holds."""
    case = _case(tmp_path)
    assert main(["run", str(case)]) == 0
    compare(case, update=True)
    assert capsys.readouterr().out == golden_path(case).read_text()
