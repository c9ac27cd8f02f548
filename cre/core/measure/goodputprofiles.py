"""The goodput LogProfile CRE ships: ``megatron-training``, for Megatron-LM / NeMo logs.

Megatron-LM (and NeMo, which runs it) prints one line per log interval::

     iteration       10/     200 | consumed samples:          640 | elapsed time per
     iteration (ms): 1000.0 | throughput per GPU (TFLOP/s/GPU): 400.0 | learning rate: ...

and around checkpoints ``saving checkpoint at iteration N to DIR in torch_dist format``,
``successfully saved checkpoint from iteration N to DIR [ t 1/1, p 1/1 ]``, ``loading
distributed checkpoint from DIR at iteration N`` and ``successfully loaded checkpoint from DIR
[ t 1/1, p 1/1 ] at iteration N``; a run starts with ``> initializing torch distributed ...``.
The profile reads worker 0 of the ``node`` replicated job (torch: every rank prints the same
lines), takes ``elapsed time per iteration (ms)`` as ``stepTiming`` (unit ms) and the
throughput as ``tflops``, and counts the first 20 iterations of each run as warm-up.
``deploy/logprofiles/megatron-training.yaml`` is this model serialised (a test keeps them
identical).
"""

from __future__ import annotations

from typing import Final

from cre.api.measurement import (
    LogPattern,
    LogPatterns,
    LogProfile,
    LogProfileSpec,
    TimestampSpec,
    TimeUnit,
    WorkerStrategy,
    WorkerStrategyType,
)
from cre.api.meta import ObjectMeta

MEGATRON_TRAINING: Final = "megatron-training"
STEP_REGEX: Final = (r"iteration\s+(?P<globalStep>\d+)/\s*\d+\s*\|.*?elapsed time per iteration "
                     r"\(ms\):\s*(?P<stepTiming>[\d.]+)(?:.*?throughput per GPU "
                     r"\(TFLOP/s/GPU\):\s*(?P<tflops>[\d.]+))?")
STEP_EXAMPLE: Final = (" iteration       10/     200 | consumed samples:          640 | elapsed "
                       "time per iteration (ms): 1000.0 | throughput per GPU (TFLOP/s/GPU): "
                       "400.0 | learning rate: 1.000000E-04 | global batch size:    64 |")


def megatron_profile() -> LogProfile:
    """The ``megatron-training`` LogProfile."""
    return LogProfile(
        metadata=ObjectMeta(name=MEGATRON_TRAINING, labels={"app.kubernetes.io/name": "cre"},
                            annotations={"cre.dev/description": (
                                "Megatron-LM / NeMo training: worker 0's log, iteration lines "
                                "with step time and TFLOP/s, checkpoint save and load lines")}),
        spec=LogProfileSpec(
            timestamp=TimestampSpec(layout="2006-01-02T15:04:05.999999999Z"),
            worker_strategy=WorkerStrategy(type=WorkerStrategyType.SINGLE,
                                           replicated_job_name="node"),
            warmup_steps=20,
            patterns=LogPatterns(
                training_step=LogPattern(regex=STEP_REGEX, example=STEP_EXAMPLE,
                                         units={"stepTiming": TimeUnit.MILLISECONDS}),
                checkpoint_save=LogPattern(
                    regex=r"saving checkpoint at iteration\s+(?P<globalStep>\d+)",
                    example="saving checkpoint at iteration      100 to /ckpt in torch_dist "
                            "format"),
                checkpoint_done=LogPattern(
                    regex=r"successfully saved checkpoint from iteration\s+(?P<globalStep>\d+)",
                    example="  successfully saved checkpoint from iteration      100 to /ckpt "
                            "[ t 1/1, p 1/1 ]"),
                checkpoint_restore=LogPattern(
                    regex=r"loading (?:distributed )?checkpoint from \S+ at iteration "
                          r"(?P<globalStep>\d+)",
                    example="loading distributed checkpoint from /ckpt at iteration 100"),
                checkpoint_loaded=LogPattern(
                    regex=r"successfully loaded checkpoint from \S+ .*at iteration "
                          r"(?P<globalStep>\d+)",
                    example="  successfully loaded checkpoint from /ckpt [ t 1/1, p 1/1 ] at "
                            "iteration 100"),
                application_start=LogPattern(
                    regex=r"^> initializing torch distributed",
                    example="> initializing torch distributed ..."),
            )))
