"""Simulated GPU cluster: Trainer, JobSet, batch Job, scheduler and kubelets over the emulator.

``async with simulate(emu, profile="aws-h100", nodes=2, scale=50) as cluster:`` runs the
simulated controllers against an in-process API emulator; ``python -m cre.testing.cluster``
runs them against a separately started one. Each controller is a pure step
(``World`` + simulated time -> actions), tested without HTTP; see docs/design/007.
"""

from cre.testing.cluster.clock import SimClock
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.memory import MemoryCluster
from cre.testing.cluster.profiles import PROFILES, Profile, get_profile, node_manifest
from cre.testing.cluster.program import Role
from cre.testing.cluster.runtime import SimulatedCluster, simulate
from cre.testing.cluster.stubs import Behaviour, Override

__all__ = [
    "PROFILES",
    "Behaviour",
    "MemoryCluster",
    "Override",
    "Profile",
    "Role",
    "SimClock",
    "SimConfig",
    "SimulatedCluster",
    "get_profile",
    "node_manifest",
    "simulate",
]
