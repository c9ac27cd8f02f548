"""The simulator against the real Job controller and kube-scheduler, per scenario golden.

Each scenario runs on the session's real kube-apiserver twice: with the full simulator, and
with the upstream Job controller and kube-scheduler in place of the simulated ones. What CRE
observes (per-object state sequences) and the golden output must be equal, or differ only
where :mod:`cre.testing.controlplane.sequence_allowlist` says why. Also unit tests of the
recording and comparison (no server needed), so the harness itself can fail.
"""

from __future__ import annotations

import json

import pytest

from cre.api.watch import WatchEventType
from cre.testing.cluster.engine import ROLES, parse_roles
from cre.testing.controlplane import ControlPlane
from cre.testing.controlplane.pytest_fixtures import workloads_or_skip
from cre.testing.controlplane.sequence_allowlist import ALLOWED, ALLOWED_WITH_WORKLOADS, Allowed
from cre.testing.controlplane.sequences import (
    SKIPS,
    Recorder,
    compare,
    compare_scenarios,
    rename,
    workload_plane,
)

# Two scenarios keep the test near two minutes (both run at scale 1, twice); the CLI
# (`python -m cre.testing.controlplane scenarios`) runs every one.
IN_TEST = ("workload-failed", "retry-success")


def _pod(name: str, prefix: str, uid: str, phase: str, *,
         deleting: bool = False) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "generateName": prefix, "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase, "conditions": [
        {"type": "Ready", "status": "False", "reason": "PodFailed",
         "lastTransitionTime": "x"}]}}


def test_recorder_normalises_names_and_collapses_states() -> None:
    rec = Recorder()
    first = _pod("j-0-abcde", "j-0-", "u1", "Running")
    rec.observe("Pod", WatchEventType.ADDED, first)
    rec.observe("Pod", WatchEventType.MODIFIED, first)  # same state: collapsed
    rec.observe("Pod", WatchEventType.MODIFIED, _pod("j-0-abcde", "j-0-", "u1", "Failed",
                                                     deleting=True))
    rec.observe("Pod", WatchEventType.DELETED, first)
    rec.observe("Pod", WatchEventType.ADDED, _pod("j-0-zzzzz", "j-0-", "u2", "Pending"))
    assert list(rec.sequences) == ["Pod/j-0-#1", "Pod/j-0-#2"]
    assert rec.sequences["Pod/j-0-#1"] == [
        {"conditions": [["Ready", "False", "PodFailed"]], "phase": "Running"},
        {"conditions": [["Ready", "False", "PodFailed"]], "phase": "Failed", "deleting": True},
        "DELETED"]
    assert rename({"log": "j-0-zzzzz: failed", "n": ["j-0-abcde"]}, rec.aliases) == {
        "log": "j-0-#2: failed", "n": ["j-0-#1"]}


def test_compare_reports_allowed_and_differing() -> None:
    a = ({"Job/x": [{"conditions": []}]}, {"collected": [{"v": 1}]})
    b = ({"Job/x": [{"conditions": []}, "DELETED"]}, {"collected": [{"v": 2}]})
    assert compare("s", a, a, []) == ("equal", ())
    verdict, diffs = compare("s", a, b, [])
    assert verdict == "differing" and [d.obj for d in diffs] == ["Job/x", "collected[0].v"]
    allow = [Allowed("s", "Job/*", "sequence", "because"),
             Allowed("*", "collected*", "collected", "also")]
    verdict, diffs = compare("s", a, b, allow)
    assert verdict == "allowed" and [d.reason for d in diffs] == ["because", "also"]
    assert compare("other", a, b, allow[:1])[0] == "differing"


def test_roles_are_checked() -> None:
    assert parse_roles("trainer, jobset,kubelet") == {"trainer", "jobset", "kubelet"}
    assert set(ROLES) == {"trainer", "jobset", "job", "scheduler", "nodelifecycle", "kubelet"}
    with pytest.raises(ValueError,
                       match=r"--roles: unknown simulated controller\(s\) \['kubelets'\]"):
        parse_roles("kubelets", where="--roles")


def test_scenarios_agree_with_the_real_controllers(real_control_plane: ControlPlane) -> None:
    results = compare_scenarios(real_control_plane, [*IN_TEST, "api-faults"])
    by_name = {r.scenario: r for r in results}
    assert by_name["api-faults"].verdict == "skipped"
    assert by_name["api-faults"].skip_reason == SKIPS["api-faults"]
    unexplained = {r.scenario: [d for d in r.differences if not d.reason] for r in results}
    assert all(not d for d in unexplained.values()), json.dumps(
        {k: [str(d) for d in v] for k, v in unexplained.items()}, indent=1)[:6000]
    assert all(by_name[n].verdict in ("equal", "allowed") for n in IN_TEST)


