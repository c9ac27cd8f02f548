"""Predicates: which watch events are worth a reconcile at all.

As controller-runtime's ``pkg/predicate``, a predicate looks at one event and says whether the
handlers should see it; a watch passes an event on only if every predicate agrees. Two are
common enough to ship: :func:`generation_changed` (the spec changed, not just the status or
metadata) and :class:`OwnStatusEcho`, which drops the watch echo of the controller's own last
status write (the pass that wrote it already decided on that state, and reconciling the echo
costs a pass per write).

Dropping the echo has a price the echo's owner must pay: until the echo arrives, the cache
holds the copy the write replaced. A reconcile that starts in that window (the key was enqueued
again while the writing pass ran, and the worker takes it the moment that pass ends) would plan
on the old status; a plan that writes the status or creates is stopped by its precondition,
but one that only deletes, or plans nothing, is not, and since the echo is dropped nothing
brings the key back. So :meth:`OwnStatusEcho.latest` reads the controller's own writes: while
the cache holds a copy one of its writes replaced, a reconcile gets the copy that write
returned.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

import attrs

from cre.api.watch import WatchEventType
from cre.kube.runtime.handlers import WatchEvent, key_of

T = TypeVar("T")


class _Stored(Protocol):
    @property
    def metadata(self) -> Any: ...


S = TypeVar("S", bound=_Stored)

Predicate = Callable[[WatchEvent[T]], bool]


def generation_changed(event: WatchEvent[Any]) -> bool:
    """Creates and deletes pass; an update passes only when ``metadata.generation`` moved (the
    API server bumps it on spec changes, not on status or metadata ones)."""
    if event.type != WatchEventType.MODIFIED or event.old is None or event.new is None:
        return True
    return bool(event.old.metadata.generation != event.new.metadata.generation)


@attrs.frozen
class _Copy:
    """The copy of an object a controller's last write returned (decoded on first use) and
    the resourceVersions of the copies its writes replaced."""

    resource_version: str
    get: Callable[[], Any]
    replaced: frozenset[str]


class OwnStatusEcho:
    """Drops the echo of the controller's own status write: an update whose new status is the
    one :meth:`remember`-ed for that key, with spec and metadata (but the resourceVersion)
    unchanged; and until the echo arrives, :meth:`latest` stands in for the cache's older copy.
    Works for any kind with ``metadata`` (attrs), ``spec`` and ``status``."""

    def __init__(self) -> None:
        self._written: dict[str, Any] = {}
        self._copies: dict[str, _Copy] = {}
        self._read: dict[str, str] = {}  # the resourceVersion latest() last handed out

    def remember(self, key: str, status: Any, *, replaced: str = "",
                 copy: tuple[str, Callable[[], Any]] | None = None) -> None:
        """The status this controller just wrote for ``key``; ``copy``: the resourceVersion
        and (a function building) the object as the write left it, which replaced the copy at
        ``replaced`` (and the one this reconcile started from)."""
        self._written[key] = status
        if copy is None:
            return
        before = self._copies.get(key)
        gone = {replaced, self._read.get(key, ""), *(before.replaced if before else ())}
        self._copies[key] = _Copy(resource_version=copy[0], get=functools.cache(copy[1]),
                                  replaced=frozenset(gone - {""}))

    def latest(self, key: str, cached: S | None) -> S | None:
        """``cached`` (an object with ``metadata``), or the copy this controller's last write
        of ``key`` left while ``cached`` is one that a write of its replaced (the watch echo
        not seen yet)."""
        own = self._copies.get(key)
        if cached is None:
            return None
        rv = cached.metadata.resource_version or ""
        if own is not None and rv in own.replaced:
            self._read[key] = own.resource_version
            return cast(S, own.get())
        if own is not None:
            del self._copies[key]  # the cache caught up (or moved on)
        self._read[key] = rv
        return cached

    def forget(self, key: str) -> None:
        """Forget ``key`` (the object is gone)."""
        self._written.pop(key, None)
        self._copies.pop(key, None)
        self._read.pop(key, None)

    def written(self, key: str) -> Any:
        """The last status remembered for ``key`` (``None``: none)."""
        return self._written.get(key)

    def __len__(self) -> int:
        return len(self._written)

    def is_echo(self, event: WatchEvent[Any]) -> bool:
        """Whether ``event`` is only the echo of the remembered status write (any event of a
        copy no write of this controller replaced also ends :meth:`latest`'s stand-in: the
        cache holds that copy now)."""
        old, new = event.old, event.new
        if new is not None:
            own = self._copies.get(key_of(new))
            if own is not None and (new.metadata.resource_version or "") not in own.replaced:
                del self._copies[key_of(new)]
        if event.type != WatchEventType.MODIFIED or old is None or new is None:
            return False
        written = self._written.get(key_of(new))
        if written is None or new.status != written or old.spec != new.spec:
            return False
        return bool(attrs.evolve(old.metadata, resource_version=None)
                    == attrs.evolve(new.metadata, resource_version=None))

    def __call__(self, event: WatchEvent[Any]) -> bool:
        """The predicate: pass everything but the echo."""
        return not self.is_echo(event)
