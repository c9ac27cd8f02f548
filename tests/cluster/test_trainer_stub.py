"""The stub Megatron trainer (cre.testing.cluster.trainerstub): its scripted, timed log."""

from __future__ import annotations

import attrs

from cre.core.measure.goodputlog import EventKind, compile_goodput_profile
from cre.core.measure.goodputprofiles import megatron_profile
from cre.testing.cluster.program import Role, StubContext
from cre.testing.cluster.stubs import choose

CMD = ["torchrun", "pretrain_gpt.py", "--train-iters", "100", "--log-interval", "10",
       "--save-interval", "50", "--save", "/ckpt", "--load", "/ckpt", "--stub-step-time", "2",
       "--stub-startup", "4", "--stub-save-time", "3"]
PARSER = compile_goodput_profile(megatron_profile())


def _ctx(*extra: str, state: dict[str, object] | None = None) -> StubContext:
    return StubContext(pod_name="t-node-0-0-aaaaa", container={"name": "node",
                                                              "command": [*CMD, *extra]},
                       role=Role.WORKER, node_name="n0", node_busbw=1.0, group_busbw=1.0,
                       group_size=2, gpus_per_node=8, gpu_product="H100", namespace="ns",
                       state=state or {})


def _kinds(ctx: StubContext) -> list[tuple[float, EventKind]]:
    program = choose(ctx)
    out = []
    for line in program.lines:
        for text in line.text.splitlines():
            event = PARSER.parse(f"2026-01-01T00:00:00Z {text}")
            if event is not None:
                out.append((line.at, event.kind))
    return out


def test_a_full_run_prints_its_schedule() -> None:
    """Start, a step line every 10 iterations at 2 s each, a save of 3 s at 50 and 100, exit 0
    one second after the last line; the checkpoint is remembered as a mark."""
    program = choose(_ctx())
    assert program.name == "trainer" and program.exit_code == 0
    kinds = _kinds(_ctx())
    assert kinds[0] == (0.0, EventKind.APPLICATION_START)
    assert kinds[1] == (24.0, EventKind.TRAINING_STEP)  # 4 s startup + 10 x 2 s
    assert (107.0, EventKind.CHECKPOINT_DONE) in kinds  # 4 s + 50 x 2 s + a 3 s save
    assert program.duration == 4 + 100 * 2 + 2 * 3 + 1
    marks = [(line.mark, line.value) for line in program.lines if line.mark]
    assert marks == [("trainer/ns//ckpt/step", 50), ("trainer/ns//ckpt/step", 100)]


def test_crash_once_then_resume_from_the_checkpoint() -> None:
    """--stub-crash-at: the first run exits 1 at that iteration and marks the crash; a run
    that finds the mark and a saved checkpoint loads it and runs to the end."""
    first = choose(_ctx("--stub-crash-at", "70"))
    assert (first.exit_code, first.reason) == (1, "Error")
    assert "CUDA error" in first.lines[-2].text and first.lines[-2].mark.endswith("/crashed")
    again = _ctx("--stub-crash-at", "70", state={"trainer/ns//ckpt/step": 50,
                                                 "trainer/ns//ckpt/crashed": True})
    second = choose(again)
    assert second.exit_code == 0
    kinds = [k for _, k in _kinds(again)]
    assert kinds[1:3] == [EventKind.CHECKPOINT_RESTORE, EventKind.CHECKPOINT_LOADED]
    assert "iteration       60/" in next(ln.text for ln in second.lines if "iteration" in
                                          ln.text and "elapsed" in ln.text)


def test_stall_hangs_without_more_steps() -> None:
    """--stub-stall-at: no step line from that iteration on, and the container never exits."""
    program = choose(_ctx("--stub-stall-at", "35"))
    assert program.duration is None
    steps = [ln.text for ln in program.lines if "elapsed time" in ln.text]
    assert len(steps) == 3


def test_other_programs_are_untouched() -> None:
    """A command without a trainer marker keeps its program."""
    ctx = attrs.evolve(_ctx(), container={"name": "node", "command": ["sleep", "1"]})
    assert choose(ctx).name == "generic"


def test_trainer_crash_override_crashes_a_catalog_trainer_once_at_its_iteration() -> None:
    """The scenario override trainer-crash makes a trainer without stub flags (a catalog
    entry's command) crash at iteration ``after`` with a CUDA error; once the crash is
    remembered, the restarted run finishes; a non-trainer container keeps its own program."""
    from cre.testing.cluster.stubs import Behaviour, Override

    crash = Override(behaviour=Behaviour.TRAINER_CRASH, role=Role.WORKER, after=60)
    program = choose(_ctx(), crash)
    assert program.exit_code == 1 and "CUDA error" in program.lines[-2].text
    assert "(iteration 60)" in program.lines[-2].text
    assert [line.mark for line in program.lines if line.mark][-1] == "trainer/ns//ckpt/crashed"
    again = choose(_ctx(state={"trainer/ns//ckpt/crashed": True,
                               "trainer/ns//ckpt/step": 50}), crash)
    assert again.exit_code == 0
    sshd = attrs.evolve(_ctx(), container={"name": "node", "command": ["sh", "-c", "sshd -De"]})
    assert choose(sshd, crash).name == "sshd"
