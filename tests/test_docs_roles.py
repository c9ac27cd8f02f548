"""The docs build turns docstrings' Sphinx roles into cross-references and flags broken ones."""

from __future__ import annotations

import importlib.util
import logging
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import griffe
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _extension_module() -> ModuleType:
    path = ROOT / "tools" / "docs" / "griffe_sphinx_roles.py"
    spec = importlib.util.spec_from_file_location("griffe_sphinx_roles", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def _load(tmp_path: Path, files: dict[str, str]) -> griffe.Module:
    for name, text in files.items():
        path = tmp_path / "demo_pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    ext = _extension_module().SphinxRoles(packages=["demo_pkg"])
    loaded = griffe.load("demo_pkg", search_paths=[tmp_path],
                         extensions=griffe.load_extensions(ext))
    assert isinstance(loaded, griffe.Module)
    return loaded


def test_roles_become_links_code_or_broken_links(tmp_path: Path) -> None:
    """Known names link to their canonical path, foreign ones are code, missing ones warn."""
    pkg = _load(tmp_path, {
        "__init__.py": '"""Package: see :mod:`.models` and :class:`~demo_pkg.models.Thing`."""\n'
                       "from demo_pkg.models import Thing\n",
        "models.py": '''
            """Models."""
            from datetime import datetime


            class Thing:
                """A thing made by :func:`make`, stamped with a :class:`datetime`."""


            def make() -> Thing:
                """Make one; see :class:`Gone` (no such class)."""
                return Thing()
        ''',
    })
    models = pkg["models"]
    assert pkg.docstring is not None
    assert pkg.docstring.value == (
        'Package: see <autoref identifier="demo_pkg.models" optional><code>models</code>'
        '</autoref> and <autoref identifier="demo_pkg.models.Thing" optional><code>Thing'
        "</code></autoref>."
    )
    thing = models["Thing"].docstring.value
    assert '<autoref identifier="demo_pkg.models.make" optional><code>make</code>' in thing
    assert "stamped with a `datetime`." in thing
    assert models["make"].docstring.value == "Make one; see [`Gone`][Gone] (no such class)."


def test_a_missing_name_is_logged_so_a_strict_build_fails(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A role naming nothing is reported with file, object and name (mkdocs --strict fails)."""
    with caplog.at_level(logging.WARNING):
        _load(tmp_path, {"__init__.py": '"""See :func:`nowhere`."""\n'})
    assert any("Sphinx role names no object: nowhere" in r.getMessage()
               for r in caplog.records)
