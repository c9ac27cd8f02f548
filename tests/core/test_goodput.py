"""The pure goodput fold (cre.core.measure.goodputfold) and the training-log parser
(cre.core.measure.goodputlog)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from cre.api.converter import structure, to_dict
from cre.api.goodput import GoodputMeasurementStatus
from cre.api.measurement import LogPattern, LogPatterns, LogProfile, TimeUnit
from cre.core.measure import goodputfold as G
from cre.core.measure.goodputlog import EventKind, LogEvent, compile_goodput_profile, from_ms, to_ms
from cre.core.measure.goodputprofiles import MEGATRON_TRAINING, megatron_profile
from cre.core.measure.logprofile import ProfileError

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "logprofiles"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
PARSER = compile_goodput_profile(megatron_profile())


def stamp(seconds: float) -> str:
    when = T0 + timedelta(seconds=seconds)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond * 1000:09d}Z"


def step_line(it: int, ms: float = 1000.0, tflops: float | None = 400.0) -> str:
    tail = f" throughput per GPU (TFLOP/s/GPU): {tflops:.1f} |" if tflops is not None else ""
    return (f" iteration {it:8d}/     200 | consumed samples: {it * 64:12d} | elapsed time per "
            f"iteration (ms): {ms:.1f} |{tail} learning rate: 1.0E-04 |")


def log(*lines: tuple[float, str]) -> list[str]:
    return [f"{stamp(t)} {text}" for t, text in lines]


def events(lines: list[str]) -> list[LogEvent]:
    return [e for e in (PARSER.parse(line) for line in lines) if e is not None]


def fold(status: GoodputMeasurementStatus, lines: list[str], pod: str = "pod-1"
         ) -> GoodputMeasurementStatus:
    return G.summarise(G.fold(status, events(lines), pod_uid=pod,
                              warmup_steps=PARSER.warmup_steps))


# A run: starts at 0, first step (10) at 15, steps every 10 s (1 s per iteration), a checkpoint
# at 50 saved from 55 to 57, then steps go on; crash after step 80 (at 87).
RUN_1 = log(
    (0, "> initializing torch distributed ..."),
    (15, step_line(10)), (25, step_line(20)), (35, step_line(30)), (45, step_line(40)),
    (55, step_line(50)),
    (55, "saving checkpoint at iteration       50 to /ckpt in torch_dist format"),
    (57, "  successfully saved checkpoint from iteration       50 to /ckpt [ t 1/1, p 1/1 ]"),
    (67, step_line(60)), (77, step_line(70)), (87, step_line(80)),
    (88, "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered"),
)
# The restarted run: starts at 120, loads 50 at 126, first step (60) at 136, ends at 196.
RUN_2 = log(
    (120, "> initializing torch distributed ..."),
    (123, "loading distributed checkpoint from /ckpt at iteration 50"),
    (126, "  successfully loaded checkpoint from /ckpt [ t 1/1, p 1/1 ] at iteration 50"),
    (136, step_line(60)), (146, step_line(70)), (156, step_line(80)), (166, step_line(90)),
    (176, step_line(100)), (186, step_line(110)), (196, step_line(120)),
)


def test_megatron_lines_become_events() -> None:
    """Each Megatron line kind becomes its event, with step, timing (ms), TFLOPs and time."""
    got = events(RUN_1[:7] + RUN_2[1:3])
    assert [e.kind for e in got] == [
        EventKind.APPLICATION_START, *[EventKind.TRAINING_STEP] * 5, EventKind.CHECKPOINT_SAVE,
        EventKind.CHECKPOINT_RESTORE, EventKind.CHECKPOINT_LOADED]
    first = got[1]
    assert (first.step, first.step_ms, first.tflops_milli, first.at_ms) == (
        10, 1000, 400000, to_ms(T0) + 15000)
    assert got[-1].step == 50


def test_a_line_without_a_time_or_a_step_is_no_event() -> None:
    """No kubelet stamp and no timestamp capture, or a step line without a step: skipped."""
    assert PARSER.parse(step_line(10)) is None
    assert PARSER.parse(f"{stamp(0)} nothing to see") is None


def test_units_and_timestamp_capture() -> None:
    """``units`` scale a capture; a ``timestamp`` capture wins over the kubelet's stamp."""
    profile = attrs.evolve(megatron_profile(), spec=attrs.evolve(
        megatron_profile().spec, patterns=LogPatterns(training_step=LogPattern(
            regex=r"\[(?P<timestamp>[\d\- :.]+)\] step (?P<step>\d+) took (?P<stepTiming>[\d.]+)",
            units={"stepTiming": TimeUnit.MICROSECONDS}))))
    parser = compile_goodput_profile(profile)
    event = parser.parse(f"{stamp(99)} [2026-01-01 00:00:05.250] step 7 took 2500000")
    assert event is not None
    assert (event.step, event.step_ms, event.at_ms) == (7, 2500, to_ms(T0) + 5250)


