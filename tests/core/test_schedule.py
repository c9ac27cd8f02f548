"""The CertificationSchedule core: due times (cron in a time zone, interval), one run per due
time and never a burst, missed deadlines, Forbid and Replace, history and pruning, and the
idle-aware choice of nodes (busy ones left out, stalest first, whole groups)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cre.api.certification import Certification
from cre.api.converter import from_dict
from cre.api.meta import ObjectMeta, format_time
from cre.api.nodecertification import (
    CategoryResult,
    CertificationRef,
    NodeCertification,
    NodeCertificationSpec,
    NodeCertificationStatus,
    NodeResult,
)
from cre.api.schedule import CertificationSchedule, ScheduleReason
from cre.core.common.conditions import condition
from cre.core.common.observed import NodeTaint, NodeView
from cre.core.common.plan import CreateConflict, Feedback
from cre.core.schedule.nodes import (
    NO_GPU,
    GpuPodView,
    busy_nodes,
    choose_nodes,
    gpu_pod_view,
    group_size,
    staleness,
)
from cre.core.schedule.reconcile import ScheduleObservation, reconcile_schedule
from cre.core.schedule.times import MAX_COUNTED, ScheduleError, due_times, run_name
from tests.core.tierworld import gpu_node, nodes

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NS = "certs"
DCGM = {"domain": "diagnostics", "variant": "dcgm-level1"}


def schedule(*, status: dict[str, Any] | None = None, created: datetime = T0,
             **spec: Any) -> CertificationSchedule:
    """A schedule ``nightly`` created at ``created``; ``spec`` over an hourly default."""
    template = spec.pop("template", {"categories": [DCGM]})
    body: dict[str, Any] = {
        "apiVersion": "cre.dev/v1alpha1", "kind": "CertificationSchedule",
        "metadata": {"name": "nightly", "namespace": NS, "uid": "sched-uid", "generation": 1,
                     "resourceVersion": "7", "creationTimestamp": format_time(created)},
        "spec": {"certificationTemplate": {"spec": template},
                 **({"schedule": "0 * * * *"} if "interval" not in spec else {}), **spec},
        **({"status": status} if status else {}),
    }
    obj = from_dict(body)
    assert isinstance(obj, CertificationSchedule)
    return obj


def run(name: str, *, outcome: str | None = None, at: datetime = T0,
        deleting: bool = False, node_names: tuple[str, ...] = ("gpu-00",)) -> Certification:
    """A Certification the schedule controls; ``outcome`` Succeeded/Failed ended at ``at``."""
    conditions = [] if outcome is None else [
        {"type": outcome, "status": "True", "reason": "Done", "message": "",
         "lastTransitionTime": format_time(at)}]
    body: dict[str, Any] = {
        "apiVersion": "cre.dev/v1alpha1", "kind": "Certification",
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                     "creationTimestamp": format_time(at - timedelta(minutes=30)),
                     "ownerReferences": [{"apiVersion": "cre.dev/v1alpha1",
                                          "kind": "CertificationSchedule", "name": "nightly",
                                          "uid": "sched-uid", "controller": True}],
                     **({"deletionTimestamp": format_time(at)} if deleting else {})},
        "spec": {"target": {"nodeNames": list(node_names)}, "categories": [DCGM]},
        "status": {"conditions": conditions,
                   **({"verdict": "Passed" if outcome == "Succeeded" else "Failed"}
                      if outcome else {})},
    }
    cert = from_dict(body)
    assert isinstance(cert, Certification)
    return cert


def record(node: str, *results: tuple[NodeResult, datetime, datetime | None]
           ) -> NodeCertification:
    """A NodeCertification of ``node`` with dcgm-level1 results (result, time, validUntil)."""
    cats = tuple(CategoryResult(domain="diagnostics", variant="dcgm-level1", result=r, time=t,
                                valid_until=v, certification=CertificationRef(namespace=NS,
                                                                              name="x"))
                 for r, t, v in results)
    return NodeCertification(metadata=ObjectMeta(name=node),
                             spec=NodeCertificationSpec(node_name=node),
                             status=NodeCertificationStatus(categories=cats))


def observe(**kwargs: Any) -> ScheduleObservation:
    return ScheduleObservation(**{"nodes": nodes(4), **kwargs})


def created_nodes(plan: Any) -> list[str]:
    (create,) = plan.creates
    return list(create.body["spec"]["target"]["nodeNames"])


# --- due times ----------------------------------------------------------------------------


def test_cron_due_times_are_read_in_the_time_zone() -> None:
    """'0 2 * * *' in Europe/Paris is due at 01:00 UTC in winter; the next one a day later."""
    spec = schedule(schedule="0 2 * * *", timeZone="Europe/Paris").spec
    due = due_times(spec, created=T0, since=None, now=T0 + timedelta(days=1))
    assert due.latest == datetime(2026, 3, 2, 1, 0, tzinfo=UTC)
    assert due.count == 1
    assert due.next == datetime(2026, 3, 3, 1, 0, tzinfo=UTC)


def test_an_interval_is_due_at_creation_then_every_interval() -> None:
    """An interval's first run is due when the schedule was created, then on its grid."""
    spec = schedule(interval="90m").spec
    first = due_times(spec, created=T0, since=None, now=T0)
    assert (first.latest, first.count, first.next) == (T0, 1, T0 + timedelta(minutes=90))
    later = due_times(spec, created=T0, since=T0, now=T0 + timedelta(minutes=200))
    assert later.latest == T0 + timedelta(minutes=180)
    assert later.count == 2
    assert later.next == T0 + timedelta(minutes=270)


