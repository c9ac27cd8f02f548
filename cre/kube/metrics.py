"""Prometheus metrics of the informer layer, the workqueue and the reconcilers, in one place.

Operators already have dashboards and alerts built on controller-runtime's metric names, so CRE
exports the same names and labels. Every collector lives in the default prometheus-client
registry and is defined exactly once here; the controllers and the manager import them from this
module instead of declaring their own (a second declaration of the same name would raise).
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Gauge, Histogram

# client-go's workqueue histograms use exponential buckets from 10 ns, factor 10, 12 buckets.
_WORKQUEUE_BUCKETS: Final = tuple(1e-8 * 10**i for i in range(12))
# controller-runtime's reconcile-time buckets (5 ms ... 60 s).
_RECONCILE_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4,
                             0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0,
                             3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0,
                             30.0, 40.0, 50.0, 60.0)

WORKQUEUE_DEPTH: Final = Gauge("workqueue_depth", "Current depth of workqueue", ["name"])
WORKQUEUE_ADDS: Final = Counter("workqueue_adds", "Total number of adds handled by workqueue",
                                ["name"])
WORKQUEUE_QUEUE_DURATION: Final = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    ["name"], buckets=_WORKQUEUE_BUCKETS)
WORKQUEUE_WORK_DURATION: Final = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes",
    ["name"], buckets=_WORKQUEUE_BUCKETS)
WORKQUEUE_RETRIES: Final = Counter("workqueue_retries", "Total number of retries handled by "
                                   "workqueue", ["name"])
WORKQUEUE_LONGEST_RUNNING: Final = Gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running.", ["name"])
WORKQUEUE_UNFINISHED_WORK: Final = Gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has been done that is in progress and hasn't been observed by "
    "work_duration. Large values indicate stuck threads.", ["name"])

RECONCILE_TOTAL: Final = Counter(
    "controller_runtime_reconcile", "Total number of reconciliations per controller",
    ["controller", "result"])
RECONCILE_ERRORS: Final = Counter(
    "controller_runtime_reconcile_errors", "Total number of reconciliation errors per controller",
    ["controller"])
RECONCILE_TIME: Final = Histogram(
    "controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller",
    ["controller"], buckets=_RECONCILE_BUCKETS)

INFORMER_RELISTS: Final = Counter(
    "cre_informer_relists", "Full lists done by an informer (initial list and relists after 410)",
    ["informer"])
INFORMER_RECONNECTS: Final = Counter(
    "cre_informer_reconnects", "Watch reconnects after an error (not counting clean timeouts)",
    ["informer"])
INFORMER_EVENTS: Final = Counter(
    "cre_informer_events", "Watch events applied to an informer's store, by type",
    ["informer", "type"])
INFORMER_OBJECTS: Final = Gauge(
    "cre_informer_objects", "Objects currently held in an informer's store", ["informer"])


def init_workqueue_series(name: str) -> None:
    """Create a workqueue's counters at 0, so rate() and absence alerts work before any event."""
    WORKQUEUE_ADDS.labels(name=name)
    WORKQUEUE_RETRIES.labels(name=name)


def init_controller_series(controller: str) -> None:
    """Create a controller's reconcile series at 0, as controller-runtime does at start-up."""
    for result in ("success", "error", "requeue", "requeue_after"):
        RECONCILE_TOTAL.labels(controller=controller, result=result)
    RECONCILE_ERRORS.labels(controller=controller)


def init_informer_series(informer: str) -> None:
    """Create an informer's relist and reconnect counters at 0."""
    INFORMER_RELISTS.labels(informer=informer)
    INFORMER_RECONNECTS.labels(informer=informer)
