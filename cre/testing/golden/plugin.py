"""pytest collects golden cases itself: every ``<cases>/<suite>/<case>/input.yaml`` is a test.

With ``[tool.cre.golden]`` in the project's pyproject.toml (config.py), the cases folder is
collected by :class:`GoldenCases` instead of pytest's own directory walk: one item per case
(``<cases>/<suite>::<case>``, so ``pytest <cases>/<suite>/<case>`` and ``-k <suite>`` select
cases) and one failing item per stale golden (a golden whose case is gone). No test file is
needed. ``--update-goldens`` writes goldens instead of comparing and deletes stale ones; the
terminal summary lists every file it touched, for review.

A mismatch is reported without a traceback: the first differing field, then a unified diff.
A malformed case (bad YAML, unknown type or key) fails with the message naming the file and key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cre.testing.golden.config import ConfigError, GoldenConfig, read_pyproject
from cre.testing.golden.harness import CaseError, Status, check
from cre.testing.golden.normalise import NormaliseError
from cre.testing.golden.runners import (
    RunnerConflictError,
    UnknownRunnerError,
    import_runner_modules,
)

CONFIG = pytest.StashKey[GoldenConfig | None]()
TOUCHED = pytest.StashKey[list[tuple[str, Path]]]()

#: Errors whose message says everything: no traceback.
PLAIN_ERRORS = (CaseError, ConfigError, NormaliseError, UnknownRunnerError, RunnerConflictError)


class GoldenFailure(Exception):
    """A case's output differs from its golden, the golden is missing, or it is stale."""


def _project_file(config: pytest.Config) -> Path | None:
    inipath = config.inipath
    if inipath is not None and inipath.name == "pyproject.toml":
        return inipath
    candidate = config.rootpath / "pyproject.toml"
    return candidate if candidate.is_file() else None


def configure(config: pytest.Config) -> None:
    """Read ``[tool.cre.golden]`` (none: the plugin stays inert) and import runner modules."""
    config.stash[TOUCHED] = []
    path = _project_file(config)
    golden: GoldenConfig | None = None
    if path is not None:
        try:
            golden = read_pyproject(path)
            if golden is not None:
                import_runner_modules(golden.runners, where=f"{path}: [tool.cre.golden] runners")
        except (ConfigError, UnknownRunnerError, RunnerConflictError) as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[CONFIG] = golden


def collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """The golden collector for the configured cases folder; None for any other folder."""
    golden = parent.config.stash.get(CONFIG, None)
    if golden is None or path.resolve() != golden.cases:
        return None
    cases: pytest.Collector = GoldenCases.from_parent(parent, path=path)
    return cases


def terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """List the goldens ``--update-goldens`` wrote or deleted."""
    touched = config.stash.get(TOUCHED, [])
    if not touched:
        return
    root = config.rootpath
    terminalreporter.section("goldens updated (review with git diff)")
    for action, path in touched:
        shown = path.relative_to(root) if path.is_relative_to(root) else path
        terminalreporter.write_line(f"{action}: {shown}")


def _golden(node: pytest.Item | pytest.Collector) -> GoldenConfig:
    golden = node.config.stash.get(CONFIG, None)
    assert golden is not None  # only collected when configured
    return golden


def _update(node: pytest.Item) -> bool:
    return bool(node.config.getoption("--update-goldens", default=False))


class GoldenCases(pytest.Directory):
    """The cases folder: its suites, and stale goldens of suites that have no folder."""

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        golden = _golden(self)
        out: list[pytest.Item | pytest.Collector] = [
            GoldenSuite.from_parent(self, path=suite) for suite in golden.suites()]
        have = {s.name for s in golden.suites()}
        for suite in golden.golden_suites():
            if suite not in have:
                out.extend(StaleGolden.from_parent(self, name=f"{suite}/{g.name}", golden=g)
                           for g in golden.goldens_of(suite))
        return out


class GoldenSuite(pytest.Directory):
    """One suite folder: a case item per ``<case>/input.yaml`` and its stale goldens."""

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        golden = _golden(self)
        out: list[pytest.Item | pytest.Collector] = [
            GoldenCase.from_parent(self, name=case.name, path=case)
            for case in golden.case_dirs(self.path)]
        out.extend(StaleGolden.from_parent(self, name=g.name, golden=g)
                   for g in golden.stale(self.path.name))
        return out


class GoldenCase(pytest.Item):
    """One case: run it, compare with (or write) its golden."""

    def runtest(self) -> None:
        outcome = check(self.path, update=_update(self), config=_golden(self))
        if outcome.status is Status.WRITTEN:
            self.config.stash[TOUCHED].append(("written", outcome.golden))
        if not outcome.ok:
            raise GoldenFailure(outcome.report)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> Any:
        if isinstance(excinfo.value, (GoldenFailure, *PLAIN_ERRORS)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path / "input.yaml", None, f"golden case {self.parent.name}/{self.name}" \
            if self.parent is not None else self.name


class StaleGolden(pytest.Item):
    """A golden whose case folder is gone: fails, or is deleted by ``--update-goldens``."""

    def __init__(self, *, golden: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.golden = golden

    def runtest(self) -> None:
        config = _golden(self)
        case = config.case_for(self.golden)
        if _update(self):
            self.golden.unlink(missing_ok=True)
            self.config.stash[TOUCHED].append(("deleted (no case)", self.golden))
            return
        def shown(p: Path) -> Path:
            return p.relative_to(config.root) if p.is_relative_to(config.root) else p

        raise GoldenFailure(
            f"stale golden {shown(self.golden)}: there is no case {shown(case)}/input.yaml; "
            f"restore the case, or delete the golden (pytest --update-goldens deletes it)")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> Any:
        if isinstance(excinfo.value, GoldenFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.golden, None, f"stale golden {self.name}"


__all__ = ["GoldenCase", "GoldenCases", "GoldenFailure", "GoldenSuite", "StaleGolden",
           "collect_directory", "configure", "terminal_summary"]