@given(st.integers(1, 600), st.integers(0, 5000), st.integers(0, 5000))
@settings(max_examples=60, deadline=None)
def test_interval_due_times_partition_the_timeline(minutes: int, a: int, b: int) -> None:
    """Two consecutive windows count each due time once, and the next is after now."""
    spec = schedule(interval=f"{minutes}m").spec
    mid, end = T0 + timedelta(minutes=min(a, b)), T0 + timedelta(minutes=max(a, b))
    whole = due_times(spec, created=T0, since=None, now=end)
    first = due_times(spec, created=T0, since=None, now=mid)
    second = due_times(spec, created=T0, since=first.latest, now=end)
    if whole.count < MAX_COUNTED:
        assert first.count + second.count == whole.count
    assert whole.next is not None and whole.next > end
    assert (second.latest or first.latest) == whole.latest


def test_a_cron_that_never_matches_is_an_error_not_a_hang() -> None:
    """'0 0 30 2 *' (February 30) has no due time: a ScheduleError saying so."""
    spec = schedule(schedule="0 0 30 2 *").spec
    with pytest.raises(ScheduleError, match="matches no date"):
        due_times(spec, created=T0, since=None, now=T0 + timedelta(days=400))


def test_counting_stops_at_the_cap_but_finds_the_latest() -> None:
    """A year of minutely due times counts MAX_COUNTED and still runs the latest."""
    spec = schedule(schedule="* * * * *").spec
    now = T0 + timedelta(days=365, seconds=30)
    due = due_times(spec, created=T0, since=None, now=now)
    assert due.count == MAX_COUNTED
    assert due.latest == now - timedelta(seconds=30)
    assert due.next == now + timedelta(seconds=30)


def test_an_unreadable_schedule_raises_schedule_error() -> None:
    """A time zone that slipped past validation is reported, not crashed on."""
    spec = attrs.evolve(schedule(schedule="0 * * * *").spec, time_zone="Mars/Olympus")
    with pytest.raises(ScheduleError, match="timeZone"):
        due_times(spec, created=T0, since=None, now=T0)


def test_run_names_carry_the_unix_minute_of_the_due_time() -> None:
    """The run due at T0 is named <schedule>-<minutes since the epoch>."""
    assert run_name("nightly", T0) == f"nightly-{int(T0.timestamp()) // 60}"


# --- runs -----------------------------------------------------------------------------------


