"""One clock decides a threshold: in every order of "measurement done", "Job tier's deadline"
and "Workflow's pass", a group with thresholds is Passed only on a measured value that met them.

The three cores run for real: the measurement core (:func:`reconcile_bandwidth`) completes the
Job's own BandwidthMeasurement (created from :func:`bandwidth_manifest`), the Job core
(:func:`reconcile_job`) gives the threshold verdict on its clock, and the Workflow core (through
``tests.core.tierworld``) tracks the group. Only the workload's Succeeded transition is given.
"""

from __future__ import annotations

from datetime import datetime

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cre.api import labels as L
from cre.api.conditions import ConditionType, GroupPhase, JobReason, Verdict
from cre.api.converter import from_dict
from cre.api.job import Job
from cre.api.labels import JOB_FINALIZER
from cre.api.measurement import BandwidthMeasurement
from cre.core.common.observed import ContainerState, ContainerStatusView, PodView
from cre.core.common.plan import Observation
from cre.core.job.bandwidth import bandwidth_manifest
from cre.core.job.reconcile import reconcile_job
from cre.core.job.thresholds import is_final
from cre.core.measure.bandwidth import (
    BandwidthObservation,
    ReadRequest,
    ReadResult,
    reconcile_bandwidth,
)
from cre.core.measure.logprofile import compile_profile, shipped_profiles
from cre.core.measure.ncclparse import SizeResult
from cre.core.workflow import deferral as D
from cre.core.workflow.reconcile import WorkflowSettings
from cre.core.workflow.run import VALIDATION_GRACE, VERDICT_MISSING
from tests.core.tierworld import WorkflowWorld, at, nodes, succeeded, workflow

THRESHOLD = 100.0
PROFILE = compile_profile(next(p for p in shipped_profiles()
                               if p.metadata.name == "nccl-bandwidth"))

#: What the measurement finds when it is done: a value (met or missed), no rows, or no profile.
MEASURED = st.one_of(st.floats(min_value=1.0, max_value=400.0), st.just("nodata"),
                     st.just("noprofile"))
ACTION = st.sampled_from(["measure", "judge", "workflow"])
STEP = st.tuples(ACTION, st.integers(min_value=0, max_value=400))


def _launcher(job: str) -> PodView:
    state = ContainerState(kind="terminated", exit_code=0)
    return PodView(name=f"{job}-launcher-0", namespace="certs", uid="pod-1", phase="Succeeded",
                   labels=((L.REPLICATED_JOB_NAME, "launcher"), (L.LAUNCHER, job)),
                   container_statuses=(ContainerStatusView(name="launcher", state=state),))


@attrs.define
class Run:
    """The Workflow world plus its group Job's measurement, driven one action at a time."""

    world: WorkflowWorld
    job_name: str
    bm: BandwidthMeasurement
    found: float | str
    measured_at_pass: list[tuple[bool, bool]] = attrs.field(factory=list)

    @property
    def job(self) -> Job | None:
        return self.world.jobs.get(self.job_name)

    def measure(self, now: datetime) -> None:
        job = self.job
        if job is None:
            return
        obs = BandwidthObservation(job=job, profile=None if self.found == "noprofile"
                                     else PROFILE, pods=(_launcher(self.job_name),))
        plan = reconcile_bandwidth(self.bm, obs, now)
        read = next((a for a in plan.asks if isinstance(a, ReadRequest)), None)
        if read is not None:
            rows = () if self.found == "nodata" else (SizeResult(
                size_bytes=1 << 30, alg_bw="1.00", bus_bw=f"{self.found:.2f}", samples=1),)
            answer = ReadResult(request=read, results=rows, rows=len(rows))
            plan = reconcile_bandwidth(self.bm, attrs.evolve(obs, read=answer), now)
        if plan.status is not None:
            self.bm = attrs.evolve(self.bm, status=plan.status)

    def judge(self, now: datetime) -> None:
        job = self.job
        if job is None:
            return
        plan = reconcile_job(job, Observation(bandwidth_measurement=self.bm), now)
        if plan.status is not None:
            self.world.jobs[self.job_name] = attrs.evolve(job, status=plan.status)

    def workflow(self, now: datetime) -> None:
        self.world.step(now)
        self.measured_at_pass.append((self.met(), self.group.phase == GroupPhase.SUCCEEDED))

    def met(self) -> bool:
        """Whether the measurement is final with a value that meets the threshold."""
        return is_final(self.bm) and isinstance(self.found, float) and self.found >= THRESHOLD

    @property
    def group(self):  # type: ignore[no-untyped-def]
        return self.world.wf.status.groups[0]


