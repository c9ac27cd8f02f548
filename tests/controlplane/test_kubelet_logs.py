"""The kubelet-style log server answers like a kubelet: tail, byte limit, previous, 404."""

from __future__ import annotations

import ssl
from pathlib import Path

import aiohttp
import pytest

from cre.testing.apiserver.emulator import make_certificates
from cre.testing.cluster.kubelet_logs import KubeletLogs


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_logs_are_served_with_the_kubelet_query_parameters(tmp_path: Path) -> None:
    ca, crt, key = make_certificates(tmp_path)
    logs = KubeletLogs(cert=crt, key=key)
    port = await logs.start()
    assert logs.node_status()["daemonEndpoints"] == {"kubeletEndpoint": {"Port": port}}
    context = ssl.create_default_context(cafile=str(ca))
    base = f"https://127.0.0.1:{port}/containerLogs/ns/p/main"
    try:
        logs.append_log("ns", "p", "main", "one\ntwo\n")
        logs.rotate_log("ns", "p", "main")
        await logs.append("ns", "p", "main", "three\nfour\nfive\n")
        async with aiohttp.ClientSession() as s:
            async def get(query: str) -> tuple[int, str]:
                async with s.get(base + query, ssl=context) as r:
                    return r.status, await r.text()

            assert await get("") == (200, "three\nfour\nfive\n")
            assert await get("?tailLines=2") == (200, "four\nfive\n")
            assert await get("?tailLines=2&limitBytes=3") == (200, "fou")
            assert await get("?previous=true") == (200, "one\ntwo\n")
            status, text = await get("?timestamps=true&tailLines=1")
            assert status == 200 and text.endswith("Z five\n") and text[:4].isdigit()
            async with s.get(f"https://127.0.0.1:{port}/containerLogs/ns/q/main",
                             ssl=context) as r:
                assert r.status == 404
    finally:
        await logs.close()
    assert logs.requests == 6
