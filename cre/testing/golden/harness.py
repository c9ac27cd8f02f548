"""Run one golden case and compare it with its golden file.

Layout: a case is ``integration/cases/<suite>/<case>/input.yaml`` and its golden is
``goldens/<suite>/<case>.json`` at the repository root. The output is normalised
(``normalise``) and serialised (``to_json``) the same way for every suite.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from cre.testing.golden.normalise import normalise, to_json
from cre.testing.golden.runners import get_runner


class CaseError(ValueError):
    """A case folder is malformed (missing input.yaml, no ``type``)."""


def load_input(case_dir: Path) -> dict[str, Any]:
    """The case's input.yaml as a dict; it must have a top-level ``type``."""
    path = case_dir / "input.yaml"
    if not path.is_file():
        raise CaseError(f"{path}: missing")
    data = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise CaseError(f"{path}: expected a mapping with a string 'type'")
    return data


def run_case(case_dir: Path) -> Any:
    """Run the case's runner and return its normalised output."""
    data = load_input(case_dir)
    return normalise(get_runner(data["type"])(case_dir, data))


def golden_path(case_dir: Path) -> Path:
    """``<root>/goldens/<suite>/<case>.json`` for ``<root>/integration/cases/<suite>/<case>``."""
    case_dir = case_dir.resolve()
    root = case_dir.parents[3]
    return root / "goldens" / case_dir.parent.name / f"{case_dir.name}.json"


def compare(case_dir: Path, *, update: bool = False) -> str | None:
    """None when the output matches the golden (or was rewritten); else a unified diff."""
    actual = to_json(run_case(case_dir))
    path = golden_path(case_dir)
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != actual:
            path.write_text(actual, encoding="utf-8")
        return None
    if not path.is_file():
        return f"{path}: golden missing; run `make goldens` (pytest --update-goldens) and review it"
    expected = path.read_text(encoding="utf-8")
    if expected == actual:
        return None
    diff = difflib.unified_diff(
        expected.splitlines(keepends=True),
        actual.splitlines(keepends=True),
        fromfile=str(path),
        tofile="actual",
    )
    return "".join(diff)
