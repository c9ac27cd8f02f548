"""The manager's controller table: the tier controllers read the Job controller's pod and node
caches instead of keeping copies of their own, whatever order --controllers names them in."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from cre.controller.certification import CertificationController
from cre.controller.job import JobController
from cre.controller.workflow import WorkflowController
from cre.kube.client import KubeClient
from cre_manager.config import parse_config
from cre_manager.controllers import CONTROLLERS
from cre_manager.runnable import Draining

pytestmark = pytest.mark.anyio


def _inner(runnable: object) -> object:
    assert isinstance(runnable, Draining)
    return runnable.controller


@pytest.mark.parametrize("order", ["job,workflow,certification", "certification,workflow,job"])
async def test_one_pod_and_node_cache_per_process(kubeconfig: Path, order: str) -> None:
    """With the Job controller enabled, the Workflow controller follows its worker, launcher
    and node caches and the Certification controller its node cache (same objects)."""
    config = parse_config(["--controllers", order], {"KUBECONFIG": str(kubeconfig)})
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    try:
        registry = CollectorRegistry()
        built = {name: _inner(CONTROLLERS[name].build(client, config, registry))
                 for name in config.controllers}
        job, wf, cert = built["job"], built["workflow"], built["certification"]
        assert isinstance(job, JobController) and isinstance(wf, WorkflowController)
        assert isinstance(cert, CertificationController)
        assert wf.workers is job.workers and wf.launchers is job.launchers
        assert wf.nodes is job.nodes and cert.nodes is job.nodes
        assert job.workers not in wf.controller.informers
        assert job.nodes not in cert.controller.informers
    finally:
        await client.close()


async def test_without_the_job_controller_the_tiers_keep_their_own(kubeconfig: Path) -> None:
    """--controllers workflow: the Workflow controller builds and runs its own caches."""
    config = parse_config(["--controllers", "workflow"], {"KUBECONFIG": str(kubeconfig)})
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    try:
        wf = _inner(CONTROLLERS["workflow"].build(client, config, CollectorRegistry()))
        assert isinstance(wf, WorkflowController)
        assert wf.workers in wf.controller.informers and wf.nodes in wf.controller.informers
    finally:
        await client.close()


async def test_every_controller_runs_the_configured_workers(kubeconfig: Path) -> None:
    """--max-concurrent-reconciles sizes every controller's worker pool, the log-reading
    measurement controllers included (they ran 2 workers whatever the flag said)."""
    config = parse_config(["--max-concurrent-reconciles", "7"], {"KUBECONFIG": str(kubeconfig)})
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    try:
        registry = CollectorRegistry()
        built = {name: _inner(spec.build(client, config, registry))
                 for name, spec in CONTROLLERS.items()}
        workers = {name: ctl.controller.workers  # type: ignore[attr-defined]
                   for name, ctl in built.items()}
        assert workers == dict.fromkeys(CONTROLLERS, 7)
    finally:
        await client.close()
