"""Registry of golden-case runners: the ``type:`` of a case's input.yaml picks one.

A runner is ``(case_dir: Path, input: dict) -> JSON-able``. Entries are ``"module:function"``
strings imported only when a case of that type runs, so a suite with heavy dependencies (the
cluster simulator) costs nothing to the others. Registering a new type is one line below.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

Runner = Callable[[Path, dict[str, Any]], Any]

RUNNERS: dict[str, str] = {
    "render": "cre.testing.golden.render_runner:run",
    "scenario": "cre.testing.cluster.scenario:run_case",
    "job": "cre.testing.golden.job_runner:run",
}


class UnknownRunnerError(LookupError):
    """A case names a ``type`` no runner is registered for."""


def get_runner(kind: str, registry: Mapping[str, str] = RUNNERS) -> Runner:
    """Import and return the runner registered for ``kind``."""
    if kind not in registry:
        known = ", ".join(sorted(registry))
        raise UnknownRunnerError(f"no golden runner for type {kind!r} (known: {known})")
    module_name, _, attr = registry[kind].partition(":")
    runner: Runner = getattr(importlib.import_module(module_name), attr)
    return runner
