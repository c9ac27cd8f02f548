"""Pod logs through a real kube-apiserver: its log proxy reaches the kubelet-style log server.

The path CRE's failure capture takes on a cluster (``GET .../pods/{name}/log`` on the API
server, which calls the kubelet of the pod's node) runs here for real: the node's status points
at :class:`~cre.testing.cluster.kubelet_logs.KubeletLogs`, and the answer comes back
through kube-apiserver with its query parameters honoured.
"""

from __future__ import annotations

import anyio
import pytest

from cre.testing.controlplane import ControlPlane
from cre.testing.controlplane.backend import real_logs_backend


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_pod_log_is_proxied_to_the_simulated_kubelet(real_control_plane: ControlPlane) -> None:
    plane = real_control_plane
    ns = "logs-proxy"
    plane.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": ns}})
    pods = f"/api/v1/namespaces/{ns}/pods"

    async def scenario() -> list[tuple[int, object]]:
        async with real_logs_backend(plane, nodes=["sim-node-0"]) as backend:
            status, _ = await anyio.to_thread.run_sync(lambda: plane.request("POST", pods, {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"nodeName": "sim-node-0",
                         "containers": [{"name": "main", "image": "busybox"}]}}))
            assert status == 201
            backend.append_log(ns, "p", "main", "first\nNCCL WARN failed\n")
            backend.logs.rotate_log(ns, "p", "main")
            backend.append_log(ns, "p", "main", "second run\n")
            queries = ["?container=main", "?container=main&tailLines=1&previous=true",
                       "?container=main&limitBytes=3", "?container=other"]
            return [await anyio.to_thread.run_sync(
                lambda q=q: plane.request("GET", f"{pods}/p/log{q}")) for q in queries]

    try:
        answers = anyio.run(scenario)
    finally:
        plane.reset()
    assert answers[0] == (200, "second run\n")
    assert answers[1] == (200, "NCCL WARN failed\n")
    assert answers[2] == (200, "sec")
    status, body = answers[3]
    assert status == 400 and "container other is not valid for pod p" in str(body)
