"""The import-linter contract between the kind packages of ``cre.core`` bites: an import
against the dependency direction (docs/design/019-one-contract.md), injected into a copy of the
tree, makes lint-imports fail and name the edge.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter on ``root`` (its pyproject.toml, its packages first on the path)."""
    code = "from importlinter.cli import lint_imports_command; lint_imports_command()"
    return subprocess.run([sys.executable, "-c", code, "--no-cache"], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True,
                          text=True, timeout=180, check=False)


def test_a_kind_importing_another_against_the_direction_breaks_the_contract(
        tmp_path: Path) -> None:
    """measure -> job is not an allowed edge: injected into a copy, lint-imports names it."""
    skip = shutil.ignore_patterns("__pycache__", "*.yaml", "*.json", "*.md")
    for top in ("cre", "cre_manager"):
        shutil.copytree(ROOT / top, tmp_path / top, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "cre" / "core" / "measure" / "logwindow.py"
    target.write_text(target.read_text() + "\nimport cre.core.job.classify  # injected\n")
    result = lint(tmp_path)
    assert result.returncode != 0, result.stdout
    assert "Kind packages of cre.core are independent BROKEN" in result.stdout, result.stdout
    assert "cre.core.measure.logwindow -> cre.core.job.classify" in result.stdout, result.stdout
