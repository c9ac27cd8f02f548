"""Per-task logging context: who is reconciling what, carried by a contextvar.

A reconcile runs many awaits across the informer, executor and log-capture modules; threading a
logger with bound fields through each call would couple them all. Instead the worker that takes a
key from the queue enters :func:`reconcile_context`, and every log record emitted while it runs
(in that task, and in tasks it starts, since anyio copies the context) carries ``controller``,
``namespace``, ``name`` and ``reconcileID``.

To put those fields on a record, add :class:`ContextFilter` to a handler (the manager does; so can
library users who configure logging themselves). It snapshots the bound fields onto the record at
emit time, under :data:`FIELDS_ATTR` as one mapping (what field-aware formatters read) and as one
attribute per field for ``%``-style formats. ``name`` is the one field a ``LogRecord`` already has
(the logger's name), so the object's name is exposed as the attribute ``objectName`` instead
(:func:`record_attribute`); the mapping keeps the key ``name``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Final

_EMPTY: Mapping[str, str] = MappingProxyType({})
_FIELDS: ContextVar[Mapping[str, str]] = ContextVar("cre_log_fields", default=_EMPTY)

FIELDS_ATTR: Final = "cre_fields"
"""The record attribute holding the fields bound when the record was emitted (a mapping)."""

# Attributes every LogRecord has; a bound field of the same name would shadow or be shadowed.
_RECORD_ATTRS: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName"}


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


def record_attribute(key: str) -> str:
    """The record attribute a bound field is copied to: the key itself, or ``object<Key>`` for
    keys a ``LogRecord`` already owns (``name`` -> ``objectName``)."""
    return f"object{key[:1].upper()}{key[1:]}" if key in _RECORD_ATTRS else key


class ContextFilter(logging.Filter):
    """Snapshots the bound fields onto each record: the mapping under :data:`FIELDS_ATTR` and one
    attribute per field (``record.controller``, ``record.objectName``, ...). Fields passed with
    ``extra=`` win over bound ones of the same name."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = _FIELDS.get()
        if not hasattr(record, FIELDS_ATTR):
            setattr(record, FIELDS_ATTR, fields)
        for key, value in fields.items():
            attr = record_attribute(key)
            if not hasattr(record, attr):
                setattr(record, attr, value)
        return True
