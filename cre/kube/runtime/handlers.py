"""Event handlers: map a watch event of a watched kind to the keys of the objects to reconcile.

As controller-runtime's ``pkg/handler``, a handler does nothing but decide which keys an event
concerns and enqueue them (quickly: it runs inside the informer's dispatch). The helpers cover
the usual mappings: the object itself (:func:`enqueue_object`), its controller owner
(:func:`enqueue_owner`), the object named by one of its labels (:func:`enqueue_by_label`) and any
mapping function, for instance an index lookup (:func:`enqueue_mapped`). A kind with needs of
its own (CRE's Job controller reads a failed pod's log from its pod handlers) writes a plain
function ``handler(event, queue)``.

Objects are read by duck typing, so the helpers work for CRE's attrs models (``metadata.name``,
``metadata.owner_references``, ``metadata.labels``) and for the slim views of ``cre.core``
(``name``, ``owner_refs``, ``label()``) alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

import attrs

from cre.api.watch import WatchEventType
from cre.kube.runtime.reconcile import object_key

T = TypeVar("T")


@attrs.frozen(slots=True)
class WatchEvent(Generic[T]):
    """One change an informer saw: ``old`` is ``None`` when ADDED, ``new`` when DELETED."""

    type: WatchEventType
    old: T | None
    new: T | None

    @property
    def obj(self) -> T:
        """The object as it is now (its last known state when DELETED)."""
        obj = self.new if self.new is not None else self.old
        if obj is None:
            raise ValueError("a watch event without an object")
        return obj


class KeyQueue(Protocol):
    """The part of :class:`cre.kube.workqueue.WorkQueue` a handler may use."""

    def add(self, key: str, *, priority: int = ...) -> None: ...

    def add_after(self, key: str, delay: float) -> None: ...


EventHandler = Callable[[WatchEvent[T], KeyQueue], None]


def _meta(obj: Any) -> Any:
    return getattr(obj, "metadata", obj)


def namespace_of(obj: Any) -> str | None:
    """``metadata.namespace`` of a model, ``namespace`` of a view."""
    return getattr(_meta(obj), "namespace", None)


def key_of(obj: Any) -> str:
    """The reconcile key of ``obj`` itself."""
    return object_key(namespace_of(obj), getattr(_meta(obj), "name", None) or "")


def label_of(obj: Any, label: str) -> str | None:
    """The value of ``label`` on ``obj`` (a view's kept labels or a model's ``metadata``)."""
    if callable(getattr(obj, "label", None)):
        value: str | None = obj.label(label)
        return value
    labels = getattr(_meta(obj), "labels", None) or {}
    value = labels.get(label) if isinstance(labels, Mapping) else None
    return value if isinstance(value, str) else None


def owner_refs_of(obj: Any) -> Sequence[Any]:
    """The owner references of ``obj`` (``owner_refs`` of a view, ``metadata.owner_references``
    of a model)."""
    refs = getattr(obj, "owner_refs", None)
    if refs is None:
        refs = getattr(_meta(obj), "owner_references", None)
    return tuple(refs or ())


def _put(queue: KeyQueue, key: str, delay: float) -> None:
    if delay > 0:
        queue.add_after(key, delay)
    else:
        queue.add(key)


def enqueue_object(*, delay: float = 0.0) -> EventHandler[Any]:
    """Enqueue the object itself (after ``delay`` seconds, coalescing bursts)."""
    def handle(event: WatchEvent[Any], queue: KeyQueue) -> None:
        _put(queue, key_of(event.obj), delay)
    return handle


def enqueue_owner(*, kind: str, group: str, delay: float = 0.0) -> EventHandler[Any]:
    """Enqueue the controller owner of the object, when it is a ``kind`` of API ``group``
    (same namespace: owner references never cross namespaces)."""
    def handle(event: WatchEvent[Any], queue: KeyQueue) -> None:
        obj = event.obj
        for ref in owner_refs_of(obj):
            if (ref.controller and ref.kind == kind
                    and str(ref.api_version).partition("/")[0] == group):
                _put(queue, object_key(namespace_of(obj), ref.name), delay)
                return
    return handle


def enqueue_by_label(label: str, *, delay: float = 0.0) -> EventHandler[Any]:
    """Enqueue the object of the object's namespace named by its ``label`` (CRE's pods name
    their Job in ``cre.dev/job`` / ``cre.dev/launcher``)."""
    def handle(event: WatchEvent[Any], queue: KeyQueue) -> None:
        value = label_of(event.obj, label)
        if value:
            _put(queue, object_key(namespace_of(event.obj), value), delay)
    return handle


def enqueue_mapped(mapper: Callable[[WatchEvent[T]], Iterable[str]], *,
                   delay: float = 0.0) -> EventHandler[T]:
    """Enqueue every key ``mapper`` returns for the event (an index lookup, a fan-out), in
    sorted order, once each."""
    def handle(event: WatchEvent[T], queue: KeyQueue) -> None:
        for key in sorted(set(mapper(event))):
            _put(queue, key, delay)
    return handle
