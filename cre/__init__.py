"""CRE, the Cluster Readiness Engine: certify GPU clusters on Kubernetes before they take real work.

CRE is a library first and a thin manager binary (``cre-manager``) second. This module is the
front door to the pure part of the library, the part that does no I/O and is safe to import
anywhere: the API models and the Job tier's reconciliation core. Everything that talks to an
API server lives one import further, so importing ``cre`` never opens a connection, starts a
task or registers a metric.

The packages, top layer first (a lower layer never imports a higher one; import-linter checks
it in CI):

``cre.testing``
    The shipped test kit: the API emulator, the cluster simulator, the golden harness, hypothesis
    strategies, the demo (extras ``testing`` / ``demo`` / ``test``).
``cre.controller``
    One controller per kind, e.g. :class:`cre.controller.job.controller.JobController`.
``cre.kube``
    The I/O edge: API client, informers with slim stores, scoped pod reads, workqueue, executor.
``cre.core`` and ``cre.render``
    Pure reconciliation ``(desired object, Observation, now) -> Plan`` with the views and
    projections it reads; pure rendering of catalog workloads into manifests.
``cre.catalog``
    The workload catalog loader and model.
``cre.api``
    attrs models of the ``cre.dev/v1alpha1`` kinds, the JSON converter, validation, CRDs.

``cre_manager`` (the process) and ``cre.cli`` (the ``cre`` command, extra ``cli``) sit side by
side between ``cre.testing`` and ``cre.controller``.
"""

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cre.api import Job, JobSpec, JobStatus, ValidationError, from_dict, to_dict
    from cre.core import (
        JobSettings,
        LogTail,
        NodeView,
        Observation,
        Plan,
        PodView,
        ProjectionError,
        ReadLog,
        TrainJobView,
        node_view,
        pod_view,
        reconcile_job,
        trainjob_view,
    )

# The re-exports load on first use (PEP 562), so ``import cre.cli`` (``cre --help``, TAB
# completion) does not pay for the API models and the core it may never touch.
_FROM_API = frozenset({"Job", "JobSpec", "JobStatus", "ValidationError", "from_dict", "to_dict"})


def __getattr__(name: str) -> Any:
    if name in _FROM_API:
        import cre.api

        return getattr(cre.api, name)
    if name in __all__:
        import cre.core

        return getattr(cre.core, name)
    raise AttributeError(f"module 'cre' has no attribute {name!r}")


__all__ = [
    "Job",
    "JobSettings",
    "JobSpec",
    "JobStatus",
    "LogTail",
    "NodeView",
    "Observation",
    "Plan",
    "PodView",
    "ProjectionError",
    "ReadLog",
    "TrainJobView",
    "ValidationError",
    "__version__",
    "from_dict",
    "node_view",
    "pod_view",
    "reconcile_job",
    "to_dict",
    "trainjob_view",
]
