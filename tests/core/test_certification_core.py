"""The pure Certification core: categories in spec order, fail-continue, unknown categories
and bad options fail before anything is created, WaitingForNodes, option merging, the
summary verdict and the printer column."""

from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from cre.api.conditions import (
    CategoryState,
    CertificationReason,
    ConditionType,
    GroupPhase,
    Verdict,
)
from cre.api.meta import Condition, ConditionStatus, TypedLocalObjectReference
from cre.api.workflow import GroupStatus
from cre.core.certification.build import merged_options
from cre.core.certification.reconcile import CertificationObservation, reconcile_certification
from tests.core.tierworld import (
    CertificationWorld,
    at,
    catalog,
    certification,
    gpu_node,
    nodes,
)

ALL_REDUCE = ("communication", "nccl-all-reduce")
LOOPBACK = ("communication", "nccl-loopback")


def _cond(world: CertificationWorld, type_: str) -> tuple[str, str, str] | None:
    c = next((c for c in world.cert.status.conditions if c.type == type_), None)
    return None if c is None else (str(c.status), c.reason, c.message)


def test_categories_run_in_order_and_a_failure_does_not_stop_the_next() -> None:
    """The first category fails, the second still runs; Failed overall, 1/2 passed."""
    world = CertificationWorld(cert=certification(ALL_REDUCE, LOOPBACK), nodes=nodes(4))
    world.step(at(0))
    assert len(world.created) == 1 and "nccl-all-reduce" in world.created[0]
    world.finish(world.created[0], ok=False, verdict=Verdict.FAILED, now=at(1))
    world.step(at(2))
    world.step(at(3))
    assert len(world.created) == 2 and "nccl-loopback" in world.created[1]
    states = [c.status for c in world.cert.status.category_statuses]
    assert states == [CategoryState.FAILED, CategoryState.IN_PROGRESS]
    world.finish(world.created[1], ok=True, verdict=Verdict.PASSED, now=at(4))
    for t in range(5, 8):
        world.step(at(t))
    assert _cond(world, "Failed") == ("True", CertificationReason.WORKFLOW_FAILED,
                                      "Category communication/nccl-all-reduce failed: done")
    assert world.cert.status.verdict == Verdict.FAILED
    assert world.cert.status.categories == "1/2"


def test_all_pass_with_one_incomplete_summarises_incomplete() -> None:
    """Passed + Incomplete categories: Succeeded, verdict Incomplete, Incomplete=True."""
    world = CertificationWorld(cert=certification(ALL_REDUCE, LOOPBACK), nodes=nodes(2))
    world.step(at(0))
    world.finish(world.created[0], ok=True, verdict=Verdict.INCOMPLETE, now=at(1))
    world.step(at(2))
    world.step(at(3))
    world.finish(world.created[1], ok=True, verdict=Verdict.PASSED, now=at(4))
    for t in range(5, 8):
        world.step(at(t))
    assert _cond(world, "Succeeded")[:2] == ("True", CertificationReason.ALL_WORKFLOWS_SUCCEEDED)
    assert world.cert.status.verdict == Verdict.INCOMPLETE
    assert _cond(world, "Incomplete")[0] == "True"
    assert world.cert.status.categories == "2/2"


def test_unknown_category_fails_at_once_with_nothing_created() -> None:
    """An unknown category fails the Certification before any Workflow exists, naming the
    field and the known categories."""
    world = CertificationWorld(cert=certification(ALL_REDUCE, ("communication", "nope")),
                               nodes=nodes(2))
    world.step(at(0))
    status, reason, message = _cond(world, "Failed") or ("", "", "")
    assert (status, reason) == ("True", CertificationReason.CATEGORY_NOT_FOUND)
    assert "spec.categories[1]: unknown category 'communication/nope'" in message
    assert world.created == []


