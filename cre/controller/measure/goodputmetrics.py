"""GoodputMeasurement metrics, on the registry the goodput controller is given.

``cre_goodput_ratio`` and the time gauges (``cre_goodput_{training,lost_work,reschedule,resume,
checkpoint_save,warmup,non_warmup}_time_seconds``, ``cre_goodput_avg_step_time_seconds``,
``cre_goodput_avg_tflops_per_gpu``), labels namespace and measurement, as the reference names
them (``nvcre_`` -> ``cre_``). While a measurement samples every gauge follows its status; when
it completes the operational gauges are removed and the ratio is kept (the run's result), and
everything is removed when the measurement is deleted. ``cre_goodput_parsed_lines_total``
counts lines fed to the parser. Nothing is registered at import time.
"""

from __future__ import annotations

import contextlib
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge

from cre.api.goodput import GoodputMeasurementStatus
from cre.kube.metrics import PerRegistry

_TIMES: Final = (
    ("training", "training_time_sec"), ("lost_work", "lost_work_time_sec"),
    ("reschedule", "reschedule_time_sec"), ("resume", "resume_time_sec"),
    ("checkpoint_save", "checkpoint_save_time_sec"), ("warmup", "warmup_time_sec"),
    ("non_warmup", "non_warmup_time_sec"))


class GoodputMetrics:
    """The goodput collectors on one registry (use :func:`goodput_metrics_for`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["namespace", "measurement"]
        self.ratio = Gauge("cre_goodput_ratio", "Goodput: useful share of the wall time",
                           labels, registry=registry)
        self.times = {name: Gauge(f"cre_goodput_{name}_time_seconds",
                                  f"Goodput {name.replace('_', ' ')} time (s)", labels,
                                  registry=registry) for name, _ in _TIMES}
        self.avg_step = Gauge("cre_goodput_avg_step_time_seconds",
                              "Average non-warm-up step time (s)", labels, registry=registry)
        self.tflops = Gauge("cre_goodput_avg_tflops_per_gpu", "Average TFLOP/s per GPU",
                            labels, registry=registry)
        self.parsed_lines = Counter("cre_goodput_parsed_lines",
                                    "Log lines fed to the goodput parser", registry=registry)

    def _operational(self) -> list[Gauge]:
        return [*self.times.values(), self.avg_step, self.tflops]

    def publish(self, namespace: str, name: str, status: GoodputMeasurementStatus,
                *, terminal: bool) -> None:
        """Set the gauges from ``status``; a terminal one keeps only the ratio."""
        if status.result is not None:
            self.ratio.labels(namespace, name).set(float(status.result))
        if terminal:
            self._drop(namespace, name, self._operational())
            return
        for gauge_name, field in _TIMES:
            value = getattr(status, field)
            if value is not None:
                self.times[gauge_name].labels(namespace, name).set(float(value))
        if status.avg_step_time_sec is not None:
            self.avg_step.labels(namespace, name).set(float(status.avg_step_time_sec))
        if status.avg_tflops_per_gpu is not None:
            self.tflops.labels(namespace, name).set(float(status.avg_tflops_per_gpu))

    def clear(self, namespace: str, name: str) -> None:
        """Remove every series of the measurement."""
        self._drop(namespace, name, [self.ratio, *self._operational()])

    @staticmethod
    def _drop(namespace: str, name: str, gauges: list[Gauge]) -> None:
        for gauge in gauges:
            with contextlib.suppress(KeyError):
                gauge.remove(namespace, name)


#: The goodput collectors of a registry (``goodput_metrics_for(registry)``), created on first use.
goodput_metrics_for: Final = PerRegistry(GoodputMetrics)
