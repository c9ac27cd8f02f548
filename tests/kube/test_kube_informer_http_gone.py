"""The informer's HTTP-410 path over real HTTP: a watch resume answered with a 410 Status.

A real API server answers an expired resume in two ways: a 200 stream whose first event is an
``ERROR`` with code 410 (the watch cache), or a plain HTTP 410 ``Expired`` Status before any
stream starts. The emulator's ``gone_status_on_resume`` fault produces the second; the informer
must relist, emit the gap as events, and resume watching.
"""

from __future__ import annotations

import anyio
import attrs
import pytest
from kube_emu import FAST, Recorder, cache_state, emulator, relists

from cre.api.watch import WatchEventType
from cre.kube.client import CONFIGMAPS, KubeClient
from cre.kube.informer import Informer

pytestmark = pytest.mark.anyio
SELECTOR = "app=gone-test"


@attrs.frozen
class CmView:
    namespace: str
    name: str
    resource_version: str


def cm_view(obj: dict[str, object]) -> CmView:
    meta = obj["metadata"]
    assert isinstance(meta, dict)
    return CmView(str(meta["namespace"]), str(meta["name"]), str(meta["resourceVersion"]))


async def create_cm(client: KubeClient, name: str) -> str:
    body = {"metadata": {"name": name, "labels": {"app": "gone-test"}}, "data": {"v": "0"}}
    out = await client.create(CONFIGMAPS, body, namespace="cre")
    return str(out["metadata"]["resourceVersion"])


async def update_cm(client: KubeClient, name: str, value: str) -> None:
    await client.patch(CONFIGMAPS, name, {"data": {"v": value}}, namespace="cre")


async def server_cms(client: KubeClient) -> dict[str, str]:
    page = await client.list(CONFIGMAPS, namespace="cre", query={"labelSelector": SELECTOR})
    return {f"cre/{c['metadata']['name']}": c["metadata"]["resourceVersion"]
            for c in page["items"]}


async def test_http_410_on_resume_relists_and_resumes() -> None:
    """An HTTP 410 Status on resume makes the informer relist, emit the gap, and watch again."""
    async with emulator() as (emu, client):
        for name in ("a", "b", "c"):
            await create_cm(client, name)
        inf: Informer[CmView] = Informer(client, CONFIGMAPS, transform=cm_view, namespace="cre",
                                         label_selector=SELECTOR, name="t-http-410",
                                         config=FAST)
        rec = Recorder()
        inf.add_handler(rec)
        async with anyio.create_task_group() as tg:
            tg.start_soon(inf.run)
            await inf.wait_synced()
            tg.cancel_scope.cancel()
        assert relists("t-http-410") == 1
        rec.events.clear()
        await client.delete(CONFIGMAPS, "b", namespace="cre")
        await update_cm(client, "c", "1")
        await create_cm(client, "d")
        emu.faults.gone_status_on_resume(1, resource="configmaps")
        async with anyio.create_task_group() as tg:
            tg.start_soon(inf.run)
            expected = await server_cms(client)
            await rec.wait_until(lambda: cache_state(inf) == expected)
            gap = sorted((t, k) for t, k, _ in rec.events)
            rv = await create_cm(client, "e")  # arrives through the resumed watch
            await rec.wait_until(lambda: "cre/e" in inf.store)
            tg.cancel_scope.cancel()
        assert emu.faults.gone_status_remaining == 0, "the resume really got the HTTP 410"
        assert gap == [(WatchEventType.ADDED, "cre/d"), (WatchEventType.DELETED, "cre/b"),
                       (WatchEventType.MODIFIED, "cre/c")]
        assert rec.events[-1] == (WatchEventType.ADDED, "cre/e", rv)
        assert relists("t-http-410") == 2, "exactly one relist, caused by the 410"
