"""The soak's invariant checks on hand-made journals and audits: each one catches what it names
(a check that cannot fail would let the soak print 0 violations for nothing)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, cast

import pytest
import yaml

from cre.api.validate import validate
from cre.testing.soak import Soak
from cre.testing.soakreport import RunResult, percentile, summarize
from cre.testing.soaktiers import (
    BLIND_FAULTS,
    CERTIFICATION,
    FAULT_KINDS,
    NOT_READY_GRACE,
    TIERS,
    UNSEEN_REASONS,
    WORKLOAD_RUN,
    check,
    draw,
    failure_log_problem,
    manifest,
)

SHORT_SOAK_SEED = 319  # integration/e2e/test_e2e_soak.py

NS = "soak-c1"


def _v(resource: str, name: str, uid: str = "u1", group: str = "cre.dev",
       **status: Any) -> dict[str, Any]:
    return {"group": group, "resource": resource, "object": {
        "metadata": {"name": name, "namespace": NS, "uid": uid}, "status": status}}


def _create(resource: str, group: str = "cre.dev", code: int = 201) -> dict[str, Any]:
    return {"verb": "create", "group": group, "resource": resource, "namespace": NS,
            "code": code}


def _checked(versions: list[dict[str, Any]], audit: list[dict[str, Any]] | None = None, *,
             fail: bool = False, gap: bool = False) -> dict[str, str]:
    result = RunResult(run=0, seed=1, faults=[], expected="Succeeded", tier="Certification")
    check(result, namespace=NS, versions=versions, audit=audit or [], fail=fail,
          blind=gap)
    return result.violations


def test_a_clean_run_has_no_violation() -> None:
    versions = [_v("workflows", "w", phase="Running"), _v("workflows", "w", phase="Succeeded",
                                                          verdict="Passed"),
                _v("jobs", "j", phase="Succeeded"),
                _v("trainjobs", "j-workload", group="trainer.kubeflow.org")]
    audit = [_create("workflows"), _create("jobs"), _create("jobs", code=409),
             _create("trainjobs", group="trainer.kubeflow.org")]
    assert _checked(versions, audit) == {}


def test_a_name_created_twice_is_caught_by_uid_and_by_the_audit() -> None:
    twice = [_v("jobs", "j", uid="u1"), _v("jobs", "j", uid="u2")]
    assert "jobs/j" in _checked(twice)["single_create"]
    once = [_v("jobs", "j")]
    assert "jobs" in _checked(once, [_create("jobs"), _create("jobs")])["single_create"]


def test_a_lost_verdict_or_failure_log_is_a_regression() -> None:
    lost = [_v("certifications", "c", phase="Failed", verdict="Failed"),
            _v("certifications", "c", phase="Running")]
    message = _checked(lost)["no_regression"]
    assert "certifications/c lost its terminal phase" in message and "verdict" in message
    log = [_v("jobs", "j", failureLog={"podName": "j-launcher"}), _v("jobs", "j")]
    assert "lost its failureLog" in _checked(log)["no_regression"]
    other_uid = [_v("jobs", "j", uid="u1", phase="Failed"), _v("jobs", "j", uid="u2")]
    assert "no_regression" not in _checked(other_uid)


def test_failed_jobs_must_name_their_launcher() -> None:
    named = {"phase": "Failed", "failureClass": {"scope": "Workload"},
             "failureLog": {"podName": "x-workload-launcher-0-abc", "reason": "Error"}}
    gone = {"phase": "Failed", "failureClass": {"scope": "Workload"},
            "failureLog": {"reason": "PodNotFound"}}
    assert _checked([_v("jobs", "a", **named)], fail=True) == {}
    assert "a: failureLog names None" in _checked([_v("jobs", "a", **gone)], fail=True)[
        "failure_log"]
    assert _checked([_v("jobs", "a", **gone)], fail=True, gap=True) == {}


def test_failure_log_problem() -> None:
    workload = {"failureClass": {"scope": "Workload"}}
    assert failure_log_problem({**workload, "failureLog": {"podName": "j-launcher-x"}},
                               blind=False) == ""
    assert "with the manager watching" in failure_log_problem(
        {**workload, "failureLog": {"reason": "PodNotFound"}}, blind=False)
    assert failure_log_problem({**workload}, blind=True)  # no record at all
    assert failure_log_problem({**workload, "failureLog": {"reason": "NoTerminatedContainer"}},
                               blind=True) == ""
    assert failure_log_problem({"failureClass": {"scope": "Node"}}, blind=False) == ""


@pytest.mark.parametrize("reason", UNSEEN_REASONS)
def test_the_blind_excuse_needs_a_blind_manager(reason: str) -> None:
    """The loosened check: a record that says why no pod is named passes only when the manager
    was blind; with the manager watching, a failure that names no launcher is a violation,
    whatever its reason, and with or without a failureClass (no class counts as Workload)."""
    for status in ({"failureClass": {"scope": "Workload"}}, {}):
        unseen = {**status, "failureLog": {"reason": reason}}
        assert failure_log_problem(unseen, blind=True) == ""
        assert failure_log_problem(unseen, blind=False) == (
            f"failureLog names None (reason {reason!r}) with the manager watching")
        # A worker named instead of the launcher, or an excuse the blind rule does not know.
        worker = {**status, "failureLog": {"podName": "j-workload-node-0-0-x", "reason": reason}}
        assert failure_log_problem(worker, blind=False)
        other = {**status, "failureLog": {"podName": "j-workload-node-0-0-x", "reason": "Error"}}
        assert "after the manager was blind" in failure_log_problem(other, blind=True)
        assert failure_log_problem({**status}, blind=False)  # no record at all


def test_a_run_is_blind_only_after_a_blinding_fault_or_a_manager_exit() -> None:
    soak = Soak(cast(Any, None), time_scale=1.0, outage_seconds=1.0, verdict_timeout=1.0)
    seeing = RunResult(run=0, seed=1, faults=["latency", "conflict_storm", "watch_drops",
                                              "gone_http", "node_not_ready"], expected="Failed")
    assert not soak.blind(seeing)
    for fault in BLIND_FAULTS:
        assert soak.blind(RunResult(run=0, seed=1, faults=[fault], expected="Failed"))
    soak.exits_during_runs += 1  # a manager exited during this run (a lease lost)
    assert soak.blind(seeing)


def test_summary_figures() -> None:
    runs = [RunResult(run=i, seed=i, faults=["outage"] if i % 2 else [], expected="Succeeded",
                      seconds=float(i)) for i in range(10)]
    runs[3].violations["verdict"] = "timed out"
    report = summarize(runs, seed=7, fault_kinds=("outage", "latency"), retries={},
                       startup_exits=0, exits_during_runs=0)
    assert report["runs"] == 10
    assert report["faults_injected"] == {"outage": 5}
    assert report["fault_kinds_missing"] == ["latency"]
    # One violating run, and faults without a counted retry.
    assert report["violations"] == 2
    assert [r["seed"] for r in report["failing_runs"]] == [3]
    assert report["time_to_verdict_s"]["without_faults"] == {"p50": 4.0, "p99": 8.0, "runs": 5}
    assert percentile([], 50) == 0.0


def test_the_short_soak_draws_every_tier_and_fault() -> None:
    """The ten runs of the short soak's seed, drawn as :func:`run_soak` draws them: every
    tier (a WorkloadRun passing and one failing), every fault kind, a tier run deleted."""
    master = random.Random(SHORT_SOAK_SEED)
    plans = [draw(random.Random(master.randrange(1 << 31))) for _ in range(10)]
    assert Counter(p.tier for p in plans) == {"Job": 6, "Certification": 2, "WorkloadRun": 2}
    assert set(TIERS) == {p.tier for p in plans}
    assert {p.fail for p in plans if p.tier == "WorkloadRun"} == {True, False}
    assert any(p.deleted for p in plans if p.tier == "Certification")
    assert {k for p in plans for k in p.kinds} == set(FAULT_KINDS)


def test_tier_shares_over_many_runs() -> None:
    """About a third of the runs are tier runs, split evenly; a launcher failing while the
    manager is down is always a Job run."""
    plans = [draw(random.Random(s)) for s in range(3000)]
    shares = Counter(p.tier for p in plans)
    assert 0.12 < shares["WorkloadRun"] / 3000 < 0.2
    assert 0.12 < shares["Certification"] / 3000 < 0.2
    assert all(p.tier == "Job" for p in plans if "launcher_fails_while_down" in p.kinds)


def test_a_workload_run_checks_its_own_children() -> None:
    """A WorkloadRun's BandwidthMeasurements are created once; its lost phase is caught."""
    twice = [_v("bandwidthmeasurements", "m", uid="u1"),
             _v("bandwidthmeasurements", "m", uid="u2")]
    result = RunResult(run=0, seed=1, faults=[], expected="Succeeded", tier="WorkloadRun")
    check(result, namespace=NS, versions=twice, audit=[], fail=False, blind=False,
          kind=WORKLOAD_RUN)
    assert "bandwidthmeasurements/m" in result.violations["single_create"]
    lost = [_v("workloadruns", "r", phase="Failed"), _v("workloadruns", "r", phase="Running")]
    result = RunResult(run=0, seed=1, faults=[], expected="Failed", tier="WorkloadRun")
    check(result, namespace=NS, versions=lost, audit=[], fail=True, blind=False,
          kind=WORKLOAD_RUN)
    assert "workloadruns/r lost its terminal phase" in result.violations["no_regression"]


@pytest.mark.parametrize("kind", [CERTIFICATION, WORKLOAD_RUN], ids=lambda k: k.tier)
def test_every_tier_run_shortens_the_not_ready_grace(kind: Any) -> None:
    """The soak's Certification and WorkloadRun are valid objects that both set the NotReady
    grace the verdict wait allows for (the WorkloadRun no longer waits the default 300 s)."""
    doc = yaml.safe_load(manifest(kind, "r", NS))
    assert validate(doc) == []
    assert doc["spec"]["failurePolicy"] == {"nodeNotReadyGraceSeconds": NOT_READY_GRACE}
