"""The knobs of a simulated cluster, in simulated seconds, with upstream's defaults.

Every delay here is one the real controllers have (named in the field's comment), so a scenario
can shorten one on purpose instead of the simulator hard-coding a shortcut.
"""

from __future__ import annotations

import attrs

from cre.testing.cluster.profiles import Profile, get_profile
from cre.testing.cluster.stubs import Override


@attrs.frozen(slots=True)
class SimConfig:
    """Timings and behaviour switches shared by the simulated controllers."""

    profile: Profile = attrs.field(factory=lambda: get_profile("aws-h100"))
    # batch Job controller: pod-failure backoff base and cap (DefaultJobPodFailureBackOff/Max).
    pod_failure_backoff: float = 10.0
    pod_failure_backoff_cap: float = 600.0
    # Observed on real clusters (Mokka): the failed launcher Job's pods are gone ~0.5 s after
    # the Job failed. None keeps them, as JobSet's source alone would.
    failed_job_pod_deletion_delay: float | None = 0.5
    # kubelet: image pull + container create, and the crash-loop back-off base/cap.
    container_start_delay: float = 1.0
    crashloop_backoff: float = 10.0
    crashloop_backoff_cap: float = 300.0
    # taint-eviction controller default toleration for not-ready/unreachable (seconds).
    default_toleration_seconds: int = 300
    # CRE's wait-for-workers init gives up after this (None: the script's attempts x sleep).
    wait_for_workers_timeout: float | None = None
    overrides: tuple[Override, ...] = ()
    # Per-node bandwidth factor (1.0 healthy); a "bad" node has e.g. 0.4.
    node_bandwidth: tuple[tuple[str, float], ...] = ()
    # HTTP backend: writes in flight at once within one controller's step (one chain per
    # object keeps each object's writes in order). 1 applies every write in step order.
    write_concurrency: int = 1
    # The simulated controllers that run (engine.ROLES); the others are played by someone else,
    # e.g. the real kube-controller-manager's Job controller and kube-scheduler
    # (cre.testing.controlplane.sequences). Default: all of them.
    roles: frozenset[str] | None = None

    def runs(self, role: str) -> bool:
        """Whether the simulated controller ``role`` runs."""
        return self.roles is None or role in self.roles

    def node_factor(self, node: str) -> float:
        for name, factor in self.node_bandwidth:
            if name == node:
                return factor
        return 1.0
