"""The real control plane as a drop-in for the emulator in CRE's harnesses and benchmarks.

The Job harness (:mod:`cre.testing.jobharness`) and ``python -m bench capture`` need two things
from their API server: a kubeconfig and a way to give a container a log. On the real server the
log half is :class:`~cre.testing.cluster.kubelet_logs.KubeletLogs`, reached through the nodes'
status, so :func:`real_logs_backend` starts it and registers the named nodes with the status that
points kube-apiserver at it; everything else goes through the real API.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import attrs

from cre.kube.client import NODES, ApiError, KubeClient
from cre.testing.cluster.kubelet_logs import KubeletLogs

from .plane import ControlPlane


@attrs.define
class RealBackend:
    """What the Job harness needs (``kubeconfig_path``, ``append_log``), on a real server."""

    plane: ControlPlane
    logs: KubeletLogs

    @property
    def kubeconfig_path(self) -> Path:
        return self.plane.kubeconfig

    def append_log(self, namespace: str, pod: str, container: str, text: str) -> None:
        self.logs.append_log(namespace, pod, container, text)


async def register_nodes(client: KubeClient, logs: KubeletLogs, names: Sequence[str],
                         *, labels: dict[str, str] | None = None) -> None:
    """Ready nodes whose status sends kube-apiserver's log requests to ``logs``."""
    for name in names:
        with contextlib.suppress(ApiError):
            await client.create(NODES, {"apiVersion": "v1", "kind": "Node",
                                        "metadata": {"name": name, "labels": labels or {}}})
        await client.patch(NODES, name, {"status": {
            **logs.node_status(),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "simulated"}]}}, subresource="status")


@contextlib.asynccontextmanager
async def real_logs_backend(plane: ControlPlane, *, nodes: Sequence[str] = ()
                            ) -> AsyncIterator[RealBackend]:
    """Serve kubelet logs for ``plane`` and register ``nodes`` pointing at them."""
    cert, key = plane.serving_cert
    logs = KubeletLogs(cert=cert, key=key)
    await logs.start()
    try:
        if nodes:
            client = await KubeClient.from_kubeconfig(str(plane.kubeconfig))
            try:
                await register_nodes(client, logs, nodes)
            finally:
                await client.close()
        yield RealBackend(plane=plane, logs=logs)
    finally:
        await logs.close()
