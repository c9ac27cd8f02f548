"""Prometheus metrics of the informer layer, the workqueue, the controller runtime and Events.

Operators already have dashboards and alerts built on controller-runtime's metric names, so CRE
exports the same names and labels. The collectors are created on a registry the caller chooses,
never at import time: a library user who imports ``cre.kube`` keeps a clean default registry (a
collector of their own named ``workqueue_depth`` does not clash), and the manager passes its own
registry and serves that one. :func:`metrics_for` gives the one :class:`KubeMetrics` of a
registry, created on first use; without an argument it is prometheus-client's default registry,
which is what a component built without an explicit ``metrics`` uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Generic, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

C = TypeVar("C")

# client-go's workqueue histograms use exponential buckets from 10 ns, factor 10, 12 buckets.
_WORKQUEUE_BUCKETS: Final = tuple(1e-8 * 10**i for i in range(12))
# controller-runtime's reconcile-time buckets (5 ms ... 60 s).
_RECONCILE_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4,
                             0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0,
                             3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0,
                             30.0, 40.0, 50.0, 60.0)
#: The results ``controller_runtime_reconcile_total`` counts, as controller-runtime labels them.
RESULTS: Final = ("success", "error", "requeue", "requeue_after")
#: The outcomes ``cre_events_total`` counts per reporting component (``cre.kube.events``).
EVENT_RESULTS: Final = ("recorded", "retried", "dropped")


class KubeMetrics:
    """Every collector of ``cre.kube`` (workqueue, controller runtime, informers) on one
    registry. Build it once per registry (a second one on the same registry would clash): use
    :func:`metrics_for`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.registry = registry
        self.workqueue_depth = Gauge("workqueue_depth", "Current depth of workqueue", ["name"],
                                     registry=r)
        self.workqueue_adds = Counter("workqueue_adds", "Total number of adds handled by "
                                      "workqueue", ["name"], registry=r)
        self.workqueue_queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            ["name"], buckets=_WORKQUEUE_BUCKETS, registry=r)
        self.workqueue_work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            ["name"], buckets=_WORKQUEUE_BUCKETS, registry=r)
        self.workqueue_retries = Counter("workqueue_retries", "Total number of retries handled "
                                         "by workqueue", ["name"], registry=r)
        self.workqueue_longest_running = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            ["name"], registry=r)
        self.workqueue_unfinished_work = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration. Large values indicate stuck threads.", ["name"],
            registry=r)
        self.reconcile_total = Counter(
            "controller_runtime_reconcile", "Total number of reconciliations per controller",
            ["controller", "result"], registry=r)
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller", ["controller"], registry=r)
        self.terminal_reconcile_errors = Counter(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller", ["controller"],
            registry=r)
        self.reconcile_panics = Counter(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller", ["controller"], registry=r)
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller", ["controller"],
            buckets=_RECONCILE_BUCKETS, registry=r)
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller", ["controller"],
            registry=r)
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller", ["controller"], registry=r)
        self.informer_relists = Counter(
            "cre_informer_relists",
            "Full lists done by an informer (initial list and relists after 410)", ["informer"],
            registry=r)
        self.informer_reconnects = Counter(
            "cre_informer_reconnects",
            "Watch reconnects after an error (not counting clean timeouts)", ["informer"],
            registry=r)
        self.informer_events = Counter(
            "cre_informer_events", "Watch events applied to an informer's store, by type",
            ["informer", "type"], registry=r)
        self.informer_objects = Gauge(
            "cre_informer_objects", "Objects currently held in an informer's store",
            ["informer"], registry=r)
        self.events_total = Counter(
            "cre_events", "Kubernetes Events by outcome: recorded, retried (one per retry), "
            "dropped", ["component", "result"], registry=r)

    def init_workqueue_series(self, name: str) -> None:
        """Create a workqueue's counters at 0, so rate() and absence alerts work before any
        event."""
        self.workqueue_adds.labels(name=name)
        self.workqueue_retries.labels(name=name)

    def init_controller_series(self, controller: str) -> None:
        """Create a controller's reconcile series at 0, as controller-runtime does at start-up."""
        for result in RESULTS:
            self.reconcile_total.labels(controller=controller, result=result)
        self.reconcile_errors.labels(controller=controller)
        self.reconcile_panics.labels(controller=controller)
        self.terminal_reconcile_errors.labels(controller=controller)
        self.active_workers.labels(controller=controller)

    def init_event_series(self, component: str) -> None:
        """Create an event recorder's outcome counters at 0."""
        for result in EVENT_RESULTS:
            self.events_total.labels(component=component, result=result)

    def init_informer_series(self, informer: str) -> None:
        """Create an informer's relist and reconnect counters at 0."""
        self.informer_relists.labels(informer=informer)
        self.informer_reconnects.labels(informer=informer)


class PerRegistry(Generic[C]):
    """Collectors built once per registry: called with a registry (default:
    prometheus-client's default registry), ``build(registry)`` the first time, the same object
    after. The registry is kept beside its collectors, so a new registry at a recycled ``id``
    never gets another's."""

    def __init__(self, build: Callable[[CollectorRegistry], C]) -> None:
        self._build = build
        self._held: dict[int, tuple[CollectorRegistry, C]] = {}

    def __call__(self, registry: CollectorRegistry | None = None) -> C:
        reg = REGISTRY if registry is None else registry
        held = self._held.get(id(reg))
        if held is None or held[0] is not reg:
            held = (reg, self._build(reg))
            self._held[id(reg)] = held
        return held[1]


#: The runtime's collectors of a registry (``metrics_for(registry)``), created on first use.
metrics_for: Final = PerRegistry(KubeMetrics)


def init_workqueue_series(name: str) -> None:
    """:meth:`KubeMetrics.init_workqueue_series` on the default registry."""
    metrics_for().init_workqueue_series(name)


def init_controller_series(controller: str) -> None:
    """:meth:`KubeMetrics.init_controller_series` on the default registry."""
    metrics_for().init_controller_series(controller)


def init_informer_series(informer: str) -> None:
    """:meth:`KubeMetrics.init_informer_series` on the default registry."""
    metrics_for().init_informer_series(informer)
