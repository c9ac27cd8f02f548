"""Which container's log explains a failed run, and how that log becomes ``status.failureLog``.

The rules are the ones the upstream launcher fail-fast PR settled on after review, each pinned
by a test here because each review round found a real bug:

* launchers are listed before workers, so a same-second ``finishedAt`` tie (one-second precision;
  JobSet kills the workers' sshd about half a second after the launcher exits) picks the launcher;
* among init and regular containers, only terminations with a non-zero exit count; ``OOMKilled``
  wins over everything, otherwise the earliest ``finishedAt``, the earlier-listed on a tie;
* a container restarted in place (``restartPolicy: OnFailure``) keeps its last run's exit only
  in ``lastState.terminated``. While the container is back-off waiting (``CrashLoopBackOff``)
  or terminated again, that termination is a candidate of its own, with its own
  ``finishedAt``, exit code and reason, competing with current terminations by the rules
  above; its log is the container's ``previous=true`` log. A container's last run is listed
  before its current one. Once the container is *running* again it recovered, and its earlier
  exit no longer counts (a worker whose sshd crashed once at start-up is not the cause of a
  launcher failing later);
* pods whose ``DisruptionTarget`` condition is ``"True"`` were evicted or preempted and are not the
  cause (a ``"False"`` condition does not exclude a pod);
* pods created before the current workload belong to a previous generation or a checkpoint
  restart and are skipped;
* when nothing qualifies the record explains why (``PodNotFound`` / ``NoTerminatedContainer``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from datetime import datetime
from typing import Final

import attrs

from cre.api.job import FailureLog
from cre.core.common.observed import ContainerState, ContainerStatusView, LogTail, PodView
from cre.core.common.plan import LIMIT_BYTES
from cre.core.job.logtext import bounded_tail, first_bytes, sanitize

DISRUPTION_TARGET: Final = "DisruptionTarget"
OOM_KILLED: Final = "OOMKilled"
# Kubelet answers 200 with this body once the container's log is gone (AICR PR #1651).
KUBELET_LOG_GONE: Final = "unable to retrieve container logs for"
# A read error quoted in a record keeps its first KiB (the API server's message leads).
ERROR_BYTES: Final = 1024
# Preferred container names when a pod runs several (Trainer's MPI runtimes name them "node").
PREFERRED_CONTAINERS: Final = ("node", "launcher")


class FailureLogReason(enum.StrEnum):
    """``failureLog.reason`` values that are not a container termination reason."""

    POD_NOT_FOUND = "PodNotFound"
    NO_TERMINATED_CONTAINER = "NoTerminatedContainer"
    TIMEOUT = "Timeout"
    ERROR = "Error"


POD_NOT_FOUND_TAIL: Final = (
    "no pods for this Job were found when the failure was recorded; the pod was most likely "
    "deleted before its logs could be read"
)
NO_TERMINATED_TAIL: Final = (
    "pods for this Job were found, but none had a container terminated with a non-zero exit code"
)


@attrs.frozen(kw_only=True)
class FailedContainer:
    """One container termination chosen as the cause."""

    pod: PodView
    container: str
    state: ContainerState
    # The termination is the container's ``lastState``: its log is the ``previous=true`` one.
    previous: bool = False

    @property
    def oom(self) -> bool:
        return self.state.reason == OOM_KILLED


def is_disruption_target(pod: PodView) -> bool:
    """Whether the pod carries ``DisruptionTarget`` with status exactly ``"True"``."""
    cond = pod.condition(DISRUPTION_TARGET)
    return cond is not None and cond.status == "True"


#: ``DisruptionTarget`` reason kube-scheduler sets on a pod it preempts for a higher-priority
#: one; ``status.reason`` the kubelet sets on a pod it preempts to admit a critical pod.
PREEMPTION_BY_SCHEDULER: Final = "PreemptionByScheduler"
PREEMPTING: Final = "Preempting"


def is_preempted(pod: PodView) -> bool:
    """Whether higher-priority work took the pod's place: ``DisruptionTarget=True`` with reason
    ``PreemptionByScheduler``, or ``status.reason`` ``Preempting``."""
    cond = pod.condition(DISRUPTION_TARGET)
    return pod.reason == PREEMPTING or (
        cond is not None and cond.status == "True" and cond.reason == PREEMPTION_BY_SCHEDULER)


def of_current_workload(pod: PodView, workload_created: datetime | None) -> bool:
    """Whether ``pod`` was created for the current workload (not a previous generation)."""
    if workload_created is None or pod.creation_timestamp is None:
        return True
    return pod.creation_timestamp >= workload_created


def eligible(pods: Iterable[PodView], workload_created: datetime | None) -> tuple[PodView, ...]:
    """The pods that may explain the failure: current generation, not disruption targets."""
    return tuple(
        p for p in pods if not is_disruption_target(p) and of_current_workload(p, workload_created)
    )


def _failed(state: ContainerState | None) -> bool:
    return state is not None and state.kind == "terminated" and (state.exit_code or 0) != 0


def failed_terminations(pod: PodView) -> list[tuple[str, ContainerState, bool]]:
    """Every non-zero termination of ``pod``'s init and regular containers, in listing order, as
    ``(container, state, previous)``; ``previous`` marks a ``lastState`` (an earlier run of a
    container restarted in place, counted only while that container is not running again),
    listed before that container's current state."""
    found: list[tuple[str, ContainerState, bool]] = []
    statuses: tuple[ContainerStatusView, ...] = pod.init_container_statuses + pod.container_statuses
    for status in statuses:
        recovered = status.state is not None and status.state.kind == "running"
        if status.last_state is not None and _failed(status.last_state) and not recovered:
            found.append((status.name, status.last_state, True))
        if status.state is not None and _failed(status.state):
            found.append((status.name, status.state, False))
    return found


