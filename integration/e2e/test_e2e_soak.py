"""The short seeded chaos soak: 10 runs of :mod:`cre.testing.soak` at a fast simulated clock
(time scale 20, a 3 s outage); ``python -m bench soak`` is the long one.

Opt-in (``CRE_SOAK=1``, or ``make soak``) until it is confirmed to pass and to be quick: on
2026-12-01 a run stalled with no manager process alive (a driver restart path), so it is not yet
part of ``make test``. The soak's pieces (audit, RBAC, faults, invariants) are tested elsewhere."""

from __future__ import annotations

import json
import os

import pytest

from cre.testing.soak import FAULT_KINDS, run_soak


@pytest.mark.skipif(os.environ.get("CRE_SOAK") != "1",
                    reason="the short soak is opt-in until it is confirmed: CRE_SOAK=1 / make soak")
def test_short_seeded_soak_has_no_violations() -> None:
    report = run_soak(runs=10, seed=11, time_scale=20.0, outage_seconds=3.0,
                      verdict_timeout=120.0)
    assert report["runs"] == 10
    assert sum(report["faults_injected"].values()) > 0
    assert set(report["faults_injected"]) <= set(FAULT_KINDS)
    assert report["violations"] == 0, json.dumps(report["failing_runs"], indent=1)[:20_000]
