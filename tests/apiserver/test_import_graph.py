"""The emulator's modules import one another without cycles (every import counts: module level,
inside functions and under ``TYPE_CHECKING``), so each layer can be read and tested alone."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "cre.testing.apiserver"
ROOT = Path(__file__).resolve().parents[2] / "cre" / "testing" / "apiserver"


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the sibling modules it imports (relative or absolute, anywhere in the file)."""
    modules = {p.stem for p in root.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in sorted(root.glob("*.py")):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level == 1:
                    names = [base.split(".")[0]] if base else [a.name for a in node.names]
                elif base.startswith(package + "."):
                    names = [base[len(package) + 1:].split(".")[0]]
                elif base == package:
                    names = [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name[len(package) + 1:].split(".")[0] for a in node.names
                         if a.name.startswith(package + ".")]
            deps.update(n for n in names if n in modules and n != path.stem)
        graph[path.stem] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_checker_finds_a_cycle() -> None:
    """A back-edge makes a cycle the check reports (so the real check can fail)."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_emulator_modules_form_no_import_cycle() -> None:
    """No module of the emulator imports, directly or through others, one that imports it."""
    assert cycles(import_graph()) == []
