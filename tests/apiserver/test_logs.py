"""Pod logs: container choice errors, options, previous, and follow streaming."""

from __future__ import annotations

import aiohttp
import pytest

from cre.testing.apiserver import Emulator

from .conftest import PODS, Client, pod

pytestmark = pytest.mark.anyio


async def test_missing_container_is_400(client: Client) -> None:
    """A multi-container pod needs ?container=, answered with the server's 400 text."""
    await client.post(PODS, pod("p", node="n1", containers=("main", "sidecar")))
    status, body, _ = await client.get(PODS + "/p/log")
    assert status == 400
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "a container name must be specified for pod p, choose one of: "
                    "[main sidecar]", "reason": "BadRequest", "code": 400}
    status, body, _ = await client.get(PODS + "/p/log?container=nope")
    assert status == 400 and body["message"] == "container nope is not valid for pod p"


async def test_unscheduled_pod_answers_204(client: Client) -> None:
    """Logs of a pod without a node are empty with 204 No Content."""
    await client.post(PODS, pod("p"))
    status, body, _ = await client.get(PODS + "/p/log")
    assert status == 204 and body is None


@pytest.mark.emulator_only(
    "the emulator answers for the node's kubelet; kube-apiserver proxies pod logs to the "
    'kubelet of the pod\'s node, and this plane runs none for n1 (404 nodes "n1" not found)')
async def test_waiting_container_is_400(client: Client) -> None:
    """A container that has not started answers the kubelet's waiting message."""
    await client.post(PODS, pod("p", node="n1"))
    status, body, _ = await client.get(PODS + "/p/log")
    assert status == 400
    assert body["message"] == 'container "main" in pod "p" is waiting to start: ContainerCreating'


async def test_crash_looping_container_answers_its_last_run(client: Client,
                                                             emu: Emulator) -> None:
    """A container waiting in CrashLoopBackOff after a run: the default read answers with the
    last terminated instance (the kubelet's lastState.terminated branch), as previous=true
    does; without a previous run it still says it is waiting."""
    await client.post(PODS, pod("p", node="n1"))
    emu.append_log("default", "p", "main", "ssh: connect to host: Connection refused\n",
                   previous=True)
    _, cur, _ = await client.get(PODS + "/p")
    waiting = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s"}}
    cur["status"]["containerStatuses"] = [{
        "name": "main", "ready": False, "restartCount": 1, "image": "busybox", "imageID": "",
        "state": waiting, "lastState": {"terminated": {
            "exitCode": 1, "reason": "Error", "containerID": "containerd://1"}}}]
    await client.put(PODS + "/p/status", cur)
    for query in ("", "?previous=true"):
        status, text, _ = await client.get(PODS + "/p/log" + query)
        assert (status, text) == (200, "ssh: connect to host: Connection refused\n")
    await client.post(PODS, pod("q", node="n1"))
    _, cur, _ = await client.get(PODS + "/q")
    cur["status"]["containerStatuses"] = [{
        "name": "main", "ready": False, "restartCount": 0, "image": "busybox", "imageID": "",
        "state": waiting}]
    await client.put(PODS + "/q/status", cur)
    status, body, _ = await client.get(PODS + "/q/log")
    assert status == 400
    assert body["message"] == 'container "main" in pod "q" is waiting to start: CrashLoopBackOff'


async def test_log_options(client: Client, emu: Emulator) -> None:
    """tailLines, limitBytes, timestamps and previous slice the appended text."""
    await client.post(PODS, pod("p", node="n1"))
    emu.append_log("default", "p", "main", "a\nb\nc\n")
    emu.append_log("default", "p", "main", "old\n", previous=True)
    assert (await client.get(PODS + "/p/log"))[1] == "a\nb\nc\n"
    assert (await client.get(PODS + "/p/log?tailLines=2"))[1] == "b\nc\n"
    assert (await client.get(PODS + "/p/log?limitBytes=3"))[1] == "a\nb"
    assert (await client.get(PODS + "/p/log?previous=true"))[1] == "old\n"
    _, text, _ = await client.get(PODS + "/p/log?timestamps=true&tailLines=1")
    stamp, _, line = text.partition(" ")
    assert line == "c\n" and stamp.endswith("Z") and "T" in stamp
    status, body, _ = await client.get(PODS + "/p/log?tailLines=-1")
    assert status == 422
    assert body["message"] == ('PodLogOptions "p" is invalid: tailLines: Invalid value: -1: '
                               "must be greater than or equal to 0")


