"""pytest fixture for the cluster simulator (re-exported by ``cre.testing.pytest_plugin``).

``simulated_cluster`` runs a 2-node aws-h100 cluster at time scale 50 on top of the
``kube_emulator`` fixture, for anyio tests: ``async def test_x(simulated_cluster): ...``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from cre.testing.cluster.runtime import SimulatedCluster, simulate


@pytest.fixture
async def simulated_cluster(kube_emulator: Any) -> AsyncIterator[SimulatedCluster]:
    """A running simulated cluster (2 aws-h100 nodes, scale 50) against ``kube_emulator``."""
    async with simulate(kube_emulator, profile="aws-h100", nodes=2, scale=50) as cluster:
        yield cluster
