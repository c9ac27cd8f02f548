"""Builders and hypothesis strategies for the Job core's inputs, shipped for reuse.

Like attrs' ``tests/strategies.py`` and structlog's ``testing`` module, the library ships the
helpers its own tests use so that other controllers importing the core can test against it the
same way: small builders for a Job, a TrainJob view and launcher/worker pods; hypothesis
strategies that generate whole Observations; and ``apply_plan``, a model of what the shell does
with a Plan, so properties such as idempotence can be stated over the pure core alone.

Importing this module requires ``hypothesis`` (a test dependency).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import attrs
from hypothesis import strategies as st

from cre.api.conditions import ConditionType, JobReason, Phase
from cre.api.job import (
    CheckpointSpec,
    FailureLog,
    Job,
    JobSpec,
    JobStatus,
    WorkloadRetention,
    WorkloadSpec,
)
from cre.api.labels import GROUP_NODES, JOB, JOB_FINALIZER, LAUNCHER
from cre.api.meta import ObjectMeta
from cre.core.common.lifecycle import set_exclusive
from cre.core.common.observed import (
    ContainerState,
    ContainerStatusView,
    LogTail,
    NodeView,
    ObjectCondition,
    OwnerRef,
    PodCondition,
    PodView,
    TrainJobView,
)
from cre.core.common.plan import (
    ConfirmAbsent,
    CreateConflict,
    Feedback,
    ListLive,
    Observation,
    ReadLog,
)
from cre.core.job.reconcile import JobPlan
from cre.core.job.workload import TRAINJOB_KIND, reference, workload_name

T0: Final = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
NS: Final = "team-a"
JOB_NAME: Final = "j1"
JOB_UID: Final = "job-uid-1"
NODES: Final = ("gpu-0", "gpu-1", "gpu-2")


def at(seconds: float) -> datetime:
    """``T0`` plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)


def train_job_spec(*, launcher: bool = True) -> dict[str, Any]:
    """A rendered TrainJob spec whose runtime patch names its replicated jobs."""
    replicated: list[dict[str, Any]] = [{"name": "node"}]
    if launcher:
        replicated.insert(0, {"name": "launcher"})
    return {"runtimeRef": {"name": "mpi"}, "runtimePatches": [{
        "manager": "cre.dev/renderer",
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": replicated}}},
    }]}


def make_job(
    *,
    name: str = JOB_NAME,
    uid: str = JOB_UID,
    group_nodes: tuple[str, ...] = NODES,
    finalizer: bool = True,
    status: JobStatus | None = None,
    max_restarts: int | None = None,
    deleting_at: datetime | None = None,
    resource_version: str = "100",
    timeout: str | None = None,
    launcher: bool = True,
) -> Job:
    """A Job in namespace ``team-a`` whose rendered TrainJob spec patches a ``launcher`` and a
    ``node`` replicated job (only ``node`` with ``launcher=False``)."""
    annotations = {GROUP_NODES: ",".join(group_nodes)} if group_nodes else {}
    checkpoint = None if max_restarts is None else CheckpointSpec(pvc_name="ckpt",
                                                                   max_restarts=max_restarts)
    return Job(
        metadata=ObjectMeta(name=name, namespace=NS, uid=uid, generation=1,
                            resource_version=resource_version, creation_timestamp=T0,
                            annotations=annotations,
                            finalizers=(JOB_FINALIZER,) if finalizer else (),
                            deletion_timestamp=deleting_at),
        spec=JobSpec(workload=WorkloadSpec(train_job=train_job_spec(launcher=launcher)),
                     checkpoint=checkpoint, timeout_per_job=timeout),
        status=status or JobStatus(),
    )


def running_status(job_name: str = JOB_NAME, *, tj_uid: str = "tj-uid-1",
                   started: datetime = T0) -> JobStatus:
    """The status of a Job whose workload was seen running since ``started``."""
    conditions, _ = set_exclusive((), member=ConditionType.IN_PROGRESS,
                                  reason=JobReason.WORKLOAD_RUNNING,
                                  message=f"Workload {workload_name(job_name)} is running",
                                  now=started, generation=1)
    ref = reference(trainjob(job_name=job_name, uid=tj_uid))
    return JobStatus(conditions=conditions, phase=Phase.RUNNING, workload_ref=ref,
                     workload_start_time=started, observed_generation=1)


