"""Start-up retries: ride out an API brown-out instead of exiting on its first error.

A manager restarted while the API server throttles (429), restarts (5xx, refused connections) or
reports a conflict (409) must come back once the server does; exiting on the first such answer
turns a short brown-out into a crash loop with growing back-off. :class:`StartupBudget` retries
one start-up request while its answer is transient, with jittered exponential backoff (as
client-go's ``wait.Backoff``: 200 ms doubling to 5 s, up to +50 % jitter) or the server's
``Retry-After`` when it sent one, until the start-up budget (``--startup-timeout``, default
60 s) is spent. Errors that will not heal by waiting (401/403, 404, other 4xx) are raised at
once, so the caller exits with the code that says what to fix.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import anyio

from cre.kube.client import ApiError

log = logging.getLogger("cre_manager.checks")

T = TypeVar("T")

BASE_DELAY: Final = 0.2
MAX_DELAY: Final = 5.0
JITTER: Final = 0.5
# Each attempt waits at most this long for an answer (a hung connection is one more attempt).
ATTEMPT_TIMEOUT: Final = 10.0
_TRANSIENT: Final = frozenset({0, 409, 429, 500, 502, 503, 504})


def transient(exc: ApiError) -> bool:
    """Whether waiting may heal ``exc``: no connection, 409, 429 or a server error."""
    return exc.status in _TRANSIENT or exc.status >= 500


class BudgetSpent(Exception):
    """The start-up budget ran out while a request kept failing transiently."""

    def __init__(self, what: str, last: ApiError, attempts: int, budget: float) -> None:
        super().__init__(f"{what}: still failing after {attempts} attempt(s) in {budget:g}s "
                         f"(--startup-timeout): {last}")
        self.last = last
        self.attempts = attempts


class StartupBudget:
    """One deadline shared by every start-up request; the clock, sleep and random source are
    injected so tests are deterministic."""

    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
                 rng: random.Random | None = None) -> None:
        if seconds <= 0:
            raise ValueError(f"StartupBudget: seconds must be > 0, got {seconds}")
        self.seconds = seconds
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._deadline = clock() + seconds
        self.retries = 0

    def remaining(self) -> float:
        """Seconds left in the budget (0 when spent)."""
        return max(self._deadline - self._clock(), 0.0)

    def attempt_timeout(self) -> float:
        """How long the next attempt may wait for an answer."""
        return max(min(ATTEMPT_TIMEOUT, self.remaining()), 0.1)

    def delay(self, attempt: int, exc: ApiError) -> float:
        """The wait before retry ``attempt`` (1-based): Retry-After when the server sent one,
        else jittered exponential backoff."""
        if exc.retry_after is not None and exc.retry_after > 0:
            return float(exc.retry_after)
        base = min(BASE_DELAY * 2.0 ** min(attempt - 1, 30), MAX_DELAY)
        return base * (1.0 + JITTER * self._rng.random())

    async def call(self, what: str, request: Callable[[float], Awaitable[T]]) -> T:
        """``await request(timeout)`` until it succeeds; transient errors are retried while
        the budget lasts (then :class:`BudgetSpent`), others raised as they are."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return await request(self.attempt_timeout())
            except ApiError as exc:
                if not transient(exc):
                    raise
                left = self.remaining()
                if left <= 0:
                    raise BudgetSpent(what, exc, attempt, self.seconds) from None
                # The last wait is cut to the deadline, for one more attempt there.
                wait = min(self.delay(attempt, exc), left)
                self.retries += 1
                log.warning("start-up request failed, retrying", extra={
                    "request": what, "status": exc.status, "error": exc.message or str(exc),
                    "attempt": attempt, "retryIn": round(wait, 3),
                    "budgetLeft": round(self.remaining(), 3)})
                await self._sleep(wait)