def test_nodes_per_job_above_the_cluster_is_clamped_with_an_event() -> None:
    """A per-category nodesPerJob larger than the eligible nodes is clamped to them: the
    Workflow is made for 4 nodes per Job, and an event and the category message say so."""
    cert = certification(ALL_REDUCE)
    cats = (attrs.evolve(cert.spec.categories[0], options=attrs.evolve(
        merged_options(cert, 0), nodes_per_job=9)),)
    cert = attrs.evolve(cert, spec=attrs.evolve(cert.spec, categories=cats))
    world = CertificationWorld(cert=cert, nodes=nodes(4))
    plan = world.step(at(0))
    assert (_cond(world, "Failed") or ("",))[0] != "True"
    assert len(world.created) == 1
    wf = world.workflows[world.created[0]]
    train_job = wf.spec.job_template.spec.workload.train_job or {}
    assert train_job["trainer"]["numNodes"] == 4
    clamped = [e for e in plan.events if e.reason == CertificationReason.NODES_PER_JOB_CLAMPED]
    assert len(clamped) == 1
    assert "nodesPerJob: 9 is more than the 4 eligible node(s); clamped to 4" in \
        clamped[0].message
    assert "clamped to 4" in (world.cert.status.category_statuses[0].message or "")


def test_a_single_node_entry_runs_one_job_per_node_by_default() -> None:
    """A single-pod entry (nccl-loopback) with nodesPerJob unset gets numNodes 1 (one Job,
    one result per node); an explicit nodesPerJob is honoured."""
    world = CertificationWorld(cert=certification(LOOPBACK), nodes=nodes(4))
    world.step(at(0))
    wf = world.workflows[world.created[0]]
    assert (wf.spec.job_template.spec.workload.train_job or {})["trainer"]["numNodes"] == 1
    cert = certification(LOOPBACK)
    cert = attrs.evolve(cert, spec=attrs.evolve(cert.spec, nodes_per_job=2))
    world = CertificationWorld(cert=cert, nodes=nodes(4))
    world.step(at(0))
    wf = world.workflows[world.created[0]]
    assert (wf.spec.job_template.spec.workload.train_job or {})["trainer"]["numNodes"] == 2


def test_waiting_for_nodes_then_nodes_appear() -> None:
    """No node yet: WaitingForNodes (requeued), then nodes appear and the Workflow is made."""
    world = CertificationWorld(cert=certification(ALL_REDUCE), nodes=())
    plan = world.step(at(10))
    assert _cond(world, "InProgress")[1] == CertificationReason.WAITING_FOR_NODES
    assert "waiting 290s more" in _cond(world, "InProgress")[2]
    assert plan.requeue_after is not None and plan.creates == ()
    world.nodes = nodes(2)
    world.step(at(60))
    assert len(world.created) == 1


def test_waiting_for_nodes_says_how_many_match_and_why_not_eligible() -> None:
    """Nodes that match but are NotReady or cordoned: the WaitingForNodes message counts them
    and names each reason, instead of saying that no node matches."""
    world = CertificationWorld(cert=certification(ALL_REDUCE),
                               nodes=(*nodes(2, ready="Unknown"),
                                      gpu_node("gpu-09", cordoned=True)))
    world.step(at(10))
    message = _cond(world, "InProgress")[2]
    assert message == ("No eligible node for nodeSelector nvidia.com/gpu.present=true yet for "
                       "category communication/nccl-all-reduce (3 GPU node(s) match but none "
                       "is eligible: 1 Cordoned (gpu-09), 2 NotReady (gpu-00, gpu-01)); "
                       "waiting 290s more")


def test_waiting_for_nodes_names_the_architecture_asked_for_and_found() -> None:
    """A target pinning a GPU product no node has: the message counts the GPU nodes and names
    the architecture asked for and the ones present."""
    cert = certification(ALL_REDUCE)
    target = attrs.evolve(cert.spec.target, node_selector={
        **cert.spec.target.node_selector, "nvidia.com/gpu.product": "NVIDIA-GB200"})
    cert = attrs.evolve(cert, spec=attrs.evolve(cert.spec, target=target))
    world = CertificationWorld(cert=cert, nodes=nodes(3))
    world.step(at(10))
    message = _cond(world, "InProgress")[2]
    assert ("(0 of 3 GPU node(s) match; the target asks for gb200 (NVIDIA-GB200), the GPU "
            "nodes are h100 (3)); waiting 290s more") in message