def trainjob(
    *,
    job_name: str = JOB_NAME,
    job_uid: str = JOB_UID,
    uid: str = "tj-uid-1",
    state: str = "running",
    created: datetime = T0,
    owned: bool = True,
    deleting: bool = False,
) -> TrainJobView:
    """A TrainJob view in ``state`` (running, suspended, complete, failed)."""
    conditions: tuple[ObjectCondition, ...] = ()
    if state == "complete":
        conditions = (ObjectCondition(type="Complete", status="True", reason="JobsCompleted"),)
    elif state == "failed":
        conditions = (ObjectCondition(type="Failed", status="True", reason="JobsFailed",
                                      message="jobset failed"),)
    owner = OwnerRef(api_version="cre.dev/v1alpha1", kind="Job", name=job_name,
                     uid=job_uid if owned else "someone-else", controller=True)
    return TrainJobView(name=workload_name(job_name), namespace=NS, uid=uid,
                        labels=((JOB, job_name),), owner_refs=(owner,),
                        creation_timestamp=created, suspended=state == "suspended",
                        conditions=conditions,
                        deletion_timestamp=at(1) if deleting else None)


def trainjob_object(view: TrainJobView) -> dict[str, Any]:
    """The served TrainJob whose slim view is ``view`` (a create conflict's live holder)."""
    def stamp(when: datetime | None) -> str | None:
        return when.isoformat() if when is not None else None

    meta: dict[str, Any] = {
        "name": view.name, "namespace": view.namespace, "uid": view.uid,
        "labels": dict(view.labels), "creationTimestamp": stamp(view.creation_timestamp),
        "ownerReferences": [{"apiVersion": r.api_version, "kind": r.kind, "name": r.name,
                             "uid": r.uid, "controller": r.controller}
                            for r in view.owner_refs]}
    if view.deletion_timestamp is not None:
        meta["deletionTimestamp"] = stamp(view.deletion_timestamp)
    conditions = [{k: v for k, v in (("type", c.type), ("status", c.status),
                                     ("reason", c.reason), ("message", c.message))
                   if v is not None} for c in view.conditions]
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": TRAINJOB_KIND,
            "metadata": meta, "spec": {"suspend": view.suspended},
            "status": {"conditions": conditions}}


def name_taken(view: TrainJobView) -> Feedback:
    """The feedback of a workload create whose name ``view``'s TrainJob holds."""
    return Feedback(create_conflicts=(CreateConflict(kind=TRAINJOB_KIND, name=view.name,
                                                     holder=trainjob_object(view)),))


def live_pods(job_name: str = JOB_NAME) -> tuple[ListLive, ListLive]:
    """The asks for a Job's worker and launcher pods, listed live."""
    return (ListLive(kind="Pod", selector=f"{JOB}={job_name}"),
            ListLive(kind="Pod", selector=f"{LAUNCHER}={job_name}"))


def workload_absence(job_name: str = JOB_NAME) -> ConfirmAbsent:
    """The ask: is the Job's workload really gone?"""
    return ConfirmAbsent(kind=TRAINJOB_KIND, name=workload_name(job_name))


def terminated(*, exit_code: int = 1, reason: str = "Error", finished: datetime | None = None
               ) -> ContainerState:
    """A terminated container state."""
    return ContainerState(kind="terminated", exit_code=exit_code, reason=reason,
                          started_at=T0, finished_at=finished)


def crashloop(*, restart_in: str = "10s", container: str = "node") -> ContainerState:
    """The back-off wait of a container restarted in place after a failure."""
    return ContainerState(kind="waiting", reason="CrashLoopBackOff",
                          message=f"back-off {restart_in} restarting failed container={container}")


def pod(
    name: str,
    *,
    launcher: bool = False,
    job_name: str = JOB_NAME,
    node: str | None = "gpu-0",
    state: ContainerState | None = None,
    last_state: ContainerState | None = None,
    init_state: ContainerState | None = None,
    created: datetime = T0,
    phase: str | None = None,
    disruption: str | None = None,
    container: str = "node",
    conditions: tuple[PodCondition, ...] = (),
    reason: str | None = None,
) -> PodView:
    """A launcher or worker pod with one container (and optionally one init container);
    ``last_state`` is that container's previous run (a restart in place)."""
    state = state or ContainerState(kind="running", started_at=T0)
    if phase is None:
        if state.kind == "terminated":
            phase = "Failed" if state.exit_code else "Succeeded"
        else:
            phase = "Running" if state.kind == "running" else "Pending"
    conds = conditions
    if disruption is not None:
        conds = (*conds, PodCondition(type="DisruptionTarget", status=disruption,
                                      reason="EvictionByEvictionAPI"))
    inits = () if init_state is None else (
        ContainerStatusView(name="wait-for-workers", state=init_state, init=True),)
    label = (LAUNCHER, job_name) if launcher else (JOB, job_name)
    return PodView(name=name, namespace=NS, uid=f"uid-{name}", labels=(label,), node_name=node,
                   phase=phase, creation_timestamp=created, conditions=conds,
                   init_container_statuses=inits,
                   container_statuses=(ContainerStatusView(
                       name=container, state=state, last_state=last_state,
                       restart_count=0 if last_state is None else 1),),
                   reason=reason)


