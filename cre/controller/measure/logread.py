"""The shell shared by the controllers of log-reading measurements (Bandwidth, Goodput).

A BandwidthMeasurement and a GoodputMeasurement both follow one CRE Job and read one of its
pods' logs through a LogProfile, so their controllers are the same around different cores:

* the caches: the measurements, the CRE Jobs (a Job change enqueues the measurement the Job
  names ``<job><suffix>``) and the cluster-scoped LogProfiles (a change enqueues the
  measurements naming the profile and drops its compiled form);
* the profile compiled once per resourceVersion (:meth:`LogMeasurementController.profile`; a
  profile that does not compile keeps its error, naming profile and key, until it changes);
* the pods of the Job, listed live and label-scoped (CRE's launchers carry
  ``cre.dev/launcher=<job>``, its workers ``cre.dev/job=<job>``): the cache could lag behind a
  pod that just started;
* a log read streamed line by line through :class:`cre.core.measure.logwindow.WindowFilter` into the
  caller's parser (:meth:`LogMeasurementController.stream`), so memory does not grow with the
  log; the Job read live when the core asks whether it is gone;
* the plan applied by the one :class:`cre.kube.executor.PlanExecutor` (the status through
  ``/status`` guarded by the plan's resourceVersion, then the events, queued to a background
  sink while the controller runs, as the Job controller's, so a worker never waits on an event
  write; a conflict reads the measurement live and runs the core again without its reads, which
  resumed at the old copy's anchor; a gone measurement drops its series).

A subclass says how to observe, plan and publish (:class:`cre.controller.measure.bandwidth`,
:class:`cre.controller.measure.goodput`).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Final, Generic, Protocol, TypeVar

import attrs
from prometheus_client import CollectorRegistry, Counter

from cre.api.converter import structure
from cre.api.job import Job
from cre.api.labels import JOB, LAUNCHER
from cre.api.measurement import LogProfile
from cre.api.meta import ObjectMeta
from cre.controller.job.shell import involved_object, job_from_dict
from cre.core.common.observed import PodView
from cre.core.common.plan import Plan, StreamLog
from cre.core.measure.logprofile import ProfileError
from cre.core.measure.logwindow import WindowFilter
from cre.kube.client import JOBS, LOGPROFILES, ApiError, KubeClient, Resource
from cre.kube.executor import OutcomeKind, PlanExecutor, WithFeedback, answer, remember_applied
from cre.kube.factory import InformerFactory
from cre.kube.informer import Informer
from cre.kube.pods import live_list_pods, stream_pod_log
from cre.kube.runtime import (
    DONE,
    Again,
    CoreReconciler,
    Result,
    WatchEvent,
    converge,
    enqueue_mapped,
    key_of,
    object_key,
    split_key,
)

#: The replicated job whose pods carry ``cre.dev/launcher=<job>`` (the others: ``cre.dev/job``).
LAUNCHER_JOB: Final = "launcher"


def profile_from_dict(raw: dict[str, Any]) -> LogProfile:
    return structure(raw, LogProfile)


class _JobRef(Protocol):
    @property
    def name(self) -> str: ...


class _Spec(Protocol):
    @property
    def job_ref(self) -> _JobRef: ...

    @property
    def log_profile_ref(self) -> str: ...


class Measurement(Protocol):
    """What the shell reads of a measurement."""

    @property
    def metadata(self) -> ObjectMeta: ...

    @property
    def spec(self) -> _Spec: ...


class Compiled(Protocol):
    """What the shell reads of a compiled profile."""

    @property
    def resource_version(self) -> str: ...

    @property
    def replicated_job(self) -> str: ...


class Series(Protocol):
    """The measurement's collectors the shell touches."""

    parsed_lines: Counter

    def clear(self, namespace: str, name: str, /) -> None: ...


M = TypeVar("M", bound=Measurement)
B = TypeVar("B", bound=WithFeedback)
C = TypeVar("C", bound=Compiled)


