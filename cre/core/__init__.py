"""cre.core: pure reconciliation, ``(desired object, Observation, now) -> Plan``.

No I/O, no clock, no randomness: the controllers in ``cre.controller`` build the Observation
from their caches and apply the Plan. The Job tier's entry point is
:func:`cre.core.job.reconcile_job`; hypothesis strategies and builders for its inputs live in
:mod:`cre.core.strategies` (requires hypothesis).
"""

from cre.core.job import reconcile_job
from cre.core.plan import (
    Create,
    Delete,
    EventSeverity,
    EventSpec,
    JobSettings,
    LogRequest,
    Observation,
    Patch,
    Plan,
)

__all__ = [
    "Create",
    "Delete",
    "EventSeverity",
    "EventSpec",
    "JobSettings",
    "LogRequest",
    "Observation",
    "Patch",
    "Plan",
    "reconcile_job",
]


def __getattr__(name: str) -> object:
    # ``EventType`` was this package's name for a core/v1 Event's severity until the watch event
    # type got its own enum (cre.api.watch.WatchEventType); the old name keeps working.
    if name == "EventType":
        import warnings

        warnings.warn("cre.core.EventType is cre.core.EventSeverity", DeprecationWarning,
                      stacklevel=2)
        return EventSeverity
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
