"""Fixtures for the emulator conformance suite: an emulator and a small JSON HTTP client.

``CRE_BACKEND=real`` points ``client`` and ``crd_client`` at a real kube-apiserver (the
session's ``real_control_plane``, emptied after each test) instead of an emulator; a test that
needs the emulator's own Python API (the ``emu`` fixtures: clock, faults, raw objects) skips.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from cre.testing.apiserver import Emulator, serve
from cre.testing.apiserver.pytest_fixtures import default_crd_sources
from cre.testing.controlplane import ControlPlane

REAL = os.environ.get("CRE_BACKEND", "emulator") == "real"


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

    async def wire(self, method: str, path: str, body: Any = None) -> tuple[str, str, bytes]:
        """The response as bytes on the wire: status line, Content-Type and the raw body."""
        data = None if body is None else json.dumps(body).encode()
        async with self.session.request(method, self.base + path, data=data, headers={
                "Content-Type": "application/json", "Accept": "application/json"}) as resp:
            line = f"HTTP/{resp.version.major}.{resp.version.minor} {resp.status} {resp.reason}"
            return line, resp.headers.get("Content-Type", ""), await resp.read()

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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "emulator_only(reason): the test checks something only the emulator has "
        "(its control API, its kubelet stand-in); skipped under CRE_BACKEND=real with the reason")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``CRE_BACKEND=real``, skip the tests marked ``emulator_only`` (with their reason)
    and those that take an emulator fixture directly."""
    if not REAL:
        return
    for item in items:
        only = item.get_closest_marker("emulator_only")
        if only is not None:
            item.add_marker(pytest.mark.skip(
                reason=f"CRE_BACKEND=real: emulator-only: {only.args[0]}"))
            continue
        func = getattr(item, "obj", None)
        params = inspect.signature(func).parameters if callable(func) else {}
        if {"emu", "emu_crds"} & set(params) or not {"client", "crd_client"} & set(params):
            item.add_marker(pytest.mark.skip(
                reason="CRE_BACKEND=real: this test does not go through the HTTP client "
                       "fixtures alone (it drives the emulator's Python API or its units)"))


@pytest.fixture
async def emu() -> AsyncIterator[Emulator | None]:
    if REAL:
        yield None  # the HTTP client goes to the real server
        return
    async with serve(bookmark_interval=0.2, history=64) as e:
        yield e


@pytest.fixture
async def emu_crds() -> AsyncIterator[Emulator | None]:
    if REAL:
        yield None
        return
    async with serve(crds=default_crd_sources(), bookmark_interval=0.2) as e:
        yield e


@pytest.fixture
def real_plane(request: pytest.FixtureRequest) -> ControlPlane | None:
    """The real control plane under ``CRE_BACKEND=real``, else None."""
    if not REAL:
        return None
    plane: ControlPlane = request.getfixturevalue("real_control_plane")
    return plane


@contextlib.asynccontextmanager
async def _session(emulator: Emulator | None,
                   plane: ControlPlane | None) -> AsyncIterator[Client]:
    if plane is None:
        assert emulator is not None
        async with aiohttp.ClientSession() as s:
            yield Client(s, emulator.url)
        return
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    headers = {"Authorization": f"Bearer {plane.token}"}
    try:
        async with aiohttp.ClientSession(headers=headers,
                                         connector=aiohttp.TCPConnector(ssl=context)) as s:
            yield Client(s, plane.url)
    finally:
        plane.reset()


@pytest.fixture
async def client(emu: Emulator | None, real_plane: ControlPlane | None) -> AsyncIterator[Client]:
    async with _session(emu, real_plane) as c:
        yield c


@pytest.fixture
async def crd_client(emu_crds: Emulator | None,
                     real_plane: ControlPlane | None) -> AsyncIterator[Client]:
    async with _session(emu_crds, real_plane) as c:
        yield c


def pod(name: str, *, labels: dict[str, str] | None = None, node: str = "",
        containers: tuple[str, ...] = ("main",)) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": c, "image": "busybox"} for c in containers]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


PODS = "/api/v1/namespaces/default/pods"
