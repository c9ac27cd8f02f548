"""The BandwidthMeasurement controller: the shell of the pure measurement core.

It watches BandwidthMeasurements, the CRE Jobs they measure (a Job change enqueues
``<job>-bandwidth``) and LogProfiles (a profile change enqueues the measurements naming it). One
reconcile is :func:`cre.kube.runtime.converge` around the pure core: the Observation is built
from the caches (the Job, the compiled profile: compiled once per resourceVersion, its error
naming the profile and key) plus a live, label-scoped list of the Job's pods (the cache could
lag behind a pod that just started; CRE's launcher pods carry ``cre.dev/launcher=<job>``, its
workers ``cre.dev/job=<job>``). When the core asks for a log read, the log is streamed through
:func:`cre.kube.pods.stream_pod_log` line by line into :class:`cre.core.measurement.WindowFilter`
and the nccl-tests parser, so memory does not grow with the log; when it asks whether the Job is
gone, the Job is read live. A Multi profile's final read (``nccl-loopback``) asks for every
node's pod at once; they are read one after the other in the same pass. The status is written
through ``/status`` guarded by its resourceVersion (a conflict re-reads live and re-runs the
core); events follow the write; gauges are published after a provisional sample and removed
when the measurement completes or is deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import attrs
from prometheus_client import CollectorRegistry

from cre.api.converter import structure, to_dict
from cre.api.job import Job
from cre.api.labels import API_VERSION, GROUP, JOB, LAUNCHER, VERSION
from cre.api.measurement import BandwidthMeasurement, LogProfile
from cre.controller.jobshell import BANDWIDTHMEASUREMENTS, JOBS, bandwidth_from_dict, job_from_dict
from cre.controller.measurementmetrics import measurement_metrics_for
from cre.core.jobmeasure import bandwidth_name, job_name_of
from cre.core.logprofile import CompiledProfile, ProfileError, compile_profile
from cre.core.measurement import (
    MeasurementObservation,
    MeasurementPlan,
    ReadRequest,
    ReadResult,
    WindowFilter,
    reconcile_measurement,
)
from cre.core.ncclparse import NcclLineParser, SizeAggregate, compile_row_pattern
from cre.kube.client import ApiError, KubeClient, Resource
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

CONTROLLER: Final = "bandwidthmeasurement"
COMPONENT: Final = "cre.dev/measurement-controller"
LOGPROFILES: Final = Resource(GROUP, VERSION, "logprofiles", namespaced=False, kind="LogProfile")
MAX_PASSES: Final = 6
LAUNCHER_JOB: Final = "launcher"


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _involved(bm: BandwidthMeasurement) -> dict[str, Any]:
    meta = bm.metadata
    return {"apiVersion": API_VERSION, "kind": "BandwidthMeasurement", "name": meta.name,
            "namespace": meta.namespace, "uid": meta.uid}


def _profile_from_dict(raw: dict[str, Any]) -> LogProfile:
    return structure(raw, LogProfile)


class MeasurementController:
    """Reconciles BandwidthMeasurements in ``namespaces`` (``None``: all namespaces)."""

    def __init__(self, client: KubeClient, *, namespaces: Sequence[str] | None = None,
                 max_concurrent_reconciles: int = 2, log_timeout: float = 120.0,
                 clock: Callable[[], datetime] = _utcnow,
                 registry: CollectorRegistry | None = None) -> None:
        self.client = client
        self.log_timeout = log_timeout
        self._clock = clock
        kube = metrics_for(registry)
        self.metrics = measurement_metrics_for(registry)
        ns = list(namespaces) if namespaces is not None else None
        self.measurements: Informer[BandwidthMeasurement] = Informer(
            client, BANDWIDTHMEASUREMENTS, transform=bandwidth_from_dict, namespace=ns,
            name="measurement-bandwidthmeasurements", metrics=kube)
        self.jobs: Informer[Job] = Informer(client, JOBS, transform=job_from_dict, namespace=ns,
                                            name="measurement-jobs", metrics=kube)
        self.profiles: Informer[LogProfile] = Informer(
            client, LOGPROFILES, transform=_profile_from_dict, name="logprofiles", metrics=kube)
        self.recorder = EventRecorder(client, component=COMPONENT)
        self.status_echo = OwnStatusEcho()
        self._compiled: dict[str, CompiledProfile | ProfileError] = {}
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

    def _for_job(self, event: WatchEvent[Job]) -> Iterable[str]:
        job = event.obj
        return (object_key(job.metadata.namespace, bandwidth_name(job.metadata.name or "")),)

    def _for_profile(self, event: WatchEvent[LogProfile]) -> Iterable[str]:
        name = event.obj.metadata.name
        self._compiled.pop(name or "", None)
        return tuple(key_of(bm) for bm in self.measurements.store.list()
                     if bm.spec.log_profile_ref == name)

    def _clear(self, bm: BandwidthMeasurement) -> None:
        self.metrics.clear(bm.metadata.namespace or "",
                           job_name_of(bm.metadata.name or "") or bm.spec.job_ref.name)

    # --- the Reconciler -----------------------------------------------------------------------

    def _profile(self, name: str) -> tuple[CompiledProfile | None, str | None]:
        profile = self.profiles.store.get(name)
        if profile is None:
            return None, f"LogProfile {name} not found"
        held = self._compiled.get(name)
        rv = profile.metadata.resource_version or ""
        if held is None or (isinstance(held, CompiledProfile) and held.resource_version != rv):
            try:
                held = compile_profile(profile)
            except ProfileError as exc:
                held = exc
            self._compiled[name] = held
        if isinstance(held, ProfileError):
            return None, str(held)
        return held, None

    async def observe(self, bm: BandwidthMeasurement) -> MeasurementObservation:
        ns = bm.metadata.namespace or ""
        job_name = bm.spec.job_ref.name
        job = self.jobs.store.get(object_key(ns, job_name))
        profile, error = self._profile(bm.spec.log_profile_ref)
        pods: tuple[Any, ...] = ()
        if profile is not None and job is not None:
            label = LAUNCHER if profile.replicated_job == LAUNCHER_JOB else JOB
            pods = await live_list_pods(self.client, label_selector=f"{label}={job_name}",
                                        namespace=ns, caller=f"{__name__}.observe")
        return MeasurementObservation(job=job, profile=profile, profile_error=error, pods=pods)

    async def reconcile(self, key: str) -> Result:
        bm = self.measurements.store.get(key)
        if bm is None:
            ns, name = split_key(key)
            self.metrics.clear(ns or "", job_name_of(name) or name)
            return DONE
        return await converge(self._step, bm, await self.observe(bm), what=f"measurement {key}",
                              max_passes=MAX_PASSES)

    async def read(self, request: ReadRequest) -> ReadResult:
        """Stream the log ``request`` asks for through the window filter and the parser."""
        window = WindowFilter(anchor=request.anchor, skip_lines=request.skip_lines)
        parser = NcclLineParser(compile_row_pattern(request.regex))
        agg = SizeAggregate()

        def on_line(line: str) -> None:
            if window.admit(line):
                row = parser.feed(line)
                if row is not None:
                    agg.add(row)

        _, truncated, error = await stream_pod_log(
            self.client, namespace=request.namespace, pod=request.pod,
            container=request.container, on_line=on_line, since_time=request.since_time,
            limit_bytes=request.limit_bytes, timeout=self.log_timeout)
        self.metrics.parsed_lines.inc(parser.lines)
        return ReadResult(request=request, results=agg.results(),
                          transports=tuple(sorted(parser.transports)), rows=parser.rows,
                          lines=parser.lines, last_stamp=window.last_stamp,
                          lines_at_last=window.lines_at_last, truncated=truncated, error=error)

    async def _step(self, bm: BandwidthMeasurement, obs: MeasurementObservation
                    ) -> Again[BandwidthMeasurement, MeasurementObservation] | Result:
        plan = reconcile_measurement(bm, obs, self._clock())
        if plan.read is not None:
            return Again(bm, attrs.evolve(obs, read=await self.read(plan.read)), "log read")
        if plan.reads:
            # One pod after the other: each read streams, so memory stays one line deep.
            answers = tuple([await self.read(request) for request in plan.reads])
            return Again(bm, attrs.evolve(obs, node_reads=obs.node_reads + answers),
                         "per-node log reads")
        if plan.confirm_job_absence:
            job = await self._live_job(bm)
            return Again(bm, attrs.evolve(obs, job=job, job_absence_confirmed=job is None),
                         "live job read")
        return await self._apply(bm, obs, plan)

    async def _live_job(self, bm: BandwidthMeasurement) -> Job | None:
        try:
            raw = await self.client.get(JOBS, bm.spec.job_ref.name,
                                        namespace=bm.metadata.namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return job_from_dict(raw)

    async def _apply(self, bm: BandwidthMeasurement, obs: MeasurementObservation,
                     plan: MeasurementPlan) -> Again[BandwidthMeasurement,
                                                     MeasurementObservation] | Result:
        ns, name = bm.metadata.namespace or "", bm.metadata.name or ""
        if plan.status is not None:
            body = to_dict(attrs.evolve(bm, status=plan.status))
            body["metadata"]["resourceVersion"] = plan.resource_version
            try:
                await self.client.replace(BANDWIDTHMEASUREMENTS, body, subresource="status")
            except ApiError as exc:
                if exc.not_found:
                    self._clear(bm)
                    return DONE
                if not exc.conflict:
                    raise
                raw = await self.client.get(BANDWIDTHMEASUREMENTS, name, namespace=ns)
                return Again(bandwidth_from_dict(raw), attrs.evolve(obs, read=None, node_reads=()),
                             "status write conflicted")
            self.status_echo.remember(key_of(bm), plan.status)
        for event in plan.events:
            await self.recorder.emit(involved=_involved(bm), type_=event.type,
                                     reason=event.reason, message=event.message)
        job = job_name_of(name) or bm.spec.job_ref.name
        if plan.clear_gauges:
            self.metrics.clear(ns, job)
        elif plan.gauges:
            self.metrics.publish(ns, job, plan.gauges)
        return Result(requeue_after=plan.requeue_after)
