"""Workloads that cannot run: pods the scheduler cannot place, and TrainJobs that never start.

A TrainJob that is neither suspended nor finished reads as running, so without these rules a
Job whose pods can never be placed (its nodes do not exist) or whose TrainJob never makes a pod
(its runtime is missing: Trainer only emits a Warning event) stays ``InProgress/WorkloadRunning``
for as long as anyone watches, and its timeout clock burns on hardware that never ran.

* Scheduling stall (``spec.schedulingStallGraceSeconds``, default 300, reference ADR-083): while
  a pod of the workload is ``PodScheduled=False/Unschedulable``, the Job records
  ``status.schedulingBlockedSince``; after the grace it reports ``InProgress`` with reason
  ``WorkloadSchedulingBlocked``, the scheduler's message, the pods and the group's nodes (named
  with what is wrong with them: not found, cordoned, not ready). The timeout clock is paused
  while blocked: once the pods are placed, ``workloadStartTime`` moves forward by the blocked
  time (the same bookkeeping as a suspension). The pause is bounded: blocked for
  ``spec.schedulingStallTimeout`` (default 30m, at most 720h like every duration), the Job fails
  ``WorkloadUnschedulable``, class Platform / Unschedulable, with the blocked message (pods, the
  scheduler's reason, the group's nodes), the workload deleted and no node blamed.
* Startup stall (``spec.startupStallTimeoutSeconds``, default 1200): a running (not suspended)
  TrainJob with no pod at all and no ``status.jobsStatus`` (Trainer never built its JobSet)
  that long after its creation never started. (A workload whose pods are briefly all gone,
  during a JobSet restart, has its jobs status and is not a stall.) The core asks the
  shell for the TrainJob's Events (no cache holds them) and fails the Job ``WorkloadStalled``,
  Platform class, with those events in the message and the failure record.

Pure: the clock is a parameter, the Events arrive in the Observation.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Final

from cre.api.conditions import JobReason
from cre.api.durations import MAX_DURATION_SECONDS, duration_seconds
from cre.api.job import FailureLog, Job
from cre.core.common.observed import NodeView, ObjectEvent, PodView, TrainJobView

UNSCHEDULABLE: Final = "Unschedulable"
DEFAULT_STALL_TIMEOUT_SECONDS: Final = 1800.0
# Events kept in a message (the most recent ones; a crash-looping reconciler repeats itself).
MAX_EVENTS: Final = 5
_TERMINAL: Final = ("Succeeded", "Failed")


def unschedulable(pods: Sequence[PodView]) -> tuple[PodView, ...]:
    """The live pods the scheduler reported it cannot place (``PodScheduled=False``,
    reason ``Unschedulable``), in name order."""
    out = []
    for pod in pods:
        if pod.deletion_timestamp is not None or pod.phase in _TERMINAL or pod.node_name:
            continue
        cond = pod.condition("PodScheduled")
        if cond is not None and cond.status == "False" and cond.reason == UNSCHEDULABLE:
            out.append(pod)
    return tuple(sorted(out, key=lambda p: p.name))


def _node_state(name: str, nodes: Sequence[NodeView]) -> str:
    view = next((n for n in nodes if n.name == name), None)
    if view is None:
        return f"{name} (not found)"
    problems = [word for word, bad in (("cordoned", view.unschedulable),
                                       ("not ready", view.ready != "True")) if bad]
    return f"{name} ({', '.join(problems)})" if problems else name


def _blocked_detail(pods: Sequence[PodView], group: Sequence[str],
                    nodes: Sequence[NodeView]) -> str:
    """``<scheduler message> (pods: a, b; group nodes: gpu-0 (not found), gpu-1)``."""
    first = pods[0].condition("PodScheduled") if pods else None
    said = (first.message if first is not None else None) or "no message from the scheduler"
    shown = ", ".join(p.name for p in pods[:4]) + (f" and {len(pods) - 4} more"
                                                    if len(pods) > 4 else "")
    where = (f"; group nodes: {', '.join(_node_state(n, nodes) for n in group)}"
             if group else "")
    return f"{said} (pods: {shown}{where})"


def blocked_message(*, workload: str, pods: Sequence[PodView], group: Sequence[str],
                    nodes: Sequence[NodeView], blocked_for: timedelta) -> str:
    """``Workload W cannot be scheduled for 360s: <scheduler message> (pods: a, b; group nodes:
    gpu-0 (not found), gpu-1)``."""
    seconds = int(blocked_for.total_seconds())
    return (f"Workload {workload} cannot be scheduled for {seconds}s: "
            f"{_blocked_detail(pods, group, nodes)}")


def stall_timeout(job: Job) -> timedelta:
    """``spec.schedulingStallTimeout`` as a timedelta, clamped to the longest duration a spec
    accepts (an unparseable value, which validation reports, counts as the default 30m)."""
    try:
        seconds = duration_seconds(job.spec.scheduling_stall_timeout)
    except ValueError:
        seconds = DEFAULT_STALL_TIMEOUT_SECONDS
    return timedelta(seconds=min(seconds, MAX_DURATION_SECONDS))


def unschedulable_message(*, job: Job, workload: str, pods: Sequence[PodView],
                          group: Sequence[str], nodes: Sequence[NodeView]) -> str:
    """The Failed message of a workload whose pods stayed unschedulable past the bound (the
    bound, not the measured wait, so the message says the same on every pass)."""
    return (f"Workload {workload} stayed unschedulable past schedulingStallTimeout "
            f"{job.spec.scheduling_stall_timeout}: {_blocked_detail(pods, group, nodes)}")


def unschedulable_failure_log(pods: Sequence[PodView]) -> FailureLog:
    """The failure record of an unschedulable workload: no container ran, the scheduler's
    PodScheduled message speaks."""
    lines = []
    for pod in pods[:MAX_EVENTS]:
        cond = pod.condition("PodScheduled")
        said = (cond.message if cond is not None else None) or "no message from the scheduler"
        lines.append(f"{pod.name}: {said}")
    more = f"\n... and {len(pods) - MAX_EVENTS} more pod(s)" if len(pods) > MAX_EVENTS else ""
    return FailureLog(reason=JobReason.WORKLOAD_UNSCHEDULABLE,
                      tail="the workload never ran: its pods could not be scheduled\n"
                      + "\n".join(lines) + more)


def startup_deadline(job: Job, view: TrainJobView) -> datetime | None:
    """When a TrainJob that made no pod counts as never started (``None``: creation time
    unknown)."""
    if view.creation_timestamp is None:
        return None
    return view.creation_timestamp + timedelta(seconds=job.spec.startup_stall_timeout_seconds)


def _event_line(event: ObjectEvent) -> str:
    times = f" (x{event.count})" if event.count > 1 else ""
    return f"{event.type} {event.reason}: {event.message}{times}"


def events_text(events: Sequence[ObjectEvent]) -> str:
    """The most recent events, one ``Type Reason: message (xN)`` per line, or a sentence."""
    if not events:
        return "no events were recorded for it"
    return "; ".join(_event_line(e) for e in events[-MAX_EVENTS:])


def startup_message(*, job: Job, view: TrainJobView, events: Sequence[ObjectEvent]) -> str:
    """The Failed message of a workload that never started."""
    return (f"Workload {view.name} did not start within startupStallTimeoutSeconds "
            f"{job.spec.startup_stall_timeout_seconds}s (no pod was created); TrainJob events: "
            f"{events_text(events)}")


def startup_failure_log(events: Sequence[ObjectEvent]) -> FailureLog:
    """The failure record of a workload that never started: no pod, so the events speak."""
    lines = "\n".join(_event_line(e) for e in events[-MAX_EVENTS:])
    tail = ("the workload never started: no pod was created; TrainJob events:\n" + lines
            if events else "the workload never started: no pod was created and no events "
            "were recorded for the TrainJob")
    return FailureLog(reason=JobReason.WORKLOAD_STALLED, tail=tail)
