"""pytest plugin shipped with CRE (registered through the ``pytest11`` entry point).

Golden-file testing: with ``[tool.cre.golden]`` in the project's pyproject.toml, every
``<cases>/<suite>/<case>/input.yaml`` is collected as a test (``cre.testing.golden.plugin``);
``--update-goldens`` rewrites the goldens. Fixtures for the API emulator and the cluster
simulator are re-exported here as those modules provide them.

The entry point loads this module in every pytest run of an environment where CRE is installed,
including one without the ``testing`` extra (the emulator's dependencies). There the fixtures
still exist but fail with the command that installs what they need, instead of every test
session failing at start-up.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cre.testing.golden import plugin as golden_plugin

#: Top-level modules the ``testing`` extra provides (``pip install 'cre[testing]'``).
TESTING_EXTRA: frozenset[str] = frozenset(
    {"jsonschema", "kubernetes_validate", "jsonpatch", "jsonpointer", "orjson", "yaml"})

try:
    from cre.testing.apiserver.pytest_fixtures import kube_emulator
    from cre.testing.cluster.pytest_fixtures import simulated_cluster
    from cre.testing.controlplane.pytest_fixtures import real_control_plane
except ModuleNotFoundError as exc:
    if (exc.name or "").partition(".")[0] not in TESTING_EXTRA:
        raise
    _missing = exc.name

    def _needs_extra(fixture: str) -> str:
        return (f"the {fixture} fixture needs CRE's test kit dependencies: "
                f"pip install 'cre[testing]' ({_missing} is not installed)")

    @pytest.fixture
    def kube_emulator() -> Iterator[Any]:
        pytest.fail(_needs_extra("kube_emulator"), pytrace=False)
        yield None  # pragma: no cover

    @pytest.fixture
    def simulated_cluster() -> Iterator[Any]:
        pytest.fail(_needs_extra("simulated_cluster"), pytrace=False)
        yield None  # pragma: no cover

    @pytest.fixture(scope="session")
    def real_control_plane() -> Iterator[Any]:
        pytest.fail(_needs_extra("real_control_plane"), pytrace=False)
        yield None  # pragma: no cover

__all__ = ["kube_emulator", "pytest_addoption", "pytest_collect_directory", "pytest_configure",
           "pytest_terminal_summary", "real_control_plane", "simulated_cluster"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cre")
    group.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="golden cases write their goldens instead of comparing (and stale goldens "
             "are deleted); review the result with git diff",
    )


def pytest_configure(config: pytest.Config) -> None:
    golden_plugin.configure(config)


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    return golden_plugin.collect_directory(path, parent)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    golden_plugin.terminal_summary(terminalreporter, config)
