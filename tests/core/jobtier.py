"""The tier contract for the Workflow tests: Job outcomes come from the Job tier itself.

A Workflow test says *what happened* to a group's workload (a :class:`Story`: it completed, a
container failed, the health monitor flagged a node, a node went NotReady, the API refused the
create, a person deleted the TrainJob, ...). :func:`job_tier_status` builds the pods, nodes and
TrainJob the Job tier would observe for that story and runs the real Job core
(``cre.core.job.reconcile.reconcile_job``) until the Job is terminal, so the status the Workflow
core reads is one the Job tier really writes.

:func:`check_emittable` rejects a Job status the Job tier cannot produce: its signature (the
True trio member and reason, the failure class, ``HardwareFailed``, the failed-node reasons)
must be one of the signatures the stories produce (:func:`emittable`, computed by running them).
"""

from __future__ import annotations

import enum
import functools
from datetime import UTC, datetime, timedelta

import attrs

from cre.api.conditions import ConditionType, MeasurementReason
from cre.api.job import BandwidthMeasurementRequest, Job, JobStatus
from cre.api.measurement import (
    BandwidthMeasurement,
    BandwidthMeasurementSpec,
    BandwidthMeasurementStatus,
    BandwidthResult,
)
from cre.api.meta import Condition, ConditionStatus, ObjectMeta, TypedLocalObjectReference
from cre.core.common.lifecycle import true_member
from cre.core.common.observed import NodeView, PodView
from cre.core.common.plan import CreateError, Feedback, Observation, ReadEvents
from cre.core.job.bandwidth import JOB_UID_ANNOTATION
from cre.core.job.classify import group_nodes
from cre.core.job.health import check_nodes, expression_of
from cre.core.job.reconcile import is_terminal, reconcile_job
from cre.core.job.workload import reference, workload_name
from cre.testing.strategies.job import (
    apply_plan,
    live_pods,
    make_job,
    pod,
    terminated,
    trainjob,
    workload_absence,
)


class Story(enum.StrEnum):
    """What happened to a group's workload, as the cluster shows it to the Job tier."""

    SUCCEEDED = "Succeeded"  # the TrainJob completed
    CONTAINER_FAILED = "ContainerFailed"  # the launcher exited 1 (Workload class)
    HARDWARE = "Hardware"  # the nodeHealthMonitor flags ``node`` (Node / GPUUnhealthy)
    NODE_NOT_READY = "NodeNotReady"  # ``node`` went NotReady and the launcher died
    EVICTED = "Evicted"  # the launcher on ``node`` was evicted (Node / PodEvicted)
    CREATE_REJECTED = "CreateRejected"  # the API refused the TrainJob create (403/422)
    NAME_COLLISION = "NameCollision"  # a foreign TrainJob holds the name
    WORKLOAD_DELETED = "WorkloadDeleted"  # a person deleted the TrainJob
    STARTUP_STALLED = "StartupStalled"  # the TrainJob never made a pod (Platform)
    TIMED_OUT = "TimedOut"  # still running past timeoutPerJob (Workload / TimedOut)
    INVALID_SPEC = "InvalidSpec"  # a spec CRE refuses before creating anything
    THRESHOLD_MISSED = "ThresholdMissed"  # completed, bandwidth below the threshold


MONITOR = "node.metadata.labels['cre.test/broken'] == 'true'"
# Stories whose evidence is about one node (the first of the group unless told).
NODE_STORIES = frozenset({Story.HARDWARE, Story.NODE_NOT_READY, Story.EVICTED})


def _nodes(job: Job, *, bad: str | None, story: Story) -> tuple[NodeView, ...]:
    out = []
    for name in group_nodes(job):
        labels: tuple[tuple[str, str], ...] = (("cre.test/broken", "false"),)
        ready = "True"
        if name == bad and story == Story.HARDWARE:
            labels = (("cre.test/broken", "true"),)
        if name == bad and story == Story.NODE_NOT_READY:
            ready = "False"
        out.append(NodeView(name=name, uid=f"uid-{name}", ready=ready, allocatable_gpus=8,
                            ready_reason="KubeletNotReady" if ready == "False" else None,
                            labels=labels))
    return tuple(out)


def _launcher(job: Job, node: str, **kw: object) -> PodView:
    name = job.metadata.name or ""
    return pod(f"{workload_name(name)}-launcher-0-0-abcde", launcher=True, job_name=name,
               node=node, **kw)  # type: ignore[arg-type]


