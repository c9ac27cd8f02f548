"""An image that cannot be pulled is a cause of its own: within imagePullGraceSeconds the Job
keeps running (and says since when the pull fails); past it the Job fails ImagePullFailed,
Platform class, naming the image and the kubelet's message, no node blamed, workload deleted."""

from __future__ import annotations

import attrs
import pytest

from cre.api.conditions import FailureScope, JobReason
from cre.api.converter import structure
from cre.api.job import Job, JobSpec
from cre.api.validate import validate
from cre.core.common.lifecycle import true_member
from cre.core.common.observed import ContainerState, ContainerStatusView, PodView
from cre.core.common.plan import Observation, Plan
from cre.core.job.reconcile import reconcile_job
from cre.testing.strategies.job import at, make_job, pod, running_status, trainjob

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
WHY = f'rpc error: code = NotFound desc = failed to pull and unpack image "{IMAGE}": not found'
BACKOFF = f'Back-off pulling image "{IMAGE}": ErrImagePull: {WHY}'
PULL_ERR = f'Failed to pull image "{IMAGE}": {WHY}'
W0, W1 = "j1-workload-node-0-0-aaaaa", "j1-workload-node-0-1-bbbbb"


def _waiting(name: str, reason: str, message: str, *, node: str = "gpu-0",
             init: bool = False) -> PodView:
    state = ContainerState(kind="waiting", reason=reason, message=message)
    base = pod(name, node=node, state=state, phase="Pending")
    status = ContainerStatusView(name="wait-for-workers" if init else "node", state=state,
                                 init=init, image=IMAGE)
    if init:
        running = ContainerStatusView(name="node", state=ContainerState(
            kind="waiting", reason="PodInitializing"), image=IMAGE)
        return attrs.evolve(base, init_container_statuses=(status,),
                            container_statuses=(running,))
    return attrs.evolve(base, container_statuses=(status,))


def _world(*pods: PodView) -> Observation:
    return Observation(trainjob=trainjob(), worker_pods=pods)


def _current(plan: Plan) -> tuple[str, str]:
    assert plan.status is not None
    cond = true_member(plan.status.conditions)
    assert cond is not None
    return cond.reason, cond.message


def test_a_failing_pull_within_the_grace_is_recorded_and_rechecked_at_its_end() -> None:
    """First seen at t=60: imagePullFailingSince=60, still WorkloadRunning, the next pass
    comes no later than the end of the 120 s grace."""
    job = make_job(status=running_status())
    plan = reconcile_job(job, _world(_waiting(W0, "ErrImagePull", PULL_ERR)), at(60))
    assert plan.status is not None and plan.status.image_pull_failing_since == at(60)
    assert _current(plan)[0] == "WorkloadRunning"
    later = attrs.evolve(job, status=plan.status)
    again = reconcile_job(later, _world(_waiting(W0, "ImagePullBackOff", BACKOFF)), at(170))
    assert again.requeue_after == pytest.approx(10.0)
    assert not again.deletes


@pytest.mark.parametrize(("reason", "said"), [
    ("ErrImagePull", PULL_ERR), ("ImagePullBackOff", BACKOFF),
    ("ImagePullBackOff", f'Back-off pulling image "{IMAGE}"'),
    ("InvalidImageName", "couldn't parse image name"),
    ("ErrImageNeverPull", f'Container image "{IMAGE}" is not present with pull policy of Never'),
])
def test_past_the_grace_the_job_fails_image_pull_failed(reason: str, said: str) -> None:
    """Each image-pull waiting reason, still there 120 s after it was first seen, fails the
    Job ImagePullFailed (Platform/ImagePullFailed) naming the image, the pods and nodes and
    what the runtime said; the workload is deleted and no node is blamed."""
    job = make_job(status=attrs.evolve(running_status(), image_pull_failing_since=at(60)))
    plan = reconcile_job(job, _world(_waiting(W0, reason, said),
                                     _waiting(W1, reason, said, node="gpu-1")), at(180))
    cond, message = _current(plan)
    assert cond == JobReason.IMAGE_PULL_FAILED
    cause = WHY if said in (PULL_ERR, BACKOFF) else said
    assert message == (
        "Workload j1-workload could not pull its image within imagePullGraceSeconds 120s: "
        f'image "{IMAGE}" on pod {W0} (container node on node gpu-0), pod {W1} (container '
        f"node on node gpu-1): {cause}")
    status = plan.status
    assert status is not None and status.failure_class is not None
    assert (status.failure_class.scope, status.failure_class.reason) == (
        FailureScope.PLATFORM, "ImagePullFailed")
    assert status.failed_nodes == ()
    assert status.failure_log is not None and status.failure_log.reason == "ImagePullFailed"
    assert cause in status.failure_log.tail and status.failure_log.node_name == "gpu-0"
    assert [d.name for d in plan.deletes] == ["j1-workload"]


