"""``python -m bench soak``: the chaos soak (see :mod:`cre.testing.soak`), JSON on stdout.

``--runs`` runs (default 100) on the simulated cluster, each a Job or a Certification (about a
third) with a seeded mix of API faults, manager kills, leader failovers, deletions and NotReady
nodes; prints the runs (by tier), faults by kind,
invariant violations (target 0, every fault kind injected), p50/p99 time to verdict with and
without faults, and each violating run with its seed and journal. ``--replay SEED`` runs one
run again exactly (the seed printed with a failing run).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys

from cre.testing.soak import run_soak


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench soak", description=__doc__)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--seed", type=int, default=0, help="seed of the whole soak")
    p.add_argument("--replay", type=int, default=None, metavar="RUN_SEED",
                   help="run only the run with this seed (from a failing run's report)")
    p.add_argument("--time-scale", type=float, default=10.0,
                   help="simulated seconds per real second")
    p.add_argument("--outage-seconds", type=float, default=10.0)
    p.add_argument("--verdict-timeout", type=float, default=180.0)
    p.add_argument("--budget-seconds", type=float, default=None,
                   help="start no run after this long (a watchdog; reported as stuck)")
    args = p.parse_args()
    # SIGTERM ends the soak through its finally blocks: the stack's processes are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    report = run_soak(runs=args.runs, seed=args.seed, time_scale=args.time_scale,
                      outage_seconds=args.outage_seconds, verdict_timeout=args.verdict_timeout,
                      replay=args.replay, budget_seconds=args.budget_seconds)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
