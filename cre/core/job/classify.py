"""Whom a failed Job is attributed to (``status.failureClass``) and which nodes it blames.

The Workflow tier decides from this whether to retry a group, blame its nodes or escalate, the
way infra-scoped fail-fast keeps an infrastructure abort from being charged to a test. Scopes:

* ``Node``: something happened to a node under the test (NotReady, a pod disrupted by eviction or
  preemption and not replaced, a GPU health monitor firing). Only the affected nodes are blamed.
  A disrupted or evicted pod whose slot a replacement took (the launcher retry) is not evidence:
  the replacement's own outcome decided the run. The caller passes only the current workload's
  pods (a previous generation's disruption did not decide this run).
* ``Platform``: the cluster could not start the test (image pull, unschedulable, a DRA claim or
  ComputeDomain not ready, admission rejection), or took it away for other work (a pod
  ``Preempted`` by the scheduler or the kubelet: the node was busy, not broken; a NotReady node
  still wins). No node is blamed.
* ``ControlPlane``: the run was ended from outside (workload deleted by someone else, name taken
  by a foreign object). No node is blamed.
* ``Workload``: a container of the test failed on its own (non-zero exit, OOMKilled, timeout with
  no other evidence). Every node of the group is blamed, as the reference does. A timeout is
  evidence only when a test ran and had not finished: one where no container ever started is
  ``Platform/WorkloadNotStarted``, one where every pod had already succeeded (the workload's
  controllers never reported it complete) is ``ControlPlane/CompletionNotReported``; neither
  blames a node (a loaded control plane, not the node, ran out the clock).

Evidence is ranked Node > Platform > Workload: a launcher that exits non-zero because a worker
node went NotReady is a node failure, not a test failure. See docs/design/006-failure-classes.md.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Final

import attrs

from cre.api.conditions import ConditionType, FailedNodeReason, FailureScope
from cre.api.job import FailedNode, FailureClass, FailureLog, Job
from cre.api.labels import GROUP_NODES
from cre.api.meta import ConditionStatus
from cre.core.common.observed import NodeView, PodView
from cre.core.job.failurelog import OOM_KILLED, is_disruption_target, is_preempted


class Cause(enum.StrEnum):
    """What ended the run, as the lifecycle decided it."""

    CONTAINER_FAILED = "ContainerFailed"
    WORKLOAD_FAILED = "WorkloadFailed"
    TIMEOUT = "Timeout"
    WORKLOAD_DELETED = "WorkloadDeleted"
    NAME_COLLISION = "WorkloadNameCollision"
    CREATE_REJECTED = "WorkloadCreateRejected"
    INVALID_SPEC = "InvalidSpec"
    # The nodeHealthMonitor flagged a node (``cre.core.job.health``).
    HARDWARE_FAILED = "HardwareFailed"
    # The TrainJob made no pod within startupStallTimeoutSeconds (``cre.core.job.stall``).
    STARTUP_STALLED = "StartupStalled"
    # Training stopped logging steps (``cre.core.job.goodput``): the workload ran, then hung.
    TRAINING_STALLED = "TrainingStalled"
    # A container waited on a failing image pull past imagePullGraceSeconds
    # (``cre.core.job.imagepull``).
    IMAGE_PULL_FAILED = "ImagePullFailed"
    # Pods stayed unschedulable past schedulingStallTimeout (``cre.core.job.stall``).
    UNSCHEDULABLE = "Unschedulable"
    # Higher-priority work preempted a pod of the current workload.
    PREEMPTED = "Preempted"


class ClassReason(enum.StrEnum):
    """``failureClass.reason`` values."""

    CONTAINER_FAILED = "ContainerFailed"
    TRAINING_STALLED = "TrainingStalled"
    OOM_KILLED = "OOMKilled"
    WORKLOAD_FAILED = "WorkloadFailed"
    TIMED_OUT = "TimedOut"
    NODE_NOT_READY = "NodeNotReady"
    POD_DISRUPTED = "PodDisrupted"
    POD_EVICTED = "PodEvicted"
    GPU_UNHEALTHY = "GPUUnhealthy"
    IMAGE_PULL_FAILED = "ImagePullFailed"
    UNSCHEDULABLE = "Unschedulable"
    RESOURCE_CLAIM_NOT_READY = "ResourceClaimNotReady"
    ADMISSION_REJECTED = "AdmissionRejected"
    WORKLOAD_DELETED = "WorkloadDeleted"
    NAME_COLLISION = "WorkloadNameCollision"
    INVALID_SPEC = "InvalidSpec"
    WORKLOAD_NOT_STARTED = "WorkloadNotStarted"
    PREEMPTED = "Preempted"
    # Timed out although every pod of the workload had succeeded: the workload's controllers
    # (JobSet, Trainer) never reported its completion.
    COMPLETION_NOT_REPORTED = "CompletionNotReported"


IMAGE_PULL_REASONS: Final = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
)
ADMISSION_POD_REASONS: Final = frozenset({"UnexpectedAdmissionError", "NodeAffinity"})
EVICTION_POD_REASONS: Final = frozenset({"Evicted", "Terminated", "Shutdown"})
CLAIM_WORDS: Final = ("resourceclaim", "computedomain", "resource claim")


@attrs.frozen(kw_only=True)
class Verdict:
    """A failure class and the nodes it blames (reason ``WorkloadFailed``)."""

    failure_class: FailureClass
    blamed: tuple[str, ...] = ()


def group_nodes(job: Job) -> tuple[str, ...]:
    """The nodes of the group, from the ``cre.dev/group-nodes`` annotation (order kept)."""
    raw = job.metadata.annotations.get(GROUP_NODES, "")
    seen: list[str] = []
    for part in raw.split(","):
        name = part.strip()
        if name and name not in seen:
            seen.append(name)
    return tuple(seen)


def slot(pod: PodView) -> str:
    """The pod's place in its workload: its name without the random suffix
    (``<trainjob>-<replicatedJob>-<jobIdx>-<podIdx>``); a replacement takes the same slot."""
    return pod.name.rsplit("-", 1)[0]


def superseded(pod: PodView, pods: Iterable[PodView]) -> bool:
    """Whether a pod that is not a disruption target has taken ``pod``'s slot: the disruption
    was absorbed by a replacement and did not decide the run."""
    return any(other.name != pod.name and slot(other) == slot(pod)
               and not is_disruption_target(other) for other in pods)


def _not_ready(node: NodeView) -> bool:
    """Ready is False, or Unknown because the node stopped reporting (the node lifecycle
    controller then sets a reason such as ``NodeStatusUnknown``; a node that never reported a
    Ready condition at all is not evidence)."""
    return node.ready == "False" or (node.ready == "Unknown" and node.ready_reason is not None)


def _node_evidence(
    job: Job, pods: tuple[PodView, ...], nodes: tuple[NodeView, ...]
) -> tuple[ClassReason, tuple[str, ...]] | None:
    hosting = {p.node_name for p in pods if p.node_name}
    scope = hosting | set(group_nodes(job))
    not_ready = sorted(n.name for n in nodes if n.name in scope and _not_ready(n))
    if not_ready:
        return ClassReason.NODE_NOT_READY, tuple(not_ready)
    disrupted = sorted({p.node_name for p in pods if is_disruption_target(p) and p.node_name
                        and not is_preempted(p) and not superseded(p, pods)})
    if disrupted:
        return ClassReason.POD_DISRUPTED, tuple(disrupted)
    evicted = sorted({p.node_name for p in pods if p.reason in EVICTION_POD_REASONS
                      and p.node_name and not superseded(p, pods)})
    if evicted:
        return ClassReason.POD_EVICTED, tuple(evicted)
    hardware = any(
        c.type == ConditionType.HARDWARE_FAILED and c.status == ConditionStatus.TRUE
        for c in job.status.conditions
    )
    if hardware:
        flagged = tuple(sorted({
            f.name for f in job.status.failed_nodes
            if f.reason == FailedNodeReason.HARDWARE_FAILURE_DETECTED
        }))
        return ClassReason.GPU_UNHEALTHY, flagged
    return None


def _platform_evidence(pods: tuple[PodView, ...]) -> ClassReason | None:
    for pod in pods:
        if pod.reason in ADMISSION_POD_REASONS or (pod.reason or "").startswith("OutOf"):
            return ClassReason.ADMISSION_REJECTED
        for status in pod.init_container_statuses + pod.container_statuses:
            state = status.state
            if state is not None and state.kind == "waiting" and state.reason in IMAGE_PULL_REASONS:
                return ClassReason.IMAGE_PULL_FAILED
        scheduled = pod.condition("PodScheduled")
        if scheduled is not None and scheduled.status == "False":
            text = f"{scheduled.reason or ''} {pod.message or ''}".lower()
            if any(word in text for word in CLAIM_WORDS):
                return ClassReason.RESOURCE_CLAIM_NOT_READY
            return ClassReason.UNSCHEDULABLE
        if any(word in (pod.message or "").lower() for word in CLAIM_WORDS):
            return ClassReason.RESOURCE_CLAIM_NOT_READY
    return None


def _ran(pod: PodView) -> bool:
    """Whether a container of ``pod`` ever started (running, ended, or restarted)."""
    return pod.phase in ("Running", "Succeeded", "Failed") or any(
        (s.state is not None and s.state.kind != "waiting") or s.restart_count > 0
        or s.last_state is not None
        for s in pod.init_container_statuses + pod.container_statuses)


def _succeeded(pod: PodView) -> bool:
    """Whether ``pod`` ended with every container exiting 0."""
    return pod.phase == "Succeeded" or (bool(pod.container_statuses) and all(
        s.state is not None and s.state.kind == "terminated" and s.state.exit_code == 0
        for s in pod.container_statuses))


def _timeout_without_test(pods: tuple[PodView, ...]) -> tuple[FailureScope, ClassReason] | None:
    """A timeout that says nothing about the nodes: no container of the workload ever started
    (pods never created, never bound, or ``ContainerCreating`` the whole time:
    ``Platform/WorkloadNotStarted``), or every pod had already succeeded and only the
    workload's completion was never reported (``ControlPlane/CompletionNotReported``).
    ``None``: a test ran and did not finish in time."""
    if not any(_ran(p) for p in pods):
        return FailureScope.PLATFORM, ClassReason.WORKLOAD_NOT_STARTED
    if all(_succeeded(p) for p in pods):
        return FailureScope.CONTROL_PLANE, ClassReason.COMPLETION_NOT_REPORTED
    return None


def preempted_message(pods: Iterable[PodView]) -> str:
    """Which pods were preempted, on which nodes (``""``: none)."""
    hit = sorted((p.name, p.node_name or "?") for p in pods if is_preempted(p))
    if not hit:
        return ""
    return "preempted by higher-priority work: " + ", ".join(
        f"pod {name} on node {node}" for name, node in hit[:10]) + (
        f" and {len(hit) - 10} more" if len(hit) > 10 else "")


def classify(
    *,
    job: Job,
    cause: Cause,
    message: str,
    failure_log: FailureLog | None,
    pods: tuple[PodView, ...],
    nodes: tuple[NodeView, ...],
) -> Verdict:
    """The failure class of a run that ended for ``cause`` and the nodes to blame."""
    if cause == Cause.WORKLOAD_DELETED:
        return Verdict(failure_class=FailureClass(
            scope=FailureScope.CONTROL_PLANE, reason=ClassReason.WORKLOAD_DELETED, message=message))
    if cause == Cause.NAME_COLLISION:
        return Verdict(failure_class=FailureClass(
            scope=FailureScope.CONTROL_PLANE, reason=ClassReason.NAME_COLLISION, message=message))
    if cause == Cause.CREATE_REJECTED:
        return Verdict(failure_class=FailureClass(
            scope=FailureScope.PLATFORM, reason=ClassReason.ADMISSION_REJECTED, message=message))
    if cause == Cause.INVALID_SPEC:
        # CRE refused the spec before any workload ran: no node is to blame.
        return Verdict(failure_class=FailureClass(
            scope=FailureScope.PLATFORM, reason=ClassReason.INVALID_SPEC, message=message))
    if cause == Cause.STARTUP_STALLED:
        # No pod ever ran (a missing runtime, a webhook, a controller down): no node to blame.
        return Verdict(failure_class=FailureClass(
            scope=FailureScope.PLATFORM, reason=ClassReason.WORKLOAD_NOT_STARTED,
            message=message))
    if cause == Cause.IMAGE_PULL_FAILED:
        # The registry or the image, not the nodes: no container of the test ever ran.
        return Verdict(failure_class=FailureClass(
            scope=FailureScope.PLATFORM, reason=ClassReason.IMAGE_PULL_FAILED, message=message))
    if cause == Cause.UNSCHEDULABLE:
        # The scheduler could not place the pods: nothing ran on the nodes to judge them by.
        return Verdict(failure_class=FailureClass(
            scope=FailureScope.PLATFORM, reason=ClassReason.UNSCHEDULABLE, message=message))
    node = _node_evidence(job, pods, nodes)
    if cause == Cause.PREEMPTED or (any(is_preempted(p) for p in pods) and (
            node is None or node[0] != ClassReason.NODE_NOT_READY)):
        return Verdict(failure_class=FailureClass(
            scope=FailureScope.PLATFORM, reason=ClassReason.PREEMPTED,
            message=preempted_message(pods) or message))
    if node is not None:
        reason, blamed = node
        return Verdict(
            failure_class=FailureClass(scope=FailureScope.NODE, reason=reason, message=message),
            blamed=blamed,
        )
    platform = _platform_evidence(pods)
    if platform is not None:
        return Verdict(failure_class=FailureClass(
            scope=FailureScope.PLATFORM, reason=platform, message=message))
    if cause == Cause.TIMEOUT:
        unjudged = _timeout_without_test(pods)
        if unjudged is not None:
            scope, why = unjudged
            return Verdict(failure_class=FailureClass(scope=scope, reason=why, message=message))
        reason = ClassReason.TIMED_OUT
    elif cause == Cause.TRAINING_STALLED:
        reason = ClassReason.TRAINING_STALLED
    elif failure_log is not None and failure_log.reason == OOM_KILLED:
        reason = ClassReason.OOM_KILLED
    elif failure_log is not None and (failure_log.exit_code or 0) != 0:
        reason = ClassReason.CONTAINER_FAILED
    else:
        reason = ClassReason.WORKLOAD_FAILED
    return Verdict(
        failure_class=FailureClass(scope=FailureScope.WORKLOAD, reason=reason, message=message),
        blamed=group_nodes(job),
    )


def merge_failed_nodes(
    existing: Iterable[FailedNode], blamed: Iterable[str], *, message: str
) -> tuple[FailedNode, ...]:
    """``existing`` plus a ``WorkloadFailed`` entry for each newly blamed node (keyed by name
    and reason; entries are never removed; a node the health monitor already flagged keeps
    only that entry)."""
    out = list(existing)
    keys = {(f.name, f.reason) for f in out}
    for name in blamed:
        key = (name, FailedNodeReason.WORKLOAD_FAILED)
        if (name, FailedNodeReason.HARDWARE_FAILURE_DETECTED) in keys:
            continue  # already listed with the monitor's finding, which says more
        if key not in keys:
            keys.add(key)
            out.append(FailedNode(name=name, reason=FailedNodeReason.WORKLOAD_FAILED,
                                  message=message))
    return tuple(out)