def test_the_message_is_the_same_in_either_half_of_the_back_off_cycle() -> None:
    """One container in ErrImagePull and one in ImagePullBackOff give one cause, not two."""
    job = make_job(status=attrs.evolve(running_status(), image_pull_failing_since=at(0)))
    plan = reconcile_job(job, _world(_waiting(W0, "ErrImagePull", PULL_ERR),
                                     _waiting(W1, "ImagePullBackOff", BACKOFF, node="gpu-1")),
                         at(120))
    message = _current(plan)[1]
    assert message.count(WHY) == 1 and "gpu-0" in message and "gpu-1" in message


def test_an_init_container_that_cannot_pull_counts_too() -> None:
    """An init container waiting on ErrImagePull past the grace fails the Job the same way."""
    job = make_job(status=attrs.evolve(running_status(), image_pull_failing_since=at(0)))
    plan = reconcile_job(job, _world(_waiting(W0, "ErrImagePull", PULL_ERR, init=True)), at(120))
    cond, message = _current(plan)
    assert cond == JobReason.IMAGE_PULL_FAILED
    assert "container wait-for-workers" in message and message.endswith(WHY)


def test_a_pull_that_recovers_within_the_grace_does_not_fail_the_job() -> None:
    """The pull fails at t=60 and the containers run at t=150: the mark is cleared and the Job
    keeps running, even at t=400 (past where the grace would have ended)."""
    job = make_job(status=attrs.evolve(running_status(), image_pull_failing_since=at(60)))
    plan = reconcile_job(job, _world(pod(W0), pod(W1, node="gpu-1")), at(150))
    assert plan.status is not None and plan.status.image_pull_failing_since is None
    assert _current(plan)[0] == "WorkloadRunning"
    later = attrs.evolve(job, status=plan.status)
    still = reconcile_job(later, _world(pod(W0), pod(W1, node="gpu-1")), at(400))
    assert still.status is None or _current(still)[0] == "WorkloadRunning"
    assert not still.deletes


def test_a_pull_failing_in_a_previous_workload_does_not_count() -> None:
    """A pod of an earlier workload generation (created before the current TrainJob) waiting on
    a pull is not the current run's evidence."""
    old = attrs.evolve(_waiting(W0, "ImagePullBackOff", BACKOFF), creation_timestamp=at(-600))
    job = make_job(status=attrs.evolve(running_status(), image_pull_failing_since=at(0)))
    plan = reconcile_job(job, _world(old), at(600))
    assert plan.status is not None and plan.status.image_pull_failing_since is None
    assert _current(plan)[0] == "WorkloadRunning"


def test_the_grace_is_a_bounded_spec_field() -> None:
    """imagePullGraceSeconds defaults to 120; 0 and more than an hour are refused with the
    field path."""
    job = make_job()
    assert job.spec.image_pull_grace_seconds == 120
    for bad in (0, 3601):
        raw = attrs.evolve(job, spec=attrs.evolve(job.spec, image_pull_grace_seconds=bad))
        errors = [str(e) for e in validate(raw)]
        assert any("spec.imagePullGraceSeconds" in e for e in errors), errors
    spec = structure({"workload": {"trainJob": {}}, "imagePullGraceSeconds": 30}, JobSpec)
    assert spec.image_pull_grace_seconds == 30
    assert isinstance(raw, Job)


def test_a_timeout_while_the_pull_fails_is_an_image_pull_failure() -> None:
    """timeoutPerJob (10s) runs out inside the grace while a pull fails: the Job fails
    ImagePullFailed naming the timeout, not JobTimedOut (which would charge the test)."""
    job = make_job(timeout="10s", status=attrs.evolve(running_status(),
                                                      image_pull_failing_since=at(0)))
    plan = reconcile_job(job, _world(_waiting(W0, "ImagePullBackOff", BACKOFF)), at(30))
    cond, message = _current(plan)
    assert cond == JobReason.IMAGE_PULL_FAILED
    assert message.startswith("Workload j1-workload could not pull its image within "
                              "timeoutPerJob 10s: ")
    assert plan.status is not None and plan.status.failure_class is not None
    assert plan.status.failure_class.reason == "ImagePullFailed"
    assert [d.name for d in plan.deletes] == ["j1-workload"]


def test_a_checkpoint_restart_starts_a_new_grace() -> None:
    """A workload restarted from a checkpoint does not inherit the previous workload's
    imagePullFailingSince: the restart clears it."""
    job = make_job(max_restarts=1, status=attrs.evolve(running_status(),
                                                       image_pull_failing_since=at(0)))
    plan = reconcile_job(job, Observation(trainjob=trainjob(state="failed")), at(60))
    assert _current(plan)[0] == "WorkloadRestarting"
    assert plan.status is not None and plan.status.image_pull_failing_since is None
