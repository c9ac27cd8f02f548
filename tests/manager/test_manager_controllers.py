"""The manager's runnables: every enabled controller from the registry, over one informer
factory that the manager runs, so a query several controllers ask for is one informer whatever
order --controllers names them in."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from cre.controller.certification.controller import CertificationController
from cre.controller.job.controller import JobController
from cre.controller.registry import CONTROLLERS
from cre.controller.workflow.controller import WorkflowController
from cre.kube.client import NODES, KubeClient
from cre.kube.factory import InformerFactory
from cre_manager.config import parse_config
from cre_manager.controllers import INFORMERS, runnables
from cre_manager.runnable import Draining, Supervised

pytestmark = pytest.mark.anyio


def _inner(sup: Supervised) -> object:
    assert isinstance(sup.runnable, Draining)
    return sup.runnable.controller


@pytest.mark.parametrize("order", ["job,workflow,certification", "certification,workflow,job"])
async def test_one_pod_and_node_cache_per_process(kubeconfig: Path, order: str) -> None:
    """The Workflow controller reads the Job controller's worker, launcher and node informers
    and the Certification controller its node informer (same objects), all held by the one
    factory the manager supervises last."""
    config = parse_config(["--controllers", order], {"KUBECONFIG": str(kubeconfig)})
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    try:
        *controllers, factory_sup = runnables(client, config, CollectorRegistry())
        assert factory_sup.name == INFORMERS
        factory = factory_sup.runnable
        assert isinstance(factory, InformerFactory)
        built = {sup.name: _inner(sup) for sup in controllers}
        assert list(built) == list(config.controllers)
        job, wf, cert = built["job"], built["workflow"], built["certification"]
        assert isinstance(job, JobController) and isinstance(wf, WorkflowController)
        assert isinstance(cert, CertificationController)
        assert wf.workers is job.workers and wf.launchers is job.launchers
        assert wf.nodes is job.nodes and cert.nodes is job.nodes
        assert [i for i in factory.informers if i.resource == NODES] == [job.nodes]
        assert all(i in factory.informers for c in (job, wf, cert) for i in c.informers)
    finally:
        await client.close()


async def test_without_the_job_controller_the_factory_still_holds_the_caches(
        kubeconfig: Path) -> None:
    """--controllers workflow: the Workflow controller's pod and node caches come from the
    manager's factory (run by the manager, not by the controller)."""
    config = parse_config(["--controllers", "workflow"], {"KUBECONFIG": str(kubeconfig)})
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    try:
        wf_sup, factory_sup = runnables(client, config, CollectorRegistry())
        wf = _inner(wf_sup)
        assert isinstance(wf, WorkflowController)
        assert isinstance(factory_sup.runnable, InformerFactory)
        assert wf.workers in factory_sup.runnable.informers
        assert wf.nodes in factory_sup.runnable.informers
    finally:
        await client.close()


async def test_every_controller_runs_the_configured_workers(kubeconfig: Path) -> None:
    """--max-concurrent-reconciles sizes every controller's worker pool, the log-reading
    measurement controllers included (they ran 2 workers whatever the flag said)."""
    config = parse_config(["--max-concurrent-reconciles", "7"], {"KUBECONFIG": str(kubeconfig)})
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    try:
        sups = runnables(client, config, CollectorRegistry())
        workers = {s.name: _inner(s).controller.workers  # type: ignore[attr-defined]
                   for s in sups if s.name != INFORMERS}
        assert workers == dict.fromkeys(config.controllers, 7)
        assert len(workers) == len(CONTROLLERS)
    finally:
        await client.close()
