"""Phase and verdict gauges of the tier kinds (Certification, Workflow), on the registry the
controller is given.

``cre_<kind>_phase{namespace,<kind>,phase}`` is 1 for the phase the object is in and 0 for the
others, as ``cre_job_status`` is for Jobs, so ``sum by (phase) (cre_certification_phase)``
counts the runs in each phase; ``cre_<kind>_verdict{namespace,<kind>,verdict}`` is the same
for the verdict (all 0 until there is one). Both have one series per object and value of the
enum (4 phases, 3 verdicts) and are removed when the object is deleted. Nothing is registered
at import time: :func:`phase_metrics_for` creates a kind's collectors on first use.
"""

from __future__ import annotations

import contextlib
import functools

from prometheus_client import CollectorRegistry, Gauge

from cre.api.conditions import Phase, Verdict
from cre.kube.metrics import PerRegistry


class PhaseMetrics:
    """The phase and verdict gauges of one kind (``certification``, ``workflow``)."""

    def __init__(self, registry: CollectorRegistry, *, kind: str) -> None:
        self.phase = Gauge(f"cre_{kind}_phase",
                           f"1 for the phase each {kind} is in, 0 for the others",
                           ["namespace", kind, "phase"], registry=registry)
        self.verdict = Gauge(f"cre_{kind}_verdict",
                             f"1 for the verdict of each {kind}, 0 for the others (all 0 "
                             "before it has one)", ["namespace", kind, "verdict"],
                             registry=registry)

    def publish(self, namespace: str, name: str, *, phase: Phase | None,
                verdict: Verdict | None) -> None:
        """Mark ``phase`` and ``verdict`` (``None``: none yet) as the object's current ones."""
        for p in Phase:
            self.phase.labels(namespace, name, p.value).set(1 if p == phase else 0)
        for v in Verdict:
            self.verdict.labels(namespace, name, v.value).set(1 if v == verdict else 0)

    def forget(self, namespace: str, name: str) -> None:
        """Drop the object's series once it is gone."""
        for gauge, values in ((self.phase, Phase), (self.verdict, Verdict)):
            for value in values:
                with contextlib.suppress(KeyError):
                    gauge.remove(namespace, name, value.value)


_BY_KIND: dict[str, PerRegistry[PhaseMetrics]] = {}


def phase_metrics_for(kind: str, registry: CollectorRegistry | None = None) -> PhaseMetrics:
    """The ``kind``'s gauges on ``registry`` (default: prometheus-client's default registry),
    created the first time they are asked for."""
    per = _BY_KIND.get(kind)
    if per is None:
        per = _BY_KIND[kind] = PerRegistry(functools.partial(PhaseMetrics, kind=kind))
    return per(registry)
