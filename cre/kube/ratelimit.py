"""Rate limiters that decide how long a failed key waits before it is retried.

A controller that retries a failing key at once melts the API server; one that waits too long
heals slowly. client-go's answer, which CRE follows, is the maximum of two limiters: a per-key
exponential backoff (5 ms doubling to 1000 s, reset by ``forget``) so one broken object backs off
alone, and a global token bucket (10 per second, burst 100) so a storm of failures across many
keys stays bounded. The clock is injected so the limiters are deterministic in tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Protocol

Clock = Callable[[], float]


class RateLimiter(Protocol):
    """How long ``key`` should wait before its next retry; ``forget`` ends its failure streak."""

    def when(self, key: Hashable) -> float: ...

    def forget(self, key: Hashable) -> None: ...

    def num_requeues(self, key: Hashable) -> int: ...


class ItemExponentialRateLimiter:
    """Per-key exponential backoff: ``base * 2**failures`` capped at ``max_delay``."""

    def __init__(self, *, base: float = 0.005, max_delay: float = 1000.0) -> None:
        if base <= 0 or max_delay < base:
            raise ValueError(f"ItemExponentialRateLimiter: need 0 < base <= max_delay, "
                             f"got base={base} max_delay={max_delay}")
        self.base = base
        self.max_delay = max_delay
        self._failures: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        # 2**n overflows a float around n=1024; the cap is reached long before that.
        if n >= 64:
            return self.max_delay
        return min(self.base * (2.0**n), self.max_delay)

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: Hashable) -> int:
        return self._failures.get(key, 0)


class TokenBucketRateLimiter:
    """A global token bucket: ``rate`` tokens per second, at most ``burst`` saved up.

    Every ``when`` reserves one token; the answer is how long until that token exists. Keys are
    not tracked, so ``forget`` does nothing.
    """

    def __init__(self, *, rate: float = 10.0, burst: int = 100,
                 clock: Clock = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"TokenBucketRateLimiter: need rate > 0 and burst >= 1, "
                             f"got rate={rate} burst={burst}")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def when(self, key: Hashable) -> float:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def forget(self, key: Hashable) -> None:
        return None

    def num_requeues(self, key: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """The longest wait any of the given limiters asks for (client-go's MaxOfRateLimiter)."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, key: Hashable) -> float:
        # Every limiter must see the failure (the bucket spends a token, the backoff counts).
        return max([limiter.when(key) for limiter in self.limiters])

    def forget(self, key: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        return max(limiter.num_requeues(key) for limiter in self.limiters)


def default_controller_rate_limiter(*, base: float = 0.005, max_delay: float = 1000.0,
                                    rate: float = 10.0, burst: int = 100,
                                    clock: Clock = time.monotonic) -> MaxOfRateLimiter:
    """client-go's default: per-key 5 ms -> 1000 s, max'ed with a 10/s burst-100 bucket."""
    return MaxOfRateLimiter(ItemExponentialRateLimiter(base=base, max_delay=max_delay),
                            TokenBucketRateLimiter(rate=rate, burst=burst, clock=clock))
