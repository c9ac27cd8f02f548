"""The pure layers never import I/O or async modules (DESIGN.md: imports only point downwards)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PURE = ["cre/api", "cre/catalog", "cre/render", "cre/core"]
FORBIDDEN = {
    "aiohttp",
    "anyio",
    "asyncio",
    "kubernetes_asyncio",
    "kubernetes",
    "cre.kube",
    "cre.controller",
    "cre.testing",
    "cre_manager",
}
# Lower layers may not import higher ones.
ORDER = ["cre.api", "cre.catalog", "cre.render", "cre.core"]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _pure_files() -> list[Path]:
    return sorted(p for d in PURE for p in (ROOT / d).rglob("*.py"))


@pytest.mark.parametrize("path", _pure_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_pure_layer_imports_no_io(path: Path) -> None:
    """A module of a pure layer imports no I/O, async or higher-layer module."""
    rel = path.relative_to(ROOT).as_posix()
    own = ORDER.index(rel.split("/")[0] + "." + rel.split("/")[1])
    higher = set(ORDER[own + 1 :])
    bad = sorted(
        m
        for m in _imports(path)
        if any(m == f or m.startswith(f + ".") for f in FORBIDDEN | higher)
    )
    assert not bad, f"{rel} imports {bad}"
