"""What a simulated container is given and what it does: the values every stub program builds.

A :class:`StubContext` says where a container runs (its pod, role, node, group and the bus
bandwidth the profile gives it); a :class:`Program` is its scripted life in simulated seconds
(output lines, readiness, exit). :mod:`cre.testing.cluster.stubs` chooses the program for a
container and :mod:`cre.testing.cluster.trainerstub` builds a trainer's; both build these.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs


class Role(enum.StrEnum):
    """Where a container sits in a workload, as overrides select it."""

    LAUNCHER = "launcher"
    WORKER = "worker"
    INIT = "init"
    ANY = "any"


@attrs.frozen(slots=True)
class TimedLine:
    """Output ``at`` simulated seconds after the container started; ``mark`` (when set) is
    remembered in the simulator's marks with ``value`` as the line is written (a trainer's
    checkpoint on its volume outlives the container)."""

    at: float
    text: str
    mark: str = ""
    value: Any = None


@attrs.frozen(slots=True)
class Program:
    """A container instance's scripted life, in simulated seconds from its start.

    ``duration`` None means it runs until killed. ``ready_after`` None means never Ready.
    ``wait_for_workers`` (seconds) makes it exit 0 as soon as the group's worker pods are Ready,
    or fail with ``exit_code``/``message`` when that timeout passes first.
    """

    name: str
    start_text: str = ""
    end_text: str = ""
    duration: float | None = 0.0
    exit_code: int = 0
    reason: str = "Completed"
    message: str = ""
    ready_after: float | None = 0.0
    wait_for_workers: float | None = None
    # Output written over the run (``start_text`` first, ``end_text`` at the exit), e.g. the
    # first of two nccl-tests cycles, or a trainer's steps and checkpoints.
    lines: tuple[TimedLine, ...] = ()


@attrs.frozen(slots=True)
class StubContext:
    """What the program of one container may depend on."""

    pod_name: str
    container: Mapping[str, Any]
    role: Role
    node_name: str
    node_busbw: float  # this node's healthy bus bandwidth (profile x node factor)
    group_busbw: float  # the slowest node of the group
    group_size: int  # nodes in the group
    gpus_per_node: int
    gpu_product: str
    peers: tuple[str, ...] = ()  # worker endpoints (hostname.subdomain) of the group
    wait_timeout: float | None = None  # scenario override of wait-for-workers' give-up time
    namespace: str = ""
    # What earlier containers left behind (``trainer/...`` marks: checkpoints, a crash done).
    state: Mapping[str, Any] = attrs.field(factory=dict)
    # The nodes the group's pods run on (an override can select groups by their nodes).
    group_nodes: tuple[str, ...] = ()