def _observation(job: Job, story: Story, *, bad: str, start: datetime) -> Observation:
    name = job.metadata.name or ""
    view = trainjob(job_name=name, job_uid=job.metadata.uid or "", created=start,
                    state={Story.SUCCEEDED: "complete", Story.THRESHOLD_MISSED: "complete",
                           Story.CONTAINER_FAILED: "failed",
                           Story.NODE_NOT_READY: "failed",
                           Story.EVICTED: "failed"}.get(story, "running"))
    nodes = _nodes(job, bad=bad, story=story)
    launchers: tuple[PodView, ...] = ()
    if story in (Story.CONTAINER_FAILED, Story.NODE_NOT_READY):
        launchers = (_launcher(job, bad, state=terminated(exit_code=1), created=start),)
    elif story == Story.EVICTED:
        launchers = (_launcher(job, bad, state=terminated(exit_code=137), created=start,
                               phase="Failed", reason="Evicted"),)
    elif story in (Story.SUCCEEDED, Story.HARDWARE, Story.TIMED_OUT):
        launchers = (_launcher(job, bad, created=start),)
    obs = Observation(trainjob=view, nodes=nodes, launcher_pods=launchers,
                      feedback=Feedback(answered=live_pods(name)))
    if story == Story.CREATE_REJECTED:
        refused = CreateError(kind="TrainJob", name=f"{name}-workload", namespace="ns", code=403,
                              reason="Forbidden", message='admission webhook "policy.example" '
                              "denied the request: TrainJob refused")
        obs = Observation(nodes=nodes, feedback=Feedback(create_rejections=(refused,)))
    elif story == Story.NAME_COLLISION:
        obs = Observation(nodes=nodes, trainjob=attrs.evolve(
            trainjob(job_name=name, owned=False, created=start), uid="foreign"))
    elif story == Story.WORKLOAD_DELETED:
        obs = Observation(nodes=nodes, feedback=Feedback(
            answered=(workload_absence(name), *live_pods(name))))
    elif story == Story.STARTUP_STALLED:
        obs = Observation(nodes=nodes, trainjob=view, feedback=Feedback(
            answered=(ReadEvents(kind="TrainJob", name=view.name),)))
    elif story == Story.INVALID_SPEC:
        obs = Observation(nodes=nodes)
    elif story == Story.THRESHOLD_MISSED:
        obs = attrs.evolve(obs, bandwidth_measurement=_measured(job, start))
    expression = expression_of(job)
    if expression:  # the shell's evaluation of the monitor (cre.controller.job.nodechecks)
        obs = attrs.evolve(obs, node_checks=check_nodes(expression, obs.nodes))
    return obs


def _measured(job: Job, at: datetime) -> BandwidthMeasurement:
    """The Job's BandwidthMeasurement, final, at 350 GB/s bus bandwidth."""
    name = job.metadata.name or ""
    return BandwidthMeasurement(
        metadata=ObjectMeta(name=f"{name}-bandwidth", namespace=job.metadata.namespace,
                            uid=f"bm-{name}",
                            annotations={JOB_UID_ANNOTATION: job.metadata.uid or ""}),
        spec=BandwidthMeasurementSpec(job_ref=TypedLocalObjectReference(
            api_group="cre.dev", kind="Job", name=name), log_profile_ref="nccl-bandwidth"),
        status=BandwidthMeasurementStatus(conditions=(Condition(
            type=ConditionType.COMPLETE, status=ConditionStatus.TRUE,
            reason=MeasurementReason.JOB_SUCCEEDED, message="measured",
            last_transition_time=at),), results=(
            BandwidthResult(size_bytes=1 << 30, alg_bw="200.00", bus_bw="350.00",
                            samples=1),)))


def _running(job: Job, start: datetime) -> JobStatus:
    """The Job as the Job tier leaves it once its workload was created and seen running."""
    from cre.core.common.conditions import set_trio

    name = job.metadata.name or ""
    conditions, _ = set_trio((), member=ConditionType.IN_PROGRESS, reason="WorkloadRunning",
                             message=f"Workload {workload_name(name)} is running", now=start,
                             generation=job.metadata.generation)
    ref = reference(trainjob(job_name=name, job_uid=job.metadata.uid or "", created=start))
    return JobStatus(conditions=conditions, workload_ref=ref, workload_start_time=start)


