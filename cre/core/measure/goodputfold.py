"""Goodput from training-log events: a pure fold over a GoodputMeasurement's status.

A training run is one life of the trainer: it starts (``applicationStart``, or the first line
of a new pod), spends a while before its first step (warm-up on the first run; *resume* after an
interruption: loading the checkpoint), then logs steps, sometimes saving a checkpoint, until it
ends or is interrupted. The rules, all on integer milliseconds (``status.tally``), so the result
does not depend on how the log was cut into reads:

* **Wall time** ``t_w``: from the first run's start to the last line seen
  (``applicationStopTime``); ``trainingTimeSec``.
* **Interruption** (the Job restarted the workload, a new pod or a second ``applicationStart``
  took over, or the Job failed): recorded once per run at the run's last line. The work since
  the later of the last completed checkpoint and the run's first step is **lost**
  (``lostWorkTimeSec``, ``t_ch``); it stays pending until the next run resumes.
* **Reschedule** ``t_re``: from the interruption to the next run's start.
* **Resume** ``t_rm``: from a restarted run's start to its first step.
* **Checkpoint save** ``t_save``: a ``saveDuration`` capture, else ``checkpointSave`` to
  ``checkpointDone``.
* **Goodput** ``(t_w - t_ch - t_rm - t_re - t_save) / (t_w - t_re)``, clamped to [0, 1], as
  ``"%.4f"`` (the reference's formula: rescheduling is the cluster's time, not the run's).
* **Step times**: per logged step, ``stepTiming`` x steps since the previous logged step when
  printed, else the time between the two lines. Steps up to ``warmupSteps`` after a run's first
  step, and ``warmupStep`` lines, are warm-up (``warmupTimeSec``, with the first run's time
  before its first step); the rest is ``nonWarmupTimeSec`` and gives ``avgStepTimeSec`` and
  ``avgTFLOPSPerGPU`` (mean of ``tflops`` over non-warm-up steps). ``logInterval`` is the
  profile's, else the smallest step gap seen; with a profile ``logInterval`` other steps are
  ignored.

The stall inputs the Job reads (``lastStepTimestamp``, ``applicationStartTime``) describe the
current run only: an interruption clears them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import attrs

from cre.api.goodput import GoodputMeasurementStatus, GoodputTally, PendingInterruption
from cre.core.measure.goodputlog import EventKind, LogEvent, from_ms, to_ms

_STEPS = (EventKind.TRAINING_STEP, EventKind.WARMUP_STEP)


def seconds(ms: int) -> str:
    """Milliseconds as a ``"%.3f"`` seconds string (exact)."""
    return f"{ms // 1000}.{ms % 1000:03d}"


def seconds_ms(text: str | None) -> int:
    """A ``"%.3f"`` seconds string back to milliseconds (0 for ``None``)."""
    if not text:
        return 0
    whole, _, frac = text.partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


def _evolve_tally(status: GoodputMeasurementStatus, **changes: Any
                  ) -> GoodputMeasurementStatus:
    return attrs.evolve(status, tally=attrs.evolve(status.tally, **changes))


def _seen(status: GoodputMeasurementStatus, at: int) -> GoodputMeasurementStatus:
    last = status.tally.last_line_ms
    if last is not None and last >= at:
        return status
    return _evolve_tally(status, last_line_ms=at)


def _start_run(status: GoodputMeasurementStatus, at: int, pod_uid: str | None
               ) -> GoodputMeasurementStatus:
    t = status.tally
    reschedule = t.reschedule_ms
    pending = status.pending_interruption
    if pending is not None:
        reschedule += max(at - to_ms(pending.t_interrupt), 0)
    status = attrs.evolve(status, application_start_time=from_ms(at),
                          last_step_timestamp=None)
    return _evolve_tally(
        status, run=t.run + 1, run_pod_uid=pod_uid if pod_uid is not None else t.run_pod_uid,
        first_start_ms=t.first_start_ms if t.first_start_ms is not None else at,
        run_start_ms=at, run_resumed_ms=None, run_base_step=None, prev_step=None,
        prev_step_ms=None, pending_save_ms=None, reschedule_ms=reschedule,
        prior_warmup_ms=t.warmup_ms, prior_non_warmup_ms=t.non_warmup_ms)


def interrupt(status: GoodputMeasurementStatus, *, at: int | None, reason: str
              ) -> GoodputMeasurementStatus:
    """Record that the current run ended early, at its last line (``at`` when it has none).

    At most once per run: recording again is a no-op, so the fold can be re-run on its own
    output. Before any run, only the count moves (nothing was lost)."""
    t = status.tally
    if t.run == 0:
        if t.interrupted_run == 0:
            return status
        return _evolve_tally(attrs.evolve(status, interruption_count=status.interruption_count
                                          + 1), interrupted_run=0)
    if t.interrupted_run == t.run:
        return status
    end = t.last_line_ms if t.last_line_ms is not None else at
    if end is None:
        end = t.run_start_ms or 0
    began = t.run_resumed_ms if t.run_resumed_ms is not None else t.run_start_ms
    since = max(x for x in (t.checkpoint_ms, began, 0) if x is not None)
    lost = max(end - since, 0)
    pending = PendingInterruption(
        t_checkpoint=from_ms(t.checkpoint_ms) if t.checkpoint_ms is not None else None,
        t_interrupt=from_ms(end), checkpoint_step=status.last_checkpoint_step,
        last_step=status.current_step, t_ch=seconds(lost), reason=reason)
    status = attrs.evolve(status, interruption_count=status.interruption_count + 1,
                          pending_interruption=pending, last_step_timestamp=None,
                          application_start_time=None)
    return _evolve_tally(status, interrupted_run=t.run, lost_ms=t.lost_ms + lost,
                         run_resumed_ms=None, prev_step=None, prev_step_ms=None,
                         pending_save_ms=None)


_Changes = tuple[dict[str, Any], dict[str, Any]]  # (status fields, tally fields)


def _step(status: GoodputMeasurementStatus, ev: LogEvent, *, warmup_steps: int,
          log_interval: int | None) -> _Changes:
    step = ev.step
    assert step is not None
    if log_interval and step % log_interval:
        return {}, {}
    t = status.tally
    at = ev.at_ms
    changes: dict[str, Any] = {"prev_step": step, "prev_step_ms": at}
    fields: dict[str, Any] = {"current_step": step, "last_step_timestamp": from_ms(at),
                                 "highest_step": max(step, status.highest_step or 0)}
    if t.run_resumed_ms is None:
        # The run's first step: what came before it was warm-up (first run) or resumption.
        since_start = max(at - (t.run_start_ms if t.run_start_ms is not None else at), 0)
        changes.update(run_resumed_ms=at, run_base_step=step)
        fields["warmup_base_step"] = step
        if status.pending_interruption is not None:
            changes["resume_ms"] = t.resume_ms + since_start
            fields["pending_interruption"] = None
        else:
            changes["warmup_ms"] = t.warmup_ms + since_start
    elif t.prev_step is not None and t.prev_step_ms is not None and step > t.prev_step:
        gained = step - t.prev_step
        gap = max(at - t.prev_step_ms, 0)
        changes["min_step_gap"] = min(gained, t.min_step_gap or gained)
        base = t.run_base_step if t.run_base_step is not None else step
        if ev.kind == EventKind.WARMUP_STEP or step <= base + warmup_steps:
            changes["warmup_ms"] = t.warmup_ms + gap
        else:
            took = ev.step_ms * gained if ev.step_ms is not None else gap
            changes.update(non_warmup_ms=t.non_warmup_ms + took,
                           non_warmup_steps=t.non_warmup_steps + gained)
            fields["last_non_warmup_step"] = step
            if ev.tflops_milli is not None:
                changes.update(tflops_milli_sum=t.tflops_milli_sum + ev.tflops_milli,
                               tflops_samples=t.tflops_samples + 1)
    return fields, changes


def _checkpoint_done(status: GoodputMeasurementStatus, ev: LogEvent) -> _Changes:
    t = status.tally
    took = ev.save_ms
    if took is None:
        took = max(ev.at_ms - t.pending_save_ms, 0) if t.pending_save_ms is not None else 0
    step = ev.step if ev.step is not None else status.current_step
    return ({"last_checkpoint_step": step, "last_checkpoint_time": from_ms(ev.at_ms)},
            {"save_ms": t.save_ms + took, "pending_save_ms": None, "checkpoint_ms": ev.at_ms,
             "checkpoint_run": t.run})


def _event(status: GoodputMeasurementStatus, ev: LogEvent, *, warmup_steps: int,
           log_interval: int | None) -> _Changes:
    if ev.kind in _STEPS:
        return _step(status, ev, warmup_steps=warmup_steps, log_interval=log_interval)
    if ev.kind == EventKind.CHECKPOINT_SAVE:
        return {}, {"pending_save_ms": ev.at_ms}
    if ev.kind == EventKind.CHECKPOINT_DONE:
        return _checkpoint_done(status, ev)
    if ev.kind == EventKind.CHECKPOINT_LOADED and ev.step is not None:
        return {"current_step": ev.step}, {}
    return {}, {}


def fold(status: GoodputMeasurementStatus, events: Iterable[LogEvent], *,
         pod_uid: str | None = None, seen_until: int | None = None, warmup_steps: int = 0,
         log_interval: int | None = None) -> GoodputMeasurementStatus:
    """``status`` with ``events`` (one pod's new lines, in order) counted; ``seen_until`` is
    the time of the last line read (matched or not). Call :func:`summarise` after."""
    for ev in events:
        t = status.tally
        new_pod = pod_uid is not None and t.run_pod_uid not in (None, pod_uid)
        restarted = ev.kind == EventKind.APPLICATION_START and t.run_resumed_ms is not None
        if t.run > 0 and t.interrupted_run != t.run and (new_pod or restarted):
            status = interrupt(status, at=None,
                               reason="PodReplaced" if new_pod else "ApplicationRestarted")
            t = status.tally
        ended = t.run > 0 and t.interrupted_run == t.run
        if ended and not new_pod and ev.kind != EventKind.APPLICATION_START:
            continue  # a late line of the interrupted run: its time was already accounted
        if t.run == 0 or ended or new_pod:
            status = _start_run(status, ev.at_ms, pod_uid)
        fields, changes = _event(status, ev, warmup_steps=warmup_steps,
                                 log_interval=log_interval)
        last = status.tally.last_line_ms
        if last is None or ev.at_ms > last:
            changes["last_line_ms"] = ev.at_ms
        if changes:  # one copy of the tally and one of the status per event
            fields["tally"] = attrs.evolve(status.tally, **changes)
        if fields:
            status = attrs.evolve(status, **fields)
    if seen_until is not None and status.tally.run > 0:
        status = _seen(status, seen_until)
    return status


def _ratio(t: GoodputTally) -> str | None:
    if t.first_start_ms is None or t.last_line_ms is None:
        return None
    wall = t.last_line_ms - t.first_start_ms
    denominator = wall - t.reschedule_ms
    if denominator <= 0:
        return None
    useful = wall - t.lost_ms - t.resume_ms - t.reschedule_ms - t.save_ms
    ratio = min(max(useful / denominator, 0.0), 1.0)
    return f"{ratio:.4f}"


def summarise(status: GoodputMeasurementStatus, *, log_interval: int | None = None
              ) -> GoodputMeasurementStatus:
    """The reported fields derived from ``status.tally`` (pure function of it)."""
    t = status.tally
    if t.run == 0:
        return status
    wall = (t.last_line_ms or 0) - (t.first_start_ms or 0)
    avg = (seconds(round(t.non_warmup_ms / t.non_warmup_steps)) if t.non_warmup_steps
           else None)
    tflops = (f"{t.tflops_milli_sum / t.tflops_samples / 1000:.2f}" if t.tflops_samples
              else None)
    return attrs.evolve(
        status, result=_ratio(t), training_time_sec=seconds(max(wall, 0)),
        lost_work_time_sec=seconds(t.lost_ms), reschedule_time_sec=seconds(t.reschedule_ms),
        resume_time_sec=seconds(t.resume_ms), checkpoint_save_time_sec=seconds(t.save_ms),
        warmup_time_sec=seconds(t.warmup_ms), non_warmup_time_sec=seconds(t.non_warmup_ms),
        prior_warmup_time_sec=seconds(t.prior_warmup_ms),
        prior_non_warmup_time_sec=seconds(t.prior_non_warmup_ms), avg_step_time_sec=avg,
        avg_tflops_per_gpu=tflops, log_interval=log_interval or t.min_step_gap,
        application_stop_time=from_ms(t.last_line_ms) if t.last_line_ms is not None else None)


def checkpoint_since_restart(status: GoodputMeasurementStatus, restart_count: int) -> bool:
    """Whether a checkpoint completed in the current run, after the Job's last restart (the
    measurement has seen ``restart_count`` interruptions and the run was not interrupted)."""
    t = status.tally
    return (status.interruption_count >= restart_count and t.run > 0
            and t.checkpoint_run == t.run and t.interrupted_run != t.run
            and (status.last_checkpoint_step or 0) > 0)


def fresh_steps(status: GoodputMeasurementStatus, restart_count: int
                ) -> tuple[datetime | None, datetime | None]:
    """The stall inputs of the current run: (last step time, application start), both
    ``None`` while the measurement has not caught up with the Job's restarts."""
    if status.interruption_count < restart_count:
        return None, None
    return status.last_step_timestamp, status.application_start_time
