"""The build of the real JobSet and Trainer controllers: pins, cache layout, skip reasons.

These need no Go: they check what the build reads (the two ``go.mod`` pins, which must match
the CRDs ``cre._vendor.crds`` vendors and share one Kubernetes library version) and that a
machine without the toolchain or the proxy gets an error naming it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cre._vendor.crds import JOBSET_OLDEST, TRAINER_OLDEST
from cre.testing.controlplane import workload_build


def test_versions_match_the_vendored_crds() -> None:
    pinned = workload_build.versions()
    assert JOBSET_OLDEST.name == f"jobset-{pinned.jobset}"
    assert TRAINER_OLDEST.name == f"trainer-{pinned.trainer}"
    assert pinned.label == f"jobset-{pinned.jobset}-trainer-{pinned.trainer}"


def _pins(module: Path) -> dict[str, str]:
    text = (module / "go.mod").read_text()
    return dict(re.findall(r"^\s*(\S+)\s+(v\S+)", text, re.MULTILINE))


def test_both_modules_share_the_kubernetes_libraries() -> None:
    """One k8s.io/* version in both graphs: the second build reuses the first one's packages."""
    jobset, trainer = _pins(workload_build.JOBSET_MODULE), _pins(workload_build.TRAINER_MODULE)
    kube = {m for m in jobset if m.startswith("k8s.io/") and m in trainer}
    assert {"k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go"} <= kube
    assert all(jobset[m] == trainer[m] for m in kube)
    # ... and JobSet at the version Trainer's own go.mod requires
    assert trainer["sigs.k8s.io/jobset"] == jobset["sigs.k8s.io/jobset"]


def test_cache_dir_is_versioned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRE_CONTROLPLANE_CACHE", str(tmp_path))
    assert workload_build.locate() is None
    bin_dir = tmp_path / workload_build.versions().label / "bin"
    bin_dir.mkdir(parents=True)
    for name in workload_build.CONTROLLERS:
        (bin_dir / name).write_bytes(b"")
    (bin_dir / ".source").write_text("stale\n")
    assert workload_build.locate() is None  # a stamp from other sources is not current
    (bin_dir / ".source").write_text(workload_build.source_digest() + "\n")
    found = workload_build.locate()
    assert found is not None and found.path("jobset") == bin_dir / "jobset"
    with pytest.raises(ValueError, match="unknown workload controller 'kwok'"):
        found.path("kwok")
