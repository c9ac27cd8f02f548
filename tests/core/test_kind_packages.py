"""The per-kind layout of ``cre.core`` holds: every kind is a package documented as internal,
and the package roots are front doors exporting every reconcile function, Observation and Plan
type of the kinds (docs/design/019-one-contract.md). The kind independence contract's bite is
tested in ``tests/test_kind_contract.py``.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "cre" / "core"
KINDS = ("job", "workflow", "certification", "workloadrun", "measure", "nodecertification",
         "schedule", "export")


def defined(package: Path, pattern: str) -> set[str]:
    """Public top-level names matching ``pattern`` defined in the modules under ``package``."""
    names: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef):
                candidates = [node.name]
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                candidates = [t.id for t in targets if isinstance(t, ast.Name)]
            else:
                continue
            names |= {n for n in candidates if re.fullmatch(pattern, n)}
    return names


def test_every_kind_is_a_package_that_says_it_is_internal() -> None:
    """Each kind of the core is a package whose docstring sends users to ``cre.core``."""
    for kind in ("common", *KINDS):
        module = importlib.import_module(f"cre.core.{kind}")
        assert module.__doc__ is not None and "cre.core" in module.__doc__, kind
    assert not [p.name for p in CORE.glob("*.py") if p.name != "__init__.py"]


@pytest.mark.parametrize("pattern", [r"reconcile_[a-z_]+", r"([A-Z][A-Za-z]*)?Observation",
                                     r"([A-Z][A-Za-z]*)?Plan"])
def test_the_core_front_door_exports_every_entry_point(pattern: str) -> None:
    """Every reconcile function, Observation and Plan type of the kinds is in cre.core."""
    import cre.core

    names = {n for n in defined(CORE, pattern) if not n.startswith("_")}
    assert names, pattern
    assert names <= set(cre.core.__all__), sorted(names - set(cre.core.__all__))
    assert all(getattr(cre.core, n) is not None for n in names)


def test_the_kube_front_door_exports_the_io_edge() -> None:
    """cre.kube exports the client, controller, informer, recorder, metrics, Result, enqueuers."""
    import cre.kube

    wanted = {"KubeClient", "Controller", "Informer", "EventRecorder", "Result", "metrics_for"}
    wanted |= defined(ROOT / "cre" / "kube", r"enqueue_[a-z_]+")
    assert wanted <= set(cre.kube.__all__), sorted(wanted - set(cre.kube.__all__))