def test_a_due_run_is_created_pinned_and_owned() -> None:
    """At the due time the Certification is created from the template, pinned to the chosen
    nodes, labelled and controlled by the schedule; the status counts it and looks ahead."""
    now = T0 + timedelta(hours=1, seconds=5)
    plan = reconcile_schedule(schedule(maxNodesPerRun=2), observe(), now)
    (create,) = plan.creates
    due = T0 + timedelta(hours=1)
    assert create.name == run_name("nightly", due)
    meta = create.body["metadata"]
    assert meta["labels"]["cre.dev/schedule"] == "nightly"
    assert meta["annotations"]["cre.dev/scheduled-time"] == format_time(due)
    assert meta["ownerReferences"][0]["uid"] == "sched-uid"
    assert created_nodes(plan) == ["gpu-00", "gpu-01"]
    assert plan.status is not None
    assert plan.status.runs == 1
    assert plan.status.last_schedule_time == due
    assert plan.status.next_schedule_time == due + timedelta(hours=1)
    assert [a.name for a in plan.status.active] == [create.name]
    assert plan.requeue_after == pytest.approx(3595)
    assert [e.reason for e in plan.events] == [ScheduleReason.RUN_CREATED]


def test_nothing_is_due_before_the_first_time() -> None:
    """Before the first due time: no create, requeue at it."""
    plan = reconcile_schedule(schedule(), observe(), T0 + timedelta(minutes=20))
    assert plan.creates == ()
    assert plan.requeue_after == pytest.approx(40 * 60)


def test_a_crash_after_the_create_does_not_make_a_second_run() -> None:
    """The status write lost: the run of the due time's name exists, so none is created."""
    due = T0 + timedelta(hours=1)
    held = run(run_name("nightly", due))
    plan = reconcile_schedule(schedule(), observe(certifications=(held,)),
                              due + timedelta(seconds=5))
    assert plan.creates == ()
    assert plan.status is not None and plan.status.last_schedule_time == due


def test_many_due_times_at_once_make_one_run_and_count_the_misses() -> None:
    """Five hours down: one run for the latest due time, four missed with a warning."""
    plan = reconcile_schedule(schedule(), observe(), T0 + timedelta(hours=5, minutes=1))
    assert len(plan.creates) == 1
    assert plan.creates[0].name == run_name("nightly", T0 + timedelta(hours=5))
    assert plan.status is not None and plan.status.missed_runs == 4
    assert ScheduleReason.RUNS_MISSED in [e.reason for e in plan.events]


def test_a_due_time_past_the_starting_deadline_is_missed() -> None:
    """Ten minutes late with a 5-minute deadline: no run, one miss, RunSkipped MissedDeadline."""
    plan = reconcile_schedule(schedule(startingDeadlineSeconds=300), observe(),
                              T0 + timedelta(hours=1, minutes=10))
    assert plan.creates == ()
    assert plan.status is not None and plan.status.missed_runs == 1
    cond = condition(plan.status.conditions, "RunSkipped")
    assert cond is not None and cond.reason == ScheduleReason.MISSED_DEADLINE


def test_forbid_skips_and_counts_while_a_run_is_active() -> None:
    """Forbid: an active run makes the due one skipped (counted, with its reason)."""
    plan = reconcile_schedule(schedule(), observe(certifications=(run("nightly-1"),)),
                              T0 + timedelta(hours=1))
    assert plan.creates == ()
    assert plan.status is not None and plan.status.skipped_runs == 1
    cond = condition(plan.status.conditions, "RunSkipped")
    assert cond is not None and cond.status == "True"
    assert cond.reason == ScheduleReason.CONCURRENCY_FORBID


def test_replace_deletes_the_active_run_then_creates_once_it_is_gone() -> None:
    """Replace: first the active run is deleted (no create); once gone, the due run is made."""
    sched = schedule(concurrencyPolicy="Replace")
    now = T0 + timedelta(hours=1)
    first = reconcile_schedule(sched, observe(certifications=(run("nightly-1"),)), now)
    assert first.creates == ()
    assert [d.name for d in first.deletes] == ["nightly-1"]
    assert first.requeue_after == 5.0
    waiting = reconcile_schedule(
        sched, observe(certifications=(run("nightly-1", deleting=True),)), now)
    assert waiting.creates == () and waiting.deletes == ()
    gone = reconcile_schedule(sched, observe(), now)
    assert len(gone.creates) == 1


