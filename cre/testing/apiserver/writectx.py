"""What the write helpers (patch, delete, CRD status) need from the object registry.

:mod:`.objects` owns create/update/commit and hands itself down as a :class:`WriteContext`
when it delegates a PATCH to :mod:`.patchverb`, a DELETE to :mod:`.deletion` or a CRD's
status upkeep to :mod:`.crdstatus`. Those modules depend on this narrow protocol, not on the
registry class, so the import graph stays a tree: ``objects`` imports them, never the reverse.
:class:`WriteOptions` (the query options every write carries) lives here for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

import attrs

from .store import Key, Obj, Store

if TYPE_CHECKING:
    from .admission import Admission
    from .resources import ResourceType


@attrs.frozen
class WriteOptions:
    """Query options common to writes."""

    manager: str = "unknown"
    dry_run: bool = False
    force: bool = False
    field_validation: str = "Warn"  # Ignore | Warn | Strict
    patch: bool = False
    binding: bool = False  # the pods/binding subresource: spec.nodeName may be set once
    warnings: list[str] = attrs.field(factory=list)  # filled in: Warning headers to send


class WriteContext(Protocol):
    """The registry operations a delegated write may use (implemented by ``Objects``)."""

    store: Store
    admission: Admission
    clock: Callable[[], datetime]
    crd_listeners: list[Callable[[Obj, bool], None]]

    def now(self) -> str: ...

    def key_of(self, rt: ResourceType, namespace: str, name: str) -> Key: ...

    def create(self, rt: ResourceType, namespace: str, body: Obj, opts: WriteOptions) -> Obj: ...

    def check_body_identity(self, rt: ResourceType, namespace: str, body: Obj) -> Obj: ...

    def merge_for_write(self, rt: ResourceType, old: Obj, body: Obj,
                        subresource: str | None) -> Obj: ...

    def commit(self, rt: ResourceType, key: Key, old: Obj, new: Obj,
               opts: WriteOptions) -> Obj: ...
