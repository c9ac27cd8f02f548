"""The schedule controller's metrics: one ``cre_schedule_runs_total`` increment per due time
handled (by result) and ``cre_schedule_missed_runs_total`` following ``status.missedRuns``,
counted from the plan it applied."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs
import pytest
from kubernetes_asyncio import client as k8s_client
from prometheus_client import CollectorRegistry

from cre.controller.schedule.controller import ScheduleController
from cre.core.schedule.reconcile import reconcile_schedule
from cre.kube.client import KubeClient
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
