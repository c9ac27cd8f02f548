"""The Job core's shell: the Job resource, its Events, and the answers to the core's questions.

Everything here is Job-specific I/O that used to sit in the generic executor: the ``Job``
resource and how an Event names a Job; the :class:`cre.kube.executor.PlanExecutor` configured for
Job plans (TrainJobs created and deleted, the Job's status and finalizers written); and the
reads that answer what :func:`cre.core.job.reconcile.reconcile_job` asks for (log tails, preferably
the ones the prefetcher already read; live reads of its TrainJob, its pods and its TrainJob's
Events). The controller (:mod:`cre.controller.job.controller`) decides when to ask; this module
only reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from cre.api.converter import structure
from cre.api.goodput import GoodputMeasurement
from cre.api.job import Job
from cre.api.labels import API_VERSION, JOB, LAUNCHER
from cre.api.measurement import BandwidthMeasurement
from cre.api.meta import ObjectMeta
from cre.controller.job.prefetch import LogPrefetcher
from cre.core.common.observed import LogTail, ObjectEvent, PodView, TrainJobView
from cre.core.common.plan import ReadLog
from cre.core.common.projections import trainjob_view
from cre.core.job.workload import TRAINJOB_KIND, workload_name
from cre.kube.client import (
    JOBS,
    TRAINJOBS,
    ApiError,
    KubeClient,
)
from cre.kube.events import EventRecorder
from cre.kube.executor import PlanExecutor
from cre.kube.objectevents import read_object_events
from cre.kube.pods import live_list_pods, read_pod_log


def job_from_dict(raw: dict[str, Any]) -> Job:
    """The Job model of a served object (the informer drops objects that do not validate)."""
    return structure(raw, Job)


def bandwidth_from_dict(raw: dict[str, Any]) -> BandwidthMeasurement:
    """The BandwidthMeasurement model of a served object."""
    return structure(raw, BandwidthMeasurement)


def goodput_from_dict(raw: dict[str, Any]) -> GoodputMeasurement:
    """The GoodputMeasurement model of a served object."""
    return structure(raw, GoodputMeasurement)


def involved_object(kind: str, meta: ObjectMeta) -> dict[str, Any]:
    """The ``involvedObject`` of an Event about the ``cre.dev`` object of ``kind`` and ``meta``."""
    return {"apiVersion": API_VERSION, "kind": kind, "name": meta.name,
            "namespace": meta.namespace, "uid": meta.uid}


def involved(job: Job) -> dict[str, Any]:
    """The ``involvedObject`` of an Event about ``job``."""
    return involved_object("Job", job.metadata)


def job_executor(client: KubeClient, recorder: EventRecorder, *,
                 clock: Callable[[], datetime]) -> PlanExecutor:
    """The executor of Job plans: the Job's status and finalizers written, Events naming the
    Job."""
    return PlanExecutor(client, recorder, owner=JOBS, involved=involved, clock=clock)


def by_creation(pods: Sequence[PodView]) -> tuple[PodView, ...]:
    """``pods`` oldest first (by name on a tie; unknown creation times last)."""
    far = datetime.max.replace(tzinfo=UTC)
    return tuple(sorted(pods, key=lambda p: (p.creation_timestamp or far, p.name)))


class JobReads:
    """The reads that answer the Job core: log tails (the prefetched one when there is one) and
    live reads of its TrainJob, its pods and the TrainJob's Events."""

    def __init__(self, client: KubeClient, prefetcher: LogPrefetcher, *,
                 log_timeout: float) -> None:
        self.client = client
        self.prefetcher = prefetcher
        self.log_timeout = log_timeout

    async def logs(self, requests: Sequence[ReadLog]) -> tuple[LogTail, ...]:
        """The tails ``requests`` ask for, in order."""
        tails: list[LogTail] = []
        for req in requests:
            early = await self.prefetcher.tail_for(req)
            if early is not None and early.error is None:
                tails.append(early)
            else:
                tails.append(await read_pod_log(self.client, req, timeout=self.log_timeout))
        return tuple(tails)

    async def trainjob(self, job: Job) -> TrainJobView | None:
        """The Job's TrainJob as served now (``None``: absent)."""
        try:
            raw = await self.client.get(TRAINJOBS, workload_name(job.metadata.name or ""),
                                        namespace=job.metadata.namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return trainjob_view(raw)

    async def pods(self, job: Job) -> tuple[tuple[PodView, ...], tuple[PodView, ...]]:
        """The Job's worker and launcher pods as served now, oldest first."""
        ns, name = job.metadata.namespace or "", job.metadata.name or ""
        caller = f"{__name__}.JobReads"
        workers = await live_list_pods(self.client, label_selector=f"{JOB}={name}",
                                       namespace=ns, caller=caller)
        launchers = await live_list_pods(self.client, label_selector=f"{LAUNCHER}={name}",
                                         namespace=ns, caller=caller)
        return by_creation(workers), by_creation(launchers)

    async def workload_events(self, view: TrainJobView | None) -> tuple[ObjectEvent, ...]:
        """The Events about the TrainJob ``view`` (this instance of it), oldest first (none
        when there is no TrainJob: the answer still tells the core they were read)."""
        if view is None:
            return ()
        return await read_object_events(self.client, namespace=view.namespace,
                                        kind=TRAINJOB_KIND, name=view.name, uid=view.uid)
