"""The GoodputMeasurement controller: the shell of the pure goodput core.

It watches GoodputMeasurements, the CRE Jobs they measure (a Job change enqueues
``<job>-goodput``: a restart, a terminal condition) and LogProfiles (a profile change enqueues
the measurements naming it). One reconcile is :func:`cre.kube.runtime.converge` around
:func:`cre.core.goodputmeasure.reconcile_goodput`: the Observation is built from the caches (the
Job; the profile compiled once per resourceVersion by
:func:`cre.core.goodputlog.compile_goodput_profile`, its error naming the profile and key) plus a
live, label-scoped list of the Job's pods (CRE's workers carry ``cre.dev/job=<job>``, launchers
``cre.dev/launcher=<job>``). A log read the core asks for is streamed through
:func:`cre.kube.pods.stream_pod_log` line by line into :class:`cre.core.measurement.WindowFilter`
and the profile's parser, so memory holds events, not the log. The status goes through
``/status`` guarded by its resourceVersion (a conflict re-reads live and re-runs the core);
events follow the write; gauges follow the status.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import attrs
from prometheus_client import CollectorRegistry

from cre.api.converter import structure, to_dict
from cre.api.goodput import GoodputMeasurement
from cre.api.job import Job
from cre.api.labels import API_VERSION, JOB, LAUNCHER
from cre.api.measurement import LogProfile
from cre.controller.goodputmetrics import goodput_metrics_for
from cre.controller.jobshell import GOODPUTMEASUREMENTS, JOBS, goodput_from_dict, job_from_dict
from cre.controller.measurement import LOGPROFILES
from cre.core.goodputlog import GoodputParser, LogEvent, compile_goodput_profile
from cre.core.goodputmeasure import (
    GoodputObservation,
    GoodputPlan,
    GoodputReadRequest,
    GoodputReadResult,
    reconcile_goodput,
)
from cre.core.jobgoodput import goodput_name
from cre.core.logprofile import ProfileError
from cre.core.logwindow import WindowFilter
from cre.kube.client import ApiError, KubeClient
from cre.kube.events import EventRecorder
from cre.kube.informer import Informer
from cre.kube.metrics import metrics_for
from cre.kube.pods import live_list_pods, stream_pod_log
from cre.kube.runtime import (
    DONE,
    Again,
    Controller,
    OwnStatusEcho,
    Result,
    WatchEvent,
    converge,
    enqueue_mapped,
    key_of,
    object_key,
    split_key,
)
from cre.kube.workqueue import WorkQueue

log = logging.getLogger(__name__)

CONTROLLER: Final = "goodputmeasurement"
COMPONENT: Final = "cre.dev/goodput-controller"
MAX_PASSES: Final = 6


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _profile_from_dict(raw: dict[str, Any]) -> LogProfile:
    return structure(raw, LogProfile)


def _involved(gm: GoodputMeasurement) -> dict[str, Any]:
    meta = gm.metadata
    return {"apiVersion": API_VERSION, "kind": "GoodputMeasurement", "name": meta.name,
            "namespace": meta.namespace, "uid": meta.uid}


class GoodputController:
    """Reconciles GoodputMeasurements in ``namespaces`` (``None``: all namespaces)."""

    def __init__(self, client: KubeClient, *, namespaces: Sequence[str] | None = None,
                 max_concurrent_reconciles: int = 2, log_timeout: float = 120.0,
                 clock: Callable[[], datetime] = _utcnow,
                 registry: CollectorRegistry | None = None, time_scale: float = 1.0) -> None:
        if time_scale <= 0:
            raise ValueError(f"GoodputController: time_scale must be positive, got {time_scale}")
        self.client = client
        # Seconds of ``clock`` per wall second (a simulated clock runs faster): requeues are
        # in clock seconds, the workqueue waits in wall seconds.
        self.time_scale = time_scale
        self.log_timeout = log_timeout
        self._clock = clock
        kube = metrics_for(registry)
        self.metrics = goodput_metrics_for(registry)
        ns = list(namespaces) if namespaces is not None else None
        self.measurements: Informer[GoodputMeasurement] = Informer(
            client, GOODPUTMEASUREMENTS, transform=goodput_from_dict, namespace=ns,
            name="goodput-goodputmeasurements", metrics=kube)
        self.jobs: Informer[Job] = Informer(client, JOBS, transform=job_from_dict, namespace=ns,
                                            name="goodput-jobs", metrics=kube)
        self.profiles: Informer[LogProfile] = Informer(
            client, LOGPROFILES, transform=_profile_from_dict, name="goodput-logprofiles",
            metrics=kube)
        self.recorder = EventRecorder(client, component=COMPONENT)
        self.status_echo = OwnStatusEcho()
        self._compiled: dict[str, GoodputParser | ProfileError] = {}
        self.controller = Controller(CONTROLLER, self, workers=max_concurrent_reconciles,
                                     metrics=kube)
        self.controller.watch_own(self.measurements, self.status_echo, on_deleted=self._clear)
        self.controller.watch(self.jobs, enqueue_mapped(self._for_job))
        self.controller.watch(self.profiles, enqueue_mapped(self._for_profile))

    # --- wiring -------------------------------------------------------------------------------

    @property
    def queue(self) -> WorkQueue[str]:
        return self.controller.queue

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        return (self.measurements, self.jobs, self.profiles)

    def has_synced(self) -> bool:
        return self.controller.has_synced()

    async def wait_synced(self) -> None:
        await self.controller.wait_synced()

    async def run(self) -> None:
        await self.controller.run()

    def stop(self) -> None:
        self.controller.stop()

    def _clear(self, gm: GoodputMeasurement) -> None:
        self.metrics.clear(gm.metadata.namespace or "", gm.metadata.name or "")

    def _for_job(self, event: WatchEvent[Job]) -> Iterable[str]:
        job = event.obj
        return (object_key(job.metadata.namespace, goodput_name(job.metadata.name or "")),)

    def _for_profile(self, event: WatchEvent[LogProfile]) -> Iterable[str]:
        name = event.obj.metadata.name
        self._compiled.pop(name or "", None)
        return tuple(key_of(gm) for gm in self.measurements.store.list()
                     if gm.spec.log_profile_ref == name)

    # --- the Reconciler -----------------------------------------------------------------------

    def _parser(self, name: str) -> tuple[GoodputParser | None, str | None]:
        profile = self.profiles.store.get(name)
        if profile is None:
            return None, None
        held = self._compiled.get(name)
        rv = profile.metadata.resource_version or ""
        if held is None or (isinstance(held, GoodputParser) and held.resource_version != rv):
            try:
                held = compile_goodput_profile(profile)
            except ProfileError as exc:
                held = exc
            self._compiled[name] = held
        if isinstance(held, ProfileError):
            return None, str(held)
        return held, None

    async def observe(self, gm: GoodputMeasurement) -> GoodputObservation:
        ns = gm.metadata.namespace or ""
        job_name = gm.spec.job_ref.name
        job = self.jobs.store.get(object_key(ns, job_name))
        parser, error = self._parser(gm.spec.log_profile_ref)
        pods: tuple[Any, ...] = ()
        if parser is not None and job is not None:
            label = LAUNCHER if parser.replicated_job == "launcher" else JOB
            pods = await live_list_pods(self.client, label_selector=f"{label}={job_name}",
                                        namespace=ns, caller=f"{__name__}.observe")
        return GoodputObservation(job=job, parser=parser, profile_error=error,
                                  profile_missing=parser is None and error is None, pods=pods)

    async def reconcile(self, key: str) -> Result:
        gm = self.measurements.store.get(key)
        if gm is None:
            ns, name = split_key(key)
            self.metrics.clear(ns or "", name)
            return DONE
        return await converge(self._step, gm, await self.observe(gm),
                              what=f"goodput measurement {key}", max_passes=MAX_PASSES)

    async def read(self, request: GoodputReadRequest, parser: GoodputParser
                   ) -> GoodputReadResult:
        """Stream the log ``request`` asks for through the window filter and the parser."""
        window = WindowFilter(anchor=request.anchor, skip_lines=request.skip_lines)
        events: list[LogEvent] = []
        lines = 0

        def on_line(line: str) -> None:
            nonlocal lines
            if window.admit(line):
                lines += 1
                event = parser.parse(line)
                if event is not None:
                    events.append(event)

        _, truncated, error = await stream_pod_log(
            self.client, namespace=request.namespace, pod=request.pod,
            container=request.container, on_line=on_line, since_time=request.since_time,
            limit_bytes=request.limit_bytes, timeout=self.log_timeout)
        self.metrics.parsed_lines.inc(lines)
        return GoodputReadResult(request=request, events=tuple(events), lines=lines,
                                 last_stamp=window.last_stamp,
                                 lines_at_last=window.lines_at_last, truncated=truncated,
                                 error=error)

    async def _step(self, gm: GoodputMeasurement, obs: GoodputObservation
                    ) -> Again[GoodputMeasurement, GoodputObservation] | Result:
        plan = reconcile_goodput(gm, obs, self._clock())
        if plan.read is not None:
            assert obs.parser is not None
            result = await self.read(plan.read, obs.parser)
            return Again(gm, attrs.evolve(obs, read=result), "log read")
        if plan.confirm_job_absence:
            job = await self._live_job(gm)
            return Again(gm, attrs.evolve(obs, job=job, job_absence_confirmed=job is None),
                         "live job read")
        return await self._apply(gm, obs, plan)

    async def _live_job(self, gm: GoodputMeasurement) -> Job | None:
        try:
            raw = await self.client.get(JOBS, gm.spec.job_ref.name,
                                        namespace=gm.metadata.namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return job_from_dict(raw)

    async def _apply(self, gm: GoodputMeasurement, obs: GoodputObservation, plan: GoodputPlan
                     ) -> Again[GoodputMeasurement, GoodputObservation] | Result:
        ns, name = gm.metadata.namespace or "", gm.metadata.name or ""
        if plan.status is not None:
            body = to_dict(attrs.evolve(gm, status=plan.status))
            body["metadata"]["resourceVersion"] = plan.resource_version
            try:
                await self.client.replace(GOODPUTMEASUREMENTS, body, subresource="status")
            except ApiError as exc:
                if exc.not_found:
                    self.metrics.clear(ns, name)
                    return DONE
                if not exc.conflict:
                    raise
                raw = await self.client.get(GOODPUTMEASUREMENTS, name, namespace=ns)
                return Again(goodput_from_dict(raw), attrs.evolve(obs, read=None),
                             "status write conflicted")
            self.status_echo.remember(key_of(gm), plan.status)
        for event in plan.events:
            await self.recorder.emit(involved=_involved(gm), type_=event.type,
                                     reason=event.reason, message=event.message)
        if plan.publish:
            self.metrics.publish(ns, name, plan.status or gm.status, terminal=plan.terminal)
        after = plan.requeue_after
        return Result(requeue_after=after / self.time_scale if after is not None else None)
