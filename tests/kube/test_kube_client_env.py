"""KubeClient reads the environment once: a proxy named there for the API server is used, and
no request looks for netrc credentials (aiohttp's per-request lookup cost most of a request's
client CPU)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

from cre.kube.client import NAMESPACES, ApiError, KubeClient

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def _server(seen: list[tuple[str, str | None]]) -> AsyncIterator[str]:
    """An HTTP server answering every request with a Namespace, keeping (URL, Authorization)."""

    async def answer(request: web.Request) -> web.Response:
        seen.append((str(request.url), request.headers.get("Authorization")))
        return web.json_response({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "cre"}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def _kubeconfig(tmp_path: Path, server: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}"}}}}]
users: [{{name: u, user: {{}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    return str(path)


async def test_no_netrc_credentials_are_sent(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A netrc entry for the API server's host is not read: the request goes out with the
    kubeconfig's credentials only (here none)."""
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    for var in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    seen: list[tuple[str, str | None]] = []
    async with _server(seen) as url:
        client = await KubeClient.from_kubeconfig(_kubeconfig(tmp_path, url))
        try:
            assert (await client.get(NAMESPACES, "cre"))["metadata"]["name"] == "cre"
        finally:
            await client.close()
    assert seen == [(f"{url}/api/v1/namespaces/cre", None)]


async def test_the_environment_proxy_is_used(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP_PROXY names the proxy every request to the API server goes through; NO_PROXY
    naming the API server's host bypasses it."""
    seen: list[tuple[str, str | None]] = []
    async with _server(seen) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        api = "http://apiserver.invalid:6443"
        client = await KubeClient.from_kubeconfig(_kubeconfig(tmp_path, api))
        try:
            await client.get(NAMESPACES, "cre")
        finally:
            await client.close()
        assert [u for u, _ in seen] == [f"{api}/api/v1/namespaces/cre"]
        monkeypatch.setenv("NO_PROXY", "apiserver.invalid")
        client = await KubeClient.from_kubeconfig(_kubeconfig(tmp_path, api))
        try:
            with pytest.raises(ApiError) as info:  # straight to a host that does not resolve
                await client.get(NAMESPACES, "cre")
        finally:
            await client.close()
        assert info.value.status == 0 and len(seen) == 1
