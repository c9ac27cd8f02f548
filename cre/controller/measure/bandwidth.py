"""The BandwidthMeasurement controller: the shell of the pure measurement core.

It watches BandwidthMeasurements, the CRE Jobs they measure (a Job change enqueues
``<job>-bandwidth``) and LogProfiles (a profile change enqueues the measurements naming it),
with the lifecycle every log-reading measurement shares
(:class:`cre.controller.measure.logread.LogMeasurementController`). One reconcile is
:func:`cre.kube.runtime.converge` around the pure core: the Observation is built from the caches
(the Job, the compiled profile: compiled once per resourceVersion, its error naming the profile
and key) plus a live, label-scoped list of the Job's pods (the cache could lag behind a pod that
just started; CRE's launcher pods carry ``cre.dev/launcher=<job>``, its workers
``cre.dev/job=<job>``). When the core asks for a log read, the log is streamed through
:func:`cre.kube.pods.stream_pod_log` line by line into
:class:`cre.core.measure.logwindow.WindowFilter` and the nccl-tests parser, so memory does not grow
with the log; when it asks whether the Job is gone, the Job is read live. A Multi profile's final
read (``nccl-loopback``) asks for every node's pod at once; they are read one after the other in the
same pass. The status is written through ``/status`` guarded by its resourceVersion (a conflict
re-reads live and re-runs the core); events follow the write; gauges are published after a
provisional sample and removed when the measurement completes or is deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Final

import attrs
from prometheus_client import CollectorRegistry

from cre.api.measurement import BandwidthMeasurement
from cre.controller.job.shell import bandwidth_from_dict
from cre.controller.measure.bandwidthmetrics import BandwidthMetrics, bandwidth_metrics_for
from cre.controller.measure.logread import LogMeasurementController, Wiring
from cre.core.common.plan import Ask, ConfirmAbsent
from cre.core.job.bandwidth import bandwidth_name, job_name_of
from cre.core.measure.bandwidth import (
    BandwidthObservation,
    ReadRequest,
    ReadResult,
    is_complete,
    reconcile_bandwidth,
)
from cre.core.measure.logprofile import CompiledProfile, compile_profile
from cre.core.measure.ncclparse import NcclLineParser, SizeAggregate, compile_row_pattern
from cre.kube.client import BANDWIDTHMEASUREMENTS, KubeClient
from cre.kube.factory import InformerFactory
from cre.kube.runtime import Again, Result
from cre.kube.runtime.base import utcnow

log = logging.getLogger(__name__)

CONTROLLER: Final = "bandwidthmeasurement"
COMPONENT: Final = "cre.dev/measurement-controller"

__all__ = ["BandwidthController"]

_WIRING: Final = Wiring(resource=BANDWIDTHMEASUREMENTS, decode=bandwidth_from_dict,
                        measurement_name=bandwidth_name, controller=CONTROLLER,
                        component=COMPONENT, cache_prefix="measurement", what="measurement")


class BandwidthController(LogMeasurementController[BandwidthMeasurement,
                                                     BandwidthObservation, CompiledProfile]):
    """Reconciles BandwidthMeasurements in ``namespaces`` (``None``: all namespaces)."""

    metrics: BandwidthMetrics

    def __init__(self, client: KubeClient, *, namespaces: Sequence[str] | None = None,
                 informers: InformerFactory | None = None,
                 max_concurrent_reconciles: int = 2, log_timeout: float = 120.0,
                 clock: Callable[[], datetime] = utcnow,
                 registry: CollectorRegistry | None = None, time_scale: float = 1.0) -> None:
        super().__init__(client, wiring=_WIRING, compile_profile=compile_profile,
                         metrics=bandwidth_metrics_for(registry), registry=registry,
                         namespaces=namespaces, informers=informers,
                         workers=max_concurrent_reconciles, log_timeout=log_timeout,
                         clock=clock, time_scale=time_scale)

    def series(self, name: str, job: str) -> str:
        return job_name_of(name) or job

    def without_reads(self, obs: BandwidthObservation) -> BandwidthObservation:
        return attrs.evolve(obs, read=None, node_reads=())

    async def observe(self, bm: BandwidthMeasurement) -> BandwidthObservation:
        # A missing profile has no error of its own: the core names it (LogProfileNotFound);
        # an error is a profile that exists and does not compile (LogProfileInvalid).
        seen = await self.observed(bm, missing=lambda name: None, caller=f"{__name__}.observe")
        return BandwidthObservation(job=seen.job, profile=seen.profile,
                                      profile_error=seen.error, pods=seen.pods)

    async def read(self, request: ReadRequest) -> ReadResult:
        """Stream the log ``request`` asks for through the window filter and the parser."""
        parser = NcclLineParser(compile_row_pattern(request.regex))
        agg = SizeAggregate()

        def feed(line: str) -> None:
            row = parser.feed(line)
            if row is not None:
                agg.add(row)

        streamed = await self.stream(request, feed)
        self.metrics.parsed_lines.inc(parser.lines)
        window = streamed.window
        return ReadResult(request=request, results=agg.results(),
                          transports=tuple(sorted(parser.transports)), rows=parser.rows,
                          lines=parser.lines, last_stamp=window.last_stamp,
                          lines_at_last=window.lines_at_last, truncated=streamed.truncated,
                          error=streamed.error)

    async def _step(self, bm: BandwidthMeasurement, obs: BandwidthObservation
                    ) -> Again[BandwidthMeasurement, BandwidthObservation] | Result:
        plan = reconcile_bandwidth(bm, obs, self._clock())
        if plan.asks:
            return Again(bm, await self._answer(bm, obs, plan.asks), "asks answered")
        answer = await self.write(bm, obs, plan)
        if answer is not None:
            return answer
        status = plan.status or bm.status
        ns, job = bm.metadata.namespace or "", self.series(bm.metadata.name or "",
                                                           bm.spec.job_ref.name)
        if is_complete(attrs.evolve(bm, status=status)):
            if plan.status is not None:  # completed on this pass: the series go
                self.metrics.clear(ns, job)
        elif status.results:
            self.metrics.publish(ns, job, status.results)
        return self.requeue(plan.requeue_after)

    async def _answer(self, bm: BandwidthMeasurement, obs: BandwidthObservation,
                      asks: Sequence[Ask]) -> BandwidthObservation:
        """``obs`` with ``asks`` answered: the log reads (a Multi profile's, one pod after the
        other: each read streams, so memory stays one line deep) and the live Job read."""
        for ask in asks:
            if isinstance(ask, ReadRequest) and ask.per_node:
                obs = attrs.evolve(obs, node_reads=(*obs.node_reads, await self.read(ask)))
            elif isinstance(ask, ReadRequest):
                obs = attrs.evolve(obs, read=await self.read(ask))
            elif isinstance(ask, ConfirmAbsent):
                obs = attrs.evolve(obs, job=await self.live_job(bm))
        return attrs.evolve(obs, feedback=obs.feedback.answering(*asks))
