"""The webhook sender (the one POST a ReportExport makes) against a loopback receiver."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from cre.controller.export.webhook import REDACTED, WebhookSender, redact, retry_after
from cre.core.common.plan import DeliverReport
from cre.testing.webhook import URL_PLACEHOLDER, scenario_receiver, webhook_receiver, with_url

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


async def test_a_scenario_receiver_summary_numbers_keys_and_never_shows_the_token() -> None:
    """Built from a scenario's camelCase knobs, the receiver refuses the first POST; its summary
    names keys by first appearance, says whose token came (never the token itself), counts the
    kept report and checks the keys against the exports'. Unknown knobs are refused."""
    posts = [("a", "Bearer s3cret"), ("a", "Bearer s3cret"), ("b", "Bearer guess"), ("b", None)]
    async with scenario_receiver({"failFirst": 1, "expectToken": "s3cret"}) as receiver:
        assert receiver is not None
        async with aiohttp.ClientSession() as session:
            for key, auth in posts:
                headers = {"Idempotency-Key": key * 64} | (
                    {"Authorization": auth} if auth else {})
                async with session.post(receiver.url, data=b"{}", headers=headers) as answer:
                    await answer.read()
    summary = receiver.summary(export_keys={"a" * 64, "b" * 64})
    assert summary["requests"] == [
        {"key": "<key-1>", "status": 503, "kept": False, "token": "expected"},
        {"key": "<key-1>", "status": 202, "kept": True, "token": "expected"},
        {"key": "<key-2>", "status": 401, "kept": False, "token": "other"},
        {"key": "<key-2>", "status": 401, "kept": False, "token": "none"}]
    assert (summary["reports"], summary["duplicates"]) == (1, 0)
    assert summary["keysAreTheExports"] and "s3cret" not in repr(summary)
    assert receiver.summary(export_keys={"a" * 64})["keysAreTheExports"] is False
    with pytest.raises(ValueError, match="failfirst"):
        async with scenario_receiver({"failfirst": 1}):
            pass
    async with scenario_receiver(None) as none:
        assert none is None


def test_the_url_placeholder_is_replaced_in_whole_strings_only() -> None:
    """$WEBHOOK_URL as a whole string value anywhere in a scenario becomes the URL; a string
    that only contains it, keys and other values stay."""
    spec = {"apply": [{"object": {"spec": {"webhook": {"url": URL_PLACEHOLDER}},
                                  "note": f"see {URL_PLACEHOLDER}", "n": 1}}]}
    assert with_url(spec, "http://127.0.0.1:1/r") == {"apply": [{"object": {
        "spec": {"webhook": {"url": "http://127.0.0.1:1/r"}},
        "note": f"see {URL_PLACEHOLDER}", "n": 1}}]}
