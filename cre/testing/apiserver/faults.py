"""Fault injection: seeded error rates, latency, dropped watches, forced 410s and outages.

Two kinds of 410 exist on a real server and clients must handle both: an ``ERROR`` event inside
a 200 watch stream (the watch cache, ``force_410_on_resume``) and a plain HTTP 410 ``Expired``
Status answered before any stream starts (``gone_status_on_resume``).

Controllers must survive a flaky API server; the reliability tests drive these knobs, either
from Python (``emulator.faults``) or over HTTP (``/_emulator/faults``).

A create can also be *refused* the way admission refuses it (:class:`RefuseRule`, spec key
``refuseCreate``): every create of a resource (optionally of one name) answers 400 BadRequest,
403 Forbidden (``<resource> "<name>" is forbidden: <message>``, as an admission plugin or a
webhook denial surfaces), 409 AlreadyExists or 422 Invalid (``<Kind> "<name>" is invalid:
<message>`` with one cause), with ``details.name/group/kind`` as the real server fills them.
Unlike an error rate this is deterministic: it lasts until the rule is removed (``times``
bounds it). Every random decision
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


REFUSE_CODES = frozenset({400, 403, 409, 422})
DEFAULT_REFUSAL = "denied by the emulator's refuseCreate fault"


@attrs.define
class RefuseRule:
    """Refuse creates of ``resource`` (a plural) named ``name`` (``*``: any) with ``code`` and
    ``message``; ``times`` creates at most (``None``: until removed)."""

    resource: str
    code: int
    message: str = DEFAULT_REFUSAL
    name: str = "*"
    field: str = ""
    times: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.code not in REFUSE_CODES:
            raise ValueError(f"refuseCreate.code must be one of {sorted(REFUSE_CODES)}, "
                             f"got {self.code}")
        if not self.resource:
            raise ValueError("refuseCreate.resource must name a resource (a plural)")

    def matches(self, resource: str, name: str) -> bool:
        return (self.resource in ("*", resource) and self.name in ("*", name)
                and (self.times is None or self.times > 0))

    def error(self, q: errors.Qualified, name: str) -> ApiError:
        """The Status the real server answers for this refusal."""
        if self.code == 403:
            return errors.forbidden(q, name, self.message)
        if self.code == 409:
            err = errors.already_exists(q, name)
            return err if self.message in ("", DEFAULT_REFUSAL) else ApiError(
                code=409, reason=errors.Reason.ALREADY_EXISTS, message=self.message,
                details=err.details)
        if self.code == 422:
            cause = errors.StatusCause(reason="FieldValueInvalid", message=self.message,
                                       field=self.field)
            return errors.invalid_object(q, name, [cause])
        return errors.bad_request(self.message)

    def to_json(self) -> dict[str, Any]:
        return {"resource": self.resource, "code": self.code, "message": self.message,
                "name": self.name, "field": self.field, "times": self.times}


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
        self.refusals: list[RefuseRule] = []
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
        self.refusals = []

    def refuse_create(self, resource: str, code: int, message: str = "", *, name: str = "*",
                      field: str = "", times: int | None = None) -> RefuseRule:
        """Refuse creates of ``resource`` (a plural) as admission would (see the module)."""
        rule = RefuseRule(resource=resource, code=int(code),
                          message=message or DEFAULT_REFUSAL, name=name,
                          field=field, times=times)
        self.refusals.append(rule)
        return rule

    def check_create(self, q: errors.Qualified, name: str) -> ApiError | None:
        """The refusal to answer a create of ``name`` in ``q``'s resource with, or None."""
        for rule in self.refusals:
            if rule.matches(q.resource, name):
                if rule.times is not None:
                    rule.times -= 1
                self.injected += 1
                return rule.error(q, name)
        return None

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
        refuse = spec.get("refuseCreate")
        if refuse is not None:
            rules = refuse if isinstance(refuse, list) else [refuse]
            for r in rules:
                if r.get("remove"):
                    self.refusals = [x for x in self.refusals
                                     if x.resource != str(r["resource"])]
                    continue
                self.refuse_create(str(r["resource"]), int(r["code"]),
                                   str(r.get("message", "")), name=str(r.get("name", "*")),
                                   field=str(r.get("field", "")),
                                   times=None if r.get("times") is None else int(r["times"]))
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
            "refuseCreate": [r.to_json() for r in self.refusals],
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
