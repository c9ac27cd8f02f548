"""Store indexes and snapshots; the slim pod / node / TrainJob projections."""

from __future__ import annotations

from datetime import UTC, datetime

import attrs
import pytest
from kube_pods import pod

from cre.api import labels as L
from cre.core.common.observed import PodCondition, PodView
from cre.core.common.projections import (
    ProjectionError,
    node_view,
    object_key,
    pod_view,
    trainjob_view,
)
from cre.kube.store import (
    Store,
    UnknownIndex,
    label_indexer,
    namespaced_label_indexer,
    node_name_indexer,
    owner_uid_indexer,
)


def _store() -> Store[PodView]:
    return Store(indexers={"job": namespaced_label_indexer(L.JOB), "node": node_name_indexer,
                           "owner": owner_uid_indexer, "launcher": label_indexer(L.LAUNCHER)})


def test_pod_view_keeps_only_what_the_core_reads() -> None:
    """The projection keeps CRE labels, owners, node, phase, times, conditions and states."""
    v = pod_view(pod(name="w-0-abcde", exit_code=3))
    assert (v.name, v.namespace, v.node_name, v.phase) == ("w-0-abcde", "cre", "gpu-node-001",
                                                            "Running")
    assert v.label(L.JOB) == "nccl-allreduce"
    assert v.label("controller-uid") is None, "labels CRE never reads are dropped"
    assert v.owner_refs[0].kind == "Job" and v.owner_refs[0].controller
    assert v.creation_timestamp == datetime(2026, 3, 1, 10, tzinfo=UTC)
    assert v.condition("Ready") is not None
    cs = v.container_statuses[0]
    assert cs.state is not None and cs.state.kind == "terminated" and cs.state.exit_code == 3
    assert v.resource_version == "1"
    assert (v.reason, v.message) == (None, None)
    evicted = pod(name="e-0-abcde", phase="Failed")
    evicted["status"].update(reason="Evicted", message="The node was low on resource: memory.")
    assert pod_view(evicted).reason == "Evicted"
    assert pod_view(evicted).message == "The node was low on resource: memory."
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        v.phase = "Failed"  # type: ignore[misc]


def test_projection_errors_name_the_object_and_field() -> None:
    """A malformed field raises ProjectionError with the object and the field path."""
    bad = pod(name="w-1-abcde")
    bad["status"]["containerStatuses"][0]["restartCount"] = "two"
    with pytest.raises(ProjectionError, match=r"Pod cre/w-1-abcde: "
                       r"status.containerStatuses\[0\].restartCount"):
        pod_view(bad)
    with pytest.raises(ProjectionError, match=r"metadata\.name is required"):
        pod_view({"kind": "Pod", "metadata": {"namespace": "x"}})


def test_node_and_trainjob_views() -> None:
    """Node readiness and GPU count, TrainJob suspension and conditions are projected."""
    n = node_view({"kind": "Node", "metadata": {"name": "n1", "labels": {L.GPU_PRESENT: "true"}},
                   "spec": {"providerID": "aws:///i-1"},
                   "status": {"allocatable": {"nvidia.com/gpu": "8"},
                              "conditions": [{"type": "Ready", "status": "False",
                                              "reason": "KubeletNotReady"}]}})
    assert (n.ready, n.ready_reason, n.allocatable_gpus) == ("False", "KubeletNotReady", 8)
    assert n.label(L.GPU_PRESENT) == "true"
    t = trainjob_view({"kind": "TrainJob", "metadata": {"name": "t", "namespace": "cre"},
                       "spec": {"suspend": True},
                       "status": {"conditions": [{"type": "Complete", "status": "True"}]}})
    assert t.suspended and t.condition("Complete") is not None
    assert object_key({"metadata": {"name": "n1"}}) == "n1"


def test_store_indexes_follow_updates_and_deletes() -> None:
    """Indexes by job label, node and owner uid track puts, moves and removals."""
    s = _store()
    a = pod_view(pod(name="a", node="n1"))
    b = pod_view(pod(name="b", node="n2"))
    s._put("cre/a", a, "1")
    s._put("cre/b", b, "1")
    assert s.by_index("job", "cre/nccl-allreduce") == (a, b)
    assert s.by_index("node", "n1") == (a,)
    assert len(s.by_index("owner", "6d7f0b8e-1111-4a1b-9c55-0f6a3a1d2e11")) == 2
    a2 = pod_view(pod(name="a", node="n3", rv="2"))
    assert s._put("cre/a", a2, "2") is a
    assert s.by_index("node", "n1") == ()
    assert s.index_values("node") == frozenset({"n2", "n3"})
    s._remove("cre/b")
    assert s.by_index("job", "cre/nccl-allreduce") == (a2,)
    assert s.resource_version("cre/a") == "2" and s.get("cre/b") is None
    with pytest.raises(UnknownIndex, match="no index 'nope'"):
        s.by_index("nope", "x")


