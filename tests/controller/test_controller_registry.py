"""One registry of controllers, one informer per query.

The manager and the simulator's scenario runner both build controllers from
``cre.controller.registry``; controllers built over one ``InformerFactory`` share the informers
of the queries they have in common, so the API server sees one watch per query.
"""

from __future__ import annotations

import itertools
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from prometheus_client import CollectorRegistry

from cre.controller.registry import BY_NAME, CONTROLLERS, ControllerContext, ControllerEntry
from cre.kube.client import NAMESPACES, NODES, PODS, KubeClient
from cre.kube.factory import InformerFactory
from cre.kube.metrics import metrics_for
from cre.testing.apiserver import Emulator
from cre.testing.cluster.clock import SimClock
from cre.testing.cluster.scenario import ScenarioError, start_controllers
from cre_manager.config import parse_config
from cre_manager.controllers import runnables

pytestmark = pytest.mark.anyio
_namespaces = itertools.count()


def _now() -> datetime:
    return datetime.now(UTC)


class _Probe:
    """A controller that only records the context it was built from."""

    def __init__(self, ctx: ControllerContext, seen: list[ControllerContext]) -> None:
        seen.append(ctx)

    async def run(self) -> None:
        await anyio.sleep_forever()

    def has_synced(self) -> bool:
        return True


async def test_manager_and_scenario_runner_build_from_the_one_registry(
        shared_emulator: Emulator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An entry added to the registry is what both the manager's runnables and the scenario
    runner build (each over its own informer factory), and its list is the manager's default
    --controllers and the scenario runner's known names."""
    seen: list[ControllerContext] = []
    probe = ControllerEntry(name="probe", requires=(),
                            build=lambda ctx: _Probe(ctx, seen))  # type: ignore[arg-type,return-value]
    monkeypatch.setitem(BY_NAME, "probe", probe)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(shared_emulator.kubeconfig_path.read_text())
    config = parse_config([], {"KUBECONFIG": str(kubeconfig)})
    assert config.controllers == tuple(e.name for e in CONTROLLERS)
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    try:
        built = runnables(client, attrs.evolve(config, controllers=("probe",)),
                          CollectorRegistry())
        assert [s.name for s in built] == ["probe", "informers"]
        assert seen[-1].informers is built[-1].runnable
        cluster = types.SimpleNamespace(client=client, clock=SimClock(scale=10.0))
        async with anyio.create_task_group() as tg:
            await start_controllers(tg, ["probe"], cluster, "default", {})  # type: ignore[arg-type]
            tg.cancel_scope.cancel()
        assert len(seen) == 2 and seen[1].time_scale == 10.0
        assert seen[1].informers is not seen[0].informers
        with pytest.raises(ScenarioError, match=r"unknown controller 'nope'.*'probe'"):
            await start_controllers(None, ["nope"], cluster, "default", {})  # type: ignore[arg-type]
    finally:
        await client.close()


async def test_controllers_share_one_informer_and_one_watch_per_query(
        shared_emulator: Emulator) -> None:
    """Every registered controller built over one factory: the GPU-node query is one informer
    (asked for by four controllers), the worker and launcher pod caches are two (asked for by
    two), the Jobs and LogProfiles are shared by the Job and measurement controllers, the
    Certifications and NodeCertifications by the tiers, the NodeCertification and schedule
    controllers; once the factory runs, the emulator served one node watch and three pod
    watches (workers, launchers, and the schedule's pods of others)."""
    namespace = f"registry-{next(_namespaces)}"
    client = await KubeClient.from_kubeconfig(str(shared_emulator.kubeconfig_path))
    try:
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": namespace}})
        registry = CollectorRegistry()
        factory = InformerFactory(client, namespaces=[namespace], metrics=metrics_for(registry))
        ctx = ControllerContext(client=client, informers=factory, registry=registry,
                                clock=_now)
        c: dict[str, Any] = {entry.name: entry.build(ctx) for entry in CONTROLLERS}
        job, wf = c["job"], c["workflow"]
        assert job.nodes is wf.nodes is c["certification"].nodes is c["workloadrun"].nodes
        assert job.workers is wf.workers and job.launchers is wf.launchers
        assert job.workers is not job.launchers
        assert job.jobs is c["measurement"].jobs is c["goodput"].jobs
        assert job.jobs is not wf.jobs  # the Workflow's are label-scoped: another query
        assert c["measurement"].profiles is c["goodput"].profiles
        assert job.goodputs is c["workloadrun"].goodputs
        sched = c["schedule"]
        assert sched.nodes is job.nodes and sched.records is c["nodecertification"].records
        assert sched.certifications is c["nodecertification"].certifications
        asked = [i for ctl in c.values() for i in ctl.informers]
        assert len({id(i) for i in asked}) == len(factory.informers) < len(asked)
        since = shared_emulator.audit.seq

        def watches(resource: str) -> int:
            return sum(r.verb == "watch" and r.resource == resource
                       and r.namespace in ("", namespace)
                       for r in shared_emulator.audit.since(since))

        async with anyio.create_task_group() as tg:
            tg.start_soon(factory.run)
            with anyio.fail_after(20):
                for ctl in c.values():
                    await ctl.wait_synced()
                # Every reflector has listed; wait until their watches reached the server.
                while watches(NODES.plural) < 1 or watches(PODS.plural) < 3:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            assert factory.has_synced()
            await anyio.sleep(0.5)  # a duplicate informer's watch would have arrived by now
            tg.cancel_scope.cancel()
        assert watches(NODES.plural) == 1
        assert watches(PODS.plural) == 3
    finally:
        await client.close()