def test_waiting_ends_after_five_minutes() -> None:
    """Still no node 5 minutes after creation: the category fails and the Certification ends
    Failed."""
    world = CertificationWorld(cert=certification(ALL_REDUCE), nodes=())
    world.step(at(0))
    for t in (301, 302, 303):
        world.step(at(t))
    assert world.cert.status.category_statuses[0].status == CategoryState.FAILED
    assert _cond(world, "Failed")[0] == "True"
    assert world.created == []


def test_options_merge_per_category() -> None:
    """Per-category options win field by field; workload labels merge per key; the built
    Workflow carries the failure policy and the Certification as owner."""
    cert = certification(ALL_REDUCE, maxConcurrent=3, failurePolicy={"mode": "FailFast"},
                         workloadMetadata={"labels": {"a": "1", "b": "1"}})
    own = merged_options(cert, 0)
    cats = (attrs.evolve(cert.spec.categories[0], options=attrs.evolve(
        own, max_concurrent=None, repeat_count=2,
        workload_metadata=attrs.evolve(own.workload_metadata, labels={"b": "2"}))),)
    cert = attrs.evolve(cert, spec=attrs.evolve(cert.spec, categories=cats))
    merged = merged_options(cert, 0)
    assert merged.max_concurrent == 3 and merged.repeat_count == 2
    assert merged.workload_metadata is not None
    assert dict(merged.workload_metadata.labels) == {"a": "1", "b": "2"}
    world = CertificationWorld(cert=cert, nodes=nodes(2))
    world.step(at(0))
    wf = world.workflows[world.created[0]]
    assert wf.spec.failure_policy is not None and wf.spec.failure_policy.mode == "FailFast"
    assert wf.spec.orchestration.iterations == 2
    assert wf.metadata.owner_references[0].kind == "Certification"


def test_category_mirrors_workflow_node_result_refs() -> None:
    """A running category copies its Workflow's node-result ConfigMap refs."""
    world = CertificationWorld(cert=certification(ALL_REDUCE), nodes=nodes(2))
    world.step(at(0))
    name = world.created[0]
    ref = TypedLocalObjectReference(kind="ConfigMap", name="failed-nodes-abc")
    wf = world.workflows[name]
    world.workflows[name] = attrs.evolve(wf, status=attrs.evolve(wf.status, failed_nodes_ref=ref))
    world.step(at(1))
    assert world.cert.status.category_statuses[0].failed_nodes_ref == ref


def test_deletion_deletes_owned_workflows_then_the_finalizer() -> None:
    """Deletion removes the Workflows it controls, confirms they are gone, then unblocks."""
    world = CertificationWorld(cert=certification(ALL_REDUCE), nodes=nodes(2))
    world.step(at(0))
    world.cert = attrs.evolve(world.cert, metadata=attrs.evolve(world.cert.metadata,
                                                                deletion_timestamp=at(1)))
    plan = world.step(at(2))
    assert [d.kind for d in plan.deletes] == ["Workflow"]
    plan = world.step(at(3))
    assert plan.patches and world.cert.metadata.finalizers == ()


def test_plans_are_deterministic() -> None:
    """The same Certification and observation always give the same plan."""
    cert = certification(ALL_REDUCE, LOOPBACK)
    obs = CertificationObservation(nodes=nodes(3))
    assert reconcile_certification(cert, obs, at(0), catalog=catalog()) == \
        reconcile_certification(cert, obs, at(0), catalog=catalog())