@pytest.mark.parametrize(("patterns", "key"), [
    (LogPatterns(checkpoint_save=LogPattern(regex="saving")), "spec.patterns.trainingStep"),
    (LogPatterns(training_step=LogPattern(regex="(unclosed")), "spec.patterns.trainingStep.regex"),
    (LogPatterns(training_step=LogPattern(regex=r"iteration \d+")),
     "spec.patterns.trainingStep.regex needs a named group"),
    (LogPatterns(training_step=LogPattern(regex=r"it (?P<step>\d+)", example="nope")),
     "spec.patterns.trainingStep.regex does not match its own example"),
    (LogPatterns(training_step=LogPattern(regex=r"it (?P<step>\d+)"),
                 checkpoint_done=LogPattern(regex="[")), "spec.patterns.checkpointDone.regex"),
])
def test_bad_profiles_name_the_profile_and_key(patterns: LogPatterns, key: str) -> None:
    """A profile a goodput measurement cannot use is refused with its name and the key."""
    profile = LogProfile(metadata=attrs.evolve(megatron_profile().metadata, name="mine"),
                         spec=attrs.evolve(megatron_profile().spec, patterns=patterns))
    with pytest.raises(ProfileError, match="LogProfile mine: ") as info:
        compile_goodput_profile(profile)
    assert key in str(info.value)


def test_deploy_yaml_is_the_shipped_profile() -> None:
    """deploy/logprofiles/megatron-training.yaml is the model serialised, and listed."""
    raw = YAML(typ="safe").load((DEPLOY / f"{MEGATRON_TRAINING}.yaml").read_text())
    assert structure(raw, LogProfile) == megatron_profile()
    assert raw == to_dict(megatron_profile())
    assert f"{MEGATRON_TRAINING}.yaml" in (DEPLOY / "kustomization.yaml").read_text()


def test_one_uninterrupted_run() -> None:
    """Warm-up until step 30 (20 iterations past the first step), then 1 s per iteration; the
    checkpoint save is the only time lost: (87 - 2) / 87."""
    status = fold(GoodputMeasurementStatus(), RUN_1[:-1])
    assert status.result == f"{85 / 87:.4f}"
    assert (status.training_time_sec, status.checkpoint_save_time_sec) == ("87.000", "2.000")
    assert (status.warmup_time_sec, status.non_warmup_time_sec) == ("35.000", "50.000")
    assert (status.avg_step_time_sec, status.avg_tflops_per_gpu) == ("1.000", "400.00")
    assert (status.current_step, status.highest_step, status.log_interval) == (80, 80, 10)
    assert (status.last_checkpoint_step, status.last_checkpoint_time) == (
        50, T0 + timedelta(seconds=57))
    assert status.warmup_base_step == 10 and status.last_non_warmup_step == 80
    assert status.last_step_timestamp == T0 + timedelta(seconds=87)
    assert status.application_start_time == T0


def test_interruption_reschedule_and_resume() -> None:
    """Crash at 88 (its last line): 31 s since the checkpoint lost; the next run starts at 120
    (32 s rescheduled), resumes at 136 (16 s); goodput (196-31-16-32-2)/(196-32)."""
    first = G.fold(GoodputMeasurementStatus(), events(RUN_1), pod_uid="pod-1",
                   seen_until=to_ms(T0) + 88000, warmup_steps=PARSER.warmup_steps)
    interrupted = G.interrupt(first, at=to_ms(T0) + 200000, reason="WorkloadRestarting")
    assert interrupted.pending_interruption is not None
    assert interrupted.pending_interruption.t_ch == "31.000"
    assert interrupted.last_step_timestamp is None and interrupted.application_start_time is None
    status = fold(interrupted, RUN_2, pod="pod-2")
    assert (status.lost_work_time_sec, status.reschedule_time_sec, status.resume_time_sec) == (
        "31.000", "32.000", "16.000")
    assert status.result == f"{(196 - 31 - 16 - 32 - 2) / (196 - 32):.4f}"
    assert status.interruption_count == 1 and status.pending_interruption is None
    assert status.warmup_base_step == 60 and status.current_step == 120


def test_new_pod_records_the_interruption_itself() -> None:
    """Lines of a new pod without the Job's restart: the old run is interrupted at its last line
    (reason PodReplaced), then the new run is counted the same way."""
    first = G.fold(GoodputMeasurementStatus(), events(RUN_1), pod_uid="pod-1",
                   seen_until=to_ms(T0) + 88000)
    both = G.fold(first, events(RUN_2), pod_uid="pod-2")
    told = G.fold(G.interrupt(first, at=None, reason="x"), events(RUN_2), pod_uid="pod-2")
    assert both.interruption_count == 1 and both.tally.lost_ms == told.tally.lost_ms == 31000
    assert G.summarise(both).result == G.summarise(told).result


