"""Fixtures for the emulator conformance suite: an emulator and a small JSON HTTP client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from cre.testing.apiserver import Emulator, serve
from cre.testing.apiserver.pytest_fixtures import default_crd_sources


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Client:
    """Raw HTTP against the emulator, returning (status, parsed body, headers)."""

    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session = session
        self.base = base

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> tuple[int, Any, Any]:
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
        hdrs = {"Content-Type": content_type, **(headers or {})}
        async with self.session.request(method, self.base + path, data=data,
                                        headers=hdrs) as resp:
            text = await resp.read()
            try:
                parsed = json.loads(text) if text else None
            except ValueError:
                parsed = text.decode()
            return resp.status, parsed, resp.headers

    async def get(self, path: str, **kw: Any) -> tuple[int, Any, Any]:
        return await self.request("GET", path, **kw)

    async def post(self, path: str, body: Any, **kw: Any) -> tuple[int, Any, Any]:
        return await self.request("POST", path, body, **kw)

    async def put(self, path: str, body: Any, **kw: Any) -> tuple[int, Any, Any]:
        return await self.request("PUT", path, body, **kw)

    async def patch(self, path: str, body: Any, ctype: str, **kw: Any) -> tuple[int, Any, Any]:
        return await self.request("PATCH", path, body, content_type=ctype, **kw)

    async def delete(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any, Any]:
        return await self.request("DELETE", path, body, **kw)


@pytest.fixture
async def emu() -> AsyncIterator[Emulator]:
    async with serve(bookmark_interval=0.2, history=64) as e:
        yield e


@pytest.fixture
async def emu_crds() -> AsyncIterator[Emulator]:
    async with serve(crds=default_crd_sources(), bookmark_interval=0.2) as e:
        yield e


@pytest.fixture
async def client(emu: Emulator) -> AsyncIterator[Client]:
    async with aiohttp.ClientSession() as s:
        yield Client(s, emu.url)


@pytest.fixture
async def crd_client(emu_crds: Emulator) -> AsyncIterator[Client]:
    async with aiohttp.ClientSession() as s:
        yield Client(s, emu_crds.url)


def pod(name: str, *, labels: dict[str, str] | None = None, node: str = "",
        containers: tuple[str, ...] = ("main",)) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": c, "image": "busybox"} for c in containers]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


PODS = "/api/v1/namespaces/default/pods"
