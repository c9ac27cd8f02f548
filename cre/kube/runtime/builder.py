"""Say what a controller reconciles and what wakes it, as controller-runtime's builder does.

``ControllerManagedBy(mgr).For(&Job{}).Owns(&TrainJob{}).Watches(&Node{}, handler)`` reads as
the sentence a reviewer wants: which kind is reconciled, which kinds it owns (a change enqueues
the controlling owner), and which other caches wake it through a mapping. The same three words
here, over informers from the process's :class:`cre.kube.factory.InformerFactory`::

    (Builder(controller, echo=status_echo)
        .for_(jobs)                                   # own kind; own status echo dropped
        .owns(trainjobs, measurements)                # enqueue the controlling Job
        .watches(nodes, enqueue_mapped(jobs_on_node), node_changed))

Each call is one :meth:`cre.kube.runtime.Controller.watch`; the builder adds no other state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Self, TypeVar

from cre.kube.informer import Informer
from cre.kube.runtime.controller import Controller
from cre.kube.runtime.handlers import EventHandler, enqueue_owner
from cre.kube.runtime.predicates import OwnStatusEcho, Predicate

K = TypeVar("K")
T = TypeVar("T")


class Builder(Generic[K]):
    """Wires ``controller``'s watches; ``echo`` remembers the controller's own status writes."""

    def __init__(self, controller: Controller, *, echo: OwnStatusEcho) -> None:
        self.controller = controller
        self.echo = echo
        self._owner: Informer[K] | None = None

    def for_(self, informer: Informer[K], handler: EventHandler[K] | None = None, *,
             on_deleted: Callable[[K], None] | None = None) -> Self:
        """The reconciled kind: every change but the echo of its own status write enqueues
        the object (a deletion forgets its key and runs ``on_deleted``); ``handler`` replaces
        that mapping for a kind with more to do on an event."""
        self._owner = informer
        if handler is None:
            self.controller.watch_own(informer, self.echo, on_deleted=on_deleted)
        else:
            self.controller.watch(informer, handler, self.echo)
        return self

    def owns(self, *informers: Informer[Any]) -> Self:
        """Kinds the reconciled kind controls: a change enqueues the controlling owner."""
        if self._owner is None:
            raise RuntimeError(f"controller {self.controller.name}: owns() before for_()")
        owner = self._owner.resource
        for informer in informers:
            self.controller.watch(informer, enqueue_owner(kind=owner.kind, group=owner.group))
        return self

    def watches(self, informer: Informer[T], handler: EventHandler[T],
                *predicates: Predicate[T]) -> Self:
        """Another cache whose changes ``handler`` maps to keys (after ``predicates``)."""
        self.controller.watch(informer, handler, *predicates)
        return self
