"""pytest fixtures for the real control plane (re-exported by ``cre.testing.pytest_plugin``).

``real_control_plane`` is session-scoped: one etcd + kube-apiserver (with the garbage
collector and namespace controllers) serves every test that asks for it. Where it cannot run
the tests skip with the reason, naming what is missing (the Go toolchain, the module proxy,
openssl); ``CRE_CONTROLPLANE=0`` skips them on purpose. A build that fails for another reason
is an error, never a skip.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from .build import Binaries, KwokBinary, Unavailable, ensure_built, ensure_kwok_built
from .plane import ControlPlane, start
from .workload_build import WorkloadBinaries
from .workload_build import ensure_built as ensure_workloads_built

DIFF_CONTROLLERS = "garbagecollector,namespace"
T = TypeVar("T")


def skip_reason() -> str | None:
    """Why the real control plane is switched off here, if it is."""
    if os.environ.get("CRE_CONTROLPLANE", "1").lower() in ("0", "no", "off", "skip"):
        return "the real control plane is switched off (CRE_CONTROLPLANE=0)"
    return None


def binaries_or_skip() -> Binaries:
    """The built binaries (building them if needed), or a pytest skip naming the cause."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    try:
        return ensure_built().binaries
    except Unavailable as exc:
        pytest.skip(f"real control plane unavailable: {exc}")


def _built_or_skip(ensure: Callable[[], T], what: str) -> T:
    """``ensure()``'s build, or a pytest skip naming why ``what`` is unavailable."""
    try:
        return ensure()
    except Unavailable as exc:
        pytest.skip(f"{what} unavailable: {exc}")


def kwok_or_skip() -> KwokBinary:
    """The built KWOK binary (building it if needed), or a pytest skip naming the cause."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    return _built_or_skip(lambda: ensure_kwok_built().kwok, "KWOK")


def workloads_or_skip() -> WorkloadBinaries:
    """The built JobSet and Trainer managers (building them if needed), or a pytest skip naming
    the cause (the plane's own reasons first; ``CRE_CONTROLPLANE_WORKLOADS=0`` on purpose)."""
    binaries_or_skip()
    if os.environ.get("CRE_CONTROLPLANE_WORKLOADS", "1").lower() in ("0", "no", "off", "skip"):
        pytest.skip("the real JobSet/Trainer controllers are switched off "
                    "(CRE_CONTROLPLANE_WORKLOADS=0)")
    return _built_or_skip(lambda: ensure_workloads_built().binaries, "JobSet/Trainer controllers")


def start_or_skip() -> ControlPlane:
    """A started control plane (every CRD installed), or a pytest skip naming the cause."""
    binaries = binaries_or_skip()
    try:
        return start(binaries=binaries)
    except Unavailable as exc:
        pytest.skip(f"real control plane unavailable: {exc}")


@pytest.fixture(scope="session")
def real_control_plane() -> Iterator[ControlPlane]:
    """etcd + kube-apiserver + the GC and namespace controllers, with every CRD installed."""
    plane = start_or_skip()
    try:
        plane.start_controller_manager(controllers=DIFF_CONTROLLERS)
        yield plane
    finally:
        plane.stop()
