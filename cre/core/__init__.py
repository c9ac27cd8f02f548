"""cre.core: pure reconciliation, ``(desired object, Observation, now) -> Plan``.

No I/O, no clock, no randomness: the controllers in ``cre.controller`` build the Observation
from their caches and apply the Plan. The Job tier's entry point is
:func:`reconcile_job`. The core reads slim frozen views of cluster objects (:class:`PodView`,
:class:`NodeView`, :class:`TrainJobView`, ...); the projections that build them from API
objects as JSON dicts (:func:`pod_view`, :func:`node_view`, :func:`trainjob_view`) are pure
too, so a caller can build an Observation without any of the I/O stack. The names exported
here are the public surface; the submodules are internal. Hypothesis strategies and builders
for the core's inputs live in :mod:`cre.testing.strategies.job` (requires hypothesis).

The feedback contract (one path, every tier follows it; the shell's side is
:func:`cre.kube.runtime.converge`):

* The core never reads the cluster. When it needs something the caches cannot give, it *asks*
  in its Plan (``Plan.asks``, typed, :mod:`cre.core.common.plan`): ``ReadLog`` (a container's log
  tail), ``StreamLog`` (a log streamed through a measurement's parser), ``ConfirmAbsent`` (a
  live read before acting on "the object is gone"), ``ListLive`` (a live list before an
  irreversible step such as dropping a finalizer), ``ReadEvents`` (an object's Events, which no
  cache holds). A Plan that asks carries no write.
* The shell answers by running the core again on the same object with a *richer* Observation
  (the tails, stream results and Events; the live object or lists where the cached ones were)
  and the answered asks in its ``feedback``, never by changing the core's decision itself.
* Applying a Plan feeds back the same way, never through an exception: a create that worked
  puts the created object into the Observation; one that found its name held by a foreign
  object comes back as a ``CreateConflict`` (with the live holder), one refused for good
  (validation, an admission webhook's denial) as a ``CreateError``, both in ``feedback``. A
  status write that conflicts brings a fresh copy of the object. Only transient API errors are
  raised, and the runtime retries the key with backoff.
* Every answer adds information the core did not have and the core never asks twice for what
  it was given, so a pass comes to rest in a handful of runs (the Job core: at most a log read,
  a live confirmation or the workload's Events, a create's answer and a conflict's re-read).
  The shell bounds the runs (:data:`cre.kube.runtime.DEFAULT_MAX_PASSES`); a core that keeps
  asking is an error and a backoff, not a spin.
"""

from cre.core.certification.reconcile import (
    CertificationObservation,
    CertificationPlan,
    reconcile_certification,
)
from cre.core.common.observed import (
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
from cre.core.common.plan import (
    Ask,
    ConfirmAbsent,
    Create,
    CreateConflict,
    CreateError,
    Delete,
    DeliverReport,
    EventSeverity,
    EventSpec,
    Feedback,
    JobSettings,
    ListLive,
    Observation,
    Patch,
    Plan,
    ReadEvents,
    ReadLog,
    StreamLog,
)
from cre.core.common.projections import (
    POD_LABEL_KEYS,
    ProjectionError,
    node_view,
    object_key,
    pod_view,
    trainjob_view,
)
from cre.core.export.delivery import (
    ReportExportObservation,
    ReportExportPlan,
    reconcile_reportexport,
)
from cre.core.export.policy import (
    ReportExportPolicyObservation,
    ReportExportPolicyPlan,
    reconcile_reportexportpolicy,
)
from cre.core.job.reconcile import JobPlan, reconcile_job
from cre.core.measure.bandwidth import BandwidthObservation, BandwidthPlan, reconcile_bandwidth
from cre.core.measure.goodput import GoodputObservation, GoodputPlan, reconcile_goodput
from cre.core.measure.logread import LogObservation
from cre.core.nodecertification.expiry import reconcile_expiry
from cre.core.nodecertification.reconcile import (
    NodeCertificationObservation,
    NodeCertificationPlan,
    reconcile_nodecertification,
)
from cre.core.schedule.reconcile import (
    ScheduleObservation,
    SchedulePlan,
    reconcile_schedule,
)
from cre.core.workflow.reconcile import WorkflowObservation, WorkflowPlan
from cre.core.workflow.run import reconcile_workflow
from cre.core.workloadrun.reconcile import (
    WorkloadRunObservation,
    WorkloadRunPlan,
    reconcile_workloadrun,
)

__all__ = [
    "POD_LABEL_KEYS",
    "Ask",
    "BandwidthObservation",
    "BandwidthPlan",
    "CertificationObservation",
    "CertificationPlan",
    "ConfirmAbsent",
    "ContainerState",
    "ContainerStatusView",
    "Create",
    "CreateConflict",
    "CreateError",
    "Delete",
    "DeliverReport",
    "EventSeverity",
    "EventSpec",
    "Feedback",
    "GoodputObservation",
    "GoodputPlan",
    "JobPlan",
    "JobSettings",
    "Labels",
    "ListLive",
    "LogObservation",
    "LogTail",
    "NodeCertificationObservation",
    "NodeCertificationPlan",
    "NodeView",
    "ObjectCondition",
    "Observation",
    "OwnerRef",
    "Patch",
    "Plan",
    "PodCondition",
    "PodView",
    "ProjectionError",
    "ReadEvents",
    "ReadLog",
    "ReportExportObservation",
    "ReportExportPlan",
    "ReportExportPolicyObservation",
    "ReportExportPolicyPlan",
    "ScheduleObservation",
    "SchedulePlan",
    "StreamLog",
    "TrainJobView",
    "WorkflowObservation",
    "WorkflowPlan",
    "WorkloadRunObservation",
    "WorkloadRunPlan",
    "label_value",
    "node_view",
    "object_key",
    "pod_view",
    "reconcile_bandwidth",
    "reconcile_certification",
    "reconcile_expiry",
    "reconcile_goodput",
    "reconcile_job",
    "reconcile_nodecertification",
    "reconcile_reportexport",
    "reconcile_reportexportpolicy",
    "reconcile_schedule",
    "reconcile_workflow",
    "reconcile_workloadrun",
    "trainjob_view",
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
