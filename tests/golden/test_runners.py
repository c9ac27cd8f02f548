"""Runners come from entry points and the decorator; a type claimed twice is an error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cre.testing.golden import runners
from cre.testing.golden.runners import (
    RunnerConflictError,
    UnknownRunnerError,
    available_runners,
    get_runner,
    golden_runner,
    unregister_runner,
)


@pytest.fixture
def clean() -> Iterator[None]:
    yield
    for name in ("demo-type", "render"):
        unregister_runner(name)


def test_cre_runners_are_entry_points() -> None:
    """CRE's own types are registered the way a third party registers one."""
    known = available_runners()
    for name in ("render", "job", "scenario", "controller"):
        assert "(entry point of cre)" in known[name], known
    assert get_runner("render").__module__ == "cre.testing.golden.render_runner"


def test_the_decorator_registers(clean: None) -> None:
    """@golden_runner makes a type known, with its default normalisation attached."""
    @golden_runner("demo-type", normalise={"uids": "keep"})
    def run(case_dir: Path, data: dict[str, Any]) -> Any:
        return data

    assert get_runner("demo-type") is run
    assert run.golden_normalise == {"uids": "keep"}  # type: ignore[attr-defined]
    assert "(@golden_runner)" in available_runners()["demo-type"]


def test_a_type_claimed_twice_is_an_error(clean: None) -> None:
    """A second function for a type, or a decorator shadowing an entry point, needs replace."""
    @golden_runner("demo-type")
    def first(case_dir: Path, data: dict[str, Any]) -> Any:
        return 1

    def second(case_dir: Path, data: dict[str, Any]) -> Any:
        return 2

    with pytest.raises(RunnerConflictError, match="'demo-type' is registered twice"):
        golden_runner("demo-type")(second)
    with pytest.raises(RunnerConflictError, match=r"'render' .* already provided by "
                                                  r"cre\.testing\.golden\.render_runner:run"):
        golden_runner("render")(second)
    golden_runner("render", replace=True)(second)
    assert get_runner("render") is second


def test_two_distributions_for_one_type(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two installed packages declaring the same type: the error names both."""
    from importlib.metadata import EntryPoint

    eps = {"dup": [EntryPoint("dup", "a.mod:run", runners.ENTRY_POINT_GROUP),
                   EntryPoint("dup", "b.mod:run", runners.ENTRY_POINT_GROUP)]}
    monkeypatch.setattr(runners, "_entry_points", lambda: eps)
    with pytest.raises(RunnerConflictError, match=r"a\.mod:run .* and b\.mod:run"):
        get_runner("dup")


def test_unknown_type_says_how_to_register() -> None:
    """The message lists the known types and the two ways to add one."""
    with pytest.raises(UnknownRunnerError, match="no golden runner for type 'nope' "
                                                 r"\(known: .*render.*\); a runner is an entry"):
        get_runner("nope")


def test_an_explicit_registry_resolves_strings() -> None:
    """A registry mapping (for tests) resolves "module:function" strings on demand."""
    assert get_runner("json", {"json": "json:dumps"}) is json.dumps
