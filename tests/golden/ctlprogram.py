"""A plain asyncio controller for the ``type: controller`` runner's tests: it labels every
ConfigMap ``seen=yes`` (polling, no informer) and reads its clock from the runner."""

from __future__ import annotations

from typing import Any

import anyio

from cre.kube.client import CONFIGMAPS, ApiError, KubeClient


async def main(client: KubeClient, namespace: str, label: str = "yes") -> None:
    while True:
        items = (await client.list(CONFIGMAPS, namespace=namespace)).get("items", [])
        for cm in items:
            if (cm["metadata"].get("labels") or {}).get("seen") != label:
                try:
                    await client.patch(CONFIGMAPS, cm["metadata"]["name"],
                                       {"metadata": {"labels": {"seen": label}}},
                                       namespace=namespace)
                except ApiError as exc:
                    if not exc.retryable and not exc.not_found:
                        raise
        await anyio.sleep(0.01)


def needs_secret(client: KubeClient, secret: str) -> Any:
    return main(client, "default", secret)


async def idle() -> None:
    """A controller that does nothing (the case's steps play every part)."""
    await anyio.sleep_forever()
