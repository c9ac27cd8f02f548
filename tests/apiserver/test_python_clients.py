"""The same scenarios driven by the official ``kubernetes`` client and ``kubernetes_asyncio``."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import anyio
import pytest
from kubernetes import client as kclient
from kubernetes import config as kconfig
from kubernetes import watch as kwatch
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio import config as aconfig
from kubernetes_asyncio import watch as awatch
from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
from kubernetes_asyncio.leaderelection.leaderelectionrecord import LeaderElectionRecord
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from cre.testing.apiserver import Emulator

from .conftest import pod

pytestmark = pytest.mark.anyio

TRAINJOB: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
    "metadata": {"name": "tj"}, "spec": {"runtimeRef": {"name": "torch-distributed"}},
}


def _official(emu: Emulator) -> Any:
    # The generated clients are typed loosely (models vs dicts, optional metadata): Any here.
    return kconfig.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(emu.kubeconfig_path))


async def test_official_client_crud_watch_and_logs(emu_crds: Emulator) -> None:
    """kubernetes (sync): create, label-selected list, conflict, watch, logs, CR merge patch."""
    def scenario() -> dict[str, Any]:
        api = _official(emu_crds)
        core: Any = kclient.CoreV1Api(api)
        out: dict[str, Any] = {}
        core.create_namespaced_pod("default", pod("p1", labels={"app": "a"}, node="n1"))
        core.create_namespaced_pod("default", pod("p2", labels={"app": "b"}))
        pods = core.list_namespaced_pod("default", label_selector="app in (a)")
        out["listed"] = [p.metadata.name for p in pods.items]
        stale = core.read_namespaced_pod("p1", "default")
        core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"x": "1"}}})
        try:
            core.replace_namespaced_pod("p1", "default", stale)
        except kclient.ApiException as exc:
            out["conflict"] = exc.status
        events = []
        watcher: Any = kwatch.Watch()  # type: ignore[no-untyped-call]
        for ev in watcher.stream(core.list_namespaced_pod, "default",
                                        resource_version=pods.metadata.resource_version,
                                        timeout_seconds=1):
            events.append((ev["type"], ev["object"].metadata.name))
        out["events"] = events
        emu_crds.append_log("default", "p1", "main", "hello\n")
        out["log"] = core.read_namespaced_pod_log("p1", "default")
        custom: Any = kclient.CustomObjectsApi(api)
        custom.create_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", "default",
                                               "trainjobs", TRAINJOB)
        patched = custom.patch_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", "default", "trainjobs", "tj",
            {"metadata": {"labels": {"l": "v"}}})
        out["cr_labels"] = patched["metadata"]["labels"]
        api.close()
        return out

    out = await anyio.to_thread.run_sync(scenario)
    assert out["listed"] == ["p1"]
    assert out["conflict"] == 409
    assert out["events"] == [("MODIFIED", "p1")]
    assert out["log"] == "hello\n"
    assert out["cr_labels"] == {"l": "v"}


async def test_asyncio_client_watch_and_errors(emu_crds: Emulator) -> None:
    """kubernetes_asyncio: Watch sees ADDED/DELETED; a dict CR patch sent as JSON patch is 400."""
    api = await aconfig.new_client_from_config(config_file=str(emu_crds.kubeconfig_path))
    async with api:
        core: Any = aclient.CoreV1Api(api)
        lst = await core.list_namespaced_pod("default")
        rv = lst.metadata.resource_version
        await core.create_namespaced_pod("default", pod("p1"))
        await core.delete_namespaced_pod("p1", "default")
        seen = []
        async with awatch.Watch().stream(core.list_namespaced_pod, "default",
                                         resource_version=rv, timeout_seconds=1) as stream:
            async for ev in stream:
                seen.append((ev["type"], ev["object"].metadata.name))
        assert seen == [("ADDED", "p1"), ("DELETED", "p1")]
        custom: Any = aclient.CustomObjectsApi(api)
        await custom.create_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1",
                                                     "default", "trainjobs", TRAINJOB)
        with pytest.raises(aclient.ApiException) as exc:
            await custom.patch_namespaced_custom_object(
                "trainer.kubeflow.org", "v1alpha1", "default", "trainjobs", "tj",
                {"metadata": {"labels": {"l": "v"}}})
        assert exc.value.status == 400
        ok = await custom.patch_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", "default", "trainjobs", "tj",
            {"metadata": {"labels": {"l": "v"}}}, _content_type="application/merge-patch+json")
        assert ok["metadata"]["labels"] == {"l": "v"}
        with pytest.raises(aclient.ApiException) as exc:
            await core.read_namespaced_pod("nope", "default")
        assert exc.value.status == 404
        version: Any = await aclient.VersionApi(api).get_code()  # GET /version/
        assert version.minor == "33"


async def test_asyncio_leader_election_on_lease(emu: Emulator) -> None:
    """kubernetes_asyncio leader election: one holder wins the Lease, the other cannot take it."""
    api = await aconfig.new_client_from_config(config_file=str(emu.kubeconfig_path))
    async with api:
        started = asyncio.Event()

        async def on_start() -> None:
            started.set()
            await asyncio.Event().wait()

        async def on_stop() -> None:
            return None

        def election(identity: str) -> leaderelection.LeaderElection:
            lock = LeaseLock("ctrl", "default", identity, api)
            cfg = electionconfig.Config(lock, lease_duration=15, renew_deadline=10,
                                        retry_period=2, onstarted_leading=on_start,
                                        onstopped_leading=on_stop)
            return leaderelection.LeaderElection(cfg)

        a, b = election("a"), election("b")
        task = asyncio.create_task(a.run())
        try:
            await started.wait()
            lease = emu.objects.get("coordination.k8s.io/v1", "Lease", "ctrl", "default")
            assert lease is not None and lease["spec"]["holderIdentity"] == "a"
            assert await b.try_acquire_or_renew() is False
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        # two writers holding the same revision: the second PUT loses with 409
        la, lb = LeaseLock("ctrl", "default", "a", api), LeaseLock("ctrl", "default", "b", api)
        ok_a, _ = await la.get("ctrl", "default")
        ok_b, _ = await lb.get("ctrl", "default")
        assert ok_a and ok_b
        now = str(datetime.datetime.now())
        rec_a = LeaderElectionRecord("a", "15", now, now)
        rec_b = LeaderElectionRecord("b", "15", now, now)
        assert await la.update("ctrl", "default", rec_a) is True
        assert await lb.update("ctrl", "default", rec_b) is False
