"""Releasing a finished Job's workload: the TrainJob goes, verified, and the status says so.

A Job's ``spec.workloadRetention`` chooses: ``Retain`` (the default for a Job a user applies:
the workload stays until the Job is deleted, except a workload that timed out or ran on a node
found broken, deleted at once because it would hold its GPUs) or ``Release`` (what a Workflow
sets on its group Jobs: the rules below).

A finished Job keeps everything a reader needs in its own status (the failure log, the failure
class, the measured bandwidth and the threshold verdict) and in its measurements' statuses. Its
TrainJob, and through owner references the JobSet, batch Jobs and pods under it, only hold
cluster objects (and, for a workload that is still running, GPUs) once nothing needs the pods'
logs any more. The rules, judged on every pass of a terminal Job (``WorkloadReleased``, an
additive condition next to the trio):

* **Held** (False, ``MeasurementPending``) while a measurement of this Job (its
  BandwidthMeasurement or GoodputMeasurement) has not completed: its final read streams the
  pods' logs. Not held when the measurement says it cannot run as configured (its LogProfile
  missing or invalid: it reads nothing), nor past ``measurementTimeout`` (and the Job tier's
  ``COMPLETION_GRACE``, the same bound its threshold verdict waits) after the Job's terminal
  transition (the measurement then ends without logs, as it does for a pod deleted
  under it), nor when the failure already deleted the workload (a timeout, a hardware failure:
  the workload would hold its GPUs).
* **Releasing** (False, ``Releasing``): the Job's own TrainJob (controller owner, this Job's
  uid) is deleted with a uid precondition and background propagation (the garbage collector
  removes the JobSet, the batch Jobs and the pods, as a real API server does); the condition
  stays until the TrainJob is gone (a live read confirms it) and no pod labelled for the Job is
  left (a live list confirms it). ``HeldByFinalizer`` names the finalizers a terminating TrainJob
  waits on, when one is not the garbage collector's own.
* **Released** (True, ``Released``): nothing of the workload is left; the transition time says
  when. A foreign object holding the workload's name is never deleted.

The messages do not count pods, so a pass that sees one pod fewer writes nothing. Pure: the
observation is the shell's (caches, and the live reads the Job core's Plan asks for).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

import attrs

from cre.api.conditions import ConditionType, JobReason, ReleaseReason
from cre.api.job import Job, JobStatus, WorkloadRetention
from cre.api.meta import Condition, ConditionStatus
from cre.core.common.conditions import condition, set_additive
from cre.core.common.lifecycle import true_member
from cre.core.common.observed import TrainJobView
from cre.core.common.plan import Ask, ConfirmAbsent, Delete, EventSpec, ListLive, Observation
from cre.core.common.timeouts import parse_duration
from cre.core.job.thresholds import COMPLETION_GRACE, configuration_problem
from cre.core.job.workload import (
    TRAINJOB_API_VERSION,
    TRAINJOB_KIND,
    owned_by,
    workload_name,
)
from cre.core.measure.logread import belongs_to, is_complete

# Failures that delete the workload at once (it would hold its GPUs): no measurement holds it.
DELETED_ON_FAILURE: Final = (JobReason.JOB_TIMED_OUT, JobReason.HARDWARE_FAILURE_DETECTED,
                             JobReason.WORKLOAD_STALLED, JobReason.IMAGE_PULL_FAILED,
                             JobReason.WORKLOAD_UNSCHEDULABLE, JobReason.WORKLOAD_PREEMPTED)
# Finalizers the garbage collector itself puts on an object it is deleting.
_GC_FINALIZERS: Final = ("foregroundDeletion", "orphan")


@attrs.frozen(kw_only=True)
class Release:
    """One step of the release: the status with ``WorkloadReleased`` set, the deletes, the
    event of the flip to True, and what the shell must confirm first (a Plan carrying a
    request carries no writes)."""

    status: JobStatus
    deletes: tuple[Delete, ...] = ()
    event: EventSpec | None = None
    asks: tuple[Ask, ...] = ()


def is_released(status: JobStatus) -> bool:
    """Whether the Job's ``WorkloadReleased`` condition is True."""
    found = condition(status.conditions, ConditionType.WORKLOAD_RELEASED)
    return found is not None and found.status == ConditionStatus.TRUE


