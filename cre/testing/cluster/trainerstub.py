"""A stub Megatron-style trainer: the training log a GoodputMeasurement reads, on scaled time.

Chosen for a container whose command runs ``pretrain_gpt.py`` (or names ``megatron`` or
``cre-stub-trainer``). It reads Megatron's own flags, ``--train-iters``, ``--log-interval``,
``--save-interval``, ``--save`` / ``--load`` (the checkpoint directory), and a few of its own,
``--stub-step-time`` (simulated seconds per iteration, default 1), ``--stub-startup``
(seconds before the first iteration, default 5), ``--stub-save-time`` (seconds a checkpoint
save takes, default 2), ``--stub-tflops`` (TFLOP/s per GPU printed, default 400; 0: not
printed), ``--stub-crash-at N`` (exit 1 with a CUDA error when iteration N is reached, once
per checkpoint directory) and ``--stub-stall-at N`` (stop making progress at iteration N and
hang until killed).

The output follows Megatron-LM's text: ``> initializing torch distributed ...``, the
``loading distributed checkpoint`` / ``successfully loaded checkpoint`` pair when ``--load``
holds a checkpoint, one ``iteration N/ T | ... | elapsed time per iteration (ms): X |
throughput per GPU (TFLOP/s/GPU): Y | ...`` line every log interval, ``saving checkpoint at
iteration N`` / ``successfully saved checkpoint from iteration N`` around each save, and
``[after training is done]`` at the end. Each line is written at its simulated time, so the
kubelet timestamps are the run's real schedule (scaled). A saved checkpoint is remembered in the
simulator's marks (``trainer/<namespace>/<dir>/step``), as a checkpoint volume would keep it, so
a restarted run resumes from it; the crash is remembered the same way and happens once.

Left out: per-rank output differences (every rank prints the same log), loss curves (a fixed
decreasing formula), timers, NCCL chatter.
"""

from __future__ import annotations

import shlex
from typing import Final

from cre.testing.cluster.program import Program, StubContext, TimedLine

MARKERS: Final = ("pretrain_gpt", "megatron", "cre-stub-trainer")


def is_trainer(cmd: str) -> bool:
    """Whether the command line runs a (stubbed) Megatron-style trainer."""
    low = cmd.lower()
    return any(m in low for m in MARKERS)


def _flags(cmd: str) -> dict[str, str]:
    try:
        words = shlex.split(cmd)
    except ValueError:
        words = cmd.split()
    out: dict[str, str] = {}
    for i, w in enumerate(words):
        if not w.startswith("--"):
            continue
        if "=" in w:
            key, value = w[2:].split("=", 1)
            out[key] = value
        elif i + 1 < len(words) and not words[i + 1].startswith("--"):
            out[w[2:]] = words[i + 1]
        else:
            out[w[2:]] = ""
    return out


def _num(flags: dict[str, str], key: str, default: float) -> float:
    try:
        return float(flags[key])
    except (KeyError, ValueError):
        return default


def _step_line(it: int, total: int, *, step_time: float, tflops: float, batch: int) -> str:
    loss = 10.0 / (1.0 + it / 50.0)
    parts = [f" iteration {it:8d}/{total:8d}", f" consumed samples: {it * batch:12d}",
             f" elapsed time per iteration (ms): {step_time * 1000:.1f}"]
    if tflops > 0:
        parts.append(f" throughput per GPU (TFLOP/s/GPU): {tflops:.1f}")
    parts += [" learning rate: 1.000000E-04", f" global batch size: {batch:5d}",
              f" lm loss: {loss:.6E}", " loss scale: 1.0", " grad norm: 1.000",
              " number of skipped iterations:   0", " number of nan iterations:   0", ""]
    return "|".join(parts) + "\n"


def trainer_program(ctx: StubContext, cmd: str) -> Program:
    """The scripted run of one trainer container (see the module docstring)."""
    f = _flags(cmd)
    total = int(_num(f, "train-iters", 100))
    interval = max(int(_num(f, "log-interval", 10)), 1)
    save_every = int(_num(f, "save-interval", 0))
    step_time = _num(f, "stub-step-time", 1.0)
    startup = _num(f, "stub-startup", 5.0)
    save_time = _num(f, "stub-save-time", 2.0)
    tflops = _num(f, "stub-tflops", 400.0)
    crash_at = int(_num(f, "stub-crash-at", 0))
    stall_at = int(_num(f, "stub-stall-at", 0))
    batch = int(_num(f, "global-batch-size", 64))
    save_dir = f.get("save") or f.get("load") or ""
    key = f"trainer/{ctx.namespace}/{save_dir}"
    world = ctx.group_size * ctx.gpus_per_node
    lines = [TimedLine(0.0, "> initializing torch distributed ...\n"),
             TimedLine(0.0, f"using world size: {world}, data-parallel size: {world}, "
                            "tensor-model-parallel size: 1, pipeline-model-parallel size: 1\n")]
    base = 0
    saved = ctx.state.get(f"{key}/step")
    if f.get("load") is not None and isinstance(saved, int) and saved > 0:
        base = saved
        lines += [TimedLine(startup / 2, f"loading distributed checkpoint from {save_dir} at "
                                         f"iteration {base}\n"),
                  TimedLine(startup, f"  successfully loaded checkpoint from {save_dir} "
                                     f"[ t 1/1, p 1/1 ] at iteration {base}\n")]
    lines.append(TimedLine(startup, "[before the start of training step] datetime: "
                                    "training ...\n"))
    crashed = bool(ctx.state.get(f"{key}/crashed"))
    t = startup
    for it in range(base + 1, total + 1):
        t += step_time
        if stall_at and it >= stall_at:
            return Program(name="trainer", duration=None, lines=tuple(lines))
        if crash_at and it == crash_at and not crashed:
            lines.append(TimedLine(t, f"[rank0]: RuntimeError: CUDA error: an illegal memory "
                                      f"access was encountered (iteration {it})\n",
                                   mark=f"{key}/crashed", value=True))
            lines.append(TimedLine(t, "[rank0]: Traceback (most recent call last): "
                                      "File \"pretrain_gpt.py\", line 242, in <module>\n"))
            return Program(name="trainer", duration=t, exit_code=1, reason="Error",
                           lines=tuple(lines))
        if it % interval == 0:
            lines.append(TimedLine(t, _step_line(it, total, step_time=step_time, tflops=tflops,
                                                 batch=batch)))
        if save_every and it % save_every == 0 and save_dir:
            lines.append(TimedLine(t, f"saving checkpoint at iteration {it:8d} to {save_dir} "
                                      "in torch_dist format\n"))
            t += save_time
            lines.append(TimedLine(t, f"  successfully saved checkpoint from iteration {it:8d} "
                                      f"to {save_dir} [ t 1/1, p 1/1 ]\n",
                                   mark=f"{key}/step", value=it))
    t += 1.0
    lines.append(TimedLine(t, "[after training is done] datetime: exiting program\n"))
    return Program(name="trainer", duration=t, lines=tuple(lines))
