"""Predicates: which watch events are worth a reconcile at all.

As controller-runtime's ``pkg/predicate``, a predicate looks at one event and says whether the
handlers should see it; a watch passes an event on only if every predicate agrees. Two are
common enough to ship: :func:`generation_changed` (the spec changed, not just the status or
metadata) and :class:`OwnStatusEcho`, which drops the watch echo of the controller's own last
status write (the pass that wrote it already decided on that state, and reconciling the echo
costs a pass per write).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from cre.api.watch import WatchEventType
from cre.kube.runtime.handlers import WatchEvent, key_of

T = TypeVar("T")

Predicate = Callable[[WatchEvent[T]], bool]


def generation_changed(event: WatchEvent[Any]) -> bool:
    """Creates and deletes pass; an update passes only when ``metadata.generation`` moved (the
    API server bumps it on spec changes, not on status or metadata ones)."""
    if event.type != WatchEventType.MODIFIED or event.old is None or event.new is None:
        return True
    return bool(event.old.metadata.generation != event.new.metadata.generation)


class OwnStatusEcho:
    """Drops the echo of the controller's own status write: an update whose new status is the
    one :meth:`remember`-ed for that key, with spec and metadata (but the resourceVersion)
    unchanged. Works for any kind with ``metadata`` (attrs), ``spec`` and ``status``."""

    def __init__(self) -> None:
        self._written: dict[str, Any] = {}

    def remember(self, key: str, status: Any) -> None:
        """The status this controller just wrote for ``key``."""
        self._written[key] = status

    def forget(self, key: str) -> None:
        """Forget ``key`` (the object is gone)."""
        self._written.pop(key, None)

    def written(self, key: str) -> Any:
        """The last status remembered for ``key`` (``None``: none)."""
        return self._written.get(key)

    def __len__(self) -> int:
        return len(self._written)

    def is_echo(self, event: WatchEvent[Any]) -> bool:
        """Whether ``event`` is only the echo of the remembered status write."""
        old, new = event.old, event.new
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
