"""The schedule controller's metrics: one ``cre_schedule_runs_total`` increment per due time
handled (by result) and ``cre_schedule_missed_runs_total`` following ``status.missedRuns``,
counted from the plan it applied; its GPU pod cache follows the manager's namespaces."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta

import anyio
import attrs
import pytest
from kubernetes_asyncio import client as k8s_client
from prometheus_client import CollectorRegistry

from cre.controller.schedule.controller import ScheduleController
from cre.core.schedule.reconcile import reconcile_schedule
from cre.kube.client import NAMESPACES, PODS, ApiError, KubeClient
from cre.kube.pods import busy_nodes_of
from cre.testing.apiserver import serve
from tests.core.test_schedule import T0, observe, schedule


@pytest.mark.anyio
async def test_applied_plans_count_runs_by_result_and_misses() -> None:
    """Five hours down then a run: RunCreated once, 4 missed; a skipped pass: its reason."""
    registry = CollectorRegistry()
    client = KubeClient(k8s_client.ApiClient(k8s_client.Configuration(host="http://127.0.0.1:9")))
    try:
        ctrl = ScheduleController(client, registry=registry,
                                  clock=lambda: datetime.now(UTC))
        sched = schedule()
        plan = reconcile_schedule(sched, observe(), T0 + timedelta(hours=5, minutes=1))
        ctrl.applied(sched, plan)
        assert plan.status is not None
        later = attrs.evolve(sched, status=plan.status)
        busy = reconcile_schedule(later, observe(busy=frozenset(
            f"gpu-{i:02d}" for i in range(4))), T0 + timedelta(hours=6))
        ctrl.applied(later, busy)

        def value(name: str, **labels: str) -> float | None:
            return registry.get_sample_value(name, {"namespace": "certs",
                                                    "schedule": "nightly", **labels})

        assert value("cre_schedule_runs_total", result="RunCreated") == 1
        assert value("cre_schedule_runs_total", result="NoEligibleNodes") == 1
        assert value("cre_schedule_missed_runs_total") == 4
    finally:
        await client.close()


async def _gpu_pod(client: KubeClient, namespace: str, node: str) -> None:
    """A running pod of someone else holding one GPU of ``node``."""
    with contextlib.suppress(ApiError):
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": namespace}})
    created = await client.create(PODS, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace": namespace},
        "spec": {"nodeName": node, "containers": [{
            "name": "c", "image": "trainer",
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}, namespace=namespace)
    created["status"] = {"phase": "Running"}
    await client.replace(PODS, created, subresource="status")


@pytest.mark.anyio
async def test_the_gpu_pod_cache_follows_the_managers_namespaces() -> None:
    """A schedule controller restricted to one namespace (as ``cre-manager --namespaces``)
    sees only that namespace's GPU pods: a node held by a pod elsewhere does not look busy to
    it; an unrestricted one sees both nodes busy."""
    async with serve() as emu:
        client = await KubeClient.from_kubeconfig(str(emu.kubeconfig_path))
        try:
            await _gpu_pod(client, "team-in", "node-a")
            await _gpu_pod(client, "team-out", "node-b")
            seen = {}
            for scope in (("team-in",), None):
                ctrl = ScheduleController(client, namespaces=scope,
                                          registry=CollectorRegistry())
                async with anyio.create_task_group() as tg:
                    tg.start_soon(ctrl.informer_factory.run)
                    with anyio.fail_after(20):
                        await ctrl.gpu_pods.wait_synced()
                    seen[scope] = busy_nodes_of(ctrl.gpu_pods)
                    tg.cancel_scope.cancel()
            assert seen == {("team-in",): frozenset({"node-a"}),
                            None: frozenset({"node-a", "node-b"})}
        finally:
            await client.close()
