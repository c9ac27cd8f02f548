"""A report receiver for tests: a small HTTP server on loopback that fails, stalls and loses
answers on demand, and remembers everything it was sent.

It stands in for the system a ReportExport delivers to (a results database, a fleet dashboard)
the way that system should behave: it keeps one copy of a report per ``Idempotency-Key``
(:attr:`WebhookReceiver.reports`) however many times the report arrives, and it can misbehave
in the ways that make delivery hard:

* ``fail_first``: answer the first N POSTs with ``fail_status`` (503) without keeping them;
* ``lose_first``: keep the first N POSTs but answer ``fail_status``, as if the answer were lost
  on its way back (the sender retries a report the receiver already has: a duplicate);
* ``delay``: wait that many seconds before answering (longer than the sender's timeout: the
  sender gives up, the receiver keeps the report, another duplicate);
* ``reject``: answer every POST with that status (e.g. 400);
* ``retry_after``: the ``Retry-After`` header of every failed answer.

Every request, kept or not, is in :attr:`WebhookReceiver.requests` with its headers and the
status it was answered, so a test can check what was sent and how often; ``expect_token`` makes
a POST with another bearer token a 401 (the receiver's own check of the token the sender read
from its Secret).

A scenario (:mod:`cre.testing.cluster.scenario`) serves one with its ``webhook:`` knobs
(:func:`scenario_receiver`), writes its URL where an applied object says ``$WEBHOOK_URL``
(:func:`with_url`) and records :meth:`WebhookReceiver.summary`: what arrived, with keys as
numbered stand-ins and the token never shown.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final

import attrs
from aiohttp import web

__all__ = ["URL_PLACEHOLDER", "Received", "WebhookReceiver", "scenario_receiver",
           "webhook_receiver", "with_url"]

#: The string an object applied by a scenario holds where the receiver's URL goes.
URL_PLACEHOLDER: Final = "$WEBHOOK_URL"
#: A scenario's ``webhook:`` knobs (camelCase) and the receiver's attributes they set.
SCENARIO_KNOBS: Final = {"failFirst": "fail_first", "loseFirst": "lose_first", "delay": "delay",
                         "reject": "reject", "failStatus": "fail_status",
                         "retryAfter": "retry_after", "expectToken": "expect_token"}


@attrs.frozen(kw_only=True)
class Received:
    """One POST as it arrived."""

    path: str
    key: str | None
    authorization: str | None
    body: bytes
    kept: bool
    status: int  # what the receiver answered

    def json(self) -> Any:
        """The body, parsed."""
        return json.loads(self.body)


@attrs.define(kw_only=True)
class WebhookReceiver:
    """What the server does and what it has seen (change the knobs while it runs)."""

    fail_first: int = 0
    lose_first: int = 0
    delay: float = 0.0
    reject: int | None = None
    fail_status: int = 503
    retry_after: str | None = None  # the Retry-After header of a failed answer
    expect_token: str | None = None
    url: str = ""
    requests: list[Received] = attrs.field(factory=list)
    reports: dict[str, bytes] = attrs.field(factory=dict)

    @property
    def distinct_keys(self) -> set[str]:
        """Every Idempotency-Key seen."""
        return {r.key for r in self.requests if r.key is not None}

    def duplicates(self) -> int:
        """POSTs of a report the receiver already kept."""
        seen: set[str] = set()
        count = 0
        for r in self.requests:
            if r.key in seen:
                count += 1
            elif r.kept and r.key is not None:
                seen.add(r.key)
        return count

    def summary(self, *, export_keys: set[str]) -> dict[str, Any]:
        """What arrived, stable across runs: per POST its key as ``<key-N>`` (numbered by first
        appearance), the answer, whether it was kept and whose token it carried (``expected``,
        ``other`` or ``none``: never the token); how many reports are kept and how many POSTs
        were duplicates; whether the keys seen are exactly ``export_keys`` (the
        ReportExports' ``status.idempotencyKey``)."""
        names: dict[str, str] = {}

        def token(auth: str | None) -> str:
            if auth is None:
                return "none"
            return "expected" if auth == f"Bearer {self.expect_token}" else "other"

        return {"requests": [{"key": names.setdefault(r.key, f"<key-{len(names) + 1}>")
                              if r.key is not None else None,
                              "status": r.status, "kept": r.kept,
                              "token": token(r.authorization)} for r in self.requests],
                "reports": len(self.reports), "duplicates": self.duplicates(),
                "keysAreTheExports": self.distinct_keys == export_keys}

    async def _post(self, request: web.Request) -> web.Response:
        body = await request.read()
        key = request.headers.get("Idempotency-Key")
        auth = request.headers.get("Authorization")
        n = len(self.requests)
        if self.expect_token is not None and auth != f"Bearer {self.expect_token}":
            return self._seen(request, key, auth, body, kept=False, status=401)
        if self.reject is not None:
            return self._seen(request, key, auth, body, kept=False, status=self.reject)
        if n < self.fail_first:
            return self._seen(request, key, auth, body, kept=False, status=self.fail_status)
        if key is not None:
            self.reports.setdefault(key, body)  # the first copy wins: a retry is the same
        if self.delay:
            await asyncio.sleep(self.delay)
        lost = n < self.fail_first + self.lose_first
        return self._seen(request, key, auth, body, kept=True,
                          status=self.fail_status if lost else 202)

    def _seen(self, request: web.Request, key: str | None, auth: str | None, body: bytes, *,
              kept: bool, status: int) -> web.Response:
        self.requests.append(Received(path=request.path, key=key, authorization=auth,
                                      body=body, kept=kept, status=status))
        headers = {"Retry-After": self.retry_after} if status >= 300 and self.retry_after else {}
        return web.Response(status=status, text="ok" if status < 300 else "not now",
                            headers=headers)


@asynccontextmanager
async def webhook_receiver(**knobs: Any) -> AsyncIterator[WebhookReceiver]:
    """Serve a :class:`WebhookReceiver` (built with ``knobs``) on 127.0.0.1; its ``url`` is set."""
    receiver = WebhookReceiver(**knobs)
    app = web.Application()
    app.router.add_post("/{tail:.*}", receiver._post)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    receiver.url = f"http://127.0.0.1:{port}/reports"
    try:
        yield receiver
    finally:
        await runner.cleanup()



@asynccontextmanager
async def scenario_receiver(knobs: Mapping[str, Any] | None
                            ) -> AsyncIterator[WebhookReceiver | None]:
    """A receiver built from a scenario's ``webhook:`` section (``None``: no receiver)."""
    if knobs is None:
        yield None
        return
    unknown = sorted(set(knobs) - set(SCENARIO_KNOBS))
    if unknown:
        raise ValueError(f"webhook: unknown knobs {unknown} (known: {sorted(SCENARIO_KNOBS)})")
    async with webhook_receiver(**{SCENARIO_KNOBS[k]: v for k, v in knobs.items()}) as receiver:
        yield receiver


def with_url(value: Any, url: str) -> Any:
    """``value`` (a scenario's YAML) with every string :data:`URL_PLACEHOLDER` replaced by
    ``url``."""
    if isinstance(value, str):
        return url if value == URL_PLACEHOLDER else value
    if isinstance(value, Mapping):
        return {k: with_url(v, url) for k, v in value.items()}
    if isinstance(value, list):
        return [with_url(v, url) for v in value]
    return value
