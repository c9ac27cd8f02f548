"""The simulated cluster over HTTP against the API emulator (watch-driven, scaled time)."""

from __future__ import annotations

from typing import Any

import pytest

from cre.kube.client import BATCH_JOBS, NODES, PODS, TRAINING_RUNTIMES, TRAINJOBS
from cre.testing.apiserver import Emulator
from cre.testing.cluster import SimulatedCluster, simulate
from cre.testing.cluster.model import World, condition, is_true
from cre.testing.cluster.profiles import get_profile
from cre.testing.cluster.program import Role
from cre.testing.cluster.stubs import Behaviour, Override
from cre.testing.cluster.workloads import trainjob_objects

pytestmark = pytest.mark.anyio
TJ = "default/ar-workload"


def _launchers(world: World) -> list[dict[str, Any]]:
    return [p for p in world.all(PODS) if p["metadata"]["labels"].get("cre.dev/launcher")]


async def _apply(cluster: Any) -> None:
    for obj in trainjob_objects(entry="communication/nccl-all-reduce", job_name="ar",
                                namespace="default", profile=get_profile("aws-h100"),
                                nodes=["aws-h100-node-0", "aws-h100-node-1"]):
        res = TRAINJOBS if obj["kind"] == "TrainJob" else TRAINING_RUNTIMES
        await cluster.client.create(res, obj)


async def _running_launcher(cluster: Any) -> str:
    """Apply the TrainJob with launchers that hang; the name of the first Running launcher."""
    cluster.add_override(Override(behaviour=Behaviour.HANG, role=Role.LAUNCHER))
    await _apply(cluster)
    world = await cluster.wait_for(lambda w: any(
        (p.get("status") or {}).get("phase") == "Running" for p in _launchers(w)))
    name: str = next(p for p in _launchers(world)
                     if p["status"]["phase"] == "Running")["metadata"]["name"]
    return name


async def test_trainjob_runs_to_completion_with_logs(
        simulated_cluster: SimulatedCluster) -> None:
    """Nodes register Ready, a TrainJob completes, and the launcher log is readable over HTTP."""
    cluster = simulated_cluster
    nodes = (await cluster.client.list(NODES))["items"]
    assert len(nodes) == 2
    await _apply(cluster)
    world = await cluster.wait_for(lambda w: (tj := w.get(TRAINJOBS, TJ)) is not None
                                   and is_true(tj, "Complete"))
    pod = _launchers(world)[0]
    text = await cluster.client.read_text(PODS.path(
        namespace="default", name=pod["metadata"]["name"], subresource="log"),
        query={"container": "node"})
    assert "# Avg bus bandwidth" in text
    assert cluster.errors == []


async def test_eviction_and_node_not_ready(kube_emulator: Emulator) -> None:
    """An evicted launcher fails with DisruptionTarget True; a NotReady node gets tainted."""
    async with simulate(kube_emulator, profile="aws-h100", nodes=2, scale=50) as cluster:
        name = await _running_launcher(cluster)
        await cluster.evict_pod("default", name)

        def evicted(w: World) -> bool:
            pod = w.get(PODS, f"default/{name}")
            return pod is None or (pod["status"].get("phase") == "Failed"
                                   and (condition(pod, "DisruptionTarget") or {}).get(
                                       "status") == "True")
        await cluster.wait_for(evicted)
        await cluster.set_node_ready("aws-h100-node-1", False)
        world = await cluster.wait_for(lambda w: bool(
            (w.get(NODES, "aws-h100-node-1") or {}).get("spec", {}).get("taints")))
        taints = world.get(NODES, "aws-h100-node-1")["spec"]["taints"]  # type: ignore[index]
        assert {t["key"] for t in taints} == {"node.kubernetes.io/not-ready"}


