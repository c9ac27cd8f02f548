"""Where a project keeps its golden cases and goldens, read from ``[tool.cre.golden]``.

A project says, in its ``pyproject.toml``::

    [tool.cre.golden]
    cases = "integration/cases"      # <cases>/<suite>/<case>/input.yaml
    goldens = "goldens"              # <goldens>/<suite>/<case>.json
    runners = ["myproject.golden"]   # modules that register runners with @golden_runner
    [tool.cre.golden.normalise]      # project-wide normalisation (see normalise.py)
    drop = ["$..metadata.annotations['example.dev/last-seen']"]

Paths are relative to the pyproject's folder. The table's presence is what turns the pytest
plugin on: without it the plugin collects nothing. A case run on its own (``python -m
cre.testing.golden run CASE``) finds its project by walking up from the case folder.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from cre.testing.golden.normalise import Normalisation, NormaliseError

TABLE: Final = "tool.cre.golden"
KEYS: Final = frozenset({"cases", "goldens", "runners", "normalise"})
DEFAULT_CASES: Final = "integration/cases"
DEFAULT_GOLDENS: Final = "goldens"
GOLDEN_SUFFIX: Final = ".json"


class ConfigError(ValueError):
    """``[tool.cre.golden]`` is malformed; the message names the file and the key."""


@attrs.frozen(kw_only=True)
class GoldenConfig:
    """One project's golden layout and defaults."""

    root: Path
    cases: Path
    goldens: Path
    runners: tuple[str, ...] = ()
    #: ``[tool.cre.golden.normalise]`` as written (validated): applied over a runner's defaults.
    normalise: Mapping[str, Any] = attrs.field(factory=dict)
    source: Path | None = None

    def normalisation(self, runner_defaults: Mapping[str, Any] | None = None,
                      case: Mapping[str, Any] | None = None, *,
                      where: str = "input.yaml") -> Normalisation:
        """Built-in defaults, then the runner's, the project's and the case's settings."""
        project = f"{self.source or self.root}: [{TABLE}.normalise]"
        return (Normalisation().merged(runner_defaults, where="runner defaults")
                .merged(self.normalise, where=project)
                .merged(case, where=f"{where}: normalise"))

    def golden_for(self, case_dir: Path) -> Path:
        """``<goldens>/<suite>/<case>.json`` for ``<cases>/<suite>/<case>``."""
        case_dir = case_dir.resolve()
        return self.goldens / case_dir.parent.name / f"{case_dir.name}{GOLDEN_SUFFIX}"

    def case_for(self, golden: Path) -> Path:
        """The case folder a golden belongs to (whether or not it exists)."""
        return self.cases / golden.parent.name / golden.name.removesuffix(GOLDEN_SUFFIX)

    def suites(self) -> list[Path]:
        """The suite folders under ``cases``, sorted."""
        if not self.cases.is_dir():
            return []
        return sorted(p for p in self.cases.iterdir() if p.is_dir()
                      and not p.name.startswith((".", "_")))

    def case_dirs(self, suite: Path) -> list[Path]:
        """The case folders of one suite (those with an input.yaml), sorted."""
        return sorted(p.parent for p in suite.glob("*/input.yaml"))

    def goldens_of(self, suite_name: str) -> list[Path]:
        """The golden files of one suite, sorted."""
        folder = self.goldens / suite_name
        return sorted(folder.glob(f"*{GOLDEN_SUFFIX}")) if folder.is_dir() else []

    def golden_suites(self) -> list[str]:
        """Suite names that have a golden folder."""
        if not self.goldens.is_dir():
            return []
        return sorted(p.name for p in self.goldens.iterdir() if p.is_dir())

    def stale(self, suite_name: str) -> list[Path]:
        """Goldens of ``suite_name`` whose case folder (with an input.yaml) is gone."""
        return [g for g in self.goldens_of(suite_name)
                if not (self.case_for(g) / "input.yaml").is_file()]


def read_pyproject(path: Path) -> GoldenConfig | None:
    """The project's config from ``path`` (a pyproject.toml), or None without the table."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    table: Any = data
    for part in TABLE.split("."):
        table = table.get(part) if isinstance(table, Mapping) else None
    if table is None:
        return None
    return from_table(table, root=path.parent, where=f"{path}: [{TABLE}]")


def from_table(table: Any, *, root: Path, where: str, source: Path | None = None) -> GoldenConfig:
    """A config from the ``[tool.cre.golden]`` mapping; paths relative to ``root``."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: expected a table")
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown keys {unknown} (known: {sorted(KEYS)})")
    for key in ("cases", "goldens"):
        if key in table and not isinstance(table[key], str):
            raise ConfigError(f"{where}.{key}: expected a path string, got {table[key]!r}")
    runners = table.get("runners", [])
    if not isinstance(runners, list) or not all(isinstance(r, str) for r in runners):
        raise ConfigError(f"{where}.runners: expected a list of module names")
    norm = table.get("normalise") or {}
    try:
        Normalisation().merged(norm, where=f"{where}.normalise")
    except NormaliseError as exc:
        raise ConfigError(str(exc)) from None
    root = root.resolve()
    return GoldenConfig(root=root, cases=root / str(table.get("cases", DEFAULT_CASES)),
                        goldens=root / str(table.get("goldens", DEFAULT_GOLDENS)),
                        runners=tuple(runners), normalise=dict(norm),
                        source=source or (root / "pyproject.toml"))


def find_config(start: Path) -> GoldenConfig | None:
    """The nearest pyproject.toml at or above ``start`` that has ``[tool.cre.golden]``."""
    start = start.resolve()
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            config = read_pyproject(candidate)
            if config is not None:
                return config
    return None


def config_for_case(case_dir: Path) -> GoldenConfig:
    """The config of the project that holds ``case_dir``; without one, the default layout
    around the case (``<root>/integration/cases/<suite>/<case>`` and ``<root>/goldens``)."""
    case_dir = case_dir.resolve()
    found = find_config(case_dir)
    if found is not None and case_dir.is_relative_to(found.cases):
        return found
    cases = case_dir.parent.parent
    root = cases.parent.parent
    return GoldenConfig(root=root, cases=cases, goldens=root / DEFAULT_GOLDENS)


__all__ = ["ConfigError", "GoldenConfig", "config_for_case", "find_config", "from_table",
           "read_pyproject"]
