"""cre.core: pure reconciliation, ``(desired object, Observation, now) -> Plan``.

No I/O, no clock, no randomness: the controllers in ``cre.controller`` build the Observation
from their caches and apply the Plan. The Job tier's entry point is
:func:`cre.core.job.reconcile_job`; hypothesis strategies and builders for its inputs live in
:mod:`cre.testing.strategies.job` (requires hypothesis).
"""

from cre.core.job import reconcile_job
from cre.core.plan import (
    Create,
    Delete,
    EventSpec,
    EventType,
    JobSettings,
    LogRequest,
    Observation,
    Patch,
    Plan,
)

__all__ = [
    "Create",
    "Delete",
    "EventSpec",
    "EventType",
    "JobSettings",
    "LogRequest",
    "Observation",
    "Patch",
    "Plan",
    "reconcile_job",
]
