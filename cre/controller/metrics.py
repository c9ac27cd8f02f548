"""Job-tier metrics (prometheus default registry, next to ``cre.kube.metrics``).

``cre_job_status`` tells an operator which Jobs are where without listing them;
``cre_job_failure_log_delay_seconds`` is the figure the early launcher capture exists for: how
long after a container exited its log was safely in ``status.failureLog`` (JobSet deletes a
failed launcher about half a second after it exits).
"""

from __future__ import annotations

import contextlib
from typing import Final

from prometheus_client import Counter, Gauge, Histogram

from cre.api.conditions import Phase

JOB_STATUS: Final = Gauge(
    "cre_job_status", "1 for the phase each Job is in, 0 for the others",
    ["namespace", "job", "phase"])
FAILURE_LOG_DELAY: Final = Histogram(
    "cre_job_failure_log_delay_seconds",
    "Delay from a container's exit (finishedAt) to its failureLog being written",
    buckets=(0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0))
WORKLOAD_CREATED: Final = Counter(
    "cre_job_workload_created", "Workloads (TrainJobs) created by the Job controller")


def set_job_phase(namespace: str, job: str, phase: Phase | None) -> None:
    """Mark ``phase`` as the Job's current one (``None``: no phase yet)."""
    for candidate in Phase:
        JOB_STATUS.labels(namespace=namespace, job=job, phase=candidate.value).set(
            1 if candidate == phase else 0)


def forget_job(namespace: str, job: str) -> None:
    """Drop the Job's series once it is gone."""
    for candidate in Phase:
        with contextlib.suppress(KeyError):
            JOB_STATUS.remove(namespace, job, candidate.value)
