"""The real control plane starts, serves CRE's CRDs, and stops without leaking a process.

Both ways of running it are covered: the Python API (with the controller-manager and the
scheduler) and the detached CLI (``up`` then ``down``). Each check that nothing leaked reads
/proc for the exact pids the plane started.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cre.testing.controlplane import ControlPlane
from cre.testing.controlplane.plane import _running
from cre.testing.controlplane.pytest_fixtures import binaries_or_skip, start_or_skip


def _check_serving(plane: ControlPlane) -> None:
    status, body = plane.request("GET", "/version")
    assert status == 200
    assert body["gitVersion"] == plane.binaries.versions.kubernetes
    status, crds = plane.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    names = {c["metadata"]["name"] for c in crds["items"]}
    assert {"jobs.cre.dev", "trainjobs.trainer.kubeflow.org", "jobsets.jobset.x-k8s.io"} <= names
    out = subprocess.run(["kubectl", "--kubeconfig", str(plane.kubeconfig), "get", "crejob",
                          "-A", "-o", "json"], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["items"] == []


def test_api_start_and_stop_leaves_nothing_behind() -> None:
    plane = start_or_skip()
    workdir = plane.workdir
    try:
        plane.start_controller_manager()
        plane.start_scheduler()
        _check_serving(plane)
        pids = plane.pids()
        assert len(pids) == 4  # etcd, apiserver, controller-manager, scheduler
        assert all(_running(p) for p in pids)
    finally:
        plane.stop()
    assert not any(_running(p) for p in pids)
    assert not workdir.exists()


def test_cli_up_and_down(tmp_path: Path) -> None:
    binaries_or_skip()  # skips here with the reason where the plane cannot run
    cli = [sys.executable, "-m", "cre.testing.controlplane"]
    up = subprocess.run([*cli, "up", "--dir", str(tmp_path)], capture_output=True, text=True,
                        check=False, timeout=300)
    assert up.returncode == 0, up.stderr
    started = json.loads(up.stdout)
    pids = list(started["pids"].values())
    try:
        assert all(_running(p) for p in pids)
        out = subprocess.run(["kubectl", "--kubeconfig", started["kubeconfig"], "get", "ns",
                              "default", "-o", "name"], capture_output=True, text=True,
                             check=True)
        assert out.stdout.strip() == "namespace/default"
    finally:
        down = subprocess.run([*cli, "down", "--dir", str(tmp_path)], capture_output=True,
                              text=True, check=False, timeout=120)
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout)["stopped"] == ["kube-apiserver", "etcd"]
    assert not any(_running(p) for p in pids)
