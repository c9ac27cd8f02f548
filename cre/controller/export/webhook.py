"""The one place a report leaves the cluster: one POST per ``DeliverReport`` ask.

:class:`WebhookSender` reads the bearer token from the named Secret key (a live ``get`` of that
one Secret, never a list, watch or cache), POSTs the payload with ``Idempotency-Key`` and
``Authorization: Bearer <token>``, follows no redirect, reads at most 64 KiB of the answer and
returns an :class:`cre.core.export.delivery.Attempt` (with the receiver's ``Retry-After``).
Nothing it returns, logs or raises holds the token: every sentence is written here, naming the
Secret and key only, and any text that comes from elsewhere (a transport error) passes
:func:`redact` first.
"""

from __future__ import annotations

import base64
import binascii
import logging
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Final

import aiohttp

from cre.core.common.plan import DeliverReport
from cre.core.export.delivery import Attempt
from cre.kube.client import SECRETS, ApiError, KubeClient

log = logging.getLogger(__name__)

#: Bytes of the receiver's answer read (and dropped) before the connection is released.
ANSWER_LIMIT: Final = 64 * 1024
USER_AGENT: Final = "cre-report-export"
REDACTED: Final = "<redacted>"


class TokenUnavailable(Exception):
    """The token Secret cannot be read; the message names the Secret and key only."""


def retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """The seconds a ``Retry-After`` header asks for (delay-seconds or an HTTP date; ``None``
    when absent or unreadable)."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def redact(text: str, token: str | None) -> str:
    """``text`` with every occurrence of ``token`` replaced."""
    return text.replace(token, REDACTED) if token else text


class WebhookSender:
    """POSTs reports; reads tokens through ``client`` (the manager's own identity)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    async def token(self, namespace: str, name: str, key: str) -> str:
        """The value of ``key`` in the Secret ``namespace/name``."""
        where = f"Secret {namespace}/{name}"
        try:
            secret = await self.client.get(SECRETS, name, namespace=namespace)
        except ApiError as exc:
            if exc.status == 403:
                raise TokenUnavailable(
                    f"the manager may not read {where} (bind it a Role with get on that "
                    "Secret: docs/guide/report-export.md)") from None
            if exc.not_found:
                raise TokenUnavailable(f"{where} not found") from None
            raise TokenUnavailable(f"reading {where} failed (HTTP {exc.status})") from None
        raw = (secret.get("data") or {}).get(key)
        if raw is None:
            raise TokenUnavailable(f"{where} has no key {key!r}")
        try:
            value = base64.b64decode(raw, validate=True).decode().strip()
        except (binascii.Error, UnicodeDecodeError):
            raise TokenUnavailable(f"key {key!r} of {where} is not a UTF-8 token") from None
        if not value:
            raise TokenUnavailable(f"key {key!r} of {where} is empty")
        return value

    async def send(self, ask: DeliverReport, *, namespace: str) -> Attempt:
        """One attempt of ``ask`` (the token Secret in ``namespace``)."""
        token = None
        if ask.token_secret is not None:
            try:
                token = await self.token(namespace, *ask.token_secret)
            except TokenUnavailable as exc:
                return Attempt(http_status=None, error=str(exc))
        headers = {"Content-Type": "application/json", "Idempotency-Key": ask.key,
                   "User-Agent": USER_AGENT}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        timeout = aiohttp.ClientTimeout(total=ask.timeout_seconds)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session, session.post(
                    ask.url, data=ask.body, headers=headers, allow_redirects=False) as answer:
                await answer.content.read(ANSWER_LIMIT)
                ok = 200 <= answer.status < 300
                return Attempt(http_status=answer.status,
                               error=None if ok else redact(answer.reason or "", token) or None,
                               retry_after=retry_after(answer.headers.get("Retry-After")))
        except TimeoutError:
            return Attempt(http_status=None,
                           error=f"no answer within {ask.timeout_seconds:g}s")
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            return Attempt(http_status=None,
                           error=redact(f"{type(exc).__name__}: {exc}", token)[:512])
