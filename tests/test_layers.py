"""The import contracts of docs/design/010 and 019 are checked, and each of them bites.

The layers live in ``pyproject.toml`` (``[tool.importlinter]``, run by ``make lint``): the
package order ``cre.testing > cre.cli | cre_manager > cre.controller > cre.kube > cre.core >
cre.render > cre.catalog > cre.api > cre._vendor``, the test kit's own layers, the pure layers
free of I/O and async libraries, and production code free of the test-only libraries. These
tests run ``lint-imports`` on the real tree and on a copy with one forbidden import injected,
so a contract that silently stopped matching anything would be noticed. Two rules an
import-linter contract cannot state are checked here on grimp's graph and the source's AST: no
import cycle anywhere in ``cre`` and ``cre_manager``, and no import of a ``_``-prefixed name
from another module (a ``_``-prefixed module is private to the package that holds it).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cre", "cre_manager")


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
    ("cre/core/common/plan.py", "import cre.controller.job.controller", "CRE layers",
     "cre.core.common.plan -> cre.controller.job.controller"),
    ("cre/kube/workqueue.py", "import cre.testing.procs", "CRE layers",
     "cre.kube.workqueue -> cre.testing.procs"),
    ("cre/render/job.py", "import cre.core.common.plan", "CRE layers",
     "cre.render.job -> cre.core.common.plan"),
    ("cre/core/job/classify.py", "import anyio", "Pure layers import no I/O",
     "cre.core.job.classify -> anyio"),
    ("cre_manager/app.py", "import hypothesis", "Production code imports no test-only",
     "cre_manager.app -> hypothesis"),
    ("cre/cli/reportview.py", "import cre.testing.procs", "CRE layers",
     "cre.cli.reportview -> cre.testing.procs"),
    ("cre_manager/app.py", "import cre.cli.reportview", "CRE layers",
     "cre_manager.app -> cre.cli.reportview"),
    ("cre/cli/app.py", "import pytest", "The CLI imports no test-only", "cre.cli.app -> pytest"),
    ("cre/_vendor/crds/__init__.py", "import cre.api.kinds", "CRE layers",
     "cre._vendor.crds -> cre.api.kinds"),
    ("cre/testing/apiserver/server.py", "import cre.testing.golden.harness", "Test kit layers",
     "cre.testing.apiserver.server -> cre.testing.golden.harness"),
    ("cre/testing/cluster/runtime.py", "import cre.testing.controlplane.plane", "Test kit layers",
     "cre.testing.cluster.runtime -> cre.testing.controlplane.plane"),
], ids=["core->controller", "kube->testing", "render->core", "core->anyio",
        "manager->hypothesis", "cli->testing", "manager->cli", "cli->pytest", "vendor->api",
        "emulator->golden", "simulator->controlplane"])
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


def test_a_test_kit_module_without_a_layer_breaks_the_contract(tmp_path: Path) -> None:
    """A new top-level module of cre.testing that no test-kit layer names fails the contract."""
    root = _copy_tree(tmp_path)
    (root / "cre" / "testing" / "unplaced.py").write_text('"""Placed in no layer."""\n')
    result = _lint_imports(root)
    assert result.returncode != 0, result.stdout
    assert "Test kit layers" in result.stdout and "cre.testing.unplaced" in result.stdout, \
        result.stdout


# --- import cycles --------------------------------------------------------------------------


def import_cycles(*packages: str) -> list[list[str]]:
    """Every import cycle among the modules of ``packages``, each once, as the chain
    ``a -> ... -> a``. grimp counts every import: module level, inside functions and under
    ``TYPE_CHECKING`` (a cycle a type checker sees is still a cycle a reader must untangle)."""
    graph = grimp.build_graph(*packages, cache_dir=None)
    seen: set[frozenset[str]] = set()
    cycles: list[list[str]] = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back and frozenset(back) not in seen:
                seen.add(frozenset(back))
                cycles.append([importer, *back])
    return cycles


def test_no_module_imports_itself_through_others() -> None:
    """No module of cre or cre_manager imports, directly or through others, one importing it."""
    assert import_cycles(*PACKAGES) == []


def test_a_planted_import_cycle_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two modules of a throw-away package that import each other (one inside a function) are
    reported as a cycle; a one-way import is not."""
    name = f"cyc_{uuid.uuid4().hex[:8]}"
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(f"from {name} import b\n")
    (pkg / "b.py").write_text(f"def f() -> None:\n    from {name} import a\n")
    (pkg / "c.py").write_text(f"from {name} import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles(name) == [[f"{name}.a", f"{name}.b", f"{name}.a"]]


# --- private names --------------------------------------------------------------------------


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def private_imports(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """``path:line: what`` for every import of a ``_``-prefixed name from another module.

    A ``_``-prefixed *module* (or package) may be imported by any module inside the package that
    holds it (``cre.testing.apiserver._causes`` by ``cre.testing.apiserver.server``; the data
    package ``cre._vendor`` by anything in ``cre``), by nothing outside it. A ``_``-prefixed
    function, class or constant may not be imported at all: share it under a public name."""
    found: list[str] = []
    for top in packages:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).with_suffix("").parts
            importer = ".".join(rel[:-1] if rel[-1] == "__init__" else rel)
            package = ".".join(rel[:-1])

            def outside(module: str, importer: str = importer) -> bool:
                """Whether ``importer`` is outside the package holding a private part of it."""
                parts = module.split(".")
                return any(_private(p) and not (importer + ".").startswith(
                    ".".join(parts[:i]) + ".") for i, p in enumerate(parts))

            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                bad: list[str] = []
                if isinstance(node, ast.Import):
                    bad = [a.name for a in node.names if outside(a.name)]
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                        base = ".".join([*anchor, *([base] if base else [])])
                    for alias in node.names:
                        target = f"{base}.{alias.name}"
                        is_module = (root.joinpath(*target.split(".")).is_dir()
                                     or root.joinpath(*target.split(".")).with_suffix(".py")
                                     .is_file())
                        if (is_module and outside(target)) or outside(base) or (
                                not is_module and _private(alias.name)):
                            bad.append(target)
                found += [f"{path.relative_to(root)}:{node.lineno}: {b}" for b in bad]
    return found


def test_no_module_imports_a_private_name_of_another() -> None:
    """Nothing in cre or cre_manager imports a ``_``-prefixed name from another module, nor a
    ``_``-prefixed module from outside the package that holds it."""
    assert private_imports(ROOT) == []


def test_a_planted_private_import_is_found(tmp_path: Path) -> None:
    """A private helper imported from a sibling, and a private module imported from outside
    its package, are reported; a private module used inside its own package is not."""
    for rel, text in {
        "pkg/__init__.py": "",
        "pkg/a.py": "def _helper() -> None: ...\nclass Public: ...\n",
        "pkg/b.py": "from pkg.a import Public, _helper\nfrom . import _impl\n",
        "pkg/_impl.py": "X = 1\n",
        "pkg/sub/__init__.py": "from .._impl import X\n",
        "other/__init__.py": "from pkg._impl import X\nimport pkg._impl\n",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert private_imports(tmp_path, ("pkg", "other")) == [
        "pkg/b.py:1: pkg.a._helper",
        "other/__init__.py:1: pkg._impl.X",
        "other/__init__.py:2: pkg._impl",
    ]