def test_pass_agrees_with_the_real_jobset_and_trainer() -> None:
    """The pass scenario with the real JobSet v0.11.1 and Trainer v2.2.0 too (the simulator
    plays only node lifecycle and kubelets): nothing differs without a reason, and the
    scenario whose timeline waits for JobSet to delete a failed launcher's pods is skipped."""
    workloads_or_skip()
    with workload_plane() as plane:
        results = compare_scenarios(plane, ["pass", "workload-failed"], workloads=True)
    by_name = {r.scenario: r for r in results}
    assert by_name["workload-failed"].verdict == "skipped"
    assert "JobSet v0.11.1 keeps" in by_name["workload-failed"].skip_reason
    unexplained = [str(d) for d in by_name["pass"].differences if not d.reason]
    assert not unexplained, unexplained
    assert by_name["pass"].verdict in ("equal", "allowed")


def test_a_pod_deleted_only_by_the_simulator_is_its_own_difference() -> None:
    """The same states, then deleted in run A only (the simulated JobSet's deletion of a failed
    launcher's pods): allowed with the real JobSet, not without it; any other change of the
    states stays a ``sequence`` difference."""
    failed = {"phase": "Failed"}
    a = {"Pod/j-launcher-0-#1": [{"phase": "Running"}, failed, {**failed, "deleting": True},
                                 "DELETED"]}
    kept = {"Pod/j-launcher-0-#1": [{"phase": "Running"}, failed]}
    verdict, diffs = compare("s", (a, {}), (kept, {}), ALLOWED_WITH_WORKLOADS)
    assert verdict == "allowed" and {d.where for d in diffs} == {"deleted-only-simulated"}
    verdict, _ = compare("s", (a, {}), (kept, {}), ALLOWED)
    assert verdict == "differing"
    other = {"Pod/j-launcher-0-#1": [{"phase": "Running"}, {"phase": "Succeeded"}]}
    verdict, diffs = compare("s", (a, {}), (other, {}), ALLOWED_WITH_WORKLOADS)
    assert verdict == "differing" and {d.where for d in diffs} == {"sequence"}


def test_swapped_pods_of_one_job_are_placement() -> None:
    """Two pods of one Job whose sequences swapped indexes are a placement difference; a
    sequence neither run had is not."""
    a = {"Pod/j-0-#1": [{"phase": "Running"}], "Pod/j-1-#1": [{"phase": "Failed"}]}
    b = {"Pod/j-0-#1": [{"phase": "Failed"}], "Pod/j-1-#1": [{"phase": "Running"}]}
    allow = [Allowed("*", "Pod/*", "placement", "nodes")]
    verdict, diffs = compare("s", (a, {}), (b, {}), allow)
    assert verdict == "allowed" and {d.where for d in diffs} == {"placement"}
    c = {"Pod/j-0-#1": [{"phase": "Failed"}], "Pod/j-1-#1": [{"phase": "Pending"}]}
    verdict, diffs = compare("s", (a, {}), (c, {}), allow)
    assert verdict == "differing" and {d.where for d in diffs} == {"sequence"}


def test_pod_shapes_mask_uids_and_report_what_differs() -> None:
    """A pod's shape keeps what its Job controller wrote (uids masked, node left out)."""
    pod = {"metadata": {"name": "j-0-abcde", "generateName": "j-0-", "uid": "u1",
                        "labels": {"controller-uid": "0e0b6f7e-1f5a-4a35-9c1a-6f1d2b3c4d5e"},
                        "finalizers": ["batch.kubernetes.io/job-tracking"]},
           "spec": {"nodeName": "n1", "hostname": "j-0"}, "status": {"phase": "Pending"}}
    rec = Recorder()
    rec.observe("Pod", WatchEventType.ADDED, pod)
    shape = rec.shapes["Pod/j-0-#1"]
    assert shape["labels"] == {"controller-uid": "<uid>"} and shape["spec"] == {"hostname": "j-0"}
    other = {**shape, "spec": {"hostname": "j-0", "subdomain": "s"}}
    verdict, diffs = compare("s", ({}, {}), ({}, {}), [],
                             shapes=({"Pod/j-0-#1": shape}, {"Pod/j-0-#1": other}))
    assert verdict == "differing" and [(d.where, d.obj) for d in diffs] == [
        ("shape", "Pod/j-0-#1:spec.subdomain")]
