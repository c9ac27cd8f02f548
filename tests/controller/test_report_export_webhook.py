"""The webhook sender (the one POST a ReportExport makes) against a loopback receiver."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web

from cre.controller.export.webhook import REDACTED, WebhookSender, redact, retry_after
from cre.core.common.plan import DeliverReport
from cre.testing.webhook import webhook_receiver

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _ask(url: str, **changes: Any) -> DeliverReport:
    fields: dict[str, Any] = {"url": url, "key": "k" * 64, "body": b'{"a":1}',
                              "timeout_seconds": 2.0, **changes}
    return DeliverReport(**fields)


async def test_a_post_carries_the_key_and_json_and_a_2xx_is_accepted() -> None:
    """The receiver gets the body as sent with the Idempotency-Key; 202 is an accepted
    attempt with no error."""
    sender = WebhookSender(client=None)  # type: ignore[arg-type]  # no token: no API read
    async with webhook_receiver() as receiver:
        attempt = await sender.send(_ask(receiver.url), namespace="ns")
    assert (attempt.http_status, attempt.error, attempt.accepted) == (202, None, True)
    (got,) = receiver.requests
    assert got.key == "k" * 64 and got.body == b'{"a":1}' and got.authorization is None


async def test_a_receiver_slower_than_the_timeout_is_no_answer() -> None:
    """A receiver that answers after the timeout: no status, a sentence naming the timeout,
    retryable."""
    sender = WebhookSender(client=None)  # type: ignore[arg-type]
    async with webhook_receiver(delay=1.0) as receiver:
        attempt = await sender.send(_ask(receiver.url, timeout_seconds=0.2), namespace="ns")
    assert attempt.http_status is None and attempt.retryable
    assert attempt.error == "no answer within 0.2s"


async def test_a_redirect_is_not_followed() -> None:
    """A 302 comes back as it is (the core rejects it); the redirect target is never asked."""
    hits: list[str] = []

    async def moved(request: web.Request) -> web.Response:
        hits.append(request.path)
        if request.path == "/in":
            raise web.HTTPFound("/elsewhere")
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/{tail:.*}", moved)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        attempt = await WebhookSender(client=None).send(  # type: ignore[arg-type]
            _ask(f"http://127.0.0.1:{port}/in"), namespace="ns")
    finally:
        await runner.cleanup()
    assert attempt.http_status == 302 and not attempt.retryable
    assert hits == ["/in"]


async def test_a_refused_connection_is_no_answer_and_redaction_replaces_the_token() -> None:
    """Nothing listening: no status, the transport error's text; ``redact`` removes a token
    from any text that might carry it."""
    async with webhook_receiver() as receiver:
        url = receiver.url  # the port is free again once the receiver stopped
    attempt = await WebhookSender(client=None).send(_ask(url), namespace="ns")  # type: ignore[arg-type]
    assert attempt.http_status is None and attempt.error
    assert redact("Bearer s3cret rejected", "s3cret") == f"Bearer {REDACTED} rejected"
    assert redact("nothing here", None) == "nothing here"


async def test_the_receivers_retry_after_comes_back_with_the_attempt() -> None:
    """A 503 with ``Retry-After: 7`` is an attempt that asks for 7 seconds; an HTTP date is read
    as the seconds until it; garbage is ignored."""
    async with webhook_receiver(fail_first=1, retry_after="7") as receiver:
        attempt = await WebhookSender(client=None).send(  # type: ignore[arg-type]
            _ask(receiver.url), namespace="ns")
    assert (attempt.http_status, attempt.retry_after) == (503, 7.0)
    now = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)
    assert retry_after("Sun, 06 Dec 2026 08:00:30 GMT", now=now) == 30.0
    assert retry_after("soon", now=now) is None and retry_after(None) is None
