"""Fault injection: seeded error rates, latency, dropped watches, forced 410s and outages.

Two kinds of 410 exist on a real server and clients must handle both: an ``ERROR`` event inside
a 200 watch stream (the watch cache, ``force_410_on_resume``) and a plain HTTP 410 ``Expired``
Status answered before any stream starts (``gone_status_on_resume``).

Controllers must survive a flaky API server; the reliability tests drive these knobs, either
from Python (``emulator.faults``) or over HTTP (``/_emulator/faults``). Every random decision
comes from one ``random.Random(seed)``, so a run is reproducible for a given request order.
"""

from __future__ import annotations

import enum
import random
import time
from typing import TYPE_CHECKING, Any

import attrs

from . import errors
from .errors import ApiError

if TYPE_CHECKING:
    from .store import Store


# A 409 Conflict answers a write (an optimistic-concurrency loss, an AlreadyExists); a real server
# never answers it to get, list or watch, so conflict rules skip the reads.
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


class FaultKind(enum.StrEnum):
    CONFLICT = "409"
    TOO_MANY_REQUESTS = "429"
    INTERNAL = "500"
    UNAVAILABLE = "503"


@attrs.frozen
class ErrorRule:
    """Fail ``rate`` of the requests matching ``verb``/``resource`` (``*`` = any)."""

    code: FaultKind
    rate: float
    verb: str = "*"
    resource: str = "*"
    retry_after: int = 1

    def matches(self, verb: str, resource: str) -> bool:
        return self.verb in ("*", verb) and self.resource in ("*", resource)


@attrs.frozen
class WatchFaults:
    """Drop watch streams after ``after_events`` events or ``after_seconds`` seconds."""

    after_events: int | None = None
    after_seconds: float | None = None
    resource: str = "*"


