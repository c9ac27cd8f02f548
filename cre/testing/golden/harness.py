"""Run one golden case and compare it with its golden file.

Layout (``[tool.cre.golden]``, see config.py): a case is ``<cases>/<suite>/<case>/input.yaml``
and its golden is ``<goldens>/<suite>/<case>.json``. The case's ``type`` picks a runner
(runners.py); its output is normalised (normalise.py, with the runner's, the project's and the
case's ``normalise`` settings) and serialised the same way for every suite (``to_json``).

Keys every case may have, whatever its type: ``type``, ``normalise`` and ``description`` (free
text for the reader). The runner gets the input without the last two.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any, Final

import attrs
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from cre.testing.golden.config import GoldenConfig, config_for_case
from cre.testing.golden.diff import describe_mismatch
from cre.testing.golden.normalise import Normalisation, to_json
from cre.testing.golden.runners import Runner, get_runner, import_runner_modules

HARNESS_KEYS: Final = frozenset({"normalise", "description"})


class CaseError(ValueError):
    """A case folder is malformed (missing input.yaml, no ``type``, bad YAML)."""


class Status(enum.StrEnum):
    """What :func:`check` found or did."""

    MATCH = "match"
    MISMATCH = "mismatch"
    MISSING = "missing"      # no golden yet
    WRITTEN = "written"      # --update-goldens wrote a new or changed golden
    UNCHANGED = "unchanged"  # --update-goldens: the golden already held the output


@attrs.frozen(kw_only=True)
class Outcome:
    """The result of checking one case against its golden."""

    status: Status
    golden: Path
    report: str = ""

    @property
    def ok(self) -> bool:
        return self.status in (Status.MATCH, Status.WRITTEN, Status.UNCHANGED)


def load_input(case_dir: Path) -> dict[str, Any]:
    """The case's input.yaml as a dict; it must have a top-level string ``type``."""
    path = case_dir / "input.yaml"
    if not path.is_file():
        raise CaseError(f"{path}: missing")
    try:
        data = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    except YAMLError as exc:
        raise CaseError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise CaseError(f"{path}: expected a mapping with a string 'type'")
    return data


def _runner_defaults(runner: Runner) -> dict[str, Any] | None:
    defaults = getattr(runner, "golden_normalise", None)
    return dict(defaults) if isinstance(defaults, dict) else None


def normalisation_for(case_dir: Path, data: dict[str, Any], runner: Runner,
                      config: GoldenConfig) -> Normalisation:
    """The case's normalisation settings (defaults, runner, project, case)."""
    return config.normalisation(_runner_defaults(runner), data.get("normalise"),
                                where=str(case_dir / "input.yaml"))


def run_case(case_dir: Path, *, config: GoldenConfig | None = None) -> Any:
    """Run the case's runner and return its normalised output."""
    config = config or config_for_case(case_dir)
    import_runner_modules(config.runners, where=str(config.source or config.root))
    data = load_input(case_dir)
    runner = get_runner(data["type"])
    settings = normalisation_for(case_dir, data, runner, config)
    raw = runner(case_dir, {k: v for k, v in data.items() if k not in HARNESS_KEYS})
    return settings.apply(raw)


def golden_path(case_dir: Path, config: GoldenConfig | None = None) -> Path:
    """Where the golden of ``case_dir`` lives (``<goldens>/<suite>/<case>.json``)."""
    return (config or config_for_case(case_dir)).golden_for(case_dir)


def _shown(path: Path, config: GoldenConfig) -> str:
    return str(path.relative_to(config.root)) if path.is_relative_to(config.root) else str(path)


def check(case_dir: Path, *, update: bool = False,
          config: GoldenConfig | None = None) -> Outcome:
    """Run the case and compare its output with the golden (or write it when ``update``)."""
    config = config or config_for_case(case_dir)
    actual = to_json(run_case(case_dir, config=config))
    path = config.golden_for(case_dir)
    existing = path.read_text(encoding="utf-8") if path.is_file() else None
    if update:
        if existing == actual:
            return Outcome(status=Status.UNCHANGED, golden=path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return Outcome(status=Status.WRITTEN, golden=path)
    if existing is None:
        return Outcome(status=Status.MISSING, golden=path, report=(
            f"{_shown(path, config)}: golden missing; run pytest with --update-goldens, "
            f"then review the new file"))
    if existing == actual:
        return Outcome(status=Status.MATCH, golden=path)
    return Outcome(status=Status.MISMATCH, golden=path,
                   report=describe_mismatch(existing, actual, golden=_shown(path, config)))


def compare(case_dir: Path, *, update: bool = False,
            config: GoldenConfig | None = None) -> str | None:
    """None when the output matches the golden (or was rewritten); else the report."""
    outcome = check(case_dir, update=update, config=config)
    return None if outcome.ok else outcome.report


__all__ = ["HARNESS_KEYS", "CaseError", "Outcome", "Status", "check", "compare", "golden_path",
           "load_input", "normalisation_for", "run_case"]
