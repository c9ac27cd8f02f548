"""The manager's metrics registry: what ``/metrics`` serves, and the manager's own collectors.

The library creates no collector at import time (``cre.kube.metrics``); the process decides
where they go. :func:`manager_registry` builds a fresh registry with what prometheus-client's
default registry carries (process, platform and Python GC collectors) plus every collector CRE
exports (``cre.kube``'s, the Job tier's, the tier phase/verdict and per-node gauges, and the
manager's own: leader election and GC pauses), so ``/metrics`` lists the same series from the
first scrape, before any controller has started.
:func:`manager_metrics` gives the manager's collectors of a registry, created on first use.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Gauge, Histogram
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from cre.controller.certification.nodemetrics import node_metrics_for
from cre.controller.common.phasemetrics import phase_metrics_for
from cre.controller.job.metrics import job_metrics_for
from cre.kube.metrics import metrics_for


class ManagerMetrics:
    """The manager's collectors on one registry (use :func:`manager_metrics`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.leader_status = Gauge(
            "leader_election_master_status",
            "1 while this replica holds the leader-election lease, else 0", ["name"],
            registry=registry)
        self.gc_pause = Histogram(
            "cre_gc_pause_seconds",
            "Duration of CPython garbage collections (the event loop stops)", ["generation"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=registry)


_BY_REGISTRY: dict[int, tuple[CollectorRegistry, ManagerMetrics]] = {}


def manager_metrics(registry: CollectorRegistry | None = None) -> ManagerMetrics:
    """The manager's collectors of ``registry`` (default: prometheus-client's default
    registry), created the first time they are asked for."""
    reg = REGISTRY if registry is None else registry
    held = _BY_REGISTRY.get(id(reg))
    if held is None or held[0] is not reg:
        held = (reg, ManagerMetrics(reg))
        _BY_REGISTRY[id(reg)] = held
    return held[1]


def register_all(registry: CollectorRegistry) -> CollectorRegistry:
    """Create every CRE collector on ``registry`` (idempotent); returns it."""
    metrics_for(registry)
    job_metrics_for(registry)
    phase_metrics_for("certification", registry)
    phase_metrics_for("workflow", registry)
    node_metrics_for(registry)
    manager_metrics(registry)
    return registry


def manager_registry() -> CollectorRegistry:
    """A fresh registry with the default registry's process, platform and GC collectors and
    every CRE collector."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return register_all(registry)
