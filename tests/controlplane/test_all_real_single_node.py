"""Issue 31 item 3 on the all-real stack: one broken node of four fails only itself.

The same stack as ``test_all_real.py`` (etcd, kube-apiserver, kube-controller-manager's Job
controller, kube-scheduler, KWOK, the real JobSet v0.11.1 and Trainer v2.2.0) with four KWOK
``aws-h100`` GPU nodes and ``cre-manager`` as a separate process running every tier, so the
Certification controller itself runs here (not only a Workflow). The user applies a
Certification of ``diagnostics/dcgm-level1``, a single-pod catalog entry: CRE runs it as one
Job per node. :class:`~cre.testing.controlplane.allreal.NodeScript` scripts each pod by the node
it was bound to: on ``node-03`` ``dcgmi diag`` reports a failed memory test and exits 226 (the
simulator's ``dcgm-fail`` program), elsewhere it passes and exits 0, its output served through
kube-apiserver's pod-log proxy. Waits are safety nets; nothing asserts a duration. Skips with
the reason where the plane, KWOK or the workload controllers are unavailable.
"""

from __future__ import annotations

import base64
import shutil
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from cre.api import labels as L
from cre.core.workflow import noderesults as R
from cre.kube.client import (
    CERTIFICATIONS,
    CONFIGMAPS,
    JOBS,
    NAMESPACES,
    TRAINJOBS,
    WORKFLOWS,
    ApiError,
    KubeClient,
)
from cre.testing.cluster.stubs import dcgm_program
from cre.testing.controlplane.allreal import NodeScript, Stack, logging_nodes
from cre.testing.procs import Stack as Processes
from tests.controlplane.allreal_stack import all_real_stack

NODES = ("node-01", "node-02", "node-03", "node-04")
BROKEN = "node-03"
NAMESPACE = "allreal-single-node"
CERT = "single-node"
WORKFLOW = f"{CERT}-diagnostics-dcgm-level1"
LIMIT = 600.0


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from all_real_stack()


def _program(node: str) -> tuple[int, str]:
    program = dcgm_program(passed=node != BROKEN)
    return program.exit_code, program.end_text


def _verdict(cert: dict[str, Any]) -> bool:
    return bool((cert.get("status") or {}).get("verdict"))


def _cleaned_up(cert: dict[str, Any]) -> bool:
    """Whether the Certification says every workload of its run is gone (CleanedUp=True)."""
    return any(c.get("type") == "CleanedUp" and c.get("status") == "True"
               for c in (cert.get("status") or {}).get("conditions") or ())


