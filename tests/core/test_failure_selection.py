"""Table tests for failure-log selection: every case the upstream launcher fail-fast PR settled."""

from __future__ import annotations

from datetime import datetime

import pytest

from cre.core.common.observed import PodView
from cre.core.job import failurelog as fl
from cre.testing.strategies.job import T0, at, crashloop, pod, tail, terminated

L1 = "j1-workload-launcher-0-0-aaaaa"
L2 = "j1-workload-launcher-0-0-bbbbb"
W0 = "j1-workload-node-0-0-ccccc"
W1 = "j1-workload-node-0-1-ddddd"


def _pick(pods: list[PodView], created_at: float | None = 0) -> str | None:
    created = at(created_at) if created_at is not None else None
    found = fl.failed_container_of(fl.eligible(pods, created))
    if found is None:
        return None
    return f"{found.pod.name}/{found.container}" + ("@previous" if found.previous else "")


def _looping(name: str, *, finished: float, launcher: bool = False, exit_code: int = 1,
             reason: str = "Error", disruption: str | None = None,
             created: datetime = T0) -> PodView:
    """A pod whose container crashed (exit in ``lastState``) and now waits in back-off."""
    last = terminated(exit_code=exit_code, reason=reason, finished=at(finished))
    return pod(name, launcher=launcher, state=crashloop(), last_state=last, phase="Running",
               disruption=disruption, created=created)


CASES = [
    # (id, pods in the order the core lists them: launchers first, expected pod/container)
    ("first-attempt-over-replacement", [
        pod(L1, launcher=True, state=terminated(finished=at(10))),
        pod(L2, launcher=True, state=terminated(finished=at(25))),
    ], f"{L1}/node"),
    ("same-second-tie-picks-launcher", [
        pod(L1, launcher=True, state=terminated(finished=at(10))),
        pod(W0, state=terminated(exit_code=255, finished=at(10))),
    ], f"{L1}/node"),
    ("earlier-worker-wins-over-later-launcher", [
        pod(L1, launcher=True, state=terminated(finished=at(12))),
        pod(W0, state=terminated(finished=at(10))),
    ], f"{W0}/node"),
    ("previous-generation-ignored", [
        pod(L1, launcher=True, state=terminated(finished=at(5)), created=at(-30)),
        pod(L2, launcher=True, state=terminated(finished=at(20)), created=at(1)),
    ], f"{L2}/node"),
    ("disruption-target-true-ignored", [
        pod(L1, launcher=True, state=terminated(finished=at(5)), disruption="True"),
    ], None),
    ("disruption-target-false-not-ignored", [
        pod(L1, launcher=True, state=terminated(finished=at(5)), disruption="False"),
    ], f"{L1}/node"),
    ("replacement-over-disruption-target", [
        pod(L1, launcher=True, state=terminated(finished=at(5)), disruption="True"),
        pod(L2, launcher=True, state=terminated(finished=at(30))),
    ], f"{L2}/node"),
    ("init-container-failure-under-kai", [
        pod(L1, launcher=True, state=None, phase="Failed",
            init_state=terminated(finished=at(1200))),
        pod(W0, state=terminated(exit_code=143, finished=at(1201))),
    ], f"{L1}/wait-for-workers"),
    ("oomkilled-first", [
        pod(L1, launcher=True, state=terminated(finished=at(5))),
        pod(W1, state=terminated(exit_code=137, reason="OOMKilled", finished=at(50))),
    ], f"{W1}/node"),
    ("zero-exit-never-chosen", [
        pod(L1, launcher=True, state=terminated(exit_code=0, reason="Completed",
                                                finished=at(5))),
    ], None),
    # --- containers restarted in place: the last run's exit is only in lastState ---------
    ("crashloop-last-state-is-a-candidate", [
        pod(L1, launcher=True),
        _looping(W0, finished=20),
    ], f"{W0}/node@previous"),
    ("last-state-earlier-beats-later-current", [
        pod(L1, launcher=True, state=terminated(finished=at(30))),
        _looping(W0, finished=20),
    ], f"{W0}/node@previous"),
    ("current-earlier-beats-later-last-state", [
        pod(L1, launcher=True, state=terminated(finished=at(15))),
        _looping(W0, finished=20),
    ], f"{L1}/node"),
    ("last-state-same-second-tie-picks-launcher", [
        _looping(L1, launcher=True, finished=20),
        pod(W0, state=terminated(exit_code=255, finished=at(20))),
    ], f"{L1}/node@previous"),
    ("current-launcher-wins-tie-with-worker-last-state", [
        pod(L1, launcher=True, state=terminated(finished=at(20))),
        _looping(W0, finished=20),
    ], f"{L1}/node"),
    ("oomkilled-current-beats-earlier-last-state", [
        _looping(W0, finished=5),
        pod(W1, state=terminated(exit_code=137, reason="OOMKilled", finished=at(50))),
    ], f"{W1}/node"),
    ("oomkilled-last-state-beats-earlier-current", [
        pod(L1, launcher=True, state=terminated(finished=at(5))),
        _looping(W1, finished=50, exit_code=137, reason="OOMKilled"),
    ], f"{W1}/node@previous"),
    ("last-state-of-disruption-target-ignored", [
        _looping(W0, finished=5, disruption="True"),
    ], None),
    ("last-state-of-previous-generation-ignored", [
        _looping(W0, finished=5, created=at(-30)),
        pod(W1, state=terminated(finished=at(40))),
    ], f"{W1}/node"),
    ("zero-exit-last-state-never-chosen", [
        pod(W0, state=terminated(finished=at(40)),
            last_state=terminated(exit_code=0, reason="Completed", finished=at(5))),
    ], f"{W0}/node"),
    ("restarted-and-failed-again-records-the-first-run", [
        pod(W0, state=terminated(finished=at(40)), last_state=terminated(finished=at(25))),
    ], f"{W0}/node@previous"),
    ("running-again-after-a-crash-no-longer-counts", [
        pod(W0, last_state=terminated(exit_code=2, finished=at(25))),
    ], None),
    ("recovered-worker-not-named-over-later-launcher", [
        # sshd crashed once at start-up, restarted in place and runs again; the launcher that
        # failed later is the cause (even when the early capture missed it).
        pod(L1, launcher=True, state=terminated(finished=at(30))),
        pod(W0, last_state=terminated(exit_code=255, finished=at(2))),
    ], f"{L1}/node"),
    ("recovered-oomkilled-last-state-no-longer-counts", [
        pod(L1, launcher=True, state=terminated(finished=at(30))),
        pod(W1, last_state=terminated(exit_code=137, reason="OOMKilled", finished=at(2))),
    ], f"{L1}/node"),
    ("unknown-finish-sorts-last", [
        pod(L1, launcher=True, state=terminated(finished=None)),
        pod(W0, state=terminated(finished=at(99))),
    ], f"{W0}/node"),
]


