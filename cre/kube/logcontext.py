"""Per-task logging context: who is reconciling what, carried by a contextvar.

A reconcile runs many awaits across the informer, executor and log-capture modules; threading a
logger with bound fields through each call would couple them all. Instead the worker that takes a
key from the queue enters :func:`reconcile_context`, and every log record emitted while it runs
(in that task, and in tasks it starts, since anyio copies the context) carries ``controller``,
``namespace``, ``name`` and ``reconcileID``. The manager's formatter reads :func:`current_fields`;
library users who configure logging themselves can add :class:`ContextFilter` to their handler.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType

_EMPTY: Mapping[str, str] = MappingProxyType({})
_FIELDS: ContextVar[Mapping[str, str]] = ContextVar("cre_log_fields", default=_EMPTY)


def current_fields() -> Mapping[str, str]:
    """The fields bound in the current task (read-only)."""
    return _FIELDS.get()


@contextmanager
def log_fields(**fields: str) -> Iterator[None]:
    """Bind extra fields for the log records emitted inside the block."""
    token = _FIELDS.set(MappingProxyType({**_FIELDS.get(), **fields}))
    try:
        yield
    finally:
        _FIELDS.reset(token)


@contextmanager
def reconcile_context(*, controller: str, namespace: str, name: str,
                      reconcile_id: str | None = None) -> Iterator[str]:
    """Bind the fields of one reconcile; yields its ``reconcileID`` (a fresh UUID by default)."""
    rid = reconcile_id or str(uuid.uuid4())
    with log_fields(controller=controller, namespace=namespace, name=name, reconcileID=rid):
        yield rid


class ContextFilter(logging.Filter):
    """Copies the bound fields onto each record (``record.controller`` etc.) for any formatter."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in _FIELDS.get().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True
