"""Building the real JobSet and Kubeflow Trainer controller managers from their Go modules.

The oracle tier runs the upstream controllers CRE's workloads depend on, not only the simulator's
re-implementations of them (``cre.testing.cluster.jobset``/``trainer``). Their images are not
reachable from these machines, but ``sigs.k8s.io/jobset`` and ``github.com/kubeflow/trainer/v2``
are served by the Go module proxy, so ``tools/controlplane/workloads/{jobset,trainer}`` hold a
``main`` of ours each (the manager wiring, a few lines over the upstream packages) and a
``go.mod`` pinning the upstream version. They are two modules because JobSet v0.11.1's webhooks
use controller-runtime 0.22's builder, which Trainer v2.2.0's 0.23 replaced; both pin
``k8s.io/* v0.35.2`` so the second build reuses most of the first one's compiled packages.

Like :mod:`.build`, the pins are read from the ``go.mod`` files, the cache directory is named
after them (``jobset-v0.11.1-trainer-v2.2.0``) and a stamp with the hash of the sources decides
whether a present build is current. :class:`~.build.Unavailable` names what is missing.
"""

from __future__ import annotations

import time
from pathlib import Path

import attrs

from .build import (
    TOOLS,
    Unavailable,
    build_into,
    cache_root,
    folder_bytes,
    modules_digest,
    required_version,
)

WORKLOADS = TOOLS / "workloads"
JOBSET_MODULE = WORKLOADS / "jobset"
TRAINER_MODULE = WORKLOADS / "trainer"
CONTROLLERS = ("jobset", "trainer")


@attrs.frozen
class WorkloadVersions:
    """The upstream versions pinned by ``tools/controlplane/workloads/*/go.mod``."""

    jobset: str
    trainer: str

    @property
    def label(self) -> str:
        return f"jobset-{self.jobset}-trainer-{self.trainer}"


@attrs.frozen
class WorkloadBinaries:
    """Paths of a complete build."""

    bin_dir: Path
    versions: WorkloadVersions

    def path(self, controller: str) -> Path:
        """``jobset`` or ``trainer``."""
        if controller not in CONTROLLERS:
            raise ValueError(f"unknown workload controller {controller!r}; one of {CONTROLLERS}")
        return self.bin_dir / controller


@attrs.frozen
class WorkloadBuildReport:
    """What :func:`ensure_built` did: ``built`` is False when the cache was reused."""

    binaries: WorkloadBinaries
    built: bool
    seconds: float
    bin_bytes: int


def versions() -> WorkloadVersions:
    """The pinned versions, read from the ``go.mod`` files."""
    if not WORKLOADS.is_dir():
        raise Unavailable(f"{WORKLOADS} is missing (the controllers build from a source checkout)")
    return WorkloadVersions(
        jobset=required_version(JOBSET_MODULE / "go.mod", "sigs.k8s.io/jobset"),
        trainer=required_version(TRAINER_MODULE / "go.mod", "github.com/kubeflow/trainer/v2"))


LDFLAGS = "-s -w"


def source_digest() -> str:
    """A hash of everything the build reads from the repository."""
    return modules_digest((JOBSET_MODULE, TRAINER_MODULE), LDFLAGS)


def locate() -> WorkloadBinaries | None:
    """The current build if it is complete, else None (never builds)."""
    pinned = versions()
    bin_dir = cache_root() / pinned.label / "bin"
    stamp = bin_dir / ".source"
    binaries = WorkloadBinaries(bin_dir=bin_dir, versions=pinned)
    if all(binaries.path(c).is_file() for c in CONTROLLERS) and stamp.is_file() \
            and stamp.read_text().strip() == source_digest():
        return binaries
    return None


def ensure_built(*, jobs: int = 2, log: bool = False) -> WorkloadBuildReport:
    """Build both controller managers into the cache unless current.

    Same policy as :func:`.build.ensure_built`: ``nice -n 10``, at most ``jobs`` parallel
    compilations, stripped, moved into place only when complete.
    """
    started = time.monotonic()
    found = locate()
    if found is not None:
        return WorkloadBuildReport(binaries=found, built=False, seconds=0.0,
                                   bin_bytes=folder_bytes(found.bin_dir))
    pinned = versions()
    final = cache_root() / pinned.label / "bin"
    # Trainer first: its graph holds JobSet's API package, the JobSet build then reuses it.
    built = build_into(final, [(TRAINER_MODULE, "trainer", LDFLAGS),
                                (JOBSET_MODULE, "jobset", LDFLAGS)],
                        links=(), stamp=source_digest(), jobs=jobs, label=pinned.label, log=log)
    binaries = WorkloadBinaries(bin_dir=final, versions=pinned)
    return WorkloadBuildReport(binaries=binaries, built=built, seconds=time.monotonic() - started,
                               bin_bytes=folder_bytes(final))

