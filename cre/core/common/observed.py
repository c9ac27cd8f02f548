"""Slim, frozen projections of the cluster objects the pure core reads.

The informer layer (``cre.kube``) turns every watched Pod and Node into one of these at the
edge, dropping managedFields, specs and annotations the core never reads. The pure core only
ever sees these values, so its inputs are small, hashable and cheap to build in tests.

Timestamps are timezone-aware ``datetime`` values (UTC) or ``None``.
"""

from __future__ import annotations

from datetime import datetime

import attrs

Labels = tuple[tuple[str, str], ...]


def label_value(labels: Labels, key: str) -> str | None:
    """The value of ``key`` in a projection's kept labels, or ``None``."""
    for k, v in labels:
        if k == key:
            return v
    return None


@attrs.frozen(slots=True)
class OwnerRef:
    """An ownerReference: enough to walk Pod -> batch Job -> JobSet -> TrainJob."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = False


@attrs.frozen(slots=True)
class PodCondition:
    """One entry of ``status.conditions``; ``status`` is the API string True/False/Unknown.
    ``message`` is kept only for ``PodScheduled=False`` (the scheduler's reason a pod does not
    fit), the one condition message the core reports."""

    type: str
    status: str
    reason: str | None = None
    message: str | None = None


@attrs.frozen(slots=True)
class ContainerState:
    """The one populated branch of a container's ``state``: waiting, running or terminated."""

    kind: str  # "waiting" | "running" | "terminated"
    reason: str | None = None
    exit_code: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    message: str | None = None


@attrs.frozen(slots=True)
class ContainerStatusView:
    """A container or init-container status; ``last_state`` is the previous run, if any;
    ``image`` is the image the kubelet runs or tries to pull (named by an image-pull failure)."""

    name: str
    state: ContainerState | None
    restart_count: int = 0
    init: bool = False
    last_state: ContainerState | None = None
    image: str | None = None


@attrs.frozen(slots=True)
class PodView:
    """Everything the core reads about a Pod.

    ``labels`` keeps only the label keys CRE reads (see ``cre.api.labels``).
    """

    name: str
    namespace: str
    uid: str
    labels: tuple[tuple[str, str], ...] = ()
    owner_refs: tuple[OwnerRef, ...] = ()
    node_name: str | None = None
    phase: str | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    conditions: tuple[PodCondition, ...] = ()
    init_container_statuses: tuple[ContainerStatusView, ...] = ()
    container_statuses: tuple[ContainerStatusView, ...] = ()
    resource_version: str = ""
    # ``status.reason`` / ``status.message`` of the Pod ("Evicted", "UnexpectedAdmissionError"...).
    reason: str | None = None
    message: str | None = None

    def label(self, key: str) -> str | None:
        """The value of one kept label, or ``None``."""
        return label_value(self.labels, key)

    def condition(self, type_: str) -> PodCondition | None:
        """The condition of this type, or ``None``."""
        for c in self.conditions:
            if c.type == type_:
                return c
        return None


@attrs.frozen(slots=True)
class NodeCondition:
    """One entry of a Node's ``status.conditions`` (heartbeat and transition times dropped, so a
    heartbeat leaves the view unchanged)."""

    type: str
    status: str
    reason: str | None = None
    message: str | None = None


@attrs.frozen(slots=True)
class NodeTaint:
    """One ``spec.taints`` entry (target discovery matches ``taintSelectors`` against it; the
    ``nodeHealthMonitor`` expression sees it in ``node.spec.taints``)."""

    key: str
    value: str | None = None
    effect: str | None = None


@attrs.frozen(slots=True)
class NodeView:
    """Everything the core reads about a GPU Node.

    ``extended_resources`` names the allocatable resources beyond cpu/memory/pods/storage
    (platform detection and NIC detection read which exist, never how many). ``conditions``
    and ``taints`` feed the ``nodeHealthMonitor`` expression (see ``cre.core.job.health``)."""

    name: str
    uid: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    provider_id: str | None = None
    unschedulable: bool = False
    ready: str = "Unknown"  # the Ready condition's status: "True" / "False" / "Unknown"
    ready_reason: str | None = None
    allocatable_gpus: int = 0
    resource_version: str = ""
    taints: tuple[NodeTaint, ...] = ()
    extended_resources: tuple[str, ...] = ()
    conditions: tuple[NodeCondition, ...] = ()

    def label(self, key: str) -> str | None:
        """The value of one label, or ``None``."""
        return label_value(self.labels, key)


@attrs.frozen(slots=True, kw_only=True)
class NodeCheck:
    """A ``nodeHealthMonitor`` expression evaluated on one copy of a node: ``unhealthy``
    when it returned true, ``error`` when it could not be evaluated (on node ``"*"``: the
    expression does not compile). The shell evaluates each expression once per node copy
    (``cre.core.job.health.check_node``) and hands the results to the core."""

    node: str
    expression: str
    unhealthy: bool = False
    error: str | None = None


@attrs.frozen(slots=True)
class ObjectCondition:
    """A status condition of a non-Pod object (TrainJob, JobSet, batch Job)."""

    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: datetime | None = None


@attrs.frozen(slots=True)
class TrainJobView:
    """Everything the core reads about a Kubeflow TrainJob (``trainer.kubeflow.org/v1alpha1``)."""

    name: str
    namespace: str
    uid: str
    labels: tuple[tuple[str, str], ...] = ()
    owner_refs: tuple[OwnerRef, ...] = ()
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    suspended: bool = False
    conditions: tuple[ObjectCondition, ...] = ()
    resource_version: str = ""
    # ``status.jobsStatus`` is non-empty: Trainer built the JobSet (the workload started once).
    jobs_built: bool = False
    # ``metadata.finalizers``: what a deletion of the workload waits for.
    finalizers: tuple[str, ...] = ()

    def label(self, key: str) -> str | None:
        """The value of one label, or ``None``."""
        return label_value(self.labels, key)

    def condition(self, type_: str) -> ObjectCondition | None:
        """The condition of this type, or ``None``."""
        for c in self.conditions:
            if c.type == type_:
                return c
        return None


@attrs.frozen(slots=True)
class LogTail:
    """A container log tail the shell read because an earlier Plan asked for it.

    ``error`` is set (and ``text`` empty) when the read failed: pod gone, container unknown,
    timeout. The core decides what to record in either case. ``previous`` says the tail is the
    log of the container's previous run (``previous=true``), not of its current one.
    """

    namespace: str
    pod: str
    container: str
    text: str = ""
    error: str | None = None
    pod_uid: str = ""
    previous: bool = False


@attrs.frozen(slots=True)
class ObjectEvent:
    """A core/v1 Event about an object (the workload), read live by the shell when the core
    asked for it (``Plan.read_workload_events``): no cache holds Events."""

    type: str
    reason: str
    message: str
    count: int = 1
    last_timestamp: datetime | None = None


@attrs.frozen(kw_only=True)
class ObjectView:
    """A child object the tier created (a dependency or a Workflow): enough to delete it."""

    api_version: str
    kind: str
    name: str
    namespace: str | None
    uid: str
    owned: bool = True
    terminating: bool = False