def test_list_is_an_immutable_snapshot() -> None:
    """A listing taken before a write does not change when the store changes."""
    s = _store()
    s._put("cre/a", pod_view(pod(name="a")), "1")
    snap = s.list()
    s._put("cre/b", pod_view(pod(name="b")), "1")
    assert isinstance(snap, tuple) and len(snap) == 1 and len(s.list()) == 2


def test_job_key_maps_workers_and_launchers_to_the_job() -> None:
    """Worker and launcher pods map to namespace/<job>; unlabelled pods map to nothing."""
    from cre.kube.pods import job_key

    assert job_key(pod_view(pod(name="w"))) == "cre/nccl-allreduce"
    assert job_key(pod_view(pod(name="l", labels={L.LAUNCHER: "j1"}))) == "cre/j1"
    assert job_key(pod_view(pod(name="x", labels={"app": "y"}))) is None


def test_pod_view_holds_exactly_the_fields_the_issue_lists() -> None:
    """PodView has only the pod fields CRE reads (no spec, annotations or managedFields), and the
    init-container, deletion and termination details are carried through."""
    fields = {f.name for f in attrs.fields(PodView)}
    assert fields == {
        "name", "namespace", "uid", "labels", "owner_refs", "node_name", "phase",
        "creation_timestamp", "deletion_timestamp", "conditions", "init_container_statuses",
        "container_statuses",
        # Also read by the core: the watch version, and status.reason/message (evictions).
        "resource_version", "reason", "message",
    }, "a new PodView field must be justified in docs/design/005 and added here"
    # message: only the scheduler's, on PodScheduled=False (WorkloadSchedulingBlocked).
    assert {f.name for f in attrs.fields(PodCondition)} == {"type", "status", "reason",
                                                            "message"}
    raw = pod(name="w-1-abcde", exit_code=1)
    raw["metadata"]["deletionTimestamp"] = "2026-03-01T10:05:00Z"
    raw["metadata"]["annotations"] = {"big": "x" * 1000}
    raw["status"]["initContainerStatuses"] = [{
        "name": "init", "restartCount": 2, "state": {"terminated": {
            "reason": "Completed", "exitCode": 0, "startedAt": "2026-03-01T10:00:01Z",
            "finishedAt": "2026-03-01T10:00:02Z"}}}]
    v = pod_view(raw)
    assert v.deletion_timestamp == datetime(2026, 3, 1, 10, 5, tzinfo=UTC)
    init = v.init_container_statuses[0]
    assert (init.name, init.restart_count, init.init) == ("init", 2, True)
    assert init.state is not None
    assert (init.state.kind, init.state.reason, init.state.exit_code) == ("terminated",
                                                                         "Completed", 0)
    assert init.state.started_at == datetime(2026, 3, 1, 10, 0, 1, tzinfo=UTC)
    assert init.state.finished_at == datetime(2026, 3, 1, 10, 0, 2, tzinfo=UTC)
    assert "x" * 1000 not in repr(v)


def test_only_the_schedulers_condition_message_is_kept() -> None:
    """PodScheduled=False keeps its message (the scheduler's fit error); other condition
    messages are dropped."""
    raw = pod(name="w-1-abcde")
    raw["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/8 nodes are available"},
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
         "message": "containers with unready status: [node]"}]
    view = pod_view(raw)
    assert [(c.type, c.message) for c in view.conditions] == [
        ("PodScheduled", "0/8 nodes are available"), ("Ready", None)]


def test_node_view_keeps_conditions_and_taints_without_heartbeats() -> None:
    """A node's conditions (no heartbeat times) and taints reach the view; a heartbeat-only
    update projects to an equal view."""
    def node(heartbeat: str) -> dict[str, object]:
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u"},
                "spec": {"taints": [{"key": "nvidia.com/xid", "effect": "NoSchedule"}]},
                "status": {"conditions": [{"type": "Ready", "status": "True",
                                           "reason": "KubeletReady", "message": "ok",
                                           "lastHeartbeatTime": heartbeat}]}}
    first, second = node_view(node("2026-01-01T00:00:00Z")), node_view(node("2026-01-01T00:01:00Z"))
    assert first == second
    assert [(c.type, c.status, c.reason) for c in first.conditions] == [
        ("Ready", "True", "KubeletReady")]
    assert [(t.key, t.effect, t.value) for t in first.taints] == [
        ("nvidia.com/xid", "NoSchedule", None)]


def test_trainjob_view_says_whether_trainer_built_its_jobs() -> None:
    """``jobs_built`` follows a non-empty ``status.jobsStatus`` (absent when the runtime is
    missing and Trainer built nothing)."""
    raw: dict[str, object] = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                              "metadata": {"name": "t", "namespace": "ns", "uid": "u"},
                              "spec": {}}
    assert trainjob_view(raw).jobs_built is False
    raw["status"] = {"jobsStatus": [{"name": "node", "active": 2}]}
    assert trainjob_view(raw).jobs_built is True
