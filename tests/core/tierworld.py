"""A tiny in-memory world for the pure Workflow and Certification cores: it applies their
Plans the way the executor would (children appear in the caches at once, deletes are
immediate unless asked otherwise) and lets a test script each group Job's outcome."""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from cre.api.certification import Certification
from cre.api.conditions import ConditionType, JobReason, Phase
from cre.api.converter import from_dict
from cre.api.job import Job, JobStatus
from cre.api.labels import GPU_PRESENT, GPU_PRODUCT
from cre.api.meta import Condition
from cre.api.workflow import Workflow
from cre.catalog import load_catalog
from cre.catalog.model import Catalog
from cre.core.certification.build import build_workflow, discover_for
from cre.core.certification.reconcile import (
    CertificationObservation,
    CertificationPlan,
    reconcile_certification,
)
from cre.core.common.lifecycle import set_exclusive
from cre.core.common.observed import NodeTaint, NodeView, ObjectView
from cre.core.common.plan import Feedback
from cre.core.workflow.discovery import Discovery
from cre.core.workflow.reconcile import (
    WorkflowObservation,
    WorkflowPlan,
    WorkflowSettings,
    live_read,
)
from cre.core.workflow.run import reconcile_workflow
from tests.core.jobtier import Story, check_emittable, job_tier_status

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
NS = "certs"
H100 = "NVIDIA-H100-80GB-HBM3"
_CATALOG: list[Catalog] = []


def catalog() -> Catalog:
    """The shipped catalog (loaded once)."""
    if not _CATALOG:
        _CATALOG.append(load_catalog())
    return _CATALOG[0]


