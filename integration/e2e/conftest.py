"""Fixtures for the end-to-end tests: the emulator and the simulated cluster as processes.

Each test gets its own stack (API emulator + 8-node aws-h100 simulator, via their CLIs) and
starts ``cre-manager`` processes on it, exactly as a user (or ``make demo``) would.

The real backend is the session's etcd + kube-apiserver (with the garbage-collector and
namespace controllers; :mod:`cre.testing.controlplane`), emptied after each test; the simulator
then serves container logs kubelet-style for the apiserver's log proxy. Tests marked
``both_backends`` (the manager's reconcile loop and each tier: Job, Certification, WorkloadRun,
thresholds) run on both in every ``make test``: their ``[real]`` instance skips, naming what is
missing, only where the real control plane cannot be built. ``CRE_BACKEND=real`` runs every
test on the real server; those that drive the emulator's fault API skip there.
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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "both_backends: run on the emulator and on the real kube-apiserver")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The tests marked ``both_backends`` run once per backend (unless one is forced)."""
    if (not REAL and "e2e_backend" in metafunc.fixturenames
            and metafunc.definition.get_closest_marker("both_backends") is not None):
        metafunc.parametrize("e2e_backend", ["emulator", "real"])


@pytest.fixture
def e2e_backend() -> str:
    """The API server a test's stack uses: ``real`` under ``CRE_BACKEND=real``, else the
    emulator (the ``both_backends`` tests get both by parametrisation)."""
    return "real" if REAL else "emulator"


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
def cluster_stack(request: pytest.FixtureRequest, e2e_backend: str) -> Iterator[Stack]:
    """A running API server with every CRD and a simulated cluster whose GPU nodes registered."""
    plane: ControlPlane | None = None
    with Stack() as stack:
        extra: list[str] = []
        if e2e_backend == "real":
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
