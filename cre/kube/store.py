"""An informer's local cache: objects keyed ``namespace/name`` with named secondary indexes.

Controllers read the cluster from here instead of asking the API server, so reads are free and
consistent with the events that triggered them. Lookups by something other than the key (all
pods of a job label value, all pods on a node, all pods owned by a batch Job) are answered from
indexes maintained on every write, as client-go's ``Indexer`` does.

Readers get immutable snapshots: the stored values are frozen projections and every listing is a
tuple. Only the informer that owns a store writes to it (the ``_put`` / ``_remove`` methods).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Generic, Protocol, TypeVar

from cre.core.common.observed import OwnerRef

T = TypeVar("T")

Indexer = Callable[[T], Iterable[str]]


class UnknownIndex(KeyError):
    """``by_index`` was asked for an index the store was not built with."""


class Store(Generic[T]):
    """Key -> object, plus named indexes ``name -> value -> keys``."""

    def __init__(self, *, indexers: Mapping[str, Indexer[T]] | None = None) -> None:
        self._items: dict[str, T] = {}
        self._versions: dict[str, str] = {}
        self._indexers: dict[str, Indexer[T]] = dict(indexers or {})
        self._indexes: dict[str, dict[str, set[str]]] = {n: {} for n in self._indexers}
        self._snapshot: tuple[T, ...] | None = None

    # -- reads ------------------------------------------------------------------------------

    def get(self, key: str) -> T | None:
        """The object stored under ``key`` (``namespace/name``), or ``None``."""
        return self._items.get(key)

    def get_by_name(self, namespace: str | None, name: str) -> T | None:
        """The object called ``name`` in ``namespace`` (``None`` for cluster-scoped kinds)."""
        return self._items.get(f"{namespace}/{name}" if namespace else name)

    def list(self) -> tuple[T, ...]:
        """Every stored object (a snapshot: later writes do not change it)."""
        if self._snapshot is None:
            self._snapshot = tuple(self._items.values())
        return self._snapshot

    def keys(self) -> frozenset[str]:
        return frozenset(self._items)

    def by_index(self, index: str, value: str) -> tuple[T, ...]:
        """The objects whose ``index`` function yields ``value``."""
        try:
            keys = self._indexes[index].get(value, ())
        except KeyError:
            raise UnknownIndex(f"store has no index {index!r} (has: "
                               f"{', '.join(sorted(self._indexes)) or 'none'})") from None
        return tuple(self._items[k] for k in sorted(keys))

    def index_values(self, index: str) -> frozenset[str]:
        """Every value ``index`` currently has objects for."""
        if index not in self._indexes:
            raise UnknownIndex(f"store has no index {index!r}")
        return frozenset(self._indexes[index])

    def resource_version(self, key: str) -> str | None:
        """The resourceVersion the stored copy of ``key`` was taken at."""
        return self._versions.get(key)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[str]:
        """The keys (a snapshot, safe to iterate while the informer writes)."""
        return iter(tuple(self._items))

    def add_indexers(self, indexers: Mapping[str, Indexer[T]]) -> None:
        """Maintain the indexes of ``indexers`` whose names are new (over the stored objects
        too); a name the store already has keeps its function (a shared informer's index name
        means one thing)."""
        for name, fn in indexers.items():
            if name in self._indexers:
                continue
            self._indexers[name] = fn
            index: dict[str, set[str]] = {}
            self._indexes[name] = index
            for key, obj in self._items.items():
                for value in fn(obj):
                    index.setdefault(value, set()).add(key)

    # -- writes (the owning informer only) --------------------------------------------------

    def _put(self, key: str, obj: T, resource_version: str) -> T | None:
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        self._versions[key] = resource_version
        self._index(key, obj)
        self._snapshot = None
        return old

    def _remove(self, key: str) -> T | None:
        old = self._items.pop(key, None)
        if old is None:
            return None
        del self._versions[key]
        self._unindex(key, old)
        self._snapshot = None
        return old

    def _index(self, key: str, obj: T) -> None:
        for name, fn in self._indexers.items():
            index = self._indexes[name]
            for value in fn(obj):
                index.setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: T) -> None:
        for name, fn in self._indexers.items():
            index = self._indexes[name]
            for value in fn(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]


# -- ready-made index functions for the views in cre.core.common.observed --------------------------


class _Labelled(Protocol):
    def label(self, key: str) -> str | None: ...


class _OnNode(Protocol):
    @property
    def node_name(self) -> str | None: ...


class _Owned(Protocol):
    @property
    def owner_refs(self) -> tuple[OwnerRef, ...]: ...


class _Namespaced(Protocol):
    @property
    def namespace(self) -> str: ...


def label_indexer(label: str) -> Callable[[_Labelled], list[str]]:
    """Index by the value of ``label`` (objects without it are not indexed)."""

    def index(obj: _Labelled) -> list[str]:
        value = obj.label(label)
        return [] if value is None else [value]

    return index


def namespaced_label_indexer(label: str) -> Callable[[_Labelled], list[str]]:
    """Index by ``namespace/<value of label>``: the reconcile key of the labelled owner."""

    def index(obj: _Labelled) -> list[str]:
        value = obj.label(label)
        if value is None:
            return []
        return [f"{getattr(obj, 'namespace', '')}/{value}"]

    return index


def node_name_indexer(obj: _OnNode) -> list[str]:
    """Index by ``spec.nodeName`` (unscheduled pods are not indexed)."""
    return [obj.node_name] if obj.node_name else []


def owner_uid_indexer(obj: _Owned) -> list[str]:
    """Index by the uid of every owner reference."""
    return [ref.uid for ref in obj.owner_refs]


def namespace_indexer(obj: _Namespaced) -> list[str]:
    return [obj.namespace]
