"""The whole simulated chain (TrainJob -> pods -> logs) as a discrete-event run in memory."""

from __future__ import annotations

import re
from typing import Any

import pytest

from cre.testing.cluster.clock import DEFAULT_EPOCH
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.memory import MemoryCluster
from cre.testing.cluster.model import is_true
from cre.testing.cluster.profiles import get_profile
from cre.testing.cluster.program import Role
from cre.testing.cluster.stubs import Behaviour, Override
from cre.testing.cluster.workloads import memory_cluster, trainjob_finished

PROFILE = get_profile("aws-h100")
NODES = ["aws-h100-node-0", "aws-h100-node-1"]
TJ = "default/ar-workload"


def cluster(*, kai: bool = False) -> MemoryCluster:
    return memory_cluster(entry="communication/nccl-all-reduce", profile=PROFILE, kai=kai)


def config(*overrides: Override, **kw: Any) -> SimConfig:
    return SimConfig(profile=PROFILE, overrides=overrides, **kw)


def run(mc: MemoryCluster, cfg: SimConfig) -> float:
    """Simulated seconds until the TrainJob finished."""
    return mc.run(cfg, start=DEFAULT_EPOCH, until=trainjob_finished(TJ)) - DEFAULT_EPOCH


def _launcher_logs(mc: MemoryCluster) -> list[str]:
    return [text for (_ns, pod, c), text in sorted(mc.logs.items())
            if "launcher" in pod and c == "node"]


def test_pass_completes_the_trainjob_with_bandwidth_in_the_log() -> None:
    """An all_reduce run completes and the launcher log ends with the Avg bus bandwidth line."""
    mc = cluster()
    run(mc, config())
    assert is_true(mc.objects["trainjobs"][TJ], "Complete")
    assert all("# Avg bus bandwidth" in text for text in _launcher_logs(mc))


def test_bad_node_lowers_the_groups_bandwidth() -> None:
    """Marking one node bad lowers the Avg bus bandwidth the whole group reports."""
    def avg(mc: MemoryCluster) -> float:
        found = re.search(r"Avg bus bandwidth\s*: ([0-9.]+)", _launcher_logs(mc)[0])
        assert found
        return float(found.group(1))

    healthy, degraded = cluster(), cluster()
    run(healthy, config())
    run(degraded, config(node_bandwidth=((NODES[1], 0.4),)))
    assert avg(degraded) < 0.5 * avg(healthy)


def test_launcher_failure_fails_and_pods_are_deleted_half_a_second_later() -> None:
    """A failing launcher fails the TrainJob; its Job's pods are deleted 0.5 s after the failure."""
    mc = cluster()
    cfg = config(Override(behaviour=Behaviour.FAIL, role=Role.LAUNCHER, after=3, id="f"))
    t_fail = run(mc, cfg)
    assert is_true(mc.objects["trainjobs"][TJ], "Failed")
    launchers = [k for k in mc.objects["pods"] if "launcher" in k]
    assert launchers  # still there at the instant of failure
    assert any("Test NCCL failure" in text for text in _launcher_logs(mc))
    t_gone = mc.run(cfg, start=DEFAULT_EPOCH + t_fail, until=lambda m: not any(
        "launcher" in k for k in m.objects["pods"]), limit=2) - DEFAULT_EPOCH
    assert not [k for k in mc.objects["pods"] if "launcher" in k]
    assert t_gone - t_fail == pytest.approx(0.5)


def test_failed_job_pod_deletion_delay_is_configurable() -> None:
    """failedJobPodDeletionDelay 3 keeps the failed launcher pods for 3 simulated seconds."""
    mc = cluster()
    cfg = config(Override(behaviour=Behaviour.FAIL, role=Role.LAUNCHER, after=3, id="f"),
                 failed_job_pod_deletion_delay=3.0)
    t_fail = run(mc, cfg)
    t_gone = mc.run(cfg, start=DEFAULT_EPOCH + t_fail, until=lambda m: not any(
        "launcher" in k for k in m.objects["pods"]), limit=10) - DEFAULT_EPOCH
    assert t_gone - t_fail == pytest.approx(3.0)


def test_retry_after_backoff_succeeds() -> None:
    """One launcher failure is retried after the 10 s pod-failure backoff and then succeeds."""
    mc = cluster()
    took = run(mc, config(Override(behaviour=Behaviour.FAIL, role=Role.LAUNCHER, after=3,
                                   times=1, id="f")))
    assert is_true(mc.objects["trainjobs"][TJ], "Complete")
    job = mc.objects["jobs"]["default/ar-workload-launcher-0"]
    assert job["status"]["failed"] == 1
    assert took >= 3 + 10


def test_crashlooping_worker_is_bounded_by_the_worker_backoff_limit() -> None:
    """An sshd that keeps crashing restarts in place and fails the worker Job at backoffLimit."""
    mc = cluster()
    took = run(mc, config(Override(behaviour=Behaviour.CRASH, role=Role.WORKER, id="c")))
    assert is_true(mc.objects["trainjobs"][TJ], "Failed")
    node_job = mc.objects["jobs"]["default/ar-workload-node-0"]
    assert [c["reason"] for c in node_job["status"]["conditions"]] == [
        "BackoffLimitExceeded", "BackoffLimitExceeded"]
    assert took < 120
    assert any(key[1].startswith("ar-workload-node") for key in mc.previous_logs)


def test_kai_wait_for_workers_times_out_in_the_init_container() -> None:
    """Under KAI the launcher's wait-for-workers init gives up when workers never get Ready."""
    mc = cluster(kai=True)
    run(mc, config(Override(behaviour=Behaviour.NEVER_READY, role=Role.WORKER, id="n"),
                   wait_for_workers_timeout=60))
    assert is_true(mc.objects["trainjobs"][TJ], "Failed")
    init_logs = [t for (_ns, _p, c), t in mc.logs.items() if c == "wait-for-workers"]
    assert init_logs and all("gave up after 240 attempts" in t for t in init_logs)
    launcher = next(p for k, p in mc.objects["pods"].items() if "launcher" in k)
    assert launcher["status"]["phase"] == "Failed"
    init = launcher["status"]["initContainerStatuses"][-1]
    assert init["state"]["terminated"]["exitCode"] == 1
