"""Helpers for the informer tests that run against the API emulator over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from prometheus_client import REGISTRY

from cre.api.watch import WatchEventType
from cre.kube.client import NAMESPACES, PODS, KubeClient
from cre.kube.informer import Informer, ReflectorConfig
from cre.testing.apiserver import Emulator, serve

# Tiny delays: the protocol is what is under test, not the waiting.
FAST = ReflectorConfig(backoff_initial=0.001, backoff_max=0.01, watch_timeout_min=30,
                       watch_timeout_max=60, page_size=3)


@asynccontextmanager
async def emulator(*, namespaces: tuple[str, ...] = ("cre",),
                   bookmark_interval: float = 60.0) -> AsyncIterator[tuple[Emulator, KubeClient]]:
    """An emulator with ``namespaces`` created, and a client for it."""
    async with serve(bookmark_interval=bookmark_interval) as emu:
        client = await KubeClient.from_kubeconfig(str(emu.kubeconfig_path))
        try:
            for ns in namespaces:
                await client.create(NAMESPACES, {"metadata": {"name": ns}})
            yield emu, client
        finally:
            await client.close()


def pod_body(name: str, labels: dict[str, str], node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "node",
                                            "image": "nvcr.io/nvidia/pytorch:25.01"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": spec}


async def create_pod(client: KubeClient, name: str, labels: dict[str, str],
                     namespace: str = "cre", node: str | None = None) -> str:
    out = await client.create(PODS, pod_body(name, labels, node), namespace=namespace)
    return str(out["metadata"]["resourceVersion"])


async def set_labels(client: KubeClient, name: str, labels: dict[str, str | None],
                     namespace: str = "cre") -> str:
    out = await client.patch(PODS, name, {"metadata": {"labels": labels}}, namespace=namespace)
    return str(out["metadata"]["resourceVersion"])


async def delete_pod(client: KubeClient, name: str, namespace: str = "cre") -> None:
    await client.delete(PODS, name, namespace=namespace, grace_period_seconds=0)


def drop_watches(emu: Emulator) -> None:
    """End every open watch stream now, as a load balancer or apiserver restart would."""
    emu.faults.drop_watches()


def relists(name: str) -> float:
    return REGISTRY.get_sample_value("cre_informer_relists_total", {"informer": name}) or 0.0


class Recorder:
    """A handler that records events and lets a test wait for a condition on the store."""

    def __init__(self) -> None:
        self.events: list[tuple[WatchEventType, str, str]] = []  # (type, key, rv)
        self.mirror: dict[str, str] = {}  # the store as rebuilt from the events alone
        self._changed = anyio.Event()

    def __call__(self, etype: WatchEventType, old: Any, new: Any) -> None:
        obj = new if new is not None else old
        key = f"{obj.namespace}/{obj.name}"
        self.events.append((etype, key, obj.resource_version))
        if etype is WatchEventType.DELETED:
            self.mirror.pop(key, None)
        else:
            self.mirror[key] = obj.resource_version
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        with anyio.fail_after(30):  # hang guard only
            while not predicate():
                await self._changed.wait()


async def server_state(client: KubeClient, selector: str) -> dict[str, str]:
    """key -> resourceVersion of every pod the server has for ``selector`` (read live)."""
    page = await client.list(PODS, query={"labelSelector": selector})
    return {f"{p['metadata']['namespace']}/{p['metadata']['name']}":
            p["metadata"]["resourceVersion"] for p in page["items"]}


def cache_state(inf: Informer[Any]) -> dict[str, str]:
    return {k: inf.store.resource_version(k) or "" for k in inf.store}