def failed_container_of(pods: Iterable[PodView]) -> FailedContainer | None:
    """The failure that decided the run among ``pods`` (already ordered launchers first)."""
    best: FailedContainer | None = None
    best_key: tuple[int, datetime | None, int] | None = None
    index = 0
    for pod in pods:
        for name, state, previous in failed_terminations(pod):
            # OOMKilled first; then earliest finishedAt (unknown sorts last); then listing order.
            key = (0 if state.reason == OOM_KILLED else 1, state.finished_at, index)
            index += 1
            if best_key is None or _before(key, best_key):
                best = FailedContainer(pod=pod, container=name, state=state, previous=previous)
                best_key = key
    return best


def _before(a: tuple[int, datetime | None, int], b: tuple[int, datetime | None, int]) -> bool:
    if a[0] != b[0]:
        return a[0] < b[0]
    if a[1] != b[1]:
        if a[1] is None:
            return False
        if b[1] is None:
            return True
        return a[1] < b[1]
    return a[2] < b[2]


def trim_tail(text: str, *, limit: int = LIMIT_BYTES) -> str:
    """What ``failureLog.tail`` may hold of ``text``: no terminal escape sequences or control
    characters (:func:`cre.core.job.logtext.sanitize`), then its last ``limit`` UTF-8 bytes."""
    return bounded_tail(text, limit)


def tail_error(tail: LogTail) -> str | None:
    """Why the tail is unusable (a read error, or kubelet's "log is gone" 200 body)."""
    if tail.error:
        return first_bytes(sanitize(tail.error), ERROR_BYTES)
    if tail.text.lstrip().startswith(KUBELET_LOG_GONE):
        return first_bytes(sanitize(tail.text.strip()), ERROR_BYTES)
    return None


def record(failure: FailedContainer, tail: LogTail) -> FailureLog:
    """``failureLog`` for a chosen container once its log tail has been read."""
    error = tail_error(tail)
    if error is None:
        text = trim_tail(tail.text)
    else:
        run = "previous run of container" if failure.previous else "container"
        text = trim_tail(
            f"the log of {run} {failure.container!r} of pod {failure.pod.name!r} could not "
            f"be read ({error}); the pod was most likely deleted before its log was read"
        )
    return FailureLog(
        pod_name=failure.pod.name,
        container_name=failure.container,
        node_name=failure.pod.node_name,
        exit_code=failure.state.exit_code,
        reason=failure.state.reason or FailureLogReason.ERROR,
        finished_at=failure.state.finished_at,
        tail=text,
    )


def fallback(pods_seen: bool) -> FailureLog:
    """The explanatory record when no container qualifies."""
    if pods_seen:
        return FailureLog(reason=FailureLogReason.NO_TERMINATED_CONTAINER, tail=NO_TERMINATED_TAIL)
    return FailureLog(reason=FailureLogReason.POD_NOT_FOUND, tail=POD_NOT_FOUND_TAIL)


def main_container(pod: PodView) -> str | None:
    """The container whose log speaks for the pod: ``node``/``launcher`` if present, else the
    first regular container."""
    names = [s.name for s in pod.container_statuses]
    for preferred in PREFERRED_CONTAINERS:
        if preferred in names:
            return preferred
    return names[0] if names else None


def timeout_pod(
    launchers: Iterable[PodView], workers: Iterable[PodView]
) -> tuple[PodView, str] | None:
    """The pod and container to read when the run times out: a launcher first (the MPI output is
    there), then a worker; running pods before finished ones, pods with no container last."""
    ordered = list(launchers) + list(workers)
    for wanted in ("Running", None):
        for pod in ordered:
            if wanted is not None and pod.phase != wanted:
                continue
            container = main_container(pod)
            if container is not None:
                return pod, container
    return None


def timeout_record(pod: PodView, container: str, tail: LogTail) -> FailureLog:
    """``failureLog`` with reason ``Timeout`` from the tail read when the run timed out."""
    error = tail_error(tail)
    text = trim_tail(tail.text if error is None else (
        f"the log of container {container!r} of pod {pod.name!r} could not be read ({error})"
    ))
    return FailureLog(
        pod_name=pod.name,
        container_name=container,
        node_name=pod.node_name,
        reason=FailureLogReason.TIMEOUT,
        tail=text,
    )