def test_interrupt_is_once_per_run() -> None:
    """Recording an interruption twice for one run changes nothing the second time."""
    first = G.fold(GoodputMeasurementStatus(), events(RUN_1), pod_uid="pod-1")
    once = G.interrupt(first, at=None, reason="a")
    assert G.interrupt(once, at=None, reason="b") == once
    before = G.interrupt(GoodputMeasurementStatus(), at=5, reason="a")
    assert before.interruption_count == 1 and G.interrupt(before, at=5, reason="a") == before


def test_checkpoint_since_restart() -> None:
    """The Job may restart from a checkpoint only when one completed in the current run."""
    first = fold(GoodputMeasurementStatus(), RUN_1)
    assert G.checkpoint_since_restart(first, 0)
    interrupted = G.interrupt(first, at=None, reason="r")
    assert not G.checkpoint_since_restart(interrupted, 1)
    second = fold(interrupted, RUN_2, pod="pod-2")  # no checkpoint in run 2
    assert not G.checkpoint_since_restart(second, 1)
    saved = fold(second, log((200, "  successfully saved checkpoint from iteration      120 to "
                                   "/ckpt [ t 1/1, p 1/1 ]")), pod="pod-2")
    assert G.checkpoint_since_restart(saved, 1) and not G.checkpoint_since_restart(saved, 2)


def test_log_interval_filters_other_steps() -> None:
    """With a profile logInterval, steps that are not multiples of it are ignored."""
    lines = log((0, "> initializing torch distributed ..."), (10, step_line(10)),
                (15, step_line(15)), (20, step_line(20)))
    got = G.fold(GoodputMeasurementStatus(), events(lines), pod_uid="p", log_interval=10)
    assert got.tally.min_step_gap == 10 and got.current_step == 20


def test_seconds_round_trip() -> None:
    """Milliseconds <-> "%.3f" strings are exact."""
    for ms in (0, 1, 999, 1000, 123456789):
        assert G.seconds_ms(G.seconds(ms)) == ms
    assert from_ms(to_ms(T0 + timedelta(milliseconds=1234))) == T0 + timedelta(
        milliseconds=1234)


# --- properties -------------------------------------------------------------------------------


@st.composite
def training_logs(draw: st.DrawFn) -> list[tuple[float, str]]:
    """A plausible run: start, steps every few seconds, checkpoints now and then."""
    t = draw(st.integers(0, 5))
    lines = [(float(t), "> initializing torch distributed ...")]
    step = 0
    for _ in range(draw(st.integers(0, 25))):
        t += draw(st.integers(1, 20))
        kind = draw(st.sampled_from(["step", "step", "step", "save"]))
        if kind == "step":
            step += draw(st.sampled_from([5, 10]))
            lines.append((float(t), step_line(step, ms=draw(st.sampled_from([500.0, 1000.0])),
                                              tflops=draw(st.sampled_from([None, 300.0])))))
        else:
            lines.append((float(t), f"saving checkpoint at iteration {step:8d} to /c"))
            t += draw(st.integers(0, 5))
            lines.append((float(t), f"  successfully saved checkpoint from iteration {step:8d} "
                                    "to /c [ t 1/1, p 1/1 ]"))
    return lines


@settings(max_examples=60, deadline=None)
@given(training_logs(), training_logs(), st.data())
def test_fold_does_not_depend_on_the_windows(first: list[tuple[float, str]],
                                             then: list[tuple[float, str]],
                                             data: st.DataObject) -> None:
    """Folding a log in any split gives the same status as folding it at once (the sampling
    cadence never changes the result), and the ratio stays within [0, 1]."""
    one = log(*first)
    second = log(*((1000.0 + t, text) for t, text in then))
    whole = G.fold(GoodputMeasurementStatus(), events(one), pod_uid="a")
    whole = G.interrupt(whole, at=None, reason="r")
    whole = G.summarise(G.fold(whole, events(second), pod_uid="b", warmup_steps=20))
    cut_one = data.draw(st.integers(0, len(one)))
    cut_two = data.draw(st.integers(0, len(second)))
    parts = G.fold(GoodputMeasurementStatus(), events(one[:cut_one]), pod_uid="a")
    parts = G.summarise(G.fold(parts, events(one[cut_one:]), pod_uid="a"))
    parts = G.interrupt(parts, at=None, reason="r")
    parts = G.fold(parts, events(second[:cut_two]), pod_uid="b", warmup_steps=20)
    parts = G.summarise(G.fold(parts, events(second[cut_two:]), pod_uid="b", warmup_steps=20))
    assert to_dict(parts) == to_dict(whole)
    if whole.result is not None:
        assert 0.0 <= float(whole.result) <= 1.0
    # Summarising is a pure function of the tally: again gives the same bytes.
    assert to_dict(G.summarise(whole)) == to_dict(whole)
