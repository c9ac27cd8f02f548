"""The short seeded chaos soak: 10 runs of :mod:`cre.testing.soak` at a fast simulated clock
(time scale 20, a 3 s outage); ``python -m bench soak`` is the long one.

Seed 319 is the soak's whole seed: its ten runs inject every fault kind, fail and pass Jobs and
WorkloadRuns, fail a Certification and delete a Job and a Certification mid-run (chosen once by
drawing the runs of seeds 0-2999 and keeping one with the widest coverage; the draw is
deterministic, so the runs are the same on every machine, and
``tests/cluster/test_soak_checks.py`` proves from the draw alone that these ten runs hold every
tier: 6 Jobs, 2 Certifications, 2 WorkloadRuns). Nothing here is timed: the soak's waits are
bounded and a soak that cannot progress ends with ``stuck`` naming the run and its seed (its
budget is a watchdog against hanging ``make test``, not a performance figure).
"""

from __future__ import annotations

import json

from cre.testing.soak import FAULT_KINDS, run_soak

SEED = 319


def test_short_seeded_soak_has_no_violations() -> None:
    report = run_soak(runs=10, seed=SEED, time_scale=20.0, outage_seconds=3.0,
                      verdict_timeout=120.0, budget_seconds=1800.0)
    failing = json.dumps(report["failing_runs"], indent=1)[:20_000]
    assert not report["stuck"], f"{report['stuck']}\n{failing}"
    assert report["runs"] == 10
    assert report["fault_kinds_missing"] == [], report["faults_injected"]
    assert set(report["faults_injected"]) == set(FAULT_KINDS)
    assert report["runs_by_tier"] == {"Job": 6, "Certification": 2, "WorkloadRun": 2}, (
        report["runs_by_tier"])
    assert report["violations"] == 0, failing
    assert report["manager_retry_metrics"].get("workqueue_retries_total", 0) > 0
