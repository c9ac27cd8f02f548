"""The upstream launcher fail-fast rules, checked on rendered objects."""

from __future__ import annotations

import attrs
import pytest

from cre.api import labels as L
from cre.api.common import GangSchedulerSpec
from cre.render import FAIL_FAST_RULE, GangScheduler, RenderOptions

from .helpers import by_kind, patches, render, rjob

MPI = [
    "communication/nccl-all-reduce",
    "communication/nccl-all-gather",
    "communication/nccl-alltoall",
]
SINGLE = [
    "communication/nccl-loopback",
    "communication/nccl-loopback-nvswitch",
    "diagnostics/dcgm-level1",
    "diagnostics/dcgm-level4",
]
RULE = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


@pytest.mark.parametrize("entry", MPI)
def test_mpi_launcher_fails_fast(entry: str) -> None:
    """Launcher: Never, backoffLimit 1, the DisruptionTarget Ignore rule with status True."""
    launcher = rjob(render(entry), "launcher")["template"]["spec"]
    assert launcher["template"]["spec"]["restartPolicy"] == "Never"
    assert launcher["backoffLimit"] == 1
    assert launcher["podFailurePolicy"] == {"rules": [RULE]}
    assert FAIL_FAST_RULE == RULE


@pytest.mark.parametrize("entry", MPI)
def test_mpi_workers_stay_on_failure_with_bounded_backoff(entry: str) -> None:
    """Workers keep OnFailure with backoffLimit 3 by default (below Kubernetes' 6)."""
    worker = rjob(render(entry), "node")["template"]["spec"]
    assert worker["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert worker["backoffLimit"] == 3
    assert "podFailurePolicy" not in worker


def test_worker_backoff_limit_is_configurable() -> None:
    """The worker backoffLimit follows the option."""
    docs = render(MPI[0], options=RenderOptions(worker_backoff_limit=1))
    assert rjob(docs, "node")["template"]["spec"]["backoffLimit"] == 1


@pytest.mark.parametrize("entry", SINGLE)
def test_single_pod_entries_fail_fast(entry: str) -> None:
    """Single-pod entries: Never, backoffLimit 0, the same rule, no launcher at all."""
    docs = render(entry)
    node = rjob(docs, "node")["template"]["spec"]
    assert node["template"]["spec"]["restartPolicy"] == "Never"
    assert node["backoffLimit"] == 0
    assert node["podFailurePolicy"] == {"rules": [RULE]}
    jobs = by_kind(docs, "TrainingRuntime")["spec"]["template"]["spec"]["replicatedJobs"]
    assert [j["name"] for j in jobs] == ["node"]


def test_kai_launcher_backoff_is_zero_and_gate_moves_into_the_pod() -> None:
    """Under KAI: backoffLimit 0, no dependsOn/startupPolicy, a wait-for-workers init."""
    docs = render(MPI[0], options=RenderOptions(gang_scheduler=GangScheduler()))
    launcher = rjob(docs, "launcher")
    spec = launcher["template"]["spec"]
    assert spec["backoffLimit"] == 0
    assert "dependsOn" not in launcher
    runtime = by_kind(docs, "TrainingRuntime")
    assert "startupPolicy" not in runtime["spec"]["template"]["spec"]
    inits = [c["name"] for c in spec["template"]["spec"]["initContainers"]]
    assert inits == ["fix-ssh-permissions", "wait-for-workers"]
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_kai_explicit_launcher_backoff_is_kept() -> None:
    """An explicit launcher backoffLimit survives the KAI adaptation."""
    opts = RenderOptions(gang_scheduler=GangScheduler(), launcher_backoff_limit=1)
    assert rjob(render(MPI[0], options=opts), "launcher")["template"]["spec"]["backoffLimit"] == 1


def test_without_kai_launcher_waits_on_workers_ready() -> None:
    """Outside KAI the launcher depends on the node job being Ready, with no wait init."""
    launcher = rjob(render(MPI[0]), "launcher")
    assert launcher["dependsOn"] == [{"name": "node", "status": "Ready"}]
    inits = launcher["template"]["spec"]["template"]["spec"]["initContainers"]
    assert [c["name"] for c in inits] == ["fix-ssh-permissions"]


def test_kai_sets_scheduler_and_queue_labels_everywhere() -> None:
    """schedulerName on every pod, the queue label on job and pod templates and the TrainJob."""
    docs = render(MPI[0], options=RenderOptions(gang_scheduler=GangScheduler(queue="q1")))
    for name in ("node", "launcher"):
        template = rjob(docs, name)["template"]
        assert template["metadata"]["labels"]["kai.scheduler/queue"] == "q1"
        pod = template["spec"]["template"]
        assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "q1"
        assert pod["spec"]["schedulerName"] == "kai-scheduler"
    job = by_kind(docs, "Job")
    assert job["spec"]["workloadMetadata"] == {"labels": {"kai.scheduler/queue": "q1"}}


def test_default_queue_is_the_api_default_and_kais_leaf_queue() -> None:
    """Without a queue the render uses ``default-queue``, as GangSchedulerSpec and KAI do."""
    api_default = attrs.fields(GangSchedulerSpec).queue.default
    assert GangScheduler().queue == api_default == "default-queue"
    job = by_kind(render(MPI[0], options=RenderOptions(gang_scheduler=GangScheduler())), "Job")
    assert job["spec"]["workloadMetadata"] == {"labels": {"kai.scheduler/queue": "default-queue"}}


def test_gang_scheduler_from_an_api_spec_keeps_every_field() -> None:
    """An API gangScheduler maps field by field, its defaults included."""
    spec = GangSchedulerSpec(
        scheduler_name="runai-scheduler", queue="team-a", queue_label_key="runai/queue"
    )
    assert GangScheduler.from_spec(spec) == GangScheduler(
        scheduler_name="runai-scheduler", queue="team-a", queue_label_key="runai/queue"
    )
    assert GangScheduler.from_spec(GangSchedulerSpec(scheduler_name="kai-scheduler")) == (
        GangScheduler()
    )


def test_other_gang_scheduler_keeps_depends_on_and_retry() -> None:
    """A non-KAI gang scheduler gets scheduler and queue but keeps dependsOn and backoff 1."""
    gang = GangScheduler(scheduler_name="runai-scheduler", queue="d", queue_label_key="runai/queue")
    docs = render(MPI[0], options=RenderOptions(gang_scheduler=gang))
    launcher = rjob(docs, "launcher")
    assert launcher["dependsOn"] == [{"name": "node", "status": "Ready"}]
    assert launcher["template"]["spec"]["backoffLimit"] == 1
    assert launcher["template"]["spec"]["template"]["spec"]["schedulerName"] == "runai-scheduler"


def test_kai_single_pod_keeps_backoff_zero_and_has_no_wait() -> None:
    """KAI on a single-pod entry changes scheduling only."""
    docs = render(SINGLE[0], options=RenderOptions(gang_scheduler=GangScheduler()))
    node = rjob(docs, "node")["template"]["spec"]
    assert node["backoffLimit"] == 0
    assert node["template"]["spec"]["schedulerName"] == "kai-scheduler"
    assert "initContainers" not in node["template"]["spec"]


def test_job_and_launcher_labels_are_exclusive() -> None:
    """Workers get cre.dev/job, the launcher cre.dev/launcher, never both, via the patch."""
    docs = render(MPI[0])
    jobs = patches(docs)
    node_labels = jobs["node"]["template"]["spec"]["template"]["metadata"]["labels"]
    launcher_labels = jobs["launcher"]["template"]["spec"]["template"]["metadata"]["labels"]
    assert node_labels == {L.JOB: "j"}
    assert launcher_labels == {L.LAUNCHER: "j"}
    runtime_text = str(by_kind(docs, "TrainingRuntime"))
    assert L.JOB not in runtime_text and L.LAUNCHER not in runtime_text


def test_launcher_patch_only_when_runtime_has_a_launcher() -> None:
    """Single-pod runtimes get no launcher patch entry (Trainer would reject it)."""
    assert list(patches(render(SINGLE[0]))) == ["node"]
    assert list(patches(render(MPI[0]))) == ["node", "launcher"]
