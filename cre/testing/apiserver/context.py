"""What the HTTP handlers may use of the running server, as a narrow protocol.

The handler modules (:mod:`.control`, :mod:`.discovery`, :mod:`.podapi`, :mod:`.scale`,
:mod:`.table`, :mod:`.watch`) receive the server as a :class:`ServerContext`: its state
(store, registry, objects, logs, faults, clock and settings) and nothing else. They never
import :mod:`.server`, which imports them, so the emulator's import graph has no cycle; request
parsing they share (bodies, write options, field-selector checks) lives in :mod:`.httpio`.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .audit import Audit, Journal
    from .faults import Faults
    from .gc import GarbageCollector
    from .logs import LogStore
    from .objects import Objects
    from .rbac import Rbac
    from .resources import Registry
    from .store import Store


class ServerContext(Protocol):
    """The emulator state a request handler reads and writes (implemented by ``ApiServer``)."""

    kubernetes_version: str
    clock: Callable[[], datetime]
    bookmark_interval: float
    store: Store
    registry: Registry
    objects: Objects
    logs: LogStore
    faults: Faults
    gc: GarbageCollector
    audit: Audit
    journal: Journal
    rbac: Rbac
    openapi_generation: int
    # Rendered OpenAPI documents by (generation, group, version); discovery fills it.
    openapi_cache: dict[tuple[int, str, str], bytes]
    # Requests served by (user agent's product, verb, resource[/subresource]).
    requests: collections.Counter[tuple[str, str, str]]
