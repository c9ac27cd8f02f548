"""The all-real stack the all-real tests share as a module fixture: the real kube-apiserver,
etcd, Job controller and scheduler, KWOK nodes and the real JobSet and Trainer, with the oldest
pinned JobSet/Trainer CRDs and CRE's. Skips, naming what is missing, where a binary is not built
or the stack cannot start; on teardown no process of it may outlive ``stop()``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cre._vendor.crds import JOBSET_OLDEST, TRAINER_OLDEST
from cre.testing.controlplane.allreal import Stack, start_stack
from cre.testing.controlplane.build import Unavailable
from cre.testing.controlplane.plane import CRE_CRDS, _running
from cre.testing.controlplane.pytest_fixtures import (
    binaries_or_skip,
    kwok_or_skip,
    workloads_or_skip,
)


def all_real_stack() -> Iterator[Stack]:
    """Start the stack, yield it, stop it (the body of a module-scoped ``stack`` fixture)."""
    plane_binaries = binaries_or_skip()
    kwok = kwok_or_skip()
    workloads = workloads_or_skip()
    try:
        running = start_stack(crds=[JOBSET_OLDEST, TRAINER_OLDEST, CRE_CRDS],
                              kwok_binary=kwok, plane_binaries=plane_binaries,
                              workload_binaries=workloads)
    except Unavailable as exc:
        pytest.skip(f"real control plane unavailable: {exc}")
    try:
        yield running
    finally:
        pids = running.plane.pids()
        running.stop()
        assert not any(_running(p) for p in pids), "a stack process outlived stop()"
