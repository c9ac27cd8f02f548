"""The one contract between every pure core and its shell: ``Plan[S]``, the asks, ``Feedback``.

Every kind's core (Job, Workflow, Certification, WorkloadRun, BandwidthMeasurement,
GoodputMeasurement) is ``(object, Observation, now) -> Plan[S]``, ``S`` being the kind's status.
The core never performs I/O. Everything it needs from the cluster arrives in an Observation the
controller builds from its caches; everything it wants done leaves as a Plan that the one
executor (:mod:`cre.kube.executor`) applies, in the one order written there. A Plan says:

* ``creates`` (``replace=True``: create, or replace what holds the name), ``deletes`` (UID
  preconditions), ``patches`` of the object itself (its finalizers), the new ``status``
  (``None``: no status write), ``events`` (written only once the status landed) and
  ``requeue_after``;
* ``asks``: what the core wants to know before it writes. A Plan that asks writes nothing; the
  shell answers and runs the core again, in the same reconcile (:func:`cre.kube.runtime.converge`):

  - :class:`ReadLog`: a container's log tail (the Job's failure record), answered in the
    Observation's ``log_tails``;
  - :class:`StreamLog`: a log streamed through a parser (the measurements), answered as a
    :class:`cre.core.measure.logread.LogReadResult` in the Observation's ``read`` / ``node_reads``;
  - :class:`ConfirmAbsent`: the cache lacks an object the core is about to act on as gone; the
    shell reads it live and puts what it found where the cache would have;
  - :class:`ListLive`: the caches' lists may lag (no pod left, a child not yet seen); the shell
    lists live and puts the lists where the cached ones were;
  - :class:`ReadEvents`: an object's Events (no cache holds them), answered in the
    Observation's ``workload_events``;
  - :class:`DeliverReport`: one webhook POST of a ReportExport's payload, answered as a
    :class:`cre.core.export.delivery.Attempt` in the Observation's ``attempt``.

  Every answered ask is recorded in the Observation's :class:`Feedback` (``answered``), so the
  core never asks twice for what it was given.
* Applying feeds back the same way, never through an exception: a create whose name a foreign
  object holds comes back as a :class:`CreateConflict` (with the live holder), one the API
  server refused for good as a :class:`CreateError`, both in the next Observation's
  ``feedback``. Only transient API errors are raised (the runtime retries with backoff).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, Generic, Protocol, TypeVar

import attrs

from cre.api.goodput import GoodputMeasurement
from cre.api.measurement import BandwidthMeasurement
from cre.api.meta import ObjectMeta
from cre.core.common.observed import (
    LogTail,
    NodeCheck,
    NodeView,
    ObjectEvent,
    PodView,
    TrainJobView,
)

# Tail limits of every failure-log record (reference section 5.2: 800 lines, last 32 KiB).
TAIL_LINES: Final = 800
LIMIT_BYTES: Final = 32768
# The read's limitBytes. The API server keeps the *first* limitBytes of the tail window, which
# would cut off the end of the log (the part that explains the failure), so the read is bounded
# generously and the core keeps the last LIMIT_BYTES of what came back.
READ_LIMIT_BYTES: Final = 8 * LIMIT_BYTES
#: Bytes a provisional measurement read may return (server-side limitBytes; the client stops).
SAMPLE_LIMIT_BYTES: Final = 8 * 1024 * 1024

S = TypeVar("S")
S_co = TypeVar("S_co", covariant=True)


class EventSeverity(enum.StrEnum):
    """A core/v1 Event's ``type``: how serious the event is (not a watch event's type, which is
    :class:`cre.api.watch.WatchEventType`)."""

    NORMAL = "Normal"
    WARNING = "Warning"


@attrs.frozen(kw_only=True)
class Create:
    """Create ``body`` (a full manifest). ``replace``: replace the object holding the name
    instead (the node-result ConfigMaps); otherwise AlreadyExists from an object the owner does
    not control comes back as a :class:`CreateConflict`."""

    api_version: str
    kind: str
    namespace: str
    name: str
    body: Mapping[str, Any]
    replace: bool = False


@attrs.frozen(kw_only=True)
class Patch:
    """A JSON merge patch of the reconciled object itself (its finalizers), guarded by the
    resourceVersion the object has when the executor gets to it."""

    body: Mapping[str, Any]


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
    """A core/v1 Event about the reconciled object, emitted only after the status write
    succeeded."""

    type: EventSeverity  # the Event's ``type`` field
    reason: str
    message: str


# --- the asks ---------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ReadLog:
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
class StreamLog:
    """A log the core wants streamed through its parser: ``since_time`` (second resolution)
    for the server, the anchor for :class:`cre.core.measure.logwindow.WindowFilter`, and bounds. A
    measurement subclasses it with what its parser needs."""

    namespace: str
    pod: str
    container: str | None
    pod_uid: str
    final: bool
    since_time: datetime | None = None
    anchor: str | None = None
    skip_lines: int = 0
    limit_bytes: int = SAMPLE_LIMIT_BYTES


@attrs.frozen(kw_only=True)
class ConfirmAbsent:
    """Read the object ``kind``/``name`` (in the reconciled object's namespace) live: the cache
    does not hold it, and the core will not act irreversibly on a cache miss."""

    kind: str
    name: str


@attrs.frozen(kw_only=True)
class ListLive:
    """List the objects of ``kind`` matching ``selector`` live (in the reconciled object's
    namespace): the cached lists may lag behind what the core is about to decide on."""

    kind: str
    selector: str


@attrs.frozen(kw_only=True)
class ReadEvents:
    """The Events about the object ``kind``/``name`` (no cache holds Events)."""

    kind: str
    name: str


@attrs.frozen(kw_only=True)
class DeliverReport:
    """POST ``body`` (JSON) to ``url`` once, with the ``Idempotency-Key`` header ``key`` and,
    when ``token_secret`` names a Secret key (``(name, key)``, in the reconciled object's
    namespace), a bearer token read from it; answered with the attempt's outcome."""

    url: str
    key: str
    body: bytes
    timeout_seconds: float
    token_secret: tuple[str, str] | None = None


Ask = ReadLog | StreamLog | ConfirmAbsent | ListLive | ReadEvents | DeliverReport


# --- the feedback -----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CreateConflict:
    """A create whose name an object the owner does not control holds: the live ``holder``."""

    kind: str
    name: str
    holder: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class CreateError:
    """A create the API server refused for good (validation 400/422, an admission webhook's
    403): the object, the HTTP code, the Status reason and the API's own message."""

    kind: str
    name: str
    namespace: str | None
    code: int
    reason: str
    message: str

    def describe(self) -> str:
        """``the API server refused TrainingRuntime ns/name (422 Invalid): <message>``."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        said = f"{self.code} {self.reason}".strip()
        return f"the API server refused {self.kind} {where} ({said}): {self.message}"


@attrs.frozen(kw_only=True)
class Feedback:
    """What the shell told the core on this reconcile, on every kind's Observation: the asks
    it answered, the creates whose names foreign objects hold, the creates refused for good."""

    answered: tuple[Ask, ...] = ()
    create_conflicts: tuple[CreateConflict, ...] = ()
    create_rejections: tuple[CreateError, ...] = ()

    def has(self, ask: Ask) -> bool:
        """Whether ``ask`` was answered."""
        return ask in self.answered

    def conflict(self, kind: str, name: str) -> CreateConflict | None:
        """The conflict of the create of ``kind``/``name``, if one conflicted."""
        return next((c for c in self.create_conflicts if (c.kind, c.name) == (kind, name)),
                    None)

    def held(self, name: str) -> bool:
        """Whether a create of ``name`` (any kind) found the name held."""
        return any(c.name == name for c in self.create_conflicts)

    def refused(self, create: Create) -> CreateError | None:
        """The refusal of an earlier create of the same object, if it was refused for good."""
        return next((r for r in self.create_rejections
                     if (r.kind, r.name) == (create.kind, create.name)), None)

    def answering(self, *asks: Ask) -> Feedback:
        """This feedback with ``asks`` answered too."""
        return attrs.evolve(self, answered=(*self.answered, *asks))


# --- the plan ---------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Plan(Generic[S]):
    """The complete outcome of one pure reconcile of any kind (``S``: the kind's status).

    ``status`` is the complete new status when it differs from the current one (``None``: no
    status write), written through the status subresource with ``resource_version`` as
    precondition; on conflict the shell re-reads and recomputes instead of retrying this plan.
    """

    resource_version: str = ""
    creates: tuple[Create, ...] = ()
    deletes: tuple[Delete, ...] = ()
    patches: tuple[Patch, ...] = ()
    status: S | None = None
    events: tuple[EventSpec, ...] = ()
    asks: tuple[Ask, ...] = ()
    requeue_after: float | None = None

    @property
    def writes(self) -> bool:
        """Whether the plan changes anything in the cluster."""
        return bool(self.creates or self.patches or self.deletes or self.status is not None
                    or self.events)

    @property
    def quiet(self) -> bool:
        """No write, no event and no ask: nothing left to do right now."""
        return not (self.writes or self.asks)


class StatusOwner(Protocol[S_co]):
    """What a plan about an object reads of it: its resourceVersion and its current status."""

    @property
    def metadata(self) -> ObjectMeta: ...

    @property
    def status(self) -> S_co: ...


def owner_plan(owner: StatusOwner[S], status: S | None = None, *,
               events: tuple[EventSpec, ...] = (), asks: tuple[Ask, ...] = (),
               requeue_after: float | None = None) -> Plan[S]:
    """A plan about ``owner`` computed from its copy at hand (the status write's precondition)
    that writes ``status`` only when it differs from the owner's (``None``: no status write),
    then ``events``; or that ``asks`` (and writes nothing)."""
    return Plan(resource_version=owner.metadata.resource_version or "",
                status=status if status is not None and status != owner.status else None,
                events=events, asks=asks, requeue_after=requeue_after)


@attrs.frozen(kw_only=True)
class Observation:
    """Everything the Job core may read about one Job's world at one instant.

    ``trainjob`` is the cached workload named ``<job>-workload`` (``None`` when the cache has no
    such object, or a live read found none: ``feedback`` then holds the answered
    :class:`ConfirmAbsent`). ``worker_pods`` and ``launcher_pods`` come from a live list when
    ``feedback`` holds the answered :class:`ListLive` asks of pods. A create of the workload
    whose name was held, or that was refused for good, is in ``feedback``. ``nodes`` are the
    GPU nodes of the group and those hosting the Job's pods, as far as the cache holds them;
    ``node_checks`` the Job's ``nodeHealthMonitor`` expression evaluated on each of them (the
    shell evaluates an expression once per node copy, not on every pass).
    Launcher pods come first wherever pods are combined, so a same-second tie picks the launcher.
    """

    trainjob: TrainJobView | None = None
    worker_pods: tuple[PodView, ...] = ()
    launcher_pods: tuple[PodView, ...] = ()
    nodes: tuple[NodeView, ...] = ()
    node_checks: tuple[NodeCheck, ...] = ()
    log_tails: tuple[LogTail, ...] = ()
    # The Job's BandwidthMeasurement (``<job>-bandwidth``) as cached, or as the live holder a
    # create's AlreadyExists returned (see cre.core.job.bandwidth).
    bandwidth_measurement: BandwidthMeasurement | None = None
    # The Job's GoodputMeasurement (``<job>-goodput``), as cached or as a create returned it
    # (see cre.core.job.goodput): training stall detection and the checkpoint-restart trigger.
    goodput_measurement: GoodputMeasurement | None = None
    # The workload's Events, read live because the core asked (a :class:`ReadEvents`).
    workload_events: tuple[ObjectEvent, ...] = ()
    feedback: Feedback = attrs.field(factory=Feedback)

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
