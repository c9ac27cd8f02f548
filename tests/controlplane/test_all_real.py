"""CRE's Job tier end to end on the all-real stack: no simulator between CRE and the cluster.

etcd + kube-apiserver + kube-controller-manager + kube-scheduler + KWOK (two fake ``aws-h100``
nodes whose kubelet log side is :class:`~cre.testing.cluster.kubelet_logs.KubeletLogs`)
+ the real JobSet v0.11.1 and Trainer v2.2.0 controllers, with CRE's Job controller on top.
The rendered MPI all-reduce Job and its TrainingRuntime (``goldens/render``) run twice, the
launcher's pod template annotated for KWOK: exit 0 after 3 s (the CRE Job Succeeds), exit 1
(the CRE Job Fails and ``status.failureLog`` carries the launcher's log, read through
kube-apiserver's pod-log proxy). Waits are generous safety nets; nothing asserts a duration.
Skips with the reason where the plane, KWOK or the workload controllers are unavailable.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from cre.testing.controlplane.allreal import Stack, Timeline, logging_nodes
from cre.testing.controlplane.allreal_run import Rendered, RunResult, run_job
from cre.testing.controlplane.build import REPO
from cre.testing.procs import Stack as Processes
from tests.controlplane.allreal_stack import all_real_stack

GOLDEN = REPO / "goldens" / "render" / "all-reduce-aws-h100.json"
NODES = ("node-01", "node-02")  # the nodes the rendered Job's affinity names
FAILURE = "NCCL INFO Bootstrap : Using eth0\nNCCL WARN NET/OFI Unable to connect\n" \
          "mpirun detected that one or more processes exited with non-zero status\n"
LIMIT = 600.0


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from all_real_stack()


def _run(stack: Stack, namespace: str, *, exit_code: int, in_process: bool = True
         ) -> RunResult:
    rendered = Rendered.load(GOLDEN)

    async def scenario() -> RunResult:
        async with logging_nodes(stack.plane, NODES) as backend:
            return await run_job(backend, rendered, namespace=namespace, exit_code=exit_code,
                                 run_seconds=3, log_text=lambda pod: FAILURE, limit=LIMIT,
                                 settle=5.0, in_process=in_process, until=_workers_gone)

    result: RunResult = anyio.run(scenario)
    return result


def _workers_gone(timeline: Timeline) -> bool:
    """JobSet's foreground deletion of the worker Job went through (GC, KWOK)."""
    return any(c.kind == "BatchJob" and c.name.endswith("-node-0") and c.state == "deleted"
               for c in timeline.changes)


def _states(result: RunResult, kind: str, name_part: str) -> list[str]:
    return [c.state for c in result.timeline.changes if c.kind == kind and name_part in c.name]


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def test_launcher_exits_zero_job_succeeds(stack: Stack) -> None:
    result = _run(stack, "allreal-pass", exit_code=0)
    assert result.outcome() == "Succeeded", result.timeline.render(result.started)
    assert "failureLog" not in result.job["status"]
    # the whole chain ran for real: launcher pod Succeeded, its Job Complete, the JobSet
    # Completed, the TrainJob Complete; the still-running workers' Job deleted by JobSet
    assert "Succeeded,bound" in _states(result, "Pod", "-launcher-")
    assert "Complete" in _states(result, "BatchJob", "-launcher-0")
    assert "Completed" in _states(result, "JobSet", "")
    assert "Complete" in _states(result, "TrainJob", "")
    assert "deleted" in _states(result, "BatchJob", "-node-0")


def test_launcher_failure_is_captured_through_the_log_proxy(stack: Stack) -> None:
    _check_failure(_run(stack, "allreal-fail", exit_code=1))


def test_launcher_failure_with_cre_manager_as_a_process(stack: Stack) -> None:
    """The same failure with ``cre-manager`` (every tier, as deployed) as a separate process
    instead of the in-process Job controller."""
    with Processes() as procs:
        shutil.copy(stack.plane.kubeconfig, procs.kubeconfig)
        manager = procs.start_manager(timeout=120.0)
        result = _run(stack, "allreal-manager", exit_code=1, in_process=False)
        manager.check_alive()
    _check_failure(result)


def _check_failure(result: RunResult) -> None:
    timeline = "\n".join(result.timeline.render(result.started))
    assert result.outcome() == "Failed", timeline
    record = result.job["status"]["failureLog"]
    launchers = sorted({c.name.split("/")[1] for c in result.timeline.changes
                        if c.kind == "Pod" and "-launcher-" in c.name})
    assert record["podName"] in launchers, timeline
    assert record["containerName"] == "node"
    assert record["exitCode"] == 1 and record["reason"] == "Error"
    assert record["nodeName"] in NODES
    assert record["tail"] == FAILURE  # served by the fake kubelet, through kube-apiserver
    # the real chain: launcher Job Failed (backoffLimit 1: two launcher pods), JobSet and
    # TrainJob Failed, the workers' Job deleted
    assert len(launchers) == 2, timeline
    assert "Failed" in _states(result, "BatchJob", "-launcher-0")
    assert "Failed" in _states(result, "JobSet", "")
    assert "Failed" in _states(result, "TrainJob", "")
    assert "deleted" in _states(result, "BatchJob", "-node-0")
    reason = _condition(result.job, "Failed")
    assert reason["status"] == "True"
    # JobSet v0.11.1 without a failure policy keeps the failed launcher Job and its pods (the
    # simulator deletes them 0.5 s after the exit, as the reference measured on its cluster)
    assert "deleted" not in _states(result, "BatchJob", "-launcher-0"), timeline
    assert not any(s.endswith("deleting") or s == "deleted"
                   for s in _states(result, "Pod", "-launcher-")), timeline