class Faults:
    """The current fault configuration; the server consults it on every request."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.errors: list[ErrorRule] = []
        self.latency: float = 0.0
        self.watch: WatchFaults | None = None
        self.force_410_on_resume: bool = False
        # The next N watch resumes (a resourceVersion other than "" / "0") get HTTP 410.
        self.gone_status_remaining: int = 0
        self.gone_status_resource: str = "*"
        self._outage_until: float = 0.0
        self.injected: int = 0
        self._store: Store | None = None

    def attach(self, store: Store) -> None:
        """Bind the store whose open watches :meth:`drop_watches` ends (done by the server)."""
        self._store = store

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng = random.Random(seed)
        self.errors = []
        self.latency = 0.0
        self.watch = None
        self.force_410_on_resume = False
        self.gone_status_remaining = 0
        self.gone_status_resource = "*"
        self._outage_until = 0.0

    def add_error(
        self,
        code: int | str,
        *,
        rate: float = 1.0,
        verb: str = "*",
        resource: str = "*",
        retry_after: int = 1,
    ) -> ErrorRule:
        rule = ErrorRule(FaultKind(str(code)), rate, verb, resource, retry_after)
        self.errors.append(rule)
        return rule

    def drop_watches(self, resource: str | None = None) -> int:
        """End every open watch stream now (of ``resource``, a plural, or all), as a load
        balancer or an apiserver restart would; returns how many were ended."""
        if self._store is None:
            return 0
        dropped = 0
        for (_group, plural), bucket in self._store.buckets.items():
            if resource not in (None, "*", plural):
                continue
            for watcher in list(bucket.watchers):
                watcher.close()
                dropped += 1
        self.injected += dropped
        return dropped

    def gone_status_on_resume(self, times: int = 1, *, resource: str = "*") -> None:
        """Answer the next ``times`` watch requests that resume from a resourceVersion with an
        HTTP 410 ``Expired`` Status instead of a stream (``resource``: a plural or ``*``)."""
        if times < 0:
            raise ValueError(f"gone_status_on_resume: times must be >= 0, got {times}")
        self.gone_status_remaining = times
        self.gone_status_resource = resource

    def take_gone_status(self, resource: str) -> bool:
        """Whether this watch resume is one of the ones to answer with HTTP 410 (consumes one)."""
        if self.gone_status_remaining <= 0 or self.gone_status_resource not in ("*", resource):
            return False
        self.gone_status_remaining -= 1
        self.injected += 1
        return True

    def outage(self, seconds: float) -> None:
        """Answer every API request with 503 for the next ``seconds`` (monotonic time)."""
        self._outage_until = time.monotonic() + seconds

    @property
    def in_outage(self) -> bool:
        return time.monotonic() < self._outage_until

    def check(self, verb: str, resource: str, name: str = "") -> ApiError | None:
        """An error to answer instead of serving the request, or None."""
        if self.in_outage:
            self.injected += 1
            return errors.service_unavailable("the server is currently unable to handle the "
                                              "request", retry_after=1)
        for rule in self.errors:
            if not rule.matches(verb, resource):
                continue
            if rule.code is FaultKind.CONFLICT and verb not in WRITE_VERBS:
                continue
            if self.rng.random() >= rule.rate:
                continue
            self.injected += 1
            return _error(rule, resource, name)
        return None

    def check_nonresource(self, kind: str) -> ApiError | None:
        """An error to answer a non-resource request with (``kind``: ``version`` for
        ``/version``, ``discovery`` for ``/api``, ``/apis`` and the group-version documents):
        an outage answers them too, as a real server that is down does; an error rule applies
        only when its ``resource`` names the kind (a ``*`` rule keeps to resource requests)."""
        if self.in_outage:
            self.injected += 1
            return errors.service_unavailable("the server is currently unable to handle the "
                                              "request", retry_after=1)
        for rule in self.errors:
            if rule.resource != kind or rule.verb not in ("*", "get"):
                continue
            if self.rng.random() >= rule.rate:
                continue
            self.injected += 1
            return _error(rule, "", "")
        return None

    def configure(self, spec: dict[str, Any]) -> None:
        """Apply a JSON fault spec (the ``/_emulator/faults`` body)."""
        if spec.get("reset"):
            self.reset(spec.get("seed"))
        elif "seed" in spec:
            self.rng = random.Random(int(spec["seed"]))
        for e in spec.get("errors") or []:
            self.add_error(
                e["code"],
                rate=float(e.get("rate", 1.0)),
                verb=str(e.get("verb", "*")),
                resource=str(e.get("resource", "*")),
                retry_after=int(e.get("retryAfter", 1)),
            )
        if "latency" in spec:
            self.latency = float(spec["latency"])
        if "watch" in spec:
            w = spec["watch"]
            self.watch = None if w is None else WatchFaults(
                after_events=w.get("afterEvents"),
                after_seconds=w.get("afterSeconds"),
                resource=str(w.get("resource", "*")),
            )
        if "force410OnResume" in spec:
            self.force_410_on_resume = bool(spec["force410OnResume"])
        if "outageSeconds" in spec:
            self.outage(float(spec["outageSeconds"]))
        if "watchGoneStatus" in spec:
            g = spec["watchGoneStatus"]
            if isinstance(g, dict):
                self.gone_status_on_resume(int(g.get("times", 1)),
                                           resource=str(g.get("resource", "*")))
            else:
                self.gone_status_on_resume(int(g))
        if spec.get("dropWatches"):
            d = spec["dropWatches"]
            self.drop_watches(None if d is True else str(d))

    def describe(self) -> dict[str, Any]:
        return {
            "errors": [
                {"code": int(r.code), "rate": r.rate, "verb": r.verb, "resource": r.resource,
                 "retryAfter": r.retry_after}
                for r in self.errors
            ],
            "latency": self.latency,
            "watch": None if self.watch is None else {
                "afterEvents": self.watch.after_events,
                "afterSeconds": self.watch.after_seconds,
                "resource": self.watch.resource,
            },
            "force410OnResume": self.force_410_on_resume,
            "watchGoneStatus": {"times": self.gone_status_remaining,
                                "resource": self.gone_status_resource},
            "inOutage": self.in_outage,
            "injected": self.injected,
        }


def _error(rule: ErrorRule, resource: str, name: str) -> ApiError:
    q = errors.Qualified("", resource if resource != "*" else "", "")
    if rule.code is FaultKind.CONFLICT:
        return errors.conflict(q, name)
    if rule.code is FaultKind.TOO_MANY_REQUESTS:
        return errors.too_many_requests(
            "Too many requests, please try again later.", retry_after=rule.retry_after
        )
    if rule.code is FaultKind.INTERNAL:
        return errors.internal_error("injected fault")
    return errors.service_unavailable("injected fault: service unavailable",
                                      retry_after=rule.retry_after)
