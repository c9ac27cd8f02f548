"""Table tests for failure-log selection: every case the upstream launcher fail-fast PR settled."""

from __future__ import annotations

import pytest

from cre.core import failurelog as fl
from cre.core.observed import PodView
from cre.core.strategies import at, pod, tail, terminated

L1 = "j1-workload-launcher-0-0-aaaaa"
L2 = "j1-workload-launcher-0-0-bbbbb"
W0 = "j1-workload-node-0-0-ccccc"
W1 = "j1-workload-node-0-1-ddddd"


def _pick(pods: list[PodView], created_at: float | None = 0) -> str | None:
    created = at(created_at) if created_at is not None else None
    found = fl.failed_container_of(fl.eligible(pods, created))
    return None if found is None else f"{found.pod.name}/{found.container}"


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