def job_tier_status(job: Job, now: datetime, story: Story, *,
                    node: str | None = None) -> JobStatus:
    """The terminal status the Job tier writes on ``job`` when ``story`` happens (``node``:
    the node the evidence is about, the group's first by default), decided at ``now``."""
    status = _run_story(job, now, story, node=node)
    check_emittable(status)
    return status


def _run_story(job: Job, now: datetime, story: Story, *, node: str | None) -> JobStatus:
    nodes = group_nodes(job)
    bad = node or (nodes[0] if nodes else "")
    start = now - timedelta(seconds=30)
    if story == Story.STARTUP_STALLED:
        start = now - timedelta(seconds=job.spec.startup_stall_timeout_seconds + 1)
    if story == Story.TIMED_OUT:
        start = now - timedelta(minutes=2)
        job = attrs.evolve(job, spec=attrs.evolve(job.spec, timeout_per_job="1m"))
    if story in (Story.HARDWARE, Story.INVALID_SPEC):
        from cre.api.job import CelExpression, NodeHealthMonitor

        expression = MONITOR if story == Story.HARDWARE else "node.(("
        monitor = NodeHealthMonitor(cel=CelExpression(expression=expression))
        job = attrs.evolve(job, spec=attrs.evolve(job.spec, node_health_monitor=monitor))
    if story == Story.THRESHOLD_MISSED:
        job = attrs.evolve(job, spec=attrs.evolve(
            job.spec, thresholds={"busBandwidthGBps": "value >= 1000000"},
            bandwidth_measurement=BandwidthMeasurementRequest(log_profile_ref="nccl-bandwidth")))
    fresh = story in (Story.CREATE_REJECTED, Story.NAME_COLLISION, Story.INVALID_SPEC)
    job = attrs.evolve(job, status=JobStatus() if fresh else _running(job, start))
    if story == Story.STARTUP_STALLED:
        job = attrs.evolve(job, status=attrs.evolve(job.status, workload_start_time=None))
    obs = _observation(job, story, bad=bad, start=start)
    for _ in range(12):
        plan = reconcile_job(job, obs, now)
        job, obs = apply_plan(job, obs, plan, now=now)
        if story == Story.WORKLOAD_DELETED:
            obs = attrs.evolve(obs, trainjob=None, feedback=attrs.evolve(
                obs.feedback, answered=(*obs.feedback.answered,
                                        workload_absence(job.metadata.name or ""))))
        if is_terminal(job) and (story != Story.THRESHOLD_MISSED or any(
                c.type == ConditionType.VALIDATION_FAILED for c in job.status.conditions)):
            return job.status
    raise AssertionError(f"the Job tier did not finish story {story}: {job.status.conditions}")


Signature = tuple[str, str, str, str, bool, str, tuple[str, ...]]


def signature(status: JobStatus) -> Signature:
    """What the Workflow tier reads from a terminal Job status, without names and times."""
    member = true_member(status.conditions)
    assert member is not None, "a Job status without a True trio member"
    fc = status.failure_class
    hardware = any(c.type == ConditionType.HARDWARE_FAILED and c.status == ConditionStatus.TRUE
                   for c in status.conditions)
    verdict = next((c for c in status.conditions if c.type == ConditionType.VALIDATION_FAILED
                    and c.status == ConditionStatus.TRUE), None)
    return (str(member.type), member.reason or "", str(fc.scope) if fc else "",
            str(fc.reason) if fc else "", hardware, verdict.reason or "" if verdict else "",
            tuple(sorted({str(f.reason) for f in status.failed_nodes})))


@functools.cache
def emittable() -> frozenset[Signature]:
    """Every signature the Job tier produces for the stories (run once, on a reference Job)."""
    job = make_job(group_nodes=("gpu-0", "gpu-1"))
    now = datetime(2026, 3, 1, 13, 0, 0, tzinfo=UTC)
    return frozenset(signature(_run_story(job, now, story, node=None)) for story in Story)


def check_emittable(status: JobStatus) -> None:
    """Reject a terminal Job status the Job tier cannot produce (see the module docstring)."""
    got = signature(status)
    if got not in emittable():
        raise AssertionError(
            f"the Job tier never writes this status: {got}; known: {sorted(emittable())}")
