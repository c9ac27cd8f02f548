"""Upstream CRDs (Kubeflow Trainer, JobSet), vendored verbatim as data; see UPSTREAM.md.

The API emulator installs them, the renderer's schema checks validate against them, and the
cluster simulator serves their kinds. ``LATEST`` is what a fresh emulator installs by default;
``ALL`` lists every vendored version folder (oldest supported and latest of each project).
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent

TRAINER_OLDEST = HERE / "trainer-v2.2.0"
TRAINER_LATEST = HERE / "trainer-latest"
JOBSET_OLDEST = HERE / "jobset-v0.11.1"
JOBSET_LATEST = HERE / "jobset-latest"

LATEST: tuple[Path, ...] = (TRAINER_LATEST, JOBSET_LATEST)
ALL: tuple[Path, ...] = (TRAINER_OLDEST, TRAINER_LATEST, JOBSET_OLDEST, JOBSET_LATEST)


def crd_files(*dirs: Path) -> list[Path]:
    """The CRD YAML files in the given folders (default: the latest of each project), sorted."""
    return sorted(p for d in (dirs or LATEST) for p in d.glob("*.yaml"))