async def _results(client: KubeClient) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Workflow and its node results: succeeded names and failed/uncertified records."""
    workflow = await client.get(WORKFLOWS, WORKFLOW, namespace=NAMESPACE)
    uid = workflow["metadata"]["uid"]
    out: dict[str, Any] = {}
    for kind in (R.SUCCEEDED, R.FAILED, R.UNCERTIFIED):
        try:
            cm = await client.get(CONFIGMAPS, R.configmap_name(kind, uid), namespace=NAMESPACE)
        except ApiError as exc:
            if exc.status != 404:
                raise
            out[kind] = None
            continue
        blob = base64.b64decode(cm["binaryData"][R.data_key(kind)])
        out[kind] = (list(R.decode_names(blob)) if kind == R.SUCCEEDED
                     else [(r.name, r.reason, r.scope) for r in R.decode_records(blob)])
    return workflow, out


async def _scenario(stack: Stack) -> dict[str, Any]:
    async with logging_nodes(stack.plane, NODES) as backend:
        client = await KubeClient.from_kubeconfig(str(backend.kubeconfig_path))
        try:
            await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": NAMESPACE}})
            script = NodeScript(logs=backend.logs, exit_code=lambda n: _program(n)[0],
                                log_text=lambda n: _program(n)[1])
            cert: dict[str, Any] = {}
            async with anyio.create_task_group() as tg:
                tg.start_soon(script.run, client, NAMESPACE)
                await client.create(CERTIFICATIONS, {
                    "apiVersion": f"{L.GROUP}/{L.VERSION}", "kind": "Certification",
                    "metadata": {"name": CERT, "namespace": NAMESPACE},
                    "spec": {"categories": [{"domain": "diagnostics",
                                             "variant": "dcgm-level1"}]}},
                    namespace=NAMESPACE)
                with anyio.move_on_after(LIMIT):
                    while not _verdict(cert):
                        await anyio.sleep(0.5)
                        cert = await client.get(CERTIFICATIONS, CERT, namespace=NAMESPACE)
                verdict = cert
                # After the verdict the Jobs release their workloads (the real GC removes the
                # JobSets, batch Jobs and pods) and the Certification says CleanedUp.
                with anyio.move_on_after(LIMIT):
                    while _verdict(cert) and not _cleaned_up(cert):
                        await anyio.sleep(0.5)
                        cert = await client.get(CERTIFICATIONS, CERT, namespace=NAMESPACE)
                tg.cancel_scope.cancel()
            assert _verdict(verdict), f"no verdict within {LIMIT:g}s: {verdict.get('status')}"
            assert _cleaned_up(cert), f"not CleanedUp within {LIMIT:g}s: {cert.get('status')}"
            workflow, results = await _results(client)
            jobs = (await client.list(JOBS, namespace=NAMESPACE))["items"]
            trainjobs = (await client.list(TRAINJOBS, namespace=NAMESPACE))["items"]
            return {"cert": cert, "workflow": workflow, "results": results, "jobs": jobs,
                    "trainjobs": trainjobs, "scripted": dict(script.scripted)}
        finally:
            await client.close()


def test_one_broken_node_of_four_fails_only_itself(stack: Stack) -> None:
    """A Certification of dcgm-level1 over four KWOK nodes with the diagnostic failing on one:
    four Jobs (one per node), the broken node alone in failed-nodes, the three others in
    succeeded-nodes, the Certification verdict Failed; then every TrainJob is released on the
    real control plane and the Certification says CleanedUp."""
    with Processes() as procs:
        shutil.copy(stack.plane.kubeconfig, procs.kubeconfig)
        manager = procs.start_manager(timeout=120.0)
        run = anyio.run(_scenario, stack)
        manager.check_alive()
    cert, workflow, results = run["cert"], run["workflow"], run["results"]
    context = {k: v for k, v in run.items() if k not in ("jobs", "trainjobs")}
    assert cert["status"]["verdict"] == "Failed", context
    assert cert["status"]["categoryStatuses"][0]["verdict"] == "Failed", context
    # one Job per node: four CRE Jobs, each run on its own node; their TrainJobs released
    assert workflow["status"]["orchestration"]["nodesPerJob"] == 1, context
    assert workflow["status"]["orchestration"]["totalGroups"] == 4, context
    assert len(run["jobs"]) == 4 and run["trainjobs"] == [], context
    groups = {g["name"]: g for g in workflow["status"]["groups"]}
    assert sorted(n for g in groups.values() for n in g["nodes"]) == list(NODES), context
    assert sorted(run["scripted"].values()) == list(NODES), context
    phases = {g["nodes"][0]: g["phase"] for g in groups.values()}
    assert phases == {n: "Failed" if n == BROKEN else "Succeeded" for n in NODES}, context
    # the node results: the broken node Failed (the workload's own failure), three Passed
    assert results[R.FAILED] == [(BROKEN, "WorkloadFailed", "Workload")], context
    assert results[R.SUCCEEDED] == [n for n in NODES if n != BROKEN], context
    assert not results[R.UNCERTIFIED], context
    # the broken node's own output, read through kube-apiserver's pod-log proxy
    broken = next(g for g in groups.values() if g["nodes"] == [BROKEN])["jobRef"]["name"]
    record = next(j for j in run["jobs"] if j["metadata"]["name"] == broken)["status"][
        "failureLog"]
    assert (record["nodeName"], record["exitCode"]) == (BROKEN, 226), record
    assert "A DBE occurred on GPU 0" in record["tail"], record
