"""Differential conformance: every script answers the same on the emulator and kube-apiserver.

Each script runs against a fresh emulator process (at the real server's minor version, with
the same CRDs) and the session's real control plane; the normalised responses must be equal
or differ only where :mod:`cre.testing.controlplane.allowlist` says why.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import anyio
import pytest

from cre.testing.controlplane import ControlPlane, default_crds
from cre.testing.controlplane.allowlist import ALLOWED
from cre.testing.controlplane.differential import Script, Target, compare, run_script
from cre.testing.controlplane.scripts import SCRIPTS
from cre.testing.procs import Stack


@pytest.fixture(scope="module")
def targets(real_control_plane: ControlPlane) -> Iterator[tuple[Target, Target]]:
    minor = ".".join(real_control_plane.binaries.versions.kubernetes[1:].split(".")[:2])
    with Stack() as stack:
        stack.start_emulator(crds=default_crds(), args=["--kubernetes-version", minor])
        yield (Target.from_kubeconfig("emulator", stack.kubeconfig),
               Target.from_kubeconfig("real", real_control_plane.kubeconfig,
                                      etcd=real_control_plane.etcd_url))


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_script_agrees(script: Script, targets: tuple[Target, Target]) -> None:
    if any(step.kubectl for step in script.steps) and shutil.which("kubectl") is None:
        pytest.skip("kubectl is not on PATH: the kubectl scripts need it")
    emulator, real = targets
    got_emulator = anyio.run(run_script, emulator, script)
    got_real = anyio.run(run_script, real, script)
    outcome = compare(script.name, got_emulator, got_real, ALLOWED)
    assert not outcome.unexplained, json.dumps(
        [[d.path, d.emulator, d.real] for d in outcome.unexplained], indent=1, default=str)
