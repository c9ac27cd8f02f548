"""The short seeded chaos soak of ``make test``: 10 runs of :mod:`cre.testing.soak` at a fast
simulated clock (time scale 20, a 3 s outage); ``python -m bench soak`` is the long one."""

from __future__ import annotations

import json

from cre.testing.soak import FAULT_KINDS, run_soak


def test_short_seeded_soak_has_no_violations() -> None:
    report = run_soak(runs=10, seed=11, time_scale=20.0, outage_seconds=3.0,
                      verdict_timeout=120.0)
    assert report["runs"] == 10
    assert sum(report["faults_injected"].values()) > 0
    assert set(report["faults_injected"]) <= set(FAULT_KINDS)
    assert report["violations"] == 0, json.dumps(report["failing_runs"], indent=1)[:20_000]
