"""Garbage-collector pauses: measured for /metrics, and shortened by freezing the synced caches.

CPython's cyclic collector stops the event loop for as long as a collection takes, and a full
(generation 2) collection walks every tracked object. Once the informers have listed 10,000 pods,
nearly all of those objects are the caches themselves: long-lived, rarely cyclic garbage, yet
scanned again by every full collection while reconciles, watches and probes wait. Two tools:

* :func:`install_pause_metrics` times every collection through ``gc.callbacks`` into
  ``cre_gc_pause_seconds{generation}`` on the given registry (Go managers export the same as
  ``go_gc_duration_seconds``), so a pause problem is visible on a dashboard;
* :func:`freeze_heap` collects once and moves every surviving object into the permanent
  generation (``gc.freeze()``), which later collections skip. Objects frozen there are still
  freed by reference counting when a watch event replaces them; only a reference *cycle* among
  them would outlive its use, which the cache projections (plain frozen values) do not form.
  The process calls it twice: after start-up (the import-time heap, ~90,000 objects that every
  full collection during the initial lists would otherwise walk again) and when every
  controller's caches have first synced. Measured with ``python -m bench manager``; figures in
  docs/design/008-manager.md.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

from prometheus_client import CollectorRegistry, Histogram

from cre_manager.registry import manager_metrics

log = logging.getLogger("cre_manager")
_started: list[float] = []
_histograms: list[Histogram] = []  # one per registry pauses are reported to


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started.append(time.perf_counter())
    elif _started:
        pause = time.perf_counter() - _started.pop()
        generation = str(info.get("generation", "?"))
        for histogram in _histograms:
            histogram.labels(generation=generation).observe(pause)


def install_pause_metrics(registry: CollectorRegistry | None = None) -> None:
    """Observe every collection's duration in ``cre_gc_pause_seconds`` of ``registry``
    (default: prometheus-client's default registry); idempotent."""
    histogram = manager_metrics(registry).gc_pause
    if histogram not in _histograms:
        _histograms.append(histogram)
    if _on_gc not in gc.callbacks:
        gc.callbacks.append(_on_gc)


def freeze_heap(*, after: str = "caches synced") -> int:
    """Collect, then exempt every surviving object from later collections; returns how many
    objects are frozen in all. ``after`` names the moment, for the log."""
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info(f"{after}; heap frozen for the garbage collector", extra={
        "frozenObjects": frozen, "seconds": round(time.perf_counter() - started, 3)})
    return frozen
