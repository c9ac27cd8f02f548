"""A real Kubernetes control plane for the test tier: etcd, kube-apiserver, controllers.

The emulator (:mod:`cre.testing.apiserver`) is the fast default; this package is its oracle.
:mod:`.build` builds the binaries once per machine from pinned Go modules
(``tools/controlplane/``), :mod:`.plane` runs them envtest-style, and ``python -m
cre.testing.controlplane build|up|down`` does both from the shell.
"""

from .build import Binaries, BuildReport, Unavailable, Versions, ensure_built, locate, versions
from .plane import ControlPlane, ControlPlaneError, default_crds, start, stop_state

__all__ = [
    "Binaries",
    "BuildReport",
    "ControlPlane",
    "ControlPlaneError",
    "Unavailable",
    "Versions",
    "default_crds",
    "ensure_built",
    "locate",
    "start",
    "stop_state",
    "versions",
]
