"""Fixtures for the end-to-end tests: the emulator and the simulated cluster as processes.

Each test gets its own stack (API emulator + 8-node aws-h100 simulator, via their CLIs) and
starts ``cre-manager`` processes on it, exactly as a user (or ``make demo``) would.

``CRE_BACKEND=real`` swaps the emulator for the session's real etcd + kube-apiserver (with
the garbage-collector and namespace controllers; :mod:`cre.testing.controlplane`), emptied
after each test; the simulator then serves container logs kubelet-style for the apiserver's
log proxy. Tests that drive the emulator's fault API skip there.
"""

from __future__ import annotations

import inspect
import os
import shutil
from collections.abc import Iterator

import pytest
from e2e_helpers import NODES, SIM_TIME_SCALE, gpu_nodes

from cre.testing.controlplane import ControlPlane
from cre.testing.procs import Stack, wait_until

REAL = os.environ.get("CRE_BACKEND", "emulator") == "real"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``CRE_BACKEND=real``, skip the tests that use the emulator's control API."""
    if not REAL:
        return
    for item in items:
        func = getattr(item, "obj", None)
        source = inspect.getsource(func) if callable(func) else ""
        if "emulator_" in source or "cluster_stack" not in source:
            item.add_marker(pytest.mark.skip(
                reason="CRE_BACKEND=real: the test drives the emulator's fault/control API "
                       "or starts its own emulator"))


@pytest.fixture
def cluster_stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    """A running API server with every CRD and a simulated cluster whose GPU nodes registered."""
    plane: ControlPlane | None = None
    with Stack() as stack:
        extra: list[str] = []
        if REAL:
            plane = request.getfixturevalue("real_control_plane")
            assert plane is not None
            shutil.copy(plane.kubeconfig, stack.kubeconfig)
            cert, key = plane.serving_cert
            extra = ["--kubelet-logs", f"{cert},{key}"]
        else:
            stack.start_emulator()
        sim = stack.start_cluster(nodes=NODES, time_scale=SIM_TIME_SCALE, extra_args=extra)
        wait_until(lambda: len(gpu_nodes(stack)) >= NODES, timeout=60, what="GPU nodes",
                   interval=0.2, alive=sim.check_alive)
        yield stack
    if plane is not None:
        plane.reset()