def test_ended_runs_enter_the_history_and_the_oldest_beyond_the_limits_go() -> None:
    """Four succeeded and two failed runs, limits 2 and 1: the two oldest succeeded and the
    older failed run are deleted; all six are in the history, newest first."""
    runs = tuple(run(f"nightly-{i}", outcome="Succeeded", at=T0 - timedelta(hours=10 - i))
                 for i in range(4)) + \
        tuple(run(f"nightly-f{i}", outcome="Failed", at=T0 - timedelta(hours=5 - i))
              for i in range(2))
    plan = reconcile_schedule(schedule(successfulRunsHistoryLimit=2, failedRunsHistoryLimit=1),
                              observe(certifications=runs), T0 + timedelta(minutes=1))
    assert sorted(d.name for d in plan.deletes) == ["nightly-0", "nightly-1", "nightly-f0"]
    assert plan.status is not None
    assert [h.name for h in plan.status.history] == [
        "nightly-f1", "nightly-f0", "nightly-3", "nightly-2", "nightly-1", "nightly-0"]
    assert plan.status.last_successful_time == T0 - timedelta(hours=7)
    assert ScheduleReason.RUNS_PRUNED in [e.reason for e in plan.events]


def test_a_run_of_someone_else_is_neither_counted_nor_pruned() -> None:
    """A Certification the schedule does not control is not active, history or pruned."""
    foreign = attrs.evolve(run("other", outcome="Failed"),
                           metadata=attrs.evolve(run("other").metadata, owner_references=()))
    plan = reconcile_schedule(schedule(failedRunsHistoryLimit=0),
                              observe(certifications=(foreign,)), T0 + timedelta(minutes=1))
    assert plan.deletes == ()
    assert plan.status is not None and plan.status.history == ()


def test_a_suspended_schedule_lets_due_times_pass() -> None:
    """Suspended: no run, Scheduling False Suspended, the due time marked handled."""
    plan = reconcile_schedule(schedule(suspend=True), observe(), T0 + timedelta(hours=2))
    assert plan.creates == ()
    assert plan.status is not None
    assert plan.status.last_schedule_time == T0 + timedelta(hours=2)
    assert plan.status.next_schedule_time is None
    cond = condition(plan.status.conditions, "Scheduling")
    assert cond is not None and cond.reason == ScheduleReason.SUSPENDED


def test_a_schedule_that_never_matches_says_so() -> None:
    """February 30: Scheduling False InvalidSchedule, a warning, no requeue."""
    sched = schedule(schedule="0 0 30 2 *")
    plan = reconcile_schedule(sched, observe(), T0 + timedelta(days=1))
    assert plan.status is not None
    assert plan.status.next_schedule_time is None and plan.requeue_after is None
    assert plan.creates == ()
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "InvalidSchedule")]
    cond = condition(plan.status.conditions, "Scheduling")
    assert cond is not None and (cond.status, cond.reason) == ("False", "InvalidSchedule")
    again = reconcile_schedule(attrs.evolve(sched, status=plan.status), observe(),
                               T0 + timedelta(days=2))
    assert again.events == () and again.status is None


def test_a_create_conflict_skips_the_run_with_the_reason() -> None:
    """The run's name held by a foreign object: skipped RunCreateRefused, nothing created."""
    due = T0 + timedelta(hours=1)
    name = run_name("nightly", due)
    obs = observe(feedback=Feedback(create_conflicts=(
        CreateConflict(kind="Certification", name=name, holder={}),)))
    plan = reconcile_schedule(schedule(), obs, due)
    assert plan.creates == ()
    cond = condition(plan.status.conditions, "RunSkipped") if plan.status else None
    assert cond is not None and cond.reason == ScheduleReason.RUN_CREATE_REFUSED


@given(st.integers(0, 6 * 60), st.sampled_from(["Forbid", "Replace"]),
       st.booleans())