def at(seconds: float) -> datetime:
    """``T0`` plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)


def gpu_node(name: str, *, product: str | None = H100, ready: str = "True",
             cordoned: bool = False, gpus: int = 8, provider: str = "aws://us-east-1a/i-x",
             labels: Sequence[tuple[str, str]] = (), gpu: bool = True,
             taints: Sequence[NodeTaint] = ()) -> NodeView:
    """A GPU node view (AWS H100 by default)."""
    pairs = dict(labels)
    if gpu:
        pairs[GPU_PRESENT] = "true"
    if product is not None:
        pairs[GPU_PRODUCT] = product
    return NodeView(name=name, labels=tuple(sorted(pairs.items())), provider_id=provider,
                    unschedulable=cordoned, ready=ready, allocatable_gpus=gpus,
                    taints=tuple(taints))


def nodes(count: int, **kwargs: Any) -> tuple[NodeView, ...]:
    """``gpu-00 .. gpu-<count-1>``."""
    return tuple(gpu_node(f"gpu-{i:02d}", **kwargs) for i in range(count))


def certification(*categories: tuple[str, str], uid: str = "cert-uid-1",
                  **options: Any) -> Certification:
    """A Certification ``cert`` in namespace ``certs`` with the finalizer already added."""
    body: dict[str, Any] = {
        "apiVersion": "cre.dev/v1alpha1", "kind": "Certification",
        "metadata": {"name": "cert", "namespace": NS, "uid": uid, "generation": 1,
                     "resourceVersion": "1", "creationTimestamp": "2026-03-01T12:00:00Z",
                     "finalizers": ["cre.dev/certification-finalizer"]},
        "spec": {"target": {"nodeSelector": {GPU_PRESENT: "true"}},
                 "categories": [{"domain": d, "variant": v} for d, v in categories],
                 **options},
    }
    cert = from_dict(body)
    assert isinstance(cert, Certification)
    return cert


def workflow(node_views: Sequence[NodeView], *, uid: str = "wf-uid-12345678",
             entry: tuple[str, str] = ("communication", "nccl-all-reduce"),
             finalizer: bool = True, **options: Any) -> Workflow:
    """The Workflow a Certification builds for ``entry`` over ``node_views`` (AWS H100)."""
    cert = certification(entry, **options)
    found = discover_for(cert, 0, tuple(node_views), catalog())
    assert isinstance(found, Discovery), found
    body = build_workflow(cert, 0, found=found, catalog=catalog())
    body["metadata"].update(uid=uid, generation=1, resourceVersion="1",
                            creationTimestamp="2026-03-01T12:00:00Z",
                            finalizers=["cre.dev/workflow-finalizer"] if finalizer else [])
    wf = from_dict(body)
    assert isinstance(wf, Workflow)
    return wf


def _conditions(member: ConditionType, reason: str, message: str, now: datetime
                ) -> tuple[Any, ...]:
    conditions, _ = set_exclusive((), member=member, reason=reason, message=message, now=now,
                                  generation=1)
    return conditions


def succeeded(job: Job, now: datetime) -> JobStatus:
    """A Job status that says the workload completed (checked against the tier contract;
    failures come from :func:`told`, produced by the Job core)."""
    status = JobStatus(conditions=_conditions(ConditionType.SUCCEEDED,
                                              JobReason.WORKLOAD_COMPLETED, "done", now),
                       phase=Phase.SUCCEEDED)
    check_emittable(status)
    return status


def told(story: Story, *, node: str | None = None) -> Callable[[Job, datetime], JobStatus]:
    """An outcome that gives each Job the status the Job tier writes when ``story`` happens
    (``tests.core.jobtier``: produced by the Job core, never hand-written)."""
    return lambda job, now: job_tier_status(job, now, story, node=node)


Outcome = Callable[[Job, datetime], JobStatus | None]


def always_succeed(job: Job, now: datetime) -> JobStatus | None:
    """Every Job succeeds."""
    return succeeded(job, now)


@attrs.define
class WorkflowWorld:
    """One Workflow and its children, evolved by applying the core's plans."""

    wf: Workflow
    nodes: tuple[NodeView, ...]
    settings: WorkflowSettings = attrs.field(factory=WorkflowSettings)
    jobs: dict[str, Job] = attrs.field(factory=dict)
    deps: dict[tuple[str, str], ObjectView] = attrs.field(factory=dict)
    config_maps: dict[str, dict[str, bytes]] = attrs.field(factory=dict)
    plans: list[WorkflowPlan] = attrs.field(factory=list)
    created: list[tuple[str, str]] = attrs.field(factory=list)
    deleted: list[tuple[str, str]] = attrs.field(factory=list)
    events: list[tuple[str, str]] = attrs.field(factory=list)
    uid_counter: int = 0

    def observe(self, *, read_live: bool = False) -> WorkflowObservation:
        answered = (live_read(self.wf.metadata.name or ""),) if read_live else ()
        return WorkflowObservation(nodes=self.nodes, jobs=tuple(self.jobs.values()),
                                   dependencies=tuple(self.deps.values()),
                                   config_maps=dict(self.config_maps),
                                   feedback=Feedback(answered=answered))

    def step(self, now: datetime) -> WorkflowPlan:
        """One reconcile (with a live re-read when asked), applied."""
        plan = reconcile_workflow(self.wf, self.observe(), now, settings=self.settings)
        if plan.asks:
            assert not plan.writes, "a plan that asks carries no writes"
            plan = reconcile_workflow(self.wf, self.observe(read_live=True), now,
                                      settings=self.settings)
        self.apply(plan)
        return plan

    def apply(self, plan: WorkflowPlan) -> None:
        self.plans.append(plan)
        wf = self.wf
        for patch in plan.patches:
            finalizers = tuple(patch.body["metadata"]["finalizers"])
            wf = attrs.evolve(wf, metadata=attrs.evolve(wf.metadata, finalizers=finalizers))
        for d in plan.deletes:
            self.deleted.append((d.kind, d.name))
            if d.kind == "Job":
                job = self.jobs.get(d.name)
                assert job is not None and job.metadata.uid == d.uid, d
                del self.jobs[d.name]
            else:
                obj = self.deps.get((d.kind, d.name))
                assert obj is not None and obj.uid == d.uid, d
                del self.deps[(d.kind, d.name)]
        for c in plan.creates:
            if c.replace:  # a node-result ConfigMap
                self.config_maps[c.name] = {k: base64.b64decode(v)
                                            for k, v in c.body["binaryData"].items()}
                continue
            self.created.append((c.kind, c.name))
            self.uid_counter += 1
            uid = f"uid-{self.uid_counter}"
            if c.kind == "Job":
                assert c.name not in self.jobs, f"Job {c.name} created twice"
                body = dict(c.body)
                body["metadata"] = {**body["metadata"], "uid": uid, "generation": 1}
                job = from_dict(body)
                assert isinstance(job, Job)
                self.jobs[c.name] = job
            else:
                assert (c.kind, c.name) not in self.deps, f"{c.kind} {c.name} created twice"
                self.deps[(c.kind, c.name)] = ObjectView(
                    api_version=c.api_version, kind=c.kind, name=c.name,
                    namespace=c.namespace, uid=uid)
        if plan.status is not None:
            wf = attrs.evolve(wf, status=plan.status)
        self.events += [(e.reason, e.message) for e in plan.events]
        self.wf = wf

    def finish(self, outcome: Outcome, now: datetime) -> None:
        """Give every running Job the status ``outcome`` decides (``None``: keeps running)."""
        for name, job in list(self.jobs.items()):
            if job.status.conditions:
                continue
            status = outcome(job, now)
            if status is not None:
                self.jobs[name] = attrs.evolve(job, status=status)

    def run(self, outcome: Outcome, *, start: float = 0.0, limit: int = 200) -> float:
        """Reconcile and finish Jobs until the Workflow is terminal; the clock it ended at."""
        t = start
        for _ in range(limit):
            now = at(t)
            plan = self.step(now)
            if self.terminal:
                return t
            if plan.quiet:
                self.finish(outcome, now)
            t += 1.0
        raise AssertionError(f"no verdict after {limit} steps: {self.wf.status.conditions}")

    @property
    def terminal(self) -> bool:
        return any(c.type in ("Succeeded", "Failed") and c.status == "True"
                   for c in self.wf.status.conditions)

    def condition(self, type_: str) -> Any:
        return next((c for c in self.wf.status.conditions if c.type == type_), None)

    def delete(self, now: datetime) -> None:
        """Mark the Workflow deleted."""
        self.wf = attrs.evolve(self.wf, metadata=attrs.evolve(self.wf.metadata,
                                                              deletion_timestamp=now))


