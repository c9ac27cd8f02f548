"""Per-node measurements (``nccl-loopback``, workerStrategy Multi): every node pod is read at the
end, one result per node, thresholds judged per node, only the node that missed is blamed."""

from __future__ import annotations

import attrs

from cre.api import labels as L
from cre.api.conditions import (
    ConditionType,
    FailedNodeReason,
    FailureScope,
    JobReason,
    MeasurementReason,
)
from cre.api.measurement import BandwidthMeasurement, NodeBandwidth
from cre.api.meta import ConditionStatus
from cre.core.common.observed import ContainerState, ContainerStatusView, PodView
from cre.core.job.bandwidth import validate_succeeded
from cre.core.job.thresholds import judge_nodes, node_values
from cre.core.measure.bandwidth import (
    BandwidthObservation,
    BandwidthPlan,
    ReadRequest,
    ReadResult,
    pods_per_node,
    reconcile_bandwidth,
)
from cre.core.measure.logprofile import NCCL_LOOPBACK, compile_profile, shipped_profiles
from cre.core.workflow import deferral as D
from tests.core.test_measurement_core import T0, _answer, _bm, _job, _log, at

LOOPBACK = compile_profile(next(p for p in shipped_profiles()
                                if p.metadata.name == NCCL_LOOPBACK))


def _node_pod(index: int, *, phase: str = "Succeeded", attempt: int = 0,
              uid: str | None = None) -> PodView:
    return PodView(
        name=f"j1-workload-node-0-{index}-{attempt}", namespace="ns",
        uid=uid or f"pod-{index}-{attempt}", phase=phase, node_name=f"node-{index}",
        labels=((L.REPLICATED_JOB_NAME, "node"), (L.JOB, "j1"),
                (L.COMPLETION_INDEX, str(index)), (L.RESTART_ATTEMPT, str(attempt))),
        container_statuses=(ContainerStatusView(
            name="node", state=ContainerState(kind="terminated", exit_code=0),
            restart_count=0),))


def _logs(bus: dict[int, float]) -> dict[str, list[str]]:
    return {f"pod-{i}-0": _log([(f"2026-12-01T10:00:0{i}.000000000Z", 1024, b / 2),
                                (f"2026-12-01T10:00:0{i}.500000000Z", 2048, b)])
            for i, b in bus.items()}


def _final(bus: dict[int, float], *, errors: dict[int, str] | None = None
           ) -> tuple[BandwidthMeasurement, BandwidthPlan]:
    pods = tuple(_node_pod(i) for i in bus)
    obs = BandwidthObservation(job=_job(ConditionType.SUCCEEDED, when=10,
                                          reason=JobReason.WORKLOAD_COMPLETED),
                                 profile=LOOPBACK, pods=pods)
    bm = attrs.evolve(_bm(), spec=attrs.evolve(_bm().spec, log_profile_ref=NCCL_LOOPBACK))
    plan = reconcile_bandwidth(bm, obs, at(20))
    reads = [a for a in plan.asks if isinstance(a, ReadRequest) and a.per_node]
    assert len(reads) == len(plan.asks) == len(bus)
    logs = _logs(bus)
    answers: list[ReadResult] = []
    for req in reads:
        index = int(req.pod_uid.split("-")[1])
        answers.append(_answer(req, logs[req.pod_uid],
                               error=(errors or {}).get(index)))
    plan = reconcile_bandwidth(bm, attrs.evolve(obs, node_reads=tuple(answers)), at(20))
    return bm, plan


def test_the_loopback_profile_reads_every_node() -> None:
    assert LOOPBACK.multi and LOOPBACK.replicated_job == "node"
    assert not compile_profile(shipped_profiles()[0]).multi


def test_pods_per_node_takes_the_newest_attempt_of_each_index() -> None:
    pods = (_node_pod(1), _node_pod(0, attempt=0, phase="Failed"), _node_pod(0, attempt=1))
    assert [p.name for p in pods_per_node(pods, "node")] == [
        "j1-workload-node-0-0-1", "j1-workload-node-0-1-0"]


def test_final_read_keeps_one_result_per_node() -> None:
    _, plan = _final({0: 480.0, 1: 480.0, 2: 192.0})
    assert plan.status is not None and plan.status.completion_time is not None
    status = plan.status
    done = next(c for c in status.conditions if c.type == ConditionType.COMPLETE)
    assert done.reason == MeasurementReason.JOB_SUCCEEDED
    assert "3 nodes" in done.message
    assert [(n.node_name, n.bus_bw) for n in status.node_results] == [
        ("node-0", "480.00"), ("node-1", "480.00"), ("node-2", "192.00")]
    # results: the per-size means over the nodes, every row counted once
    assert [(r.size_bytes, r.bus_bw, r.samples) for r in status.results] == [
        (1024, "192.00", 3), (2048, "384.00", 3)]