@settings(max_examples=60, deadline=None)
def test_a_plan_applied_comes_to_rest(minutes: int, policy: str, busy: bool) -> None:
    """Applying a plan's status and creates, a second pass at the same instant writes nothing
    new: no second create, no count moved twice."""
    sched = schedule(concurrencyPolicy=policy)
    now = T0 + timedelta(minutes=minutes)
    pods = (GpuPodView(node="gpu-00", gpus=8, phase="Running"),) if busy else ()
    plan = reconcile_schedule(sched, observe(busy=busy_nodes(pods)), now)
    applied = sched if plan.status is None else attrs.evolve(sched, status=plan.status)
    made = tuple(from_dict(dict(c.body)) for c in plan.creates)
    again = reconcile_schedule(applied, observe(busy=busy_nodes(pods), certifications=made), now)
    assert again.creates == () and again.deletes == ()
    assert again.status is None


# --- nodes ----------------------------------------------------------------------------------


def test_busy_nodes_are_left_out_and_named() -> None:
    """A node running someone else's GPU pod is not chosen; the event names it."""
    pods = (GpuPodView(node="gpu-01", gpus=4, phase="Running"), NO_GPU)
    plan = reconcile_schedule(schedule(), observe(busy=busy_nodes(pods)), T0 + timedelta(hours=1))
    assert created_nodes(plan) == ["gpu-00", "gpu-02", "gpu-03"]
    assert "gpu-01" in plan.events[-1].message


def test_no_idle_node_skips_the_run_with_a_warning_not_an_empty_certification() -> None:
    """Every target node busy: no Certification, RunSkipped NoEligibleNodes, a Warning."""
    pods = tuple(GpuPodView(node=f"gpu-{i:02d}", gpus=1, phase="Pending") for i in range(4))
    plan = reconcile_schedule(schedule(), observe(busy=busy_nodes(pods)), T0 + timedelta(hours=1))
    assert plan.creates == ()
    assert plan.status is not None and plan.status.skipped_runs == 1
    cond = condition(plan.status.conditions, "RunSkipped")
    assert cond is not None and cond.reason == ScheduleReason.NO_ELIGIBLE_NODES
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "NoEligibleNodes")]


def test_the_stalest_nodes_come_first() -> None:
    """Never certified and expired first, then the oldest pass, then by name."""
    day = timedelta(days=1)
    records = {
        "gpu-00": record("gpu-00", (NodeResult.PASSED, T0 - day, T0 + 6 * day)),
        "gpu-01": record("gpu-01", (NodeResult.PASSED, T0 - 3 * day, T0 + 4 * day)),
        "gpu-02": record("gpu-02", (NodeResult.PASSED, T0 - 9 * day, T0 - 2 * day)),
        "gpu-03": record("gpu-03", (NodeResult.UNCERTIFIED, T0 - day, None)),
        "gpu-04": record("gpu-04", (NodeResult.PASSED, T0 - 2 * day, T0 + 5 * day)),
    }
    spec = schedule().spec.certification_template.spec
    choice = choose_nodes(spec, nodes=nodes(6), records=records, busy=frozenset(),
                          max_nodes=4, now=T0)
    # gpu-02 expired, gpu-03 only Uncertified, gpu-05 no record: first; then gpu-01 (oldest).
    assert choice.chosen == ("gpu-01", "gpu-02", "gpu-03", "gpu-05")