@pytest.mark.parametrize(("pods", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_failed_container_selection(pods: list[PodView], expected: str | None) -> None:
    """The selection picks the container the upstream review settled on for each case."""
    assert _pick(pods) == expected


def test_workers_first_would_pick_the_worker_on_a_tie() -> None:
    """The tie is decided by listing order, so listing launchers first is what picks them."""
    launcher = pod(L1, launcher=True, state=terminated(finished=at(10)))
    worker = pod(W0, state=terminated(exit_code=255, finished=at(10)))
    assert _pick([worker, launcher]) == f"{W0}/node"


def test_fallback_reasons_explain_what_was_missing() -> None:
    """With no pods the record says PodNotFound, with pods but no failure NoTerminatedContainer."""
    assert fl.fallback(False).reason == "PodNotFound"
    assert "deleted before its logs" in fl.fallback(False).tail
    assert fl.fallback(True).reason == "NoTerminatedContainer"


def test_tail_is_trimmed_to_the_last_32_kib() -> None:
    """A long log keeps its last 32 KiB, cut on a character boundary."""
    text = "é" * 40000 + "END"
    trimmed = fl.trim_tail(text)
    assert trimmed.endswith("END")
    assert len(trimmed.encode()) <= 32768


def test_gone_pod_records_identity_and_explains() -> None:
    """A log read that failed still records pod, container, exit code and reason."""
    launcher = pod(L1, launcher=True, node="gpu-1", state=terminated(exit_code=3,
                                                                     finished=at(4)))
    failure = fl.failed_container_of([launcher])
    assert failure is not None
    record = fl.record(failure, tail(launcher, error=f'pods "{L1}" not found'))
    assert (record.pod_name, record.container_name, record.node_name, record.exit_code,
            record.reason) == (L1, "node", "gpu-1", 3, "Error")
    assert "could not be read" in record.tail and "not found" in record.tail


def test_kubelet_gone_body_counts_as_error() -> None:
    """Kubelet's 200 "unable to retrieve container logs" body is treated as a failed read."""
    launcher = pod(L1, launcher=True, state=terminated(finished=at(4)))
    failure = fl.failed_container_of([launcher])
    assert failure is not None
    record = fl.record(failure, tail(launcher, text="unable to retrieve container logs for "
                                                    "containerd://abc"))
    assert record.tail.startswith("the log of container")


def test_last_state_record_carries_its_own_termination() -> None:
    """A lastState candidate records its own exit code, reason and finishedAt, not the waiting
    state's, and says it is the previous run when its log could not be read."""
    looping = _looping(W0, finished=20, exit_code=7)
    failure = fl.failed_container_of([looping])
    assert failure is not None and failure.previous
    ok = fl.record(failure, tail(looping, text="sshd: fatal\n", previous=True))
    assert (ok.pod_name, ok.exit_code, ok.reason, ok.finished_at, ok.tail) == (
        W0, 7, "Error", at(20), "sshd: fatal\n")
    gone = fl.record(failure, tail(looping, error="not found", previous=True))
    assert gone.tail.startswith("the log of previous run of container 'node'")