@attrs.frozen(kw_only=True)
class Streamed:
    """How a streamed read ended: the window (last timestamp, lines at it), whether the read
    stopped at its byte limit, and the error that ended it (``None``: the log was read)."""

    window: WindowFilter
    truncated: bool
    error: str | None


@attrs.frozen(kw_only=True)
class Observed(Generic[C]):
    """What every measurement core observes: the Job (cache), the compiled profile or its
    error, and the Job's pods (live; empty without a Job or a profile)."""

    job: Job | None
    profile: C | None
    error: str | None
    pods: tuple[PodView, ...]


@attrs.frozen(kw_only=True)
class Wiring(Generic[M]):
    """What tells one measurement kind's shell from another's."""

    resource: Resource  # the measurement kind
    decode: Callable[[dict[str, Any]], M]
    measurement_name: Callable[[str], str]  # a Job's name -> its measurement's name
    controller: str  # the controller's name
    component: str  # the events' source
    cache_prefix: str  # the measurement cache is ``<prefix>-<plural>``
    what: str  # names a measurement in a reconcile error


class LogMeasurementController(CoreReconciler[M, B, Any], Generic[M, B, C]):
    """The shell of one measurement kind ``M`` whose core reads observations ``B`` and
    profiles compiled to ``C`` (module doc)."""

    metrics: Series

    def __init__(self, client: KubeClient, *, wiring: Wiring[M],
                 compile_profile: Callable[[LogProfile], C], metrics: Series,
                 registry: CollectorRegistry | None, namespaces: Sequence[str] | None,
                 informers: InformerFactory | None, workers: int,
                 log_timeout: float, clock: Callable[[], datetime],
                 time_scale: float) -> None:
        super().__init__(client, name=wiring.controller, component=wiring.component,
                         workers=workers, clock=clock, informers=informers,
                         namespaces=namespaces, registry=registry, time_scale=time_scale)
        self.log_timeout = log_timeout
        self._wiring = wiring
        self._compile = compile_profile
        self.metrics = metrics
        self.measurements: Informer[M] = self.cache(
            wiring.resource, transform=wiring.decode,
            name=f"{wiring.cache_prefix}-{wiring.resource.plural}")
        self.jobs: Informer[Job] = self.cache(JOBS, transform=job_from_dict, name="cre-jobs")
        self.profiles: Informer[LogProfile] = self.cache(
            LOGPROFILES, transform=profile_from_dict, name="logprofiles")
        self.executor = PlanExecutor(client, self.recorder, owner=wiring.resource, clock=clock,
                                     involved=lambda m: involved_object(wiring.resource.kind,
                                                                        m.metadata))
        self._compiled: dict[str, C | ProfileError] = {}
        (self.managed().for_(self.measurements, on_deleted=self._clear)
            .watches(self.jobs, enqueue_mapped(self._for_job))
            .watches(self.profiles, enqueue_mapped(self._for_profile)))

    # --- wiring -------------------------------------------------------------------------------

    def _for_job(self, event: WatchEvent[Job]) -> Iterable[str]:
        job = event.obj
        return (object_key(job.metadata.namespace,
                           self._wiring.measurement_name(job.metadata.name or "")),)

    def _for_profile(self, event: WatchEvent[LogProfile]) -> Iterable[str]:
        name = event.obj.metadata.name
        self._compiled.pop(name or "", None)
        return tuple(key_of(m) for m in self.measurements.store.list()
                     if m.spec.log_profile_ref == name)

    def _clear(self, m: M) -> None:
        self.metrics.clear(m.metadata.namespace or "",
                           self.series(m.metadata.name or "", m.spec.job_ref.name))

    # --- what a measurement kind says ---------------------------------------------------------

    @abc.abstractmethod
    def series(self, name: str, job: str) -> str:
        """The name the gauges of measurement ``name`` (of Job ``job``) are labelled with."""

    @abc.abstractmethod
    async def observe(self, m: M) -> B:
        """The observation a reconcile starts from."""

    @abc.abstractmethod
    def without_reads(self, obs: B) -> B:
        """``obs`` without the log reads answered (they were for an older copy)."""

    @abc.abstractmethod
    async def _step(self, m: M, obs: B) -> Again[M, B] | Result:
        """One pass of the core and the shell's answer."""

    # --- the Reconciler -----------------------------------------------------------------------

    def profile(self, name: str) -> tuple[C | None, str | None]:
        """The LogProfile ``name`` compiled, or the error naming profile and key;
        ``(None, None)``: no such profile."""
        profile = self.profiles.store.get(name)
        if profile is None:
            return None, None
        held = self._compiled.get(name)
        rv = profile.metadata.resource_version or ""
        if held is None or (not isinstance(held, ProfileError) and held.resource_version != rv):
            try:
                held = self._compile(profile)
            except ProfileError as exc:
                held = exc
            self._compiled[name] = held
        if isinstance(held, ProfileError):
            return None, str(held)
        return held, None

    async def observed(self, m: M, *, missing: Callable[[str], str | None],
                       caller: str) -> Observed[C]:
        """The Job, the profile (``missing(name)`` is the error of a profile not found) and,
        with both, the Job's pods listed live (``caller`` names the list for the pod scope)."""
        ns = m.metadata.namespace or ""
        job_name = m.spec.job_ref.name
        job = self.jobs.store.get(object_key(ns, job_name))
        ref = m.spec.log_profile_ref
        profile, error = self.profile(ref)
        if profile is None and error is None:
            error = missing(ref)
        pods: tuple[PodView, ...] = ()
        if profile is not None and job is not None:
            label = LAUNCHER if profile.replicated_job == LAUNCHER_JOB else JOB
            pods = await live_list_pods(self.client, label_selector=f"{label}={job_name}",
                                        namespace=ns, caller=caller)
        return Observed(job=job, profile=profile, error=error, pods=pods)

    async def reconcile(self, key: str) -> Result:
        m = self.status_echo.latest(key, self.measurements.store.get(key))
        if m is None:
            ns, name = split_key(key)
            self.metrics.clear(ns or "", self.series(name, name))
            return DONE
        return await converge(self._step, m, await self.observe(m),
                              what=f"{self._wiring.what} {key}")

    async def stream(self, request: StreamLog, feed: Callable[[str], None]) -> Streamed:
        """Stream the log ``request`` asks for; every line the window admits goes to ``feed``."""
        window = WindowFilter(anchor=request.anchor, skip_lines=request.skip_lines)

        def on_line(line: str) -> None:
            if window.admit(line):
                feed(line)

        _, truncated, error = await stream_pod_log(
            self.client, namespace=request.namespace, pod=request.pod,
            container=request.container, on_line=on_line, since_time=request.since_time,
            limit_bytes=request.limit_bytes, timeout=self.log_timeout)
        return Streamed(window=window, truncated=truncated, error=error)

    async def live_job(self, m: M) -> Job | None:
        """The measured Job as served now (``None``: gone)."""
        try:
            raw = await self.client.get(JOBS, m.spec.job_ref.name,
                                        namespace=m.metadata.namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return job_from_dict(raw)

    async def write(self, m: M, obs: B, plan: Plan[Any]) -> Again[M, B] | Result | None:
        """Apply ``plan`` (its status, then its events); ``None`` once both are done, else the
        step's answer: ``DONE`` (the measurement is gone) or a fresh copy to plan again."""
        outcome = await self.executor.apply(m, plan)
        if outcome.kind == OutcomeKind.GONE:
            self._clear(m)
        after = answer(m, obs, outcome, decode=self._wiring.decode, stale=self.without_reads)
        if after is None:
            remember_applied(self.status_echo, m, plan, outcome)
        return after
