"""The emulator counts the API requests it serves by client, verb and resource, as an audit log
would (``GET``/``DELETE /_emulator/requests``); ``python -m bench certify`` reads them."""

from __future__ import annotations

import pytest

from .conftest import PODS, Client, pod

pytestmark = pytest.mark.anyio


@pytest.mark.emulator_only('the /_emulator/requests control API')
async def test_requests_are_counted_by_user_agent_verb_and_resource(client: Client) -> None:
    """Two clients told apart by their User-Agent product; subresources counted on their own;
    DELETE resets the counts."""
    status, _, _ = await client.delete("/_emulator/requests")
    assert status == 204
    agent = {"User-Agent": "cre-manager/0.1.0"}
    await client.post(PODS, pod("a"), headers=agent)
    await client.post(PODS, pod("b"), headers=agent)
    await client.get(f"{PODS}/a", headers={"User-Agent": "kubectl/v1.31.0 (linux/amd64)"})
    await client.get(f"{PODS}/a/status", headers=agent)
    _, rows, _ = await client.get("/_emulator/requests")
    assert rows == [
        {"userAgent": "cre-manager", "verb": "create", "resource": "pods", "count": 2},
        {"userAgent": "cre-manager", "verb": "get", "resource": "pods/status", "count": 1},
        {"userAgent": "kubectl", "verb": "get", "resource": "pods", "count": 1},
    ]
    await client.delete("/_emulator/requests")
    _, rows, _ = await client.get("/_emulator/requests")
    assert rows == []
