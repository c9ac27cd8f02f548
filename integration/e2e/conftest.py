"""Fixtures for the end-to-end tests: the emulator and the simulated cluster as processes.

Each test gets its own stack (API emulator + 8-node aws-h100 simulator, via their CLIs) and
starts ``cre-manager`` processes on it, exactly as a user (or ``make demo``) would.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from e2e_helpers import NODES, SIM_TIME_SCALE, gpu_nodes

from cre.testing.procs import Stack, wait_until


@pytest.fixture
def cluster_stack() -> Iterator[Stack]:
    """A running emulator with every CRD and a simulated cluster whose GPU nodes registered."""
    with Stack() as stack:
        stack.start_emulator()
        sim = stack.start_cluster(nodes=NODES, time_scale=SIM_TIME_SCALE)
        wait_until(lambda: len(gpu_nodes(stack)) >= NODES, timeout=60, what="GPU nodes",
                   interval=0.2, alive=sim.check_alive)
        yield stack

