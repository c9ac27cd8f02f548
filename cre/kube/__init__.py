"""cre.kube: the I/O edge — HTTP client, informers with slim stores, scoped pod reads, workqueue.

The informer layer is a library in its own right: :class:`Informer` (list + watch with 410
relists and backoff), :class:`Store` (keyed, indexed, immutable snapshots),
:class:`InformerFactory` (one shared informer per query for every controller of a process),
the pure projections from :mod:`cre.core` as transforms, the two scoped pod caches in
:mod:`cre.kube.pods` and the :class:`WorkQueue`. The generic controller runtime every controller
runs on (the controller base, Controller, Reconciler, event handlers, predicates, the bounded
core/shell loop) is :mod:`cre.kube.runtime`.
Metrics live in :mod:`cre.kube.metrics`, on a registry the caller chooses; importing this
package registers none.
"""

from cre.api.watch import WatchEventType
from cre.kube.client import (
    BANDWIDTHMEASUREMENTS,
    BATCH_JOBS,
    CERTIFICATIONS,
    CERTIFICATIONSCHEDULES,
    CLUSTER_TRAINING_RUNTIMES,
    CONFIGMAPS,
    CRDS,
    EVENTS,
    GOODPUTMEASUREMENTS,
    JOBS,
    JOBSETS,
    LEASES,
    LOGPROFILES,
    NAMESPACES,
    NODECERTIFICATIONS,
    NODES,
    PODS,
    REPORTEXPORTPOLICIES,
    REPORTEXPORTS,
    SECRETS,
    SERVICES,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    WORKFLOWS,
    WORKLOADRUNS,
    ApiError,
    KubeClient,
    Resource,
    connect,
)
from cre.kube.events import EventRecorder
from cre.kube.factory import InformerFactory
from cre.kube.guard import UnscopedPodRead
from cre.kube.informer import Backoff, Handler, Informer, ReflectorConfig, ReflectorState
from cre.kube.metrics import KubeMetrics, metrics_for
from cre.kube.ratelimit import (
    ItemExponentialRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    TokenBucketRateLimiter,
    default_controller_rate_limiter,
)
from cre.kube.runtime.base import CoreReconciler
from cre.kube.runtime.controller import Controller
from cre.kube.runtime.feedback import converge
from cre.kube.runtime.handlers import (
    enqueue_by_label,
    enqueue_mapped,
    enqueue_object,
    enqueue_owner,
    key_of,
)
from cre.kube.runtime.predicates import OwnStatusEcho, generation_changed
from cre.kube.runtime.reconcile import DONE, Reconciler, Result, TerminalError, split_key
from cre.kube.store import Store, UnknownIndex
from cre.kube.workqueue import QueueShutDown, WorkQueue

__all__ = [
    "BANDWIDTHMEASUREMENTS",
    "BATCH_JOBS",
    "CERTIFICATIONS",
    "CERTIFICATIONSCHEDULES",
    "CLUSTER_TRAINING_RUNTIMES",
    "CONFIGMAPS",
    "CRDS",
    "DONE",
    "EVENTS",
    "GOODPUTMEASUREMENTS",
    "JOBS",
    "JOBSETS",
    "LEASES",
    "LOGPROFILES",
    "NAMESPACES",
    "NODECERTIFICATIONS",
    "NODES",
    "PODS",
    "REPORTEXPORTPOLICIES",
    "REPORTEXPORTS",
    "SECRETS",
    "SERVICES",
    "TRAINING_RUNTIMES",
    "TRAINJOBS",
    "WORKFLOWS",
    "WORKLOADRUNS",
    "ApiError",
    "Backoff",
    "Controller",
    "CoreReconciler",
    "EventRecorder",
    "Handler",
    "Informer",
    "InformerFactory",
    "ItemExponentialRateLimiter",
    "KubeClient",
    "KubeMetrics",
    "MaxOfRateLimiter",
    "OwnStatusEcho",
    "QueueShutDown",
    "RateLimiter",
    "Reconciler",
    "ReflectorConfig",
    "ReflectorState",
    "Resource",
    "Result",
    "Store",
    "TerminalError",
    "TokenBucketRateLimiter",
    "UnknownIndex",
    "UnscopedPodRead",
    "WatchEventType",
    "WorkQueue",
    "connect",
    "converge",
    "default_controller_rate_limiter",
    "enqueue_by_label",
    "enqueue_mapped",
    "enqueue_object",
    "enqueue_owner",
    "generation_changed",
    "key_of",
    "metrics_for",
    "split_key",
]


def __getattr__(name: str) -> object:
    # ``EventType`` was the informers' name for the watch event type until it moved to
    # cre.api.watch.WatchEventType (one enum for every layer); the old name keeps working.
    if name == "EventType":
        import warnings

        warnings.warn("cre.kube.EventType is cre.api.watch.WatchEventType", DeprecationWarning,
                      stacklevel=2)
        return WatchEventType
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
