"""One shared informer per query for every controller of a process (controller-runtime's cache).

Several controllers read the same objects: the Job, Workflow, Certification and WorkloadRun
controllers all read GPU nodes, the Job and Workflow controllers both read the two label-scoped
pod caches, the measurement controllers share the LogProfiles. Each building its own informer
means one more list, one more watch and one more copy of every object. An
:class:`InformerFactory` hands out one informer per *query*, keyed by (resource, namespaces,
label selector, transform): asking twice for the same key returns the same informer, whose
store gains the indexes the second caller needs. Two different selectors stay two informers
(the worker and launcher pod caches of :mod:`cre.kube.pods` are two on purpose).

The factory's owner runs it (:meth:`InformerFactory.run`): the manager runs one for the whole
process, next to its controllers; a controller built without one makes a private factory and
runs it itself. Controllers never run informers: they wait for the ones they watch to sync.
The namespaces are the factory's (a manager-wide setting); cluster-scoped resources ignore them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import anyio
import attrs
from anyio.abc import TaskGroup

from cre.kube.client import JSON, KubeClient, Resource
from cre.kube.informer import Informer, ReflectorConfig
from cre.kube.metrics import KubeMetrics, metrics_for
from cre.kube.store import Indexer

T = TypeVar("T")


@attrs.frozen
class InformerKey:
    """What makes two informers the same: the query and the projection of its objects."""

    resource: Resource
    namespaces: tuple[str, ...] | None
    label_selector: str | None
    transform: Callable[[JSON], Any]


class InformerFactory:
    """Informers for ``client`` in ``namespaces`` (``None``: all), one per :class:`InformerKey`.

    ``metrics`` and ``config`` apply to every informer it builds."""

    def __init__(self, client: KubeClient, *, namespaces: Sequence[str] | None = None,
                 metrics: KubeMetrics | None = None,
                 config: ReflectorConfig | None = None) -> None:
        self.client = client
        self.namespaces = tuple(namespaces) if namespaces is not None else None
        self.metrics = metrics or metrics_for()
        self.config = config
        self._informers: dict[InformerKey, Informer[Any]] = {}
        self._running: TaskGroup | None = None

    def informer(self, resource: Resource, *, transform: Callable[[JSON], T],
                 label_selector: str | None = None,
                 indexers: Mapping[str, Indexer[T]] | None = None, name: str | None = None,
                 caller: str | None = None) -> Informer[T]:
        """The informer of this query, built on first request (``name``, default the plural,
        names it in logs and metrics); ``indexers`` are added to its store either way."""
        key = InformerKey(resource, self.namespaces if resource.namespaced else None,
                          label_selector or None, transform)
        held: Informer[T] | None = self._informers.get(key)
        if held is None:
            held = Informer(self.client, resource, transform=transform,
                            namespace=list(key.namespaces) if key.namespaces is not None
                            else None, label_selector=key.label_selector,
                            indexers=indexers, name=name, config=self.config,
                            caller=caller, metrics=self.metrics)
            self._informers[key] = held
            if self._running is not None:
                self._running.start_soon(held.run, name=f"informer {held.name}")
        elif indexers:
            held.store.add_indexers(indexers)
        return held

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        """Every informer handed out, in the order they were first asked for."""
        return tuple(self._informers.values())

    def has_synced(self) -> bool:
        """True once every informer holds its first full list."""
        return all(i.has_synced() for i in self._informers.values())

    async def run(self) -> None:
        """Run every informer (and those asked for later) until cancelled."""
        async with anyio.create_task_group() as tg:
            self._running = tg
            try:
                for informer in self._informers.values():
                    tg.start_soon(informer.run, name=f"informer {informer.name}")
                await anyio.sleep_forever()
            finally:
                self._running = None
