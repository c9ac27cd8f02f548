"""``python -m bench cli``: how long the ``cre`` command takes to answer, JSON on stdout.

A person types ``cre --help`` and presses TAB; both must answer at once (target < 300 ms), so
``cre.cli.app`` loads only click and the command that runs imports what it needs. Each case is
the median (and min/max) wall time of ``--runs`` fresh processes:

* ``help``: ``cre --help``; ``completion_command`` / ``completion_entry``: what bash runs on TAB
  after ``cre re`` and after ``cre render communication/nccl-all-r`` (the catalog loads);
* ``eager_imports`` (the "before" column): a process importing every module ``cre.cli.app``
  loaded at start-up before the lazy imports (the API models, the core, kubernetes-asyncio,
  rich, jsonschema), i.e. what every invocation used to pay;
* ``python``: an empty interpreter, the floor.

``import_ms`` is ``python -X importtime`` of ``cre.cli.app`` (cumulative, ms): what the lazy
layout saves, without process start-up noise; ``help_modules`` counts the modules loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

TARGET_MS = 300.0
EAGER = ("import cre.api, cre.core, cre.catalog, cre.cli.app, cre.cli.cluster, cre.cli.render, "
         "cre.core.certification.report, cre.cli.session, cre.cli.status, cre.cli.htmlreport, "
         "cre.cli.validate, rich.live, rich.table, anyio")


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "100", **(extra or {})}
    env.pop("CRE_DEBUG", None)
    return env


def timed(argv: Sequence[str], *, runs: int, env: Mapping[str, str] | None = None
          ) -> dict[str, float]:
    """Median, min and max wall milliseconds of ``runs`` processes (one warm-up first)."""
    samples = []
    for i in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(list(argv), env=_env(env), capture_output=True, check=True, timeout=120)
        if i:  # the first run warms the page cache and the .pyc files
            samples.append((time.perf_counter() - start) * 1000)
    return {"median_ms": round(statistics.median(samples), 1),
            "min_ms": round(min(samples), 1), "max_ms": round(max(samples), 1)}


def import_ms(module: str) -> float:
    """Cumulative import time of ``module`` in a fresh process, from ``-X importtime``."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                            env=_env(), capture_output=True, text=True, check=True, timeout=120)
    for line in reversed(result.stderr.splitlines()):
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] == module:
            return round(int(parts[1]) / 1000, 1)
    raise RuntimeError(f"{module} not in -X importtime output")


def help_modules() -> int:
    """How many modules a process that ran ``cre --help`` holds."""
    code = ("import sys; from cre.cli.app import main; main(['--help']); "
            "print(len(sys.modules), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True,
                            text=True, check=True, timeout=120)
    return int(result.stderr.strip().splitlines()[-1])


def _complete(words: str, cword: int) -> dict[str, str]:
    return {"_CRE_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(cword)}


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench cli", description=__doc__)
    p.add_argument("--runs", type=int, default=7, help="processes per case (median reported)")
    args = p.parse_args()
    cre = [sys.executable, "-m", "cre.cli"]
    cases = {
        "python": timed([sys.executable, "-c", "pass"], runs=args.runs),
        "help": timed([*cre, "--help"], runs=args.runs),
        "completion_command": timed(cre, runs=args.runs, env=_complete("cre re", 1)),
        "completion_entry": timed(cre, runs=args.runs, env=_complete(
            "cre render communication/nccl-all-r", 2)),
        "eager_imports": timed([sys.executable, "-c", EAGER], runs=args.runs),
    }
    report = {
        "benchmark": "cli",
        "runs": args.runs,
        "target_ms": TARGET_MS,
        "cases": cases,
        "before_after": {
            "before_eager_imports_ms": cases["eager_imports"]["median_ms"],
            "after_help_ms": cases["help"]["median_ms"],
        },
        "help_under_target": cases["help"]["median_ms"] < TARGET_MS,
        "completion_under_target": max(cases["completion_command"]["median_ms"],
                                       cases["completion_entry"]["median_ms"]) < TARGET_MS,
        "import_ms": {"cre.cli.app": import_ms("cre.cli.app"),
                      "cre.cli.cluster": import_ms("cre.cli.cluster")},
        "help_modules": help_modules(),
    }
    print(json.dumps(report, indent=2))
