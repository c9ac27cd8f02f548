"""What the pure Job core reads (``Observation``) and what it asks the shell to do (``Plan``).

The core never performs I/O. Everything it needs from the cluster arrives in an Observation that
the controller builds from its caches (plus, when the core asked for them, live reads and log
tails); everything it wants done leaves as a Plan the executor applies. These round trips are
part of the contract (written out in :mod:`cre.core`), and the shell runs them inside one
reconcile pass (:func:`cre.kube.runtime.converge`):

* ``Plan.log_reads``: the core wants a container log tail before it can write status. The shell
  reads it and re-runs the core on the *same* observation with the tails added, so the failure
  record lands in one status write even if the pod is deleted in between.
* ``Plan.confirm_workload_absence``: the cache does not hold the workload; the core will not act
  irreversibly on that until a live read confirms it (``Observation.workload_absence_confirmed``).
* ``Plan.confirm_pods_live``: the caches show no running pod of the Job, and the core is about to
  drop the finalizer on that; the shell lists the pods live (``Observation.pods_read_live``).
* ``Plan.read_workload_events``: the core is about to fail a workload that never started and
  wants its Events in the message; the shell lists them (``Observation.workload_events``).

A Plan that carries any request carries no writes: the shell must come back first.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final

import attrs

from cre.api.goodput import GoodputMeasurement
from cre.api.job import JobStatus
from cre.api.measurement import BandwidthMeasurement
from cre.core.observed import LogTail, NodeView, ObjectEvent, PodView, TrainJobView

# Tail limits of every failure-log record (reference section 5.2: 800 lines, last 32 KiB).
TAIL_LINES: Final = 800
LIMIT_BYTES: Final = 32768
# The read's limitBytes. The API server keeps the *first* limitBytes of the tail window, which
# would cut off the end of the log (the part that explains the failure), so the read is bounded
# generously and the core keeps the last LIMIT_BYTES of what came back.
READ_LIMIT_BYTES: Final = 8 * LIMIT_BYTES


class EventSeverity(enum.StrEnum):
    """A core/v1 Event's ``type``: how serious the event is (not a watch event's type, which is
    :class:`cre.api.watch.WatchEventType`)."""

    NORMAL = "Normal"
    WARNING = "Warning"


@attrs.frozen(kw_only=True)
class Observation:
    """Everything the Job core may read about one Job's world at one instant.

    ``trainjob`` is the cached workload named ``<job>-workload`` (``None`` when the cache has no
    such object); ``workload_absence_confirmed`` says a live read confirmed that absence.
    ``pods_read_live`` says ``worker_pods`` and ``launcher_pods`` come from a live list.
    ``create_conflict`` is the live object holding the workload's name when the shell's create
    returned AlreadyExists (``None`` when no create conflicted); ``create_rejected`` is the message
    of a create the API server refused for good. ``nodes`` are the GPU nodes of
    the group and those hosting the Job's pods, as far as the cache holds them. Launcher pods
    come first wherever pods are combined, so a same-second tie picks the launcher.
    """

    trainjob: TrainJobView | None = None
    workload_absence_confirmed: bool = False
    # The pod lists were read live (not from the caches), because the core asked for it.
    pods_read_live: bool = False
    create_conflict: TrainJobView | None = None
    # The API server refused the workload's create for good (admission webhook denial or
    # validation, not a transient error): its message. The Job fails, Platform class.
    create_rejected: str | None = None
    worker_pods: tuple[PodView, ...] = ()
    launcher_pods: tuple[PodView, ...] = ()
    nodes: tuple[NodeView, ...] = ()
    log_tails: tuple[LogTail, ...] = ()
    # The Job's BandwidthMeasurement (``<job>-bandwidth``) as cached, or as the live holder a
    # create's AlreadyExists returned (see cre.core.jobmeasure).
    bandwidth_measurement: BandwidthMeasurement | None = None
    # The Job's GoodputMeasurement (``<job>-goodput``), as cached or as a create returned it
    # (see cre.core.jobgoodput): training stall detection and the checkpoint-restart trigger.
    goodput_measurement: GoodputMeasurement | None = None
    # The workload's Events, read live because the core asked (``None``: not read).
    workload_events: tuple[ObjectEvent, ...] | None = None

    def tail_for(self, *, pod: str, container: str, pod_uid: str = "",
                 previous: bool = False) -> LogTail | None:
        """The log tail the shell read for this container (of this pod instance when both
        UIDs are known; of its previous run when ``previous``), if any."""
        for tail in self.log_tails:
            if tail.pod != pod or tail.container != container or tail.previous != previous:
                continue
            if pod_uid and tail.pod_uid and tail.pod_uid != pod_uid:
                continue
            return tail
        return None


@attrs.frozen(kw_only=True)
class JobSettings:
    """Tunables of the Job core (defaults follow the reference's timing constants)."""

    poll_interval: float = 15.0
    drain_timeout: float = 300.0
    drain_poll_interval: float = 15.0
    # Requeue after a checkpoint restart; the workload is recreated as soon as the old one is
    # confirmed gone (its deletion event usually comes first).
    restart_delay: float = 30.0
    # Re-check interval while a foreign object that holds our name is terminating.
    collision_retry: float = 5.0


DEFAULT_SETTINGS: Final = JobSettings()


@attrs.frozen(kw_only=True)
class Create:
    """Create ``body`` (a full manifest); AlreadyExists is reported back as a create conflict."""

    api_version: str
    kind: str
    namespace: str
    name: str
    body: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class Patch:
    """A JSON merge patch of the Job itself, refused unless ``resource_version`` still holds."""

    namespace: str
    name: str
    body: Mapping[str, Any]
    resource_version: str


@attrs.frozen(kw_only=True)
class Delete:
    """Delete one object instance; the UID precondition spares a same-named replacement."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str


@attrs.frozen(kw_only=True)
class EventSpec:
    """A core/v1 Event about the Job, emitted only after the status write succeeded."""

    type: EventSeverity  # the Event's ``type`` field
    reason: str
    message: str


@attrs.frozen(kw_only=True)
class LogRequest:
    """A container log tail the core wants before it decides (read with these limits);
    ``previous`` asks for the log of the container's previous run (``previous=true``)."""

    namespace: str
    pod: str
    container: str
    pod_uid: str = ""
    previous: bool = False
    tail_lines: int = TAIL_LINES
    limit_bytes: int = READ_LIMIT_BYTES


@attrs.frozen(kw_only=True)
class Plan:
    """The complete outcome of one pure reconcile.

    ``status`` is the complete new status when it differs from the current one (``None``: no
    status write). It is written through the status subresource with ``resource_version`` as
    precondition; on conflict the shell re-reads and recomputes instead of retrying this plan.
    """

    resource_version: str = ""
    creates: tuple[Create, ...] = ()
    patches: tuple[Patch, ...] = ()
    deletes: tuple[Delete, ...] = ()
    status: JobStatus | None = None
    events: tuple[EventSpec, ...] = ()
    log_reads: tuple[LogRequest, ...] = ()
    confirm_workload_absence: bool = False
    confirm_pods_live: bool = False
    read_workload_events: bool = False
    requeue_after: float | None = None

    @property
    def writes(self) -> bool:
        """Whether the plan changes anything in the cluster."""
        return bool(self.creates or self.patches or self.deletes or self.status is not None
                    or self.events)

    @property
    def quiet(self) -> bool:
        """No write, no event and no request for more input: nothing left to do right now."""
        return not (self.writes or self.log_reads or self.confirm_workload_absence
                    or self.confirm_pods_live or self.read_workload_events)
