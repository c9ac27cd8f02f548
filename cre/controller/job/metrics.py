"""Job-tier metrics, on the registry the Job controller is given (next to ``cre.kube.metrics``).

``cre_job_status`` tells an operator which Jobs are where without listing them;
``cre_job_failure_log_delay_seconds`` is the figure the early launcher capture exists for: how
long after a container exited its log was safely in ``status.failureLog`` (JobSet deletes a
failed launcher about half a second after it exits). Nothing is registered at import time:
:func:`job_metrics_for` creates the collectors of a registry on first use.
"""

from __future__ import annotations

import contextlib
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from cre.api.conditions import Phase
from cre.kube.metrics import PerRegistry


class JobMetrics:
    """The Job tier's collectors on one registry (use :func:`job_metrics_for`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.job_status = Gauge(
            "cre_job_status", "1 for the phase each Job is in, 0 for the others",
            ["namespace", "job", "phase"], registry=registry)
        self.failure_log_delay = Histogram(
            "cre_job_failure_log_delay_seconds",
            "Delay from a container's exit (finishedAt) to its failureLog being written",
            buckets=(0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0),
            registry=registry)
        self.workload_created = Counter(
            "cre_job_workload_created", "Workloads (TrainJobs) created by the Job controller",
            registry=registry)

    def set_job_phase(self, namespace: str, job: str, phase: Phase | None) -> None:
        """Mark ``phase`` as the Job's current one (``None``: no phase yet)."""
        for candidate in Phase:
            self.job_status.labels(namespace=namespace, job=job, phase=candidate.value).set(
                1 if candidate == phase else 0)

    def forget_job(self, namespace: str, job: str) -> None:
        """Drop the Job's series once it is gone."""
        for candidate in Phase:
            with contextlib.suppress(KeyError):
                self.job_status.remove(namespace, job, candidate.value)


#: The Job collectors of a registry (``job_metrics_for(registry)``), created on first use.
job_metrics_for: Final = PerRegistry(JobMetrics)