def test_a_node_read_that_fails_is_retried_not_judged() -> None:
    _, plan = _final({0: 480.0, 1: 480.0}, errors={1: "connection reset"})
    assert plan.status is not None and plan.status.completion_time is None
    measuring = next(c for c in plan.status.conditions if c.type == ConditionType.MEASURING)
    assert measuring.reason == MeasurementReason.FINAL_READ_PENDING
    assert "pod j1-workload-node-0-1-0: connection reset" in measuring.message


def test_thresholds_blame_only_the_node_that_missed() -> None:
    bm, plan = _final({0: 480.0, 1: 480.0, 2: 192.0})
    assert plan.status is not None
    bm = attrs.evolve(bm, status=plan.status)
    values = node_values(bm)
    assert values is not None and set(values) == {"node-0", "node-1", "node-2"}
    job = _job(ConditionType.SUCCEEDED, when=10, reason=JobReason.WORKLOAD_COMPLETED)
    job = attrs.evolve(job, spec=attrs.evolve(job.spec, thresholds={
        "busBandwidthGBps": "value >= 300"}))
    judged = validate_succeeded(job, bm, at(30), timeout=T0 - T0, cap=15.0)
    status = judged.status
    assert status.bus_bandwidth_gbps == "192.00"  # the lowest node: the number that explains
    cond = next(c for c in status.conditions if c.type == ConditionType.VALIDATION_FAILED)
    assert (cond.status, cond.reason) == (ConditionStatus.TRUE, JobReason.THRESHOLD_VIOLATED)
    assert "node-2: measured 192.0000, expression: value >= 300" in cond.message
    assert [(f.name, f.reason) for f in status.failed_nodes] == [
        ("node-2", FailedNodeReason.THRESHOLD_VIOLATION)]
    # The Workflow's view: Node class, only node-2 blamed, even without deferral.
    outcome = D.job_outcome(attrs.evolve(job, status=status))
    assert outcome is not None and outcome.validation and not outcome.succeeded
    assert "192.0000" in outcome.message
    for deferral in (True, False):
        decision = D.decide(nodes=("node-0", "node-1", "node-2"), retries=0, infra_retries=0,
                            outcome=outcome, policy=D.EffectivePolicy(deferral=deferral),
                            now=at(0), observed={})
        assert [(r.name, r.scope) for r in decision.failed] == [
            ("node-2", FailureScope.NODE)]


def test_judge_nodes_fails_closed_on_a_node_without_figures() -> None:
    verdict = judge_nodes({"busBandwidthGBps": "value >= 1"},
                          {"a": {"busBandwidthGBps": 5.0}, "b": {}},
                          why_missing={"b": "pod b: no bandwidth rows in its log"})
    assert verdict.failed and [n for n, _ in verdict.nodes] == ["b"]
    assert "no bandwidth rows" in verdict.message
    met = judge_nodes({"busBandwidthGBps": "value >= 1"},
                      {"a": {"busBandwidthGBps": 5.0}, "b": {"busBandwidthGBps": 3.0}})
    assert not met.failed and "lowest 3.0000" in met.message
    bad = judge_nodes({"busBandwidthGBps": "value >="}, {"a": {"busBandwidthGBps": 5.0}})
    assert bad.reason == JobReason.INVALID_THRESHOLD_EXPRESSION and not bad.nodes


def test_provisional_node_results_are_not_judged() -> None:
    assert node_values(attrs.evolve(_bm(), status=attrs.evolve(_bm().status, node_results=(
        NodeBandwidth(node_name="n", pod_name="p", bus_bw="1.00"),)))) is None  # not final


def test_a_group_level_miss_still_blames_the_whole_group() -> None:
    """A multi-node all-reduce has one figure for the group: every node answers for it."""
    outcome = D.JobOutcome(succeeded=False, reason=JobReason.THRESHOLD_VIOLATED,
                           message="Threshold violated", validation=True)
    decision = D.decide(nodes=("a", "b"), retries=0, infra_retries=0, outcome=outcome,
                        policy=D.EffectivePolicy(deferral=False), now=at(0), observed={})
    assert [(r.name, r.reason) for r in decision.failed] == [
        ("a", FailedNodeReason.THRESHOLD_VIOLATION), ("b", FailedNodeReason.THRESHOLD_VIOLATION)]