def release(job: Job, status: JobStatus, obs: Observation, now: datetime, *,
            absence: ConfirmAbsent, live_pods: tuple[ListLive, ...],
            verify: bool = True) -> Release:
    """The release step of the finished Job ``job`` whose new status is ``status``.

    ``verify``: confirm absences with live reads before saying Released (False on the pass
    that writes the terminal transition: that write must not wait for a read); ``absence`` and
    ``live_pods``: the asks that confirm the workload and the pods are gone."""
    if job.spec.workload_retention != WorkloadRetention.RELEASE:
        return _retained(job, status, obs)
    if is_released(status):
        return Release(status=status)
    name = job.metadata.name or ""
    ref = status.workload_ref
    workload = f"TrainJob {job.metadata.namespace}/{ref.name if ref else workload_name(name)}"
    held = _held_by(job, status, obs, now)
    if held is not None:
        return _set(job, status, now, ok=False, reason=ReleaseReason.MEASUREMENT_PENDING,
                    message=f"{workload} kept: {held}")
    view = obs.trainjob
    releasing = f"Deleting {workload} and its pods"
    if view is not None and owned_by(view, job):
        if view.deletion_timestamp is None:
            delete = _delete(view)
            out = _set(job, status, now, ok=False, reason=ReleaseReason.RELEASING,
                       message=releasing)
            return attrs.evolve(out, deletes=(delete,))
        holding = [f for f in view.finalizers if f not in _GC_FINALIZERS]
        if holding:
            return _set(job, status, now, ok=False, reason=ReleaseReason.HELD_BY_FINALIZER,
                        message=f"{workload} is being deleted; its finalizer(s) "
                                f"{', '.join(holding)} keep it and its pods")
        return _set(job, status, now, ok=False, reason=ReleaseReason.RELEASING, message=releasing)
    pods = obs.worker_pods + obs.launcher_pods
    if view is None and ref is not None and verify and not obs.feedback.has(absence):
        return Release(status=status, asks=(absence,))
    if not pods and verify and not all(obs.feedback.has(ask) for ask in live_pods):
        return Release(status=status, asks=live_pods)
    if pods or not verify:
        return _set(job, status, now, ok=False, reason=ReleaseReason.RELEASING, message=releasing)
    gone = f"{workload} and its pods are gone" if ref is not None else \
        "No workload was created"
    return _set(job, status, now, ok=True, reason=ReleaseReason.RELEASED, message=gone)


def _retained(job: Job, status: JobStatus, obs: Observation) -> Release:
    """``workloadRetention: Retain``: the workload stays, unless the failure was one that
    deletes it (it would hold its GPUs); that delete is repeated while it has not landed."""
    member, view, ref = true_member(status.conditions), obs.trainjob, status.workload_ref
    if (member is None or member.reason not in DELETED_ON_FAILURE or view is None or ref is None
            or not owned_by(view, job) or view.uid != ref.uid
            or view.deletion_timestamp is not None):
        return Release(status=status)
    return Release(status=status, deletes=(_delete(view),))


def _delete(view: TrainJobView) -> Delete:
    return Delete(api_version=TRAINJOB_API_VERSION, kind=TRAINJOB_KIND,
                  namespace=view.namespace, name=view.name, uid=view.uid)


def _held_by(job: Job, status: JobStatus, obs: Observation, now: datetime) -> str | None:
    """Why the workload must stay (a measurement still reading its pods), else ``None``."""
    member = true_member(status.conditions)
    if member is None or member.reason in DELETED_ON_FAILURE:
        return None
    ended = member.last_transition_time or now
    try:
        bound = parse_duration(job.spec.measurement_timeout or "5m")
    except ValueError:
        bound = timedelta(minutes=5)
    until = ended + bound + COMPLETION_GRACE
    if now >= until:
        return None
    bm, gm = obs.bandwidth_measurement, obs.goodput_measurement
    waiting = [m for m in (bm, gm) if m is not None and belongs_to(m, job) and not is_complete(m)
               and not (m is bm and configuration_problem(bm) is not None)]
    if not waiting:
        return None
    m = waiting[0]
    kind = "BandwidthMeasurement" if m is bm else "GoodputMeasurement"
    return (f"{kind} {m.metadata.name} has not completed and reads the pods' logs (for at "
            f"most measurementTimeout {job.spec.measurement_timeout} and "
            f"{int(COMPLETION_GRACE.total_seconds())}s after the Job ended)")


def _set(job: Job, status: JobStatus, now: datetime, *, ok: bool, reason: ReleaseReason,
         message: str) -> Release:
    conditions, event = set_additive(
        status.conditions, type_=ConditionType.WORKLOAD_RELEASED, status=ok, reason=reason,
        message=message, now=now, generation=job.metadata.generation)
    return Release(status=attrs.evolve(status, conditions=conditions), event=event)


def released_condition(status: JobStatus) -> Condition | None:
    """The Job's ``WorkloadReleased`` condition, if written."""
    return condition(status.conditions, ConditionType.WORKLOAD_RELEASED)
