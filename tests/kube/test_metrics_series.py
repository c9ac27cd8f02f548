"""Counters exist at 0 from the start, as controller-runtime registers them, so alerts on
rate() or absence work before the first error, retry or reconnect."""

from __future__ import annotations

from prometheus_client import REGISTRY

from cre.kube import metrics
from cre.kube.workqueue import WorkQueue


def _value(metric: str, /, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(metric, labels)


def test_workqueue_counters_start_at_zero() -> None:
    """A new queue exposes workqueue_adds_total and workqueue_retries_total at 0."""
    WorkQueue("series-zero-q")
    assert _value("workqueue_adds_total", name="series-zero-q") == 0.0
    assert _value("workqueue_retries_total", name="series-zero-q") == 0.0


def test_controller_and_informer_series_start_at_zero() -> None:
    """Reconcile results, errors, relists and reconnects exist at 0 once initialised."""
    metrics.init_controller_series("series-zero-ctl")
    metrics.init_informer_series("series-zero-inf")
    for result in ("success", "error", "requeue", "requeue_after"):
        assert _value("controller_runtime_reconcile_total", controller="series-zero-ctl",
                      result=result) == 0.0
    assert _value("controller_runtime_reconcile_errors_total", controller="series-zero-ctl") == 0.0
    assert _value("cre_informer_relists_total", informer="series-zero-inf") == 0.0
    assert _value("cre_informer_reconnects_total", informer="series-zero-inf") == 0.0