async def test_follow_streams_until_container_terminates(client: Client, emu: Emulator) -> None:
    """follow=true streams appended lines and ends when the container terminates."""
    await client.post(PODS, pod("p", node="n1"))
    emu.append_log("default", "p", "main", "first\n")
    async with aiohttp.ClientSession() as s, s.get(
            f"{emu.url}{PODS}/p/log?follow=true") as resp:
        assert (await resp.content.readline()) == b"first\n"
        emu.append_log("default", "p", "main", "second\n")
        assert (await resp.content.readline()) == b"second\n"
        _, cur, _ = await client.get(PODS + "/p")
        cur["status"]["containerStatuses"] = [{
            "name": "main", "ready": False, "restartCount": 0, "image": "busybox",
            "imageID": "", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]
        await client.put(PODS + "/p/status", cur)
        emu.append_log("default", "p", "main", "last\n")
        rest = await resp.content.read()
    assert rest == b"last\n"


@pytest.mark.emulator_only('the /_emulator/logs control API')
async def test_control_api_appends_logs(client: Client) -> None:
    """POST /_emulator/logs/... appends text for processes outside the test."""
    await client.post(PODS, pod("p", node="n1"))
    status, _, _ = await client.request("POST", "/_emulator/logs/default/p/main",
                                        raw=b"from outside\n", content_type="text/plain")
    assert status == 204
    assert (await client.get(PODS + "/p/log"))[1] == "from outside\n"


async def test_since_seconds_uses_the_emulator_clock(client: Client, emu: Emulator) -> None:
    """sinceSeconds keeps lines appended within that many seconds of the emulator's now."""
    from datetime import UTC, datetime

    emu.clock.set(datetime(2030, 1, 1, tzinfo=UTC))
    await client.post(PODS, pod("p", node="n1"))
    emu.append_log("default", "p", "main", "old\n")
    emu.clock.advance(600)
    emu.append_log("default", "p", "main", "new\n")
    assert (await client.get(PODS + "/p/log?sinceSeconds=60"))[1] == "new\n"
    assert (await client.get(PODS + "/p/log?sinceTime=2030-01-01T00:05:00Z"))[1] == "new\n"
    status, body, _ = await client.get(PODS + "/p/log?sinceSeconds=5&sinceTime="
                                       "2030-01-01T00:05:00Z")
    assert status == 422
    assert body["details"]["causes"] == [{
        "reason": "FieldValueForbidden",
        "message": "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"}]


async def test_a_late_writer_keeps_each_lines_time(client: Client, emu: Emulator) -> None:
    """A writer that runs late (the simulator's kubelet under load) stamps each line with
    when it was written, kept in time order and never after now."""
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    emu.clock.set(t0)
    await client.post(PODS, pod("p", node="n1"))
    emu.clock.advance(10)
    emu.append_log("default", "p", "main", "save\n", at=t0 + timedelta(seconds=5))
    emu.append_log("default", "p", "main", "saved\n", at=t0 + timedelta(seconds=7))
    emu.append_log("default", "p", "main", "before\n", at=t0 + timedelta(seconds=6))
    emu.append_log("default", "p", "main", "future\n", at=t0 + timedelta(seconds=60))
    _, text, _ = await client.get(PODS + "/p/log?timestamps=true")
    assert [line.split(" ")[0][11:19] for line in text.splitlines()] == [
        "00:00:05", "00:00:07", "00:00:07", "00:00:10"]