def test_nodes_of_an_ended_run_not_yet_folded_go_last() -> None:
    """The next run does not pin again the nodes the previous run judged while their records
    still show no result (the fold of a large run lags): it takes the never-certified others;
    once the records carry that run's time, plain staleness applies again."""
    s = schedule(interval="10m", maxNodesPerRun=2, status={
        "lastScheduleTime": format_time(T0 - timedelta(minutes=10))})
    first = run("nightly-a", outcome="Succeeded", at=T0 - timedelta(minutes=1),
                node_names=("gpu-00", "gpu-01"))
    plan = reconcile_schedule(s, observe(certifications=(first,)), T0)
    assert created_nodes(plan) == ["gpu-02", "gpu-03"]
    folded = {n: record(n, (NodeResult.PASSED, T0 - timedelta(minutes=1), T0 + timedelta(days=7)))
              for n in ("gpu-00", "gpu-01")}
    spec = s.spec.certification_template.spec
    fresh = choose_nodes(spec, nodes=nodes(4), records=folded, busy=frozenset(), max_nodes=2,
                         now=T0, tried={"gpu-00": T0 - timedelta(minutes=1),
                                        "gpu-01": T0 - timedelta(minutes=1)})
    assert fresh.chosen == ("gpu-02", "gpu-03")  # never certified still come first
    all_done = {**folded, **{n: record(n, (NodeResult.PASSED, T0 - timedelta(days=2),
                                           T0 + timedelta(days=5))) for n in ("gpu-02", "gpu-03")}}
    again = choose_nodes(spec, nodes=nodes(4), records=all_done, busy=frozenset(),
                         max_nodes=2, now=T0, tried={"gpu-00": T0 - timedelta(minutes=1)})
    assert again.chosen == ("gpu-02", "gpu-03")  # the oldest passes, by the records


def test_a_failed_category_counts_as_the_oldest_pass() -> None:
    """A node whose last result failed comes before nodes with any pass."""
    records = {"gpu-00": record("gpu-00", (NodeResult.PASSED, T0, T0 + timedelta(days=7))),
               "gpu-01": record("gpu-01", (NodeResult.FAILED, T0, None))}
    cats = frozenset({("diagnostics", "dcgm-level1")})
    assert staleness(records["gpu-01"], cats, T0) < staleness(records["gpu-00"], cats, T0)


@given(st.integers(1, 40), st.integers(1, 8), st.integers(0, 20))
@settings(max_examples=80, deadline=None)
def test_max_nodes_per_run_takes_whole_groups(cap: int, per_job: int, idle: int) -> None:
    """The chosen count is a multiple of nodesPerJob, at most the cap and the idle nodes."""
    spec = schedule(template={"categories": [DCGM], "nodesPerJob": per_job}
                    ).spec.certification_template.spec
    assert group_size(spec) == per_job
    choice = choose_nodes(spec, nodes=nodes(idle), records={}, busy=frozenset(),
                          max_nodes=cap, now=T0)
    assert len(choice.chosen) % per_job == 0
    assert len(choice.chosen) <= min(cap, idle)
    assert len(choice.chosen) > min(cap, idle) - per_job


def test_unready_and_cordoned_nodes_are_not_eligible_a_failed_tainted_one_is() -> None:
    """Not Ready and cordoned nodes are left out; a node CRE tainted failed is chosen (CRE's
    workloads tolerate the taint: passing again is what releases it)."""
    views: tuple[NodeView, ...] = (
        gpu_node("a", ready="False"), gpu_node("b", cordoned=True),
        gpu_node("c", taints=(NodeTaint(key="cre.dev/certification-failed", value="true",
                                        effect="NoSchedule"),)),
        gpu_node("d"))
    spec = schedule().spec.certification_template.spec
    choice = choose_nodes(spec, nodes=views, records={}, busy=frozenset(), max_nodes=None,
                          now=T0)
    assert choice.chosen == ("c", "d") and choice.unavailable == 2


def test_the_pod_view_keeps_node_gpus_and_phase_only() -> None:
    """A running GPU pod keeps node, GPU count and phase; a CPU or finished pod is NO_GPU."""
    def pod(phase: str, gpus: int | None, init: int | None = None) -> dict[str, Any]:
        res = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus is not None else {}
        spec: dict[str, Any] = {"nodeName": "n1", "containers": [{"name": "c",
                                                                  "resources": res}]}
        if init is not None:
            spec["initContainers"] = [{"name": "i", "resources": {
                "requests": {"nvidia.com/gpu": init}}}]
        return {"metadata": {"name": "p", "namespace": "x"}, "spec": spec,
                "status": {"phase": phase}}
    assert gpu_pod_view(pod("Running", 8)) == GpuPodView(node="n1", gpus=8, phase="Running")
    assert gpu_pod_view(pod("Pending", None, init=2)).gpus == 2
    assert gpu_pod_view(pod("Running", None)) is NO_GPU
    assert gpu_pod_view(pod("Succeeded", 8)) is NO_GPU
