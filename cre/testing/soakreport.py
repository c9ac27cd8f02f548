"""The chaos soak's report: runs, faults by kind, violations by check, time to verdict.

The JSON ``python -m bench soak`` prints (see :mod:`cre.testing.soak`): every figure the issue
asks for, and each violating run with its seed and the journal of its objects' versions so it
can be replayed (``--replay SEED``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import attrs


@attrs.define
class RunResult:
    """One soak run as the report counts it: its seed, faults, outcome and violated checks."""

    run: int
    seed: int
    faults: list[str]
    expected: str
    tier: str = "Job"
    phase: str = ""
    seconds: float = 0.0
    violations: dict[str, str] = attrs.field(factory=dict)
    journal: list[dict[str, Any]] = attrs.field(factory=list)


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))], 2)


def summarize(results: list[RunResult], *, seed: int, fault_kinds: Sequence[str],
              retries: dict[str, float], startup_exits: int,
              exits_during_runs: int) -> dict[str, Any]:
    """The soak's JSON report from its runs and the manager's retry metrics."""
    faults = Counter(k for r in results for k in r.faults)
    with_faults = [r.seconds for r in results if r.faults]
    without = [r.seconds for r in results if not r.faults]
    api_faults = sum(faults[k] for k in fault_kinds[:8])
    checks = {"retries": "" if not api_faults or sum(retries.values()) > 0
              else "faults were injected but no retry was counted"}
    violating = [r for r in results if r.violations]
    return {
        "benchmark": "soak", "seed": seed, "runs": len(results),
        "faults_injected": dict(sorted(faults.items())),
        "fault_kinds_missing": sorted(set(fault_kinds) - set(faults)),
        "violations": sum(len(r.violations) for r in results) + sum(bool(v)
                                                                   for v in checks.values()),
        "violations_by_check": dict(Counter(c for r in results for c in r.violations)),
        "soak_checks": checks,
        "time_to_verdict_s": {"with_faults": {"p50": percentile(with_faults, 50),
                                              "p99": percentile(with_faults, 99),
                                              "runs": len(with_faults)},
                              "without_faults": {"p50": percentile(without, 50),
                                                 "p99": percentile(without, 99),
                                                 "runs": len(without)}},
        "manager_retry_metrics": retries,
        # Managers that exited while starting during injected faults (restarted, as the
        # Deployment restarts its pod).
        "manager_startup_exits": startup_exits,
        # Managers that exited while running (a lease lost in an outage): restarted likewise.
        "manager_exits_during_runs": exits_during_runs,
        "runs_by_tier": dict(Counter(r.tier for r in results)),
        "failing_runs": [{"run": r.run, "seed": r.seed, "tier": r.tier, "faults": r.faults,
                          "expected": r.expected, "phase": r.phase,
                          "violations": r.violations, "journal": r.journal}
                         for r in violating],
        "replay": "python -m bench soak --replay <seed>",
    }
