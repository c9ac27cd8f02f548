"""Goodput benchmark: training-log parse-and-fold throughput (JSON on stdout).

A GoodputMeasurement reads worker 0's training log every ``sampleInterval`` and folds the new
lines into its status; a long Megatron run with debug chatter writes hundreds of megabytes, so
the parser (the ``megatron-training`` profile's seven patterns tried in order) and the fold
bound how cheaply a manager follows many runs. The generated log mixes kubelet timestamps,
iteration lines with step time and TFLOP/s, checkpoint save/done lines every 500 iterations and
unmatched chatter (``--noise`` lines per iteration line, default 4), to ``--mb`` megabytes
(default 20). Reported, best of ``--rounds``: MB/s and lines/s of parsing alone
(:meth:`cre.core.measure.goodputlog.GoodputParser.parse` on every line) and of parse + fold in
2000-line windows as provisional samples deliver them (:func:`cre.core.measure.goodputfold.fold`,
then :func:`cre.core.measure.goodputfold.summarise` per window), plus the final goodput ratio (a
check that the work was real: every run of the same log gives the same figure).

Usage: ``python -m bench goodput [--mb 20] [--rounds 3] [--noise 4]``
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from cre.api.goodput import GoodputMeasurementStatus
from cre.core.measure import goodputfold as G
from cre.core.measure.goodputlog import compile_goodput_profile
from cre.core.measure.goodputprofiles import megatron_profile

T0 = datetime(2026, 12, 1, tzinfo=UTC)
WINDOW = 2000


def _stamp(ms: int) -> str:
    when = T0 + timedelta(milliseconds=ms)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond * 1000:09d}Z "


def lines(mb: float, noise: int) -> Iterator[str]:
    """The generated log, line by line, until ``mb`` megabytes."""
    budget = int(mb * 1024 * 1024)
    written = 0
    ms = 0
    it = 0
    first = _stamp(0) + "> initializing torch distributed ...\n"
    written += len(first)
    yield first
    while written < budget:
        it += 10
        ms += 10_000
        for k in range(noise):
            chatter = (f"{_stamp(ms - 5000 + k)}[rank{k}]:[W1201 10:00:00.000 ProcessGroupNCCL"
                       f".cpp:1234] Warning: NCCL watchdog heartbeat {it}\n")
            written += len(chatter)
            yield chatter
        line = (f"{_stamp(ms)} iteration {it:8d}/ 9999999 | consumed samples: {it * 64:12d} | "
                "elapsed time per iteration (ms): 1000.0 | throughput per GPU (TFLOP/s/GPU): "
                "412.5 | learning rate: 1.000000E-04 | global batch size:    64 | lm loss: "
                "2.345678E+00 | loss scale: 1.0 | grad norm: 0.987 |\n")
        written += len(line)
        yield line
        if it % 500 == 0:
            for text in (f"saving checkpoint at iteration {it:8d} to /ckpt in torch_dist "
                         "format", f"  successfully saved checkpoint from iteration {it:8d} "
                         "to /ckpt [ t 1/1, p 1/1 ]"):
                out = _stamp(ms) + text + "\n"
                written += len(out)
                yield out
                ms += 3000  # the save takes 3 s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--noise", type=int, default=4)
    args = ap.parse_args()
    parser = compile_goodput_profile(megatron_profile())
    log = list(lines(args.mb, args.noise))
    size = sum(len(line) for line in log) / (1024 * 1024)
    parse_best = fold_best = float("inf")
    ratio = None
    for _ in range(args.rounds):
        start = time.perf_counter()
        for line in log:
            parser.parse(line)
        parse_best = min(parse_best, time.perf_counter() - start)
        start = time.perf_counter()
        status = GoodputMeasurementStatus()
        for i in range(0, len(log), WINDOW):
            events = [e for e in map(parser.parse, log[i:i + WINDOW]) if e is not None]
            status = G.summarise(G.fold(status, events, pod_uid="worker-0",
                                        warmup_steps=parser.warmup_steps))
        fold_best = min(fold_best, time.perf_counter() - start)
        ratio = status.result
    print(json.dumps({
        "benchmark": "goodput",
        "log_mb": round(size, 1),
        "lines": len(log),
        "parse_mb_per_s": round(size / parse_best, 1),
        "parse_lines_per_s": round(len(log) / parse_best),
        "parse_fold_mb_per_s": round(size / fold_best, 1),
        "parse_fold_lines_per_s": round(len(log) / fold_best),
        "window_lines": WINDOW,
        "goodput_ratio": ratio,
    }, indent=2))


if __name__ == "__main__":
    main()