async def test_preemption_sets_disruption_target_then_the_pod_fails(
        kube_emulator: Emulator) -> None:
    """A preempted launcher carries DisruptionTarget PreemptionByScheduler and ends Failed."""
    async with simulate(kube_emulator, profile="aws-h100", nodes=2, scale=50) as cluster:
        name = await _running_launcher(cluster)
        await cluster.preempt_pod("default", name)
        seen: dict[str, Any] = {}

        def failed(w: World) -> bool:
            pod = w.get(PODS, f"default/{name}")
            if pod is not None and pod["status"].get("phase") == "Failed":
                seen["pod"] = pod
            return "pod" in seen
        await cluster.wait_for(failed)
        dt = condition(seen["pod"], "DisruptionTarget") or {}
        assert (dt.get("status"), dt.get("reason"), dt.get("message")) == (
            "True", "PreemptionByScheduler",
            "default-scheduler: preempting to accommodate a higher priority pod")
        term = seen["pod"]["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (term["exitCode"], term["reason"]) == (143, "Error")


async def test_failed_deletes_are_retried(kube_emulator: Emulator) -> None:
    """Injected 409s on Job deletes keep the finished TrainJob's sshd Jobs, then 409s on pod
    deletes hold the finished pods Terminating; once the faults clear, the controllers' and the
    kubelet's deletes are sent again and nothing is left behind (no stuck Terminating pod, no
    orphaned batch Job)."""
    faults = kube_emulator.faults
    async with simulate(kube_emulator, profile="aws-h100", nodes=2, scale=50) as cluster:
        faults.add_error(409, verb="delete", resource="jobs")
        await _apply(cluster)
        await cluster.wait_for(lambda w: is_true(w.get(TRAINJOBS, TJ) or {}, "Complete"))
        await cluster.wait_for(lambda w: any(e.startswith("jobset: Delete")
                                             for e in cluster.errors))
        assert any(j["status"].get("active") for j in cluster.snapshot().all(BATCH_JOBS))
        faults.reset()
        faults.add_error(409, verb="delete", resource="pods")
        await cluster.wait_for(lambda w: any(e.startswith("kubelet: Delete")
                                             for e in cluster.errors))
        assert any(p["metadata"].get("deletionTimestamp") for p in cluster.snapshot().all(PODS))
        faults.reset()
        world = await cluster.wait_for(lambda w: not any(
            p["metadata"].get("deletionTimestamp") for p in w.all(PODS)) and all(
            is_true(j, "Complete") for j in w.all(BATCH_JOBS)))
        assert [p["metadata"]["name"] for p in world.all(PODS)] == [
            p["metadata"]["name"] for p in world.all(PODS) if "launcher" in p["metadata"]["name"]]


async def test_concurrent_writes_keep_each_objects_order() -> None:
    """With write_concurrency > 1 a step's writes run on one chain per object: each object's
    writes stay in step order, marks land at once, a failed write still undoes its marks."""
    import anyio

    from cre.testing.cluster import engine
    from cre.testing.cluster.config import SimConfig
    from cre.testing.cluster.model import Delete, Mark, Patch, Step

    applied: list[tuple[str, str]] = []
    marks: dict[str, Any] = {}

    class Backend:
        def snapshot(self) -> World:
            return World(objects={}, marks=dict(marks))

        async def apply(self, action: Any, now: float) -> None:
            if isinstance(action, Mark):
                action.apply_to(marks)
                return
            await anyio.sleep(0.01 if action.name == "a" else 0)
            if isinstance(action, Delete) and action.name == "b":
                raise RuntimeError("injected")
            applied.append((type(action).__name__, action.name))

    actions = (Patch(PODS, "ns", "a", {"status": {"phase": "Running"}}, subresource="status"),
               Patch(PODS, "ns", "b", {"status": {}}, subresource="status"),
               Mark("kdel/b", 1.0),
               Delete(PODS, "ns", "b", on_failure=(Mark("kdel/b", None),)),
               Delete(PODS, "ns", "a"))
    calls: list[int] = []

    def once(world: World, now: float, cfg: Any) -> Step:
        calls.append(1)
        return Step(actions=actions if len(calls) == 1 else ())

    errors: list[str] = []

    async def on_error(name: str, act: Any, exc: Exception) -> None:
        errors.append(f"{name}: {exc}")

    original = engine.CONTROLLERS
    engine.CONTROLLERS = (("test", once),)
    try:
        await engine.atick(Backend(), lambda: 0.0, SimConfig(write_concurrency=4), on_error)
    finally:
        engine.CONTROLLERS = original
    assert applied.index(("Patch", "a")) < applied.index(("Delete", "a"))
    assert applied[0] == ("Patch", "b")  # b's chain did not wait for a's slow patch
    assert errors == ["test: injected"] and "kdel/b" not in marks


async def test_a_step_that_raises_does_not_stop_the_others() -> None:
    """A controller step raising on input it did not expect is reported (no action) and
    skipped; the controllers after it still run in the same tick."""
    from cre.testing.cluster import engine
    from cre.testing.cluster.config import SimConfig
    from cre.testing.cluster.model import Mark, Step

    marks: dict[str, Any] = {}

    class Backend:
        def snapshot(self) -> World:
            return World(objects={}, marks=dict(marks))

        async def apply(self, action: Any, now: float) -> None:
            action.apply_to(marks)

    def broken(world: World, now: float, cfg: Any) -> Step:
        raise OverflowError("cannot convert float infinity to integer")

    def fine(world: World, now: float, cfg: Any) -> Step:
        return Step(actions=(Mark("ran", True),))

    reported: list[tuple[str, Any, str]] = []

    async def on_error(name: str, act: Any, exc: Exception) -> None:
        reported.append((name, act, str(exc)))

    original = engine.CONTROLLERS
    engine.CONTROLLERS = (("broken", broken), ("fine", fine))
    try:
        await engine.atick(Backend(), lambda: 0.0, SimConfig(), on_error)
    finally:
        engine.CONTROLLERS = original
    assert marks == {"ran": True}
    assert reported[0] == ("broken", None, "cannot convert float infinity to integer")


async def test_repair_node_drops_that_node_faults_only(
        simulated_cluster: SimulatedCluster) -> None:
    """Repairing a node removes the overrides aimed at it and its bandwidth factor; another
    node's faults stay."""
    cluster = simulated_cluster
    bad, other = "aws-h100-node-1", "aws-h100-node-0"
    cluster.add_override(Override(behaviour=Behaviour.DCGM_FAIL, node=bad, id="dcgm"))
    cluster.add_override(Override(behaviour=Behaviour.FAIL, role=Role.LAUNCHER,
                                  group_touches=((bad,),), id="broken"))
    cluster.add_override(Override(behaviour=Behaviour.DCGM_FAIL, node=other, id="kept"))
    cluster.mark_node_bad(bad)
    cluster.mark_node_bad(other, factor=0.5)
    cluster.repair_node(bad)
    assert [ov.id for ov in cluster.config.overrides] == ["kept"]
    assert cluster.config.node_bandwidth == ((other, 0.5),)
