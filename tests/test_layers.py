"""The layers contract (DESIGN.md "Layers") is checked by import-linter, and it bites.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``): the layer order
``cre.testing > cre.cli | cre_manager > cre.controller > cre.kube > cre.core > cre.render >
cre.catalog > cre.api``, the pure layers free of I/O and async libraries, and production code
free of the test-only libraries. CI runs ``lint-imports`` (``make lint``); these tests run it
too, on the real tree and on a copy with one forbidden import injected, so a contract that
silently stopped matching anything would be noticed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter with ``root``'s pyproject.toml and ``root`` first on the import path."""
    code = "import sys; from importlinter.cli import lint_imports_command; lint_imports_command()"
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-c", code, "--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def _copy_tree(dest: Path) -> Path:
    """A copy of the packages' Python sources and pyproject.toml under ``dest``."""
    skip = shutil.ignore_patterns("__pycache__", "*.yaml", "*.json", "*.md")
    for top in ("cre", "cre_manager"):
        shutil.copytree(ROOT / top, dest / top, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def test_the_source_tree_keeps_every_contract() -> None:
    """lint-imports passes on the repository as it is."""
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(("module", "injected", "contract", "edge"), [
    ("cre/core/plan.py", "import cre.controller.job", "CRE layers",
     "cre.core.plan -> cre.controller.job"),
    ("cre/kube/workqueue.py", "import cre.testing.procs", "CRE layers",
     "cre.kube.workqueue -> cre.testing.procs"),
    ("cre/render/job.py", "import cre.core.plan", "CRE layers",
     "cre.render.job -> cre.core.plan"),
    ("cre/core/classify.py", "import anyio", "Pure layers import no I/O",
     "cre.core.classify -> anyio"),
    ("cre_manager/app.py", "import hypothesis", "Production code imports no test-only",
     "cre_manager.app -> hypothesis"),
    ("cre/cli/report.py", "import cre.testing.procs", "CRE layers",
     "cre.cli.report -> cre.testing.procs"),
    ("cre_manager/app.py", "import cre.cli.report", "CRE layers",
     "cre_manager.app -> cre.cli.report"),
    ("cre/cli/app.py", "import pytest", "The CLI imports no test-only", "cre.cli.app -> pytest"),
], ids=["core->controller", "kube->testing", "render->core", "core->anyio",
        "manager->hypothesis", "cli->testing", "manager->cli", "cli->pytest"])
def test_an_injected_back_edge_breaks_the_contract(
        tmp_path: Path, module: str, injected: str, contract: str, edge: str) -> None:
    """One forbidden import added to a copy of the tree makes lint-imports fail and name it."""
    root = _copy_tree(tmp_path)
    target = root / module
    target.write_text(target.read_text() + f"\n{injected}  # injected back-edge\n")
    result = _lint_imports(root)
    assert result.returncode != 0, result.stdout
    # "<name> BROKEN", or "<name> BROKEN (1 ignored import)" for the layers contract
    broken = [line for line in result.stdout.splitlines() if " BROKEN" in line]
    assert any(line.startswith(contract) for line in broken), result.stdout
    assert edge in result.stdout, result.stdout
