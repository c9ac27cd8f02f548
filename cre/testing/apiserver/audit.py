"""Who called what: the emulator's audit log, and a journal of every object written.

A real API server's audit log is how an operator proves what a controller does; CRE's tests use
the emulator's the same way: least privilege is checked against the calls the manager actually
made (every verb, group, resource, subresource, namespace and user), "at most one TrainJob per
Job generation" is counted from creates rather than inferred from the end state, and "no secret
reaches an object" is checked against every version of every object ever stored, not only the
survivors (:class:`Journal`, off unless asked for: it holds every write).

Both are bounded (oldest records out) and served by the control API as JSON
(``GET /_emulator/audit``, ``GET /_emulator/journal``).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import attrs

from .store import Event, dumps

AUDIT_LIMIT = 500_000
JOURNAL_LIMIT_BYTES = 512 * 1024 * 1024


@attrs.frozen
class AuditRecord:
    """One request as the authorizer saw it and the status it got. ``resource`` is empty for a
    non-resource request (discovery, ``/version``), whose URL is then ``path``."""

    seq: int
    user: str
    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    code: int = 0

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


class Audit:
    """The last ``limit`` requests, in arrival order."""

    def __init__(self, limit: int = AUDIT_LIMIT) -> None:
        self.records: deque[AuditRecord] = deque(maxlen=limit)
        self.seq = 0

    def add(self, **fields: Any) -> AuditRecord:
        self.seq += 1
        record = AuditRecord(seq=self.seq, **fields)
        self.records.append(record)
        return record

    def since(self, seq: int = 0) -> list[AuditRecord]:
        return [r for r in self.records if r.seq > seq]

    def clear(self) -> None:
        self.records.clear()


class Journal:
    """Every object version stored while enabled (JSON bytes), bounded by total size; a store
    listener, so writes by the emulator itself (garbage collection, defaults) are in it too."""

    def __init__(self, limit_bytes: int = JOURNAL_LIMIT_BYTES) -> None:
        self.enabled = False
        self.limit_bytes = limit_bytes
        self.entries: deque[tuple[str, str, bytes]] = deque()  # (group, resource, object)
        self.size = 0
        self.dropped = 0

    def listener(self, bucket: tuple[str, str], ev: Event) -> None:
        if not self.enabled:
            return
        raw = dumps(ev.obj)
        self.entries.append((bucket[0], bucket[1], raw))
        self.size += len(raw)
        while self.size > self.limit_bytes and self.entries:
            self.size -= len(self.entries.popleft()[2])
            self.dropped += 1

    def clear(self) -> None:
        self.entries.clear()
        self.size = 0
        self.dropped = 0