def node(name: str, *, ready: str = "True") -> NodeView:
    """A GPU node view."""
    return NodeView(name=name, uid=f"uid-{name}", ready=ready, allocatable_gpus=8)


def tail(p: PodView, container: str = "node", *, text: str | None = None,
         error: str | None = None, previous: bool = False) -> LogTail:
    """The tail the shell would read for ``p`` (of the container's previous run if asked)."""
    body = "" if error else (text if text is not None else f"[stub] log of {p.name}\n")
    return LogTail(namespace=p.namespace, pod=p.name, container=container, text=body,
                   error=error, pod_uid=p.uid, previous=previous)


# --- what the shell does with a Plan --------------------------------------------------------


def apply_plan(job: Job, obs: Observation, plan: JobPlan, *, now: datetime,
               logs: Mapping[str, str] | None = None) -> tuple[Job, Observation]:
    """The Job and Observation after the shell carried out ``plan`` in an otherwise still world.

    Status and finalizer patches land on the Job; a created TrainJob appears running; a deleted
    one is gone (confirmed); a live pod list finds the same pods; log reads are answered from
    ``logs`` (pod name -> text), or with a "pod not found" error when the pod is not observed;
    a request for the workload's Events finds none.
    """
    meta = job.metadata
    for patch in plan.patches:
        finalizers = patch.body.get("metadata", {}).get("finalizers")
        if finalizers is not None:
            meta = attrs.evolve(meta, finalizers=tuple(finalizers))
    version = str(int(meta.resource_version or "0") + 1) if plan.writes else meta.resource_version
    job = attrs.evolve(job, metadata=attrs.evolve(meta, resource_version=version),
                       status=plan.status if plan.status is not None else job.status)
    trainjob_view = obs.trainjob
    answered = list(obs.feedback.answered)
    for create in plan.creates:
        if create.kind == TRAINJOB_KIND:
            trainjob_view = trainjob(job_name=job.metadata.name or "",
                                     job_uid=job.metadata.uid or "", uid=f"tj-{create.name}-new",
                                     created=now)
    for delete in plan.deletes:
        if delete.kind == TRAINJOB_KIND and trainjob_view is not None and (
            trainjob_view.uid == delete.uid
        ):
            trainjob_view = None
            answered.append(workload_absence(job.metadata.name or ""))
    for ask in plan.asks:
        if not isinstance(ask, ConfirmAbsent) or trainjob_view is None:
            answered.append(ask)
    pods = {p.name: p for p in obs.launcher_pods + obs.worker_pods}
    tails = list(obs.log_tails)
    for req in (a for a in plan.asks if isinstance(a, ReadLog)):
        if req.pod in pods:
            text = (logs or {}).get(req.pod, f"log of {req.pod}/{req.container}\n")
            tails.append(LogTail(namespace=req.namespace, pod=req.pod, container=req.container,
                                 text=text, pod_uid=req.pod_uid, previous=req.previous))
        else:
            tails.append(LogTail(namespace=req.namespace, pod=req.pod, container=req.container,
                                 error=f'pods "{req.pod}" not found', pod_uid=req.pod_uid,
                                 previous=req.previous))
    # The workload's Events, as the shell reads them: none in a still world.
    feedback = Feedback(answered=tuple(answered),
                        create_rejections=obs.feedback.create_rejections)
    return job, attrs.evolve(obs, trainjob=trainjob_view, log_tails=tuple(tails),
                             feedback=feedback)


# --- hypothesis strategies --------------------------------------------------------------------

_seconds = st.integers(min_value=0, max_value=7200)


@st.composite
def container_states(draw: st.DrawFn) -> ContainerState:
    """Running, waiting (incl. image pull errors) or terminated (exit 0, 1, 137/OOMKilled)."""
    kind = draw(st.sampled_from(["running", "waiting", "terminated", "terminated"]))
    if kind == "running":
        return ContainerState(kind="running", started_at=T0)
    if kind == "waiting":
        return ContainerState(kind="waiting", reason=draw(st.sampled_from(
            ["ContainerCreating", "ErrImagePull", "ImagePullBackOff"])))
    exit_code, reason = draw(st.sampled_from([(0, "Completed"), (1, "Error"), (137, "OOMKilled"),
                                              (2, "Error")]))
    return terminated(exit_code=exit_code, reason=reason, finished=at(draw(_seconds)))


