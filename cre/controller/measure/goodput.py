"""The GoodputMeasurement controller: the shell of the pure goodput core.

It watches GoodputMeasurements, the CRE Jobs they measure (a Job change enqueues
``<job>-goodput``: a restart, a terminal condition) and LogProfiles (a profile change enqueues
the measurements naming it), with the lifecycle every log-reading measurement shares
(:class:`cre.controller.measure.logread.LogMeasurementController`). One reconcile is
:func:`cre.kube.runtime.converge` around :func:`cre.core.measure.goodput.reconcile_goodput`: the
Observation is built from the caches (the Job; the profile compiled once per resourceVersion by
:func:`cre.core.measure.goodputlog.compile_goodput_profile`, its error naming the profile and key)
plus a live, label-scoped list of the Job's pods (CRE's workers carry ``cre.dev/job=<job>``,
launchers ``cre.dev/launcher=<job>``). A log read the core asks for is streamed through
:func:`cre.kube.pods.stream_pod_log` line by line into
:class:`cre.core.measure.logwindow.WindowFilter` and the profile's parser, so memory holds events,
not the log. The status goes through ``/status`` guarded by its resourceVersion (a conflict re-reads
live and re-runs the core); events follow the write; gauges follow the status.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Final

import attrs
from prometheus_client import CollectorRegistry

from cre.api.goodput import GoodputMeasurement
from cre.controller.job.shell import goodput_from_dict
from cre.controller.measure.goodputmetrics import GoodputMetrics, goodput_metrics_for
from cre.controller.measure.logread import LogMeasurementController, Wiring
from cre.core.common.plan import Ask, ConfirmAbsent
from cre.core.job.goodput import goodput_name
from cre.core.measure.goodput import (
    GoodputObservation,
    GoodputReadRequest,
    GoodputReadResult,
    is_complete,
    reconcile_goodput,
)
from cre.core.measure.goodputlog import GoodputParser, LogEvent, compile_goodput_profile
from cre.kube.client import GOODPUTMEASUREMENTS, KubeClient
from cre.kube.factory import InformerFactory
from cre.kube.runtime import Again, Result
from cre.kube.runtime.base import utcnow

log = logging.getLogger(__name__)

CONTROLLER: Final = "goodputmeasurement"
COMPONENT: Final = "cre.dev/goodput-controller"

_WIRING: Final = Wiring(resource=GOODPUTMEASUREMENTS, decode=goodput_from_dict,
                        measurement_name=goodput_name, controller=CONTROLLER,
                        component=COMPONENT, cache_prefix="goodput",
                        what="goodput measurement")


class GoodputController(LogMeasurementController[GoodputMeasurement, GoodputObservation,
                                                 GoodputParser]):
    """Reconciles GoodputMeasurements in ``namespaces`` (``None``: all namespaces)."""

    metrics: GoodputMetrics

    def __init__(self, client: KubeClient, *, namespaces: Sequence[str] | None = None,
                 informers: InformerFactory | None = None, max_concurrent_reconciles: int = 2,
                 log_timeout: float = 120.0,
                 clock: Callable[[], datetime] = utcnow,
                 registry: CollectorRegistry | None = None, time_scale: float = 1.0) -> None:
        super().__init__(client, wiring=_WIRING, compile_profile=compile_goodput_profile,
                         metrics=goodput_metrics_for(registry), registry=registry,
                         namespaces=namespaces, informers=informers,
                         workers=max_concurrent_reconciles, log_timeout=log_timeout,
                         clock=clock, time_scale=time_scale)

    def series(self, name: str, job: str) -> str:
        return name

    def without_reads(self, obs: GoodputObservation) -> GoodputObservation:
        return attrs.evolve(obs, read=None)

    async def observe(self, gm: GoodputMeasurement) -> GoodputObservation:
        seen = await self.observed(gm, missing=lambda name: None,
                                   caller=f"{__name__}.observe")
        return GoodputObservation(job=seen.job, parser=seen.profile, profile_error=seen.error,
                                  profile_missing=seen.profile is None and seen.error is None,
                                  pods=seen.pods)

    async def read(self, request: GoodputReadRequest, parser: GoodputParser
                   ) -> GoodputReadResult:
        """Stream the log ``request`` asks for through the window filter and the parser."""
        events: list[LogEvent] = []
        lines = 0

        def feed(line: str) -> None:
            nonlocal lines
            lines += 1
            event = parser.parse(line)
            if event is not None:
                events.append(event)

        streamed = await self.stream(request, feed)
        self.metrics.parsed_lines.inc(lines)
        window = streamed.window
        return GoodputReadResult(request=request, events=tuple(events), lines=lines,
                                 last_stamp=window.last_stamp,
                                 lines_at_last=window.lines_at_last,
                                 truncated=streamed.truncated, error=streamed.error)

    async def _step(self, gm: GoodputMeasurement, obs: GoodputObservation
                    ) -> Again[GoodputMeasurement, GoodputObservation] | Result:
        plan = reconcile_goodput(gm, obs, self._clock())
        if plan.asks:
            return Again(gm, await self._answer(gm, obs, plan.asks), "asks answered")
        answer = await self.write(gm, obs, plan)
        if answer is not None:
            return answer
        status = plan.status or gm.status
        terminal = is_complete(attrs.evolve(gm, status=status))
        # The gauges follow the status once a sample was taken; a completing write leaves
        # the ratio only.
        if (plan.status is not None and terminal) or (
                not terminal and status.last_sample_time is not None):
            self.metrics.publish(gm.metadata.namespace or "", gm.metadata.name or "", status,
                                 terminal=terminal)
        return self.requeue(plan.requeue_after)

    async def _answer(self, gm: GoodputMeasurement, obs: GoodputObservation,
                      asks: Sequence[Ask]) -> GoodputObservation:
        """``obs`` with ``asks`` answered: the log read and the live Job read."""
        for ask in asks:
            if isinstance(ask, GoodputReadRequest):
                assert obs.parser is not None
                obs = attrs.evolve(obs, read=await self.read(ask, obs.parser))
            elif isinstance(ask, ConfirmAbsent):
                obs = attrs.evolve(obs, job=await self.live_job(gm))
        return attrs.evolve(obs, feedback=obs.feedback.answering(*asks))
