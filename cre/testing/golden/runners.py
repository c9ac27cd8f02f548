"""Golden-case runners: the ``type:`` of a case's input.yaml picks one, wherever it comes from.

A runner is ``(case_dir: Path, input: dict) -> JSON-able``: it runs the case and returns what
the golden records, before normalisation. Runners come from two places:

* the entry-point group ``cre.golden_runners`` of any installed distribution (the name is the
  type, the value ``module:function``); CRE's own ``render``, ``job``, ``scenario`` and
  ``controller`` are declared this way in CRE's pyproject, and a third party adds
  ``type: mything`` the same way without touching CRE::

      [project.entry-points."cre.golden_runners"]
      mything = "mypkg.golden:run_mything"

* :func:`golden_runner`, a decorator for runners that live in the project under test (list the
  module in ``[tool.cre.golden] runners`` so the plugin imports it before collecting)::

      @golden_runner("mything")
      def run_mything(case_dir: Path, data: dict[str, Any]) -> Any: ...

Entry points are imported only when a case of their type runs, so a suite with heavy
dependencies (the cluster simulator, kopf) costs nothing to the others. A type two sources
claim is an error naming both, unless the decorator says ``replace=True``.

A runner may carry default normalisation for its output (``@golden_runner(..., normalise={...})``
or a ``golden_normalise`` attribute): the settings it needs to be deterministic (list orders it
does not define itself). The project's and the case's settings apply on top.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Final, TypeVar

Runner = Callable[[Path, dict[str, Any]], Any]
R = TypeVar("R", bound=Runner)

ENTRY_POINT_GROUP: Final = "cre.golden_runners"
_DECORATED: dict[str, Runner] = {}


class UnknownRunnerError(LookupError):
    """A case names a ``type`` no runner is registered for."""


class RunnerConflictError(LookupError):
    """Two sources register the same ``type``."""


def _entry_points() -> dict[str, list[EntryPoint]]:
    found: dict[str, list[EntryPoint]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if all(ep.value != seen.value for seen in found.get(ep.name, [])):
            found.setdefault(ep.name, []).append(ep)
    return found


def _describe(ep: EntryPoint) -> str:
    dist = ep.dist.name if ep.dist is not None else "?"
    return f"{ep.value} (entry point of {dist})"


def register_runner(type_: str, runner: Runner, *, replace: bool = False,
                    normalise: Mapping[str, Any] | None = None) -> Runner:
    """Register ``runner`` for ``type_`` in this process (what :func:`golden_runner` does)."""
    if not type_ or not isinstance(type_, str):
        raise ValueError(f"golden runner type must be a non-empty string, got {type_!r}")
    if normalise is not None:
        runner.golden_normalise = dict(normalise)  # type: ignore[attr-defined]
    if not replace:
        previous = _DECORATED.get(type_)
        if previous is not None and _qualname(previous) != _qualname(runner):
            raise RunnerConflictError(
                f"golden runner type {type_!r} is registered twice: {_qualname(previous)} and "
                f"{_qualname(runner)} (pass replace=True to override)")
        eps = _entry_points().get(type_)
        if eps:
            raise RunnerConflictError(
                f"golden runner type {type_!r} of {_qualname(runner)} is already provided by "
                f"{_describe(eps[0])} (pass replace=True to override)")
    _DECORATED[type_] = runner
    return runner


def golden_runner(type_: str, *, replace: bool = False,
                  normalise: Mapping[str, Any] | None = None) -> Callable[[R], R]:
    """Decorator: make the function the runner of cases with ``type: <type_>``."""
    def decorate(fn: R) -> R:
        register_runner(type_, fn, replace=replace, normalise=normalise)
        return fn
    return decorate


def unregister_runner(type_: str) -> None:
    """Forget a decorator-registered runner (tests)."""
    _DECORATED.pop(type_, None)


def _qualname(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


def available_runners() -> dict[str, str]:
    """Every known type and where its runner comes from."""
    out = {name: _describe(eps[0]) for name, eps in _entry_points().items()}
    out.update({name: f"{_qualname(fn)} (@golden_runner)" for name, fn in _DECORATED.items()})
    return dict(sorted(out.items()))


def _load(spec: str, *, kind: str) -> Runner:
    module_name, _, attr = spec.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    if not callable(obj):
        raise UnknownRunnerError(f"golden runner {spec!r} for type {kind!r} is not callable")
    runner: Runner = obj
    return runner


def get_runner(kind: str, registry: Mapping[str, str | Runner] | None = None) -> Runner:
    """The runner for ``kind``: from ``registry`` when given (tests), else the decorated
    runners, then the ``cre.golden_runners`` entry points."""
    if registry is not None:
        if kind not in registry:
            raise UnknownRunnerError(f"no golden runner for type {kind!r} "
                                     f"(known: {', '.join(sorted(registry))})")
        entry = registry[kind]
        return _load(entry, kind=kind) if isinstance(entry, str) else entry
    if kind in _DECORATED:
        return _DECORATED[kind]
    eps = _entry_points().get(kind, [])
    if len(eps) > 1:
        raise RunnerConflictError(f"golden runner type {kind!r} is provided twice: "
                                  f"{' and '.join(_describe(e) for e in eps)}")
    if not eps:
        known = ", ".join(available_runners()) or "none"
        raise UnknownRunnerError(
            f"no golden runner for type {kind!r} (known: {known}); a runner is an entry point "
            f"in the group {ENTRY_POINT_GROUP!r} of an installed package, or a function "
            f"decorated with @golden_runner in a module listed in [tool.cre.golden] runners")
    return _load(eps[0].value, kind=kind)


def import_runner_modules(modules: tuple[str, ...] | list[str], *, where: str) -> None:
    """Import the modules that register runners with the decorator."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise UnknownRunnerError(f"{where}: cannot import runner module {name!r}: "
                                     f"{exc}") from exc


__all__ = [
    "ENTRY_POINT_GROUP",
    "Runner",
    "RunnerConflictError",
    "UnknownRunnerError",
    "available_runners",
    "get_runner",
    "golden_runner",
    "import_runner_modules",
    "register_runner",
    "unregister_runner",
]
