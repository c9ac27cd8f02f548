"""BandwidthMeasurement metrics, on the registry the measurement controller is given.

While a measurement samples, ``cre_nccl_busbw_gbps`` / ``cre_nccl_algbw_gbps`` show the
provisional bandwidth per message size (labels namespace, job, size_bytes), so a person watching
Prometheus sees a run's numbers before its verdict; the series are removed when the measurement
completes or is deleted (cardinality stays bounded by what is running).
``cre_nccl_parsed_lines_total`` counts log lines fed to the parser (provisional and final reads).
Nothing is registered at import time: :func:`bandwidth_metrics_for` creates the collectors of
a registry on first use.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge

from cre.api.measurement import BandwidthResult
from cre.kube.metrics import PerRegistry


class BandwidthMetrics:
    """The measurement tier's collectors on one registry (use :func:`bandwidth_metrics_for`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["namespace", "job", "size_bytes"]
        self.busbw = Gauge("cre_nccl_busbw_gbps",
                           "Provisional NCCL bus bandwidth per message size (GB/s)", labels,
                           registry=registry)
        self.algbw = Gauge("cre_nccl_algbw_gbps",
                           "Provisional NCCL algorithm bandwidth per message size (GB/s)",
                           labels, registry=registry)
        self.parsed_lines = Counter("cre_nccl_parsed_lines",
                                    "Log lines fed to the nccl-tests parser", registry=registry)
        self._sizes: dict[tuple[str, str], set[str]] = {}

    def publish(self, namespace: str, job: str, results: Sequence[BandwidthResult]) -> None:
        """Set the gauges of ``results`` (sizes no longer present are removed)."""
        sizes = {str(r.size_bytes) for r in results}
        self._drop(namespace, job, self._sizes.get((namespace, job), set()) - sizes)
        for r in results:
            size = str(r.size_bytes)
            self.busbw.labels(namespace=namespace, job=job, size_bytes=size).set(float(r.bus_bw))
            self.algbw.labels(namespace=namespace, job=job, size_bytes=size).set(float(r.alg_bw))
        self._sizes[(namespace, job)] = sizes

    def clear(self, namespace: str, job: str) -> None:
        """Remove every series of the measurement of ``job``."""
        self._drop(namespace, job, self._sizes.pop((namespace, job), set()))

    def _drop(self, namespace: str, job: str, sizes: set[str]) -> None:
        for size in sizes:
            for gauge in (self.busbw, self.algbw):
                with contextlib.suppress(KeyError):
                    gauge.remove(namespace, job, size)


#: The bandwidth collectors of a registry (``bandwidth_metrics_for(registry)``), built once.
bandwidth_metrics_for: Final = PerRegistry(BandwidthMetrics)