def test_a_repeated_category_gets_its_own_workflow_name() -> None:
    """The same entry twice (say with other options) runs as two distinct Workflows."""
    world = CertificationWorld(cert=certification(LOOPBACK, LOOPBACK), nodes=nodes(2))
    world.step(at(0))
    world.finish(world.created[0], ok=True, verdict=Verdict.PASSED, now=at(1))
    world.step(at(2))
    world.step(at(3))
    assert world.created == ["cert-communication-nccl-loopback",
                             "cert-communication-nccl-loopback-1"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([ALL_REDUCE, LOOPBACK]), st.booleans(),
                          st.sampled_from(list(Verdict))), min_size=1, max_size=4))
def test_categories_one_at_a_time_and_the_verdict_summarises(
        script: list[tuple[tuple[str, str], bool, Verdict]]) -> None:
    """Whatever the categories' outcomes: one category runs at a time, in spec order, every
    category runs, and the Certification's verdict is the worst of theirs."""
    world = CertificationWorld(cert=certification(*(entry for entry, _, _ in script)),
                               nodes=nodes(2))
    finished = 0
    for t in range(60):
        world.step(at(t))
        states = [c.status for c in world.cert.status.category_statuses]
        assert states.count(CategoryState.IN_PROGRESS) <= 1
        if world.terminal:
            break
        if finished < len(world.created):
            _, ok, verdict = script[finished]
            verdict = verdict if ok and verdict != Verdict.FAILED else (
                Verdict.PASSED if ok else Verdict.FAILED)
            world.finish(world.created[finished], ok=ok, verdict=verdict, now=at(t))
            finished += 1
    assert world.terminal
    assert len(world.created) == len(script)
    verdicts = [c.verdict for c in world.cert.status.category_statuses]
    expected = (Verdict.FAILED if Verdict.FAILED in verdicts else
                Verdict.INCOMPLETE if Verdict.INCOMPLETE in verdicts else Verdict.PASSED)
    assert world.cert.status.verdict == expected
    rest = reconcile_certification(world.cert, CertificationObservation(
        nodes=world.nodes, workflows=tuple(world.workflows.values())), at(99), catalog=catalog())
    assert rest.quiet


def test_headline_is_the_most_severe_failed_category() -> None:
    """A threshold miss in the first category and broken hardware in the second: the headline
    is the hardware one (JobHardwareFailed, that category's cause), saying one more failed;
    a Workflow's SuspectedClusterOutage is copied onto the Certification."""
    world = CertificationWorld(cert=certification(ALL_REDUCE, LOOPBACK), nodes=nodes(4))
    world.step(at(0))
    world.finish(world.created[0], ok=False, verdict=Verdict.FAILED, now=at(1),
                 reason="JobValidationFailed", message="1 groups failed; busBW 191 < 300")
    world.step(at(2))
    world.step(at(3))
    outage = Condition(type=ConditionType.SUSPECTED_CLUSTER_OUTAGE,
                       status=ConditionStatus.TRUE, reason="SuspectedClusterOutage",
                       message="2 of 2 groups aborted", last_transition_time=at(4))
    world.finish(world.created[1], ok=False, verdict=Verdict.FAILED, now=at(4),
                 reason="JobHardwareFailed", message="Broken node(s) found: gpu-02: GPU",
                 extra=(outage,))
    for t in range(5, 8):
        world.step(at(t))
    assert _cond(world, "Failed") == (
        "True", CertificationReason.JOB_HARDWARE_FAILED,
        "Category communication/nccl-loopback failed: Broken node(s) found: gpu-02: GPU "
        "(1 more category failed)")
    copied = _cond(world, "SuspectedClusterOutage")
    assert copied is not None and copied[:2] == ("True", "SuspectedClusterOutage")
    assert "2 of 2 groups aborted" in copied[2]


def test_a_category_that_never_started_heads_as_configuration() -> None:
    """No node matches the target past the wait: the headline is ConfigurationError with the
    discovery message, not a generic sentence."""
    world = CertificationWorld(cert=certification(ALL_REDUCE), nodes=())
    for t in (0, 400, 401, 402):
        world.step(at(t))
    failed = _cond(world, "Failed")
    assert failed is not None and failed[1] == CertificationReason.CONFIGURATION_ERROR
    assert failed[2].startswith("Category communication/nccl-all-reduce failed: ")
    assert "node" in failed[2].lower()


