"""pytest plugin shipped with CRE (registered through the ``pytest11`` entry point).

Adds ``--update-goldens`` for the golden-file harness. Fixtures for the API emulator and the
cluster simulator are re-exported here as those modules provide them.
"""

from __future__ import annotations

import pytest

from cre.testing.apiserver.pytest_fixtures import kube_emulator
from cre.testing.cluster.pytest_fixtures import simulated_cluster

__all__ = ["kube_emulator", "pytest_addoption", "simulated_cluster"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cre")
    group.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite goldens/ from the current output instead of comparing",
    )
