"""cre.core: pure reconciliation, ``(desired object, Observation, now) -> Plan``.

No I/O, no clock, no randomness: the controllers in ``cre.controller`` build the Observation
from their caches and apply the Plan. The Job tier's entry point is
:func:`reconcile_job`. The core reads slim frozen views of cluster objects (:class:`PodView`,
:class:`NodeView`, :class:`TrainJobView`, ...); the projections that build them from API
objects as JSON dicts (:func:`pod_view`, :func:`node_view`, :func:`trainjob_view`) are pure
too, so a caller can build an Observation without any of the I/O stack. The names exported
here are the public surface; the submodules are internal. Hypothesis strategies and builders
for the core's inputs live in :mod:`cre.testing.strategies.job` (requires hypothesis).
"""

from cre.core.job import reconcile_job
from cre.core.observed import (
    ContainerState,
    ContainerStatusView,
    Labels,
    LogTail,
    NodeView,
    ObjectCondition,
    OwnerRef,
    PodCondition,
    PodView,
    TrainJobView,
    label_value,
)
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
from cre.core.projections import (
    POD_LABEL_KEYS,
    ProjectionError,
    node_view,
    object_key,
    pod_view,
    trainjob_view,
)

__all__ = [
    "POD_LABEL_KEYS",
    "ContainerState",
    "ContainerStatusView",
    "Create",
    "Delete",
    "EventSpec",
    "EventType",
    "JobSettings",
    "Labels",
    "LogRequest",
    "LogTail",
    "NodeView",
    "ObjectCondition",
    "Observation",
    "OwnerRef",
    "Patch",
    "Plan",
    "PodCondition",
    "PodView",
    "ProjectionError",
    "TrainJobView",
    "label_value",
    "node_view",
    "object_key",
    "pod_view",
    "reconcile_job",
    "trainjob_view",
]