@attrs.define
class CertificationWorld:
    """One Certification; its Workflows finish as ``verdicts`` says (by category variant)."""

    cert: Certification
    nodes: tuple[NodeView, ...]
    workflows: dict[str, Workflow] = attrs.field(factory=dict)
    plans: list[CertificationPlan] = attrs.field(factory=list)
    created: list[str] = attrs.field(factory=list)

    def step(self, now: datetime) -> CertificationPlan:
        obs = CertificationObservation(nodes=self.nodes, workflows=tuple(self.workflows.values()))
        plan = reconcile_certification(self.cert, obs, now, catalog=catalog())
        if plan.asks:
            obs = attrs.evolve(obs, feedback=Feedback(answered=plan.asks))
            plan = reconcile_certification(self.cert, obs, now, catalog=catalog())
        self.plans.append(plan)
        cert = self.cert
        for patch in plan.patches:
            finalizers = tuple(patch.body["metadata"]["finalizers"])
            cert = attrs.evolve(cert, metadata=attrs.evolve(cert.metadata,
                                                            finalizers=finalizers))
        for d in plan.deletes:
            del self.workflows[d.name]
        for c in plan.creates:
            body = dict(c.body)
            body["metadata"] = {**body["metadata"], "uid": f"wf-{len(self.created)}"}
            wf = from_dict(body)
            assert isinstance(wf, Workflow)
            self.workflows[c.name] = wf
            self.created.append(c.name)
        if plan.status is not None:
            cert = attrs.evolve(cert, status=plan.status)
        self.cert = cert
        return plan

    def finish(self, name: str, *, ok: bool, verdict: str, now: datetime,
               reason: str | None = None, message: str = "done",
               extra: Sequence[Condition] = ()) -> None:
        wf = self.workflows[name]
        member = ConditionType.SUCCEEDED if ok else ConditionType.FAILED
        why = reason or ("JobCompleted" if ok else "IterationsFailed")
        status = attrs.evolve(wf.status, conditions=(*extra, *_conditions(member, why, message,
                                                                          now)),
                              verdict=verdict)
        self.workflows[name] = attrs.evolve(wf, status=status)

    @property
    def terminal(self) -> bool:
        return any(c.type in ("Succeeded", "Failed") and c.status == "True"
                   for c in self.cert.status.conditions)

