"""Issue 31 item 6 on the all-real stack: an image that cannot be pulled, said by real KWOK.

The same stack as ``test_all_real.py`` (etcd, kube-apiserver, kube-controller-manager's Job
controller, kube-scheduler, KWOK, the real JobSet v0.11.1 and Trainer v2.2.0) runs the rendered
MPI all-reduce Job (``goldens/render``) with ``imagePullGraceSeconds: 5`` and the launcher's pod
template annotated ``cre.dev/kwok-image-pull-error``: KWOK's image-pull stages (not the
simulator) make its container wait ``ErrImagePull`` / ``ImagePullBackOff`` with the kubelet's
messages, read here through the API. CRE's Job controller must then fail the Job
ImagePullFailed (class Platform) naming the image, with no node blamed. Waits are safety nets;
nothing asserts a duration. Skips with the reason where the plane, KWOK or the workload
controllers are unavailable.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from cre.kube.client import PODS, KubeClient
from cre.testing.controlplane import kwok as K
from cre.testing.controlplane.allreal import Stack, logging_nodes
from cre.testing.controlplane.allreal_run import Rendered, RunResult, run_job
from cre.testing.controlplane.build import REPO
from tests.controlplane.allreal_stack import all_real_stack

GOLDEN = REPO / "goldens" / "render" / "all-reduce-aws-h100.json"
NODES = ("node-01", "node-02")  # the nodes the rendered Job's affinity names
NAMESPACE = "allreal-image-pull"
WHY = "rpc error: code = NotFound desc = manifest unknown"
GRACE = 5
LIMIT = 600.0
PULL_REASONS = ("ErrImagePull", "ImagePullBackOff")


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from all_real_stack()


async def _watch_waits(client: KubeClient, seen: list[tuple[str, str, str, str, str]]) -> None:
    """Poll the namespace's pods through the API and record every container waiting on an
    image pull as (pod, container, reason, message, image), each distinct one once."""
    while True:
        page = await client.list(PODS, namespace=NAMESPACE)
        for pod in page.get("items") or []:
            for cs in (pod.get("status") or {}).get("containerStatuses") or []:
                waiting = (cs.get("state") or {}).get("waiting") or {}
                if waiting.get("reason") in PULL_REASONS:
                    row = (pod["metadata"]["name"], str(cs.get("name")), str(waiting["reason"]),
                           str(waiting.get("message") or ""), str(cs.get("image") or ""))
                    if row not in seen:
                        seen.append(row)
        await anyio.sleep(0.3)


def _run(stack: Stack) -> tuple[RunResult, list[tuple[str, str, str, str, str]]]:
    base = Rendered.load(GOLDEN)
    job = copy.deepcopy(base.job)
    job["spec"]["imagePullGraceSeconds"] = GRACE
    rendered = Rendered(job=job, runtime=base.runtime)
    seen: list[tuple[str, str, str, str, str]] = []

    async def scenario() -> RunResult:
        async with logging_nodes(stack.plane, NODES) as backend:
            client = await KubeClient.from_kubeconfig(str(backend.kubeconfig_path))
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_watch_waits, client, seen)
                    result = await run_job(
                        backend, rendered, namespace=NAMESPACE, exit_code=1, run_seconds=3,
                        log_text=lambda pod: None, limit=LIMIT, settle=2.0,
                        launcher_annotations=K.pod_annotations(image_pull_error=WHY))
                    tg.cancel_scope.cancel()
                return result
            finally:
                await client.close()

    result: RunResult = anyio.run(scenario)
    return result, seen


def _runtime_rjobs() -> list[dict[str, Any]]:
    """The replicated Jobs of the rendered TrainingRuntime."""
    rjobs: list[dict[str, Any]] = Rendered.load(GOLDEN).runtime["spec"]["template"]["spec"][
        "replicatedJobs"]
    return rjobs


def test_an_image_kwok_cannot_pull_fails_the_job_image_pull_failed(stack: Stack) -> None:
    """The launcher's container, held by real KWOK in ErrImagePull/ImagePullBackOff, fails the
    CRE Job ImagePullFailed (Platform) after imagePullGraceSeconds, naming the image, with no
    node blamed and the launcher never run."""
    result, seen = _run(stack)
    image = next(c["image"] for rj in _runtime_rjobs() if rj["name"] == "launcher"
                 for c in rj["template"]["spec"]["template"]["spec"]["containers"])
    timeline = "\n".join(result.timeline.render(result.started))
    context = f"{timeline}\nwaits seen: {seen}\nstatus: {result.job.get('status')}"
    # real KWOK said it: the launcher's container waited on the pull, the kubelet's words
    assert seen, context
    assert {r[2] for r in seen} <= set(PULL_REASONS), context
    assert all("-launcher-" in r[0] and r[4] == image for r in seen), context
    assert any(r[2] == "ErrImagePull" and r[3] == f'Failed to pull image "{image}": {WHY}'
               for r in seen), context
    # the launcher never ran: no launcher pod reached Running or Succeeded, and one turned
    # Failed only once CRE deleted the workload (KWOK's terminate stage on deletion)
    launcher = [c.state for c in result.timeline.changes
                if c.kind == "Pod" and "-launcher-" in c.name and c.state != "deleted"]
    assert launcher, context
    assert not any(s.split(",")[0] in ("Running", "Succeeded") for s in launcher), context
    assert all(s.endswith("deleting") for s in launcher if s.startswith("Failed")), context
    # CRE's verdict: Failed ImagePullFailed, Platform, the image named, no node blamed
    assert result.outcome() == "Failed", context
    status = result.job["status"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "ImagePullFailed", context
    assert f'image "{image}"' in failed["message"] and WHY in failed["message"], context
    assert f"imagePullGraceSeconds {GRACE}s" in failed["message"], context
    assert (status["failureClass"]["scope"], status["failureClass"]["reason"]) == (
        "Platform", "ImagePullFailed"), context
    assert not status.get("failedNodes"), context
    record = status["failureLog"]
    assert record["reason"] == "ImagePullFailed" and WHY in record["tail"], context
    assert record["nodeName"] in NODES, context

