"""KubeClient sends a request again while the server answers 429 (or 5xx) with Retry-After, as
client-go's REST client does, at most ``max_retries`` times; without the header the error goes
straight to the caller."""

from __future__ import annotations

import anyio
import pytest
from kube_emu import emulator

from cre.kube.client import NAMESPACES, ApiError

pytestmark = pytest.mark.anyio


async def test_throttled_request_is_sent_again_after_retry_after() -> None:
    async with emulator() as (emu, client), anyio.create_task_group() as tg:
        emu.faults.add_error(429, verb="get", resource="namespaces", retry_after=1)

        async def brown_out_ends() -> None:
            await anyio.sleep(0.3)
            emu.faults.reset()

        tg.start_soon(brown_out_ends)
        got = await client.get(NAMESPACES, "cre")
        assert got["metadata"]["name"] == "cre"
        assert client.retried == 1


async def test_retries_are_bounded() -> None:
    async with emulator() as (emu, client):
        client.max_retries = 2
        emu.faults.add_error(503, verb="get", resource="namespaces", retry_after=1)
        with pytest.raises(ApiError) as info:
            await client.get(NAMESPACES, "cre")
        assert info.value.status == 503 and info.value.retry_after == 1
        assert client.retried == 2


async def test_no_retry_after_no_retry() -> None:
    async with emulator() as (emu, client):
        emu.faults.add_error(500, verb="get", resource="namespaces")
        with pytest.raises(ApiError) as info:
            await client.get(NAMESPACES, "cre")
        assert info.value.status == 500 and info.value.retry_after is None
        emu.faults.reset()
        emu.faults.add_error(409, verb="update", resource="namespaces")
        ns = await client.get(NAMESPACES, "cre")
        with pytest.raises(ApiError):
            await client.replace(NAMESPACES, ns)
        assert client.retried == 0
