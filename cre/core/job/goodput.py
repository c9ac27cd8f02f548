"""The Job's side of goodput: its GoodputMeasurement, training-stall detection and the
checkpoint-restart trigger.

A Job whose spec asks for ``goodputMeasurement`` owns one GoodputMeasurement, ``<job>-goodput``,
controlled by the Job and annotated with its uid (``cre.dev/job-uid``), created in the same Plan
as the workload and before it, exactly like the BandwidthMeasurement
(:mod:`cre.core.job.bandwidth`, both through :mod:`cre.core.measure.logread`); a leftover of an
earlier Job of the same name is deleted first.

The measurement is what the Job reads about the training itself (never written by the Job: the
reference resets the measurement's stall inputs from the Job; here the measurement records the
Job's restarts itself and the Job ignores step data from before its last restart):

* **Training stall** (``spec.stallMultiplier`` set): while the current run has logged no step,
  the run is stalled once ``startupStallTimeoutSeconds`` passed since its application start
  (never before the workload was seen running: queued time is not charged); once steps flow,
  when the last step is older than ``stallMultiplier x avgStepTimeSec x max(logInterval, 1)``.
  Both budgets get two sample intervals of grace (the measurement reports that late).
* **Checkpoint restart**: allowed while ``restartCount < checkpoint.maxRestarts`` and the
  measurement saw a checkpoint complete in the current run, since the last restart. A Job
  without a goodputMeasurement cannot see checkpoints and restarts on its budget alone. When
  the workload fails before the measurement sampled the end of its log, the Job waits for one
  more sample (at most two sample intervals) before it decides: the checkpoint may be in the
  lines not read yet (the reference decides at once, and a run checkpointing shortly before
  its crash fails for good).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Final

import attrs

from cre.api.goodput import GoodputMeasurement
from cre.api.job import Job
from cre.api.labels import GROUP
from cre.core.common.plan import Create, Delete
from cre.core.measure import logread as logmeasure
from cre.core.measure.goodput import stall_grace
from cre.core.measure.goodputfold import checkpoint_since_restart, fresh_steps, seconds_ms
from cre.core.measure.logread import belongs_to as belongs_to
from cre.core.measure.logread import child_manifest, child_writes

GOODPUT_KIND: Final = "GoodputMeasurement"
SUFFIX: Final = "-goodput"


def goodput_name(job_name: str) -> str:
    """The name of a Job's GoodputMeasurement."""
    return f"{job_name}{SUFFIX}"


def job_name_of(measurement_name: str) -> str | None:
    """The Job a goodput measurement name belongs to (``None``: not one)."""
    return logmeasure.job_name_of(measurement_name, SUFFIX)


def goodput_manifest(job: Job) -> dict[str, Any]:
    """The GoodputMeasurement ``job`` asks for (its spec must carry the request)."""
    request = job.spec.goodput_measurement
    assert request is not None
    name = job.metadata.name or ""
    return child_manifest(job, kind=GOODPUT_KIND, name=goodput_name(name), spec={
        "jobRef": {"apiGroup": GROUP, "kind": "Job", "name": name},
        "logProfileRef": request.log_profile_ref,
        "sampleInterval": request.sample_interval})


def own_goodput(job: Job, gm: GoodputMeasurement | None) -> GoodputMeasurement | None:
    """``gm`` if it measures this Job, else ``None``."""
    return gm if gm is not None and belongs_to(gm, job) else None


def goodput_writes(job: Job, gm: GoodputMeasurement | None
                   ) -> tuple[tuple[Create, ...], tuple[Delete, ...]]:
    """The create (or the delete of a previous Job's leftover) the Job's measurement needs."""
    wanted = job.spec.goodput_measurement is not None
    return child_writes(job, gm, kind=GOODPUT_KIND, manifest=goodput_manifest if wanted else None)


def checkpoint_restart_allowed(job: Job, gm: GoodputMeasurement | None) -> bool:
    """Whether a failed or stalled workload may restart from a checkpoint (module doc)."""
    checkpoint = job.spec.checkpoint
    if checkpoint is None or job.status.restart_count >= checkpoint.max_restarts:
        return False
    if job.spec.goodput_measurement is None:
        return True
    own = own_goodput(job, gm)
    return own is not None and checkpoint_since_restart(own.status, job.status.restart_count)


def checkpoint_read_pending(job: Job, gm: GoodputMeasurement | None, *,
                            failed_at: datetime | None, now: datetime) -> float | None:
    """Seconds to wait before judging a failed workload without a known checkpoint, or
    ``None``: judge now. A restart is left and the measurement has not sampled since the
    failure (the checkpoint may be in lines it has not read yet): wait for one more sample, at
    most two sample intervals after the failure."""
    checkpoint = job.spec.checkpoint
    own = own_goodput(job, gm)
    if (checkpoint is None or job.status.restart_count >= checkpoint.max_restarts
            or own is None or failed_at is None):
        return None
    sampled = own.status.last_sample_time
    if sampled is not None and sampled >= failed_at:
        return None
    left = (failed_at + stall_grace(own) - now).total_seconds()
    if left <= 0:
        return None
    return min(left, stall_grace(own).total_seconds() / 2)


@attrs.frozen(kw_only=True)
class Stall:
    """A stalled run: the message and when the budget ran out."""

    message: str
    since: datetime


@attrs.frozen(kw_only=True)
class StallCheck:
    """The verdict: stalled, or the time the next check is due (``None``: nothing to watch)."""

    stall: Stall | None = None
    next_check: datetime | None = None


def check_stall(job: Job, gm: GoodputMeasurement | None, now: datetime) -> StallCheck:
    """Whether the running workload's training stalled (module doc); needs a start time."""
    multiplier = job.spec.stall_multiplier
    own = own_goodput(job, gm)
    started = job.status.workload_start_time
    if multiplier is None or own is None or started is None:
        return StallCheck()
    grace = stall_grace(own)
    last_step, app_start = fresh_steps(own.status, job.status.restart_count)
    avg = own.status.avg_step_time_sec
    if last_step is None or last_step < started or not avg:
        anchor = max(app_start, started) if app_start is not None else started
        budget = timedelta(seconds=job.spec.startup_stall_timeout_seconds) + grace
        deadline = anchor + budget
        if now <= deadline:
            return StallCheck(next_check=deadline)
        return StallCheck(stall=Stall(since=anchor, message=(
            "Workload stalled: no training step observed within startup timeout "
            f"({job.spec.startup_stall_timeout_seconds}s after "
            f"{'the application started' if app_start is not None else 'it started running'}"
            ")")))
    interval = max(own.status.log_interval or 1, 1)
    budget_ms = multiplier * seconds_ms(avg) * interval
    deadline = last_step + timedelta(milliseconds=budget_ms) + grace
    if now <= deadline:
        return StallCheck(next_check=deadline)
    return StallCheck(stall=Stall(since=last_step, message=(
        "Workload stalled: no training step within the configured threshold (none after "
        f"step {own.status.current_step} for {multiplier} x {avg}s x log interval {interval}"
        f" + {int(grace.total_seconds())}s)")))
