"""The contract between the controller runtime and one kind's logic: ``reconcile(key) -> Result``.

As controller-runtime's ``pkg/reconcile``: the runtime hands a Reconciler one object key at a
time (``namespace/name``, or ``name`` for a cluster-scoped object) and never the same key to two
workers at once. The Reconciler reads what it needs from its caches, makes the world match the
object, and answers with a :class:`Result`. Raising means "failed, retry with backoff"; the
runtime does the counting, the logging and the requeue. Raising :class:`TerminalError` means
"failed for good": retrying cannot help (the API server refused a create with 400/403/422), so
the runtime records it (a Warning event on the object, a metric, a log line) and does not
requeue; a later change of a watched object brings the key back as usual. A Reconciler holds
no queue and starts no worker: that is what makes a second controller a Reconciler plus its
wiring.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import attrs


@attrs.frozen(kw_only=True)
class Result:
    """What a successful reconcile asks of the runtime.

    ``requeue_after``: reconcile the key again after that many seconds (a poll: the backoff is
    reset). ``requeue``: again, after the rate limiter's backoff (work left, nothing failed).
    Neither: done until a watched object changes.
    """

    requeue_after: float | None = attrs.field(default=None)
    requeue: bool = False

    @requeue_after.validator
    def _check(self, _: attrs.Attribute[float | None], value: float | None) -> None:
        if value is not None and value < 0:
            raise ValueError(f"Result.requeue_after must be >= 0 seconds, got {value}")


class TerminalError(Exception):
    """A reconcile failure that no retry can mend, as controller-runtime's
    ``reconcile.TerminalError``: recorded, never requeued.

    ``involved`` is the ``involvedObject`` of the Warning event to record (``None``: log and
    metric only); ``reason`` is that event's reason."""

    def __init__(self, message: str, *, reason: str = "ReconcileTerminalError",
                 involved: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.involved = dict(involved) if involved is not None else None


#: The Result of a reconcile with nothing left to do.
DONE = Result()


@runtime_checkable
class Reconciler(Protocol):
    """One kind's logic. ``reconcile`` is called with the key of an object that may have
    changed (or vanished: the key of a deleted object is reconciled too)."""

    async def reconcile(self, key: str) -> Result: ...


def object_key(namespace: str | None, name: str) -> str:
    """The key of an object: ``namespace/name``, or ``name`` when it has no namespace."""
    return f"{namespace}/{name}" if namespace else name


def split_key(key: str) -> tuple[str, str]:
    """``(namespace, name)`` of a key (``""`` as namespace for a cluster-scoped object)."""
    namespace, sep, name = key.partition("/")
    return (namespace, name) if sep else ("", namespace)
