"""The catalog's only I/O: read the YAML files under a directory, then parse them purely.

The shipped catalog lives in the repository's top-level ``catalog/`` (an editable install)
or, in a wheel, in ``cre/_catalog`` (pyproject force-includes it); ``default_catalog_dir``
finds whichever exists.
"""

from __future__ import annotations

from pathlib import Path

from cre.catalog.errors import CatalogError
from cre.catalog.model import Catalog
from cre.catalog.parse import parse_catalog

_PACKAGE = Path(__file__).resolve().parent.parent


def default_catalog_dir() -> Path:
    """The shipped catalog: ``cre/_catalog`` in a wheel, else the repository's ``catalog/``."""
    for candidate in (_PACKAGE / "_catalog", _PACKAGE.parent / "catalog"):
        if (candidate / "_lib" / "gpu-defaults.yaml").is_file():
            return candidate
    raise CatalogError(str(_PACKAGE), "", "no shipped catalog found (cre/_catalog or ../catalog)")


def read_catalog_files(root: Path) -> dict[str, str]:
    """Every ``*.yaml`` under ``root``, keyed by its posix path relative to ``root``."""
    if not root.is_dir():
        raise CatalogError(str(root), "", "catalog directory does not exist")
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*.yaml"))
    }


def load_catalog(root: Path | None = None) -> Catalog:
    """Read and parse the catalog under ``root`` (default: the shipped one)."""
    return parse_catalog(read_catalog_files(root or default_catalog_dir()))