def test_a_threshold_miss_fails_with_the_validation_reason_and_the_busbw() -> None:
    """A category whose Workflow missed a threshold: the Certification mirrors ValidationFailed
    (the first such category's message), fails with WorkflowValidationFailed naming the value
    and the expression, and each category lists its groups' measured busBW."""
    world = CertificationWorld(cert=certification(ALL_REDUCE, LOOPBACK), nodes=nodes(4))
    world.step(at(0))
    name = world.created[0]
    world.finish(name, ok=False, verdict=Verdict.FAILED, now=at(1))
    wf = world.workflows[name]
    missed = ("1 group failed across 1 iteration; group-1: Threshold \"busBandwidthGBps\" "
              "violated: measured 191.6000, expression: value >= 300")
    conditions = tuple(attrs.evolve(c, message=missed, reason="JobValidationFailed")
                       if c.type == ConditionType.FAILED else c for c in wf.status.conditions)
    conditions += (Condition(type=ConditionType.VALIDATION_FAILED, status=ConditionStatus.TRUE,
                             reason="JobValidationFailed", message="x",
                             last_transition_time=at(1)),)
    groups = (GroupStatus(name="group-0", phase=GroupPhase.SUCCEEDED,
                          bus_bandwidth_gbps="478.92"),
              GroupStatus(name="group-1", phase=GroupPhase.FAILED, bus_bandwidth_gbps="191.60"),
              GroupStatus(name="group-2", phase=GroupPhase.CANCELLED))
    world.workflows[name] = attrs.evolve(wf, status=attrs.evolve(
        wf.status, conditions=conditions, groups=groups))
    world.step(at(2))
    world.step(at(3))
    world.finish(world.created[1], ok=True, verdict=Verdict.PASSED, now=at(4))
    for t in range(5, 8):
        world.step(at(t))
    first = world.cert.status.category_statuses[0]
    assert [(g.name, g.phase, g.bus_bandwidth_gbps) for g in first.groups] == [
        ("group-0", GroupPhase.SUCCEEDED, "478.92"), ("group-1", GroupPhase.FAILED, "191.60")]
    validation = _cond(world, "ValidationFailed")
    assert validation is not None and validation[:2] == (
        "True", CertificationReason.WORKFLOW_VALIDATION_FAILED)
    failed = _cond(world, "Failed")
    assert failed is not None and failed[:2] == (
        "True", CertificationReason.WORKFLOW_VALIDATION_FAILED)
    assert "measured 191.6000, expression: value >= 300" in failed[2]
    assert "communication/nccl-all-reduce" in failed[2]


def test_job_tier_bounds_pass_from_the_certification_to_every_group_job() -> None:
    """schedulingStallTimeout and imagePullGraceSeconds set on the Certification reach the
    Workflow's job template and, through it, every group Job; unset they stay the Job
    defaults (30m, 120 s)."""
    from cre.core.workflow.groupjob import group_job

    cert = certification(ALL_REDUCE, schedulingStallTimeout="5m", imagePullGraceSeconds=45)
    world = CertificationWorld(cert=cert, nodes=nodes(2))
    world.step(at(0))
    wf = world.workflows[world.created[0]]
    assert wf.spec.job_template.spec.scheduling_stall_timeout == "5m"
    assert wf.spec.job_template.spec.image_pull_grace_seconds == 45
    job = group_job(wf, name="j", group="group-0", nodes=("gpu-0",), renames={})
    assert job["spec"]["schedulingStallTimeout"] == "5m"
    assert job["spec"]["imagePullGraceSeconds"] == 45
    plain = CertificationWorld(cert=certification(ALL_REDUCE), nodes=nodes(2))
    plain.step(at(0))
    spec = plain.workflows[plain.created[0]].spec.job_template.spec
    assert (spec.scheduling_stall_timeout, spec.image_pull_grace_seconds) == ("30m", 120)