@st.composite
def pods(draw: st.DrawFn, *, launcher: bool, prefix: str) -> tuple[PodView, ...]:
    """Up to three launcher or worker pods of the Job."""
    count = draw(st.integers(min_value=0, max_value=3))
    out = []
    for i in range(count):
        init = draw(st.none() | container_states()) if launcher else None
        out.append(pod(
            f"{prefix}-{i}", launcher=launcher, node=draw(st.sampled_from(NODES)),
            state=draw(container_states()), init_state=init,
            created=at(draw(st.sampled_from([-60, 0, 5]))),
            disruption=draw(st.sampled_from([None, None, "True", "False"])),
            container="node",
        ))
    return tuple(out)


@st.composite
def observations(draw: st.DrawFn, job: Job) -> Observation:
    """An Observation of ``job``'s world: any workload state, pods, nodes and no tails."""
    tj_state = draw(st.sampled_from(["none", "running", "suspended", "complete", "failed",
                                     "foreign"]))
    ref = job.status.workload_ref
    uid = (ref.uid if ref is not None and ref.uid else "tj-uid-1")
    view = None
    if tj_state == "foreign":
        view = trainjob(job_name=job.metadata.name or "", uid="foreign", owned=False)
    elif tj_state != "none":
        view = trainjob(job_name=job.metadata.name or "", job_uid=job.metadata.uid or "",
                        uid=uid, state=tj_state)
    nodes = tuple(node(n, ready=draw(st.sampled_from(["True", "True", "True", "False"])))
                  for n in NODES)
    conflict = None
    if draw(st.integers(min_value=0, max_value=5)) == 0:
        conflict = trainjob(job_name=job.metadata.name or "", job_uid=job.metadata.uid or "",
                            uid="tj-conflict", owned=draw(st.booleans()),
                            deleting=draw(st.booleans()))
    name = job.metadata.name or ""
    answered = (*((workload_absence(name),) if draw(st.booleans()) else ()),
                *(live_pods(name) if draw(st.booleans()) else ()))
    feedback = Feedback(answered=answered) if conflict is None else attrs.evolve(
        name_taken(conflict), answered=answered)
    return Observation(
        trainjob=view,
        feedback=feedback,
        launcher_pods=draw(pods(launcher=True, prefix="j1-workload-launcher-0-0")),
        worker_pods=draw(pods(launcher=False, prefix="j1-workload-node-0")),
        nodes=nodes,
    )


@st.composite
def jobs(draw: st.DrawFn) -> Job:
    """A Job at any point of its life before a terminal verdict (plus some already terminal)."""
    stage = draw(st.sampled_from(["new", "no-finalizer", "running", "running-logged",
                                  "deleting"]))
    restarts = draw(st.sampled_from([None, 0, 1]))
    timeout = draw(st.sampled_from([None, None, "5m", "1h"]))
    launcher = draw(st.booleans())
    if stage == "new":
        return make_job(max_restarts=restarts, timeout=timeout, launcher=launcher)
    if stage == "no-finalizer":
        return make_job(finalizer=False)
    status = running_status(started=at(-draw(st.integers(min_value=0, max_value=600))))
    if stage == "running-logged":
        status = attrs.evolve(status, failure_log=FailureLog(
            pod_name="j1-workload-launcher-0-0-0", container_name="node", exit_code=1,
            reason="Error", finished_at=at(3), tail="earlier"))
    if draw(st.booleans()):
        status = attrs.evolve(status, scheduling_blocked_since=at(draw(st.integers(0, 600))))
    job = make_job(status=status, max_restarts=restarts, timeout=timeout, launcher=launcher,
                   deleting_at=at(30) if stage == "deleting" else None)
    # A Workflow's group Job releases its workload once finished (cre.core.job.release).
    retention = draw(st.sampled_from([None, WorkloadRetention.RELEASE]))
    return attrs.evolve(job, spec=attrs.evolve(job.spec, workload_retention=retention))


def times() -> st.SearchStrategy[datetime]:
    """Instants within two hours after ``T0``."""
    return _seconds.map(at)


def plan_summary(plan: JobPlan) -> dict[str, Any]:
    """A compact, comparable view of a plan (for assertion messages)."""
    return {
        "creates": [c.name for c in plan.creates],
        "deletes": [d.name for d in plan.deletes],
        "patches": [dict(p.body) for p in plan.patches],
        "status": plan.status is not None,
        "events": [(e.type, e.reason) for e in plan.events],
        "asks": [type(a).__name__ for a in plan.asks],
        "log_reads": [(a.pod, a.container) for a in plan.asks if isinstance(a, ReadLog)],
    }


__all__ = [
    "NODES",
    "NS",
    "T0",
    "apply_plan",
    "at",
    "container_states",
    "jobs",
    "make_job",
    "node",
    "observations",
    "plan_summary",
    "pod",
    "pods",
    "running_status",
    "tail",
    "terminated",
    "times",
    "train_job_spec",
    "trainjob",
]