def _start(found: float | str) -> Run:
    pool = nodes(2)
    world = WorkflowWorld(wf=workflow(pool, thresholds={"busBandwidthGBps":
                                                        f"value >= {THRESHOLD}"}),
                          nodes=pool, settings=WorkflowSettings(thresholds_judged=True))
    t = 0
    while not world.jobs:
        world.step(at(t))
        t += 1
    (name, job), = world.jobs.items()
    job = attrs.evolve(job, metadata=attrs.evolve(job.metadata, finalizers=(JOB_FINALIZER,)),
                       status=succeeded(job, at(t)))
    world.jobs[name] = job
    bm = from_dict(bandwidth_manifest(job))
    assert isinstance(bm, BandwidthMeasurement)
    bm = attrs.evolve(bm, metadata=attrs.evolve(bm.metadata, uid="bm-1", resource_version="1"))
    return Run(world=world, job_name=name, bm=bm, found=found)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(found=MEASURED, steps=st.lists(STEP, max_size=12))
def test_no_unevaluated_threshold_passes(found: float | str,
                                         steps: list[tuple[str, int]]) -> None:
    """Whatever order the three tiers act in and however late each is, the group is Passed
    only when the measurement was final with a value that met the threshold; a measurement the
    Job tier judged met passes once every tier has run; anything else never passes."""
    run = _start(found)
    t = 10.0
    for action, wait in steps:
        t += wait
        getattr(run, action)(at(t))
        if run.group.phase == GroupPhase.SUCCEEDED:
            assert run.met(), f"group Passed on {found!r} (measurement {run.bm.status})"
    # Then every tier keeps running (each at its own pace) until the group's Job is done with.
    for _ in range(400):
        if run.world.terminal or run.job is None or run.group.phase != GroupPhase.RUNNING:
            break
        t += 7
        run.measure(at(t))
        run.judge(at(t))
        run.workflow(at(t))
    assert all(met for met, passed in run.measured_at_pass if passed)
    group = run.group
    if not run.met():
        assert group.phase != GroupPhase.SUCCEEDED
        assert run.world.wf.status.verdict != Verdict.PASSED
    elif group.infra_retries == 0 and group.retries == 0 and _verdict(run) == \
            JobReason.THRESHOLDS_MET:
        # Measured and met before the Job tier's deadline, and its verdict came within the
        # Workflow's bound: the group passes.
        assert group.phase == GroupPhase.SUCCEEDED, group


def _verdict(run: Run) -> str | None:
    job = run.job
    cond = None if job is None else next(
        (c for c in job.status.conditions if c.type == ConditionType.VALIDATION_FAILED), None)
    return None if cond is None else cond.reason


def test_late_job_tier_never_passes_the_group() -> None:
    """The Job tier never gives its verdict (it is down): the Workflow waits, then past its
    safety bound ends the group as an infrastructure abort, never Passed."""
    run = _start(250.0)
    run.measure(at(20))
    t = 20.0
    while run.job is not None:
        t += 15
        run.workflow(at(t))
        assert run.group.phase != GroupPhase.SUCCEEDED
        assert t < 3600, "the Workflow waited forever"
    fc = run.group.failure_class
    assert fc is not None and fc.reason == VERDICT_MISSING and run.group.infra_retries == 1
    assert t >= 300 + 30 + VALIDATION_GRACE.total_seconds()


def test_on_time_verdict_passes_a_met_threshold() -> None:
    """Measurement, then the Job tier, then the Workflow: a met threshold passes at once."""
    run = _start(250.0)
    run.measure(at(20))
    run.judge(at(21))
    cond = next(c for c in run.job.status.conditions  # type: ignore[union-attr]
                if c.type == ConditionType.VALIDATION_FAILED)
    assert cond.reason == JobReason.THRESHOLDS_MET
    run.workflow(at(22))
    assert run.group.phase == GroupPhase.SUCCEEDED


def test_missing_profile_fails_at_once() -> None:
    """No LogProfile: the Job tier's verdict comes on its first pass after the measurement said
    so (no measurementTimeout wait), ThresholdNoData with scope Configuration."""
    run = _start("noprofile")
    run.measure(at(20))
    run.judge(at(21))
    job = run.job
    assert job is not None and job.status.failure_class is not None
    assert job.status.failure_class.scope == "Configuration"
    assert "LogProfile nccl-bandwidth not found" in job.status.failure_class.message
    run.workflow(at(22))
    assert run.group.phase != GroupPhase.SUCCEEDED


def test_no_data_is_judged_by_its_cause() -> None:
    """ThresholdNoData reaches the Workflow by its cause: a measurement that never completed
    (ControlPlane) defers the group as infrastructure (nodes not Failed); no rows in the log
    (Workload) fails it as a threshold miss."""
    from cre.core.workflow.run import _unmeasured_cause

    late = _start(250.0)  # the measurement never runs: never completes
    late.judge(at(10 + 300 + 31))
    job = late.job
    assert job is not None and job.status.failure_class is not None
    assert job.status.failure_class.scope == "ControlPlane"
    late.workflow(at(10 + 300 + 32))
    assert late.group.infra_retries == 1 and late.group.phase != GroupPhase.FAILED
    empty = _start("nodata")
    empty.measure(at(20))
    empty.judge(at(10 + 300 + 1))
    job = empty.job
    assert job is not None
    outcome = _unmeasured_cause(D.job_outcome(job))  # type: ignore[arg-type]
    assert outcome.validation  # Workload: the threshold's own failure
