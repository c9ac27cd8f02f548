"""Scripted workload transitions for driving the Job controller without Trainer or a kubelet.

Tests, golden cases and the capture benchmark need the cluster side of a run: a TrainJob that
turns Failed or Complete, launcher and worker pods that start, exit with a code and a log, get a
``DisruptionTarget`` condition, and are deleted (JobSet deletes a failed launcher about half a
second after it exits). :class:`WorkloadScript` performs exactly those writes through the API,
as the cluster simulator would, and nothing else: no scheduling, no JobSet, no garbage
collection beyond what the API server does. Pod names follow Trainer/JobSet
(``<trainjob>-<replicatedJob>-<jobIdx>-<podIdx>-<suffix>``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Protocol

import anyio
import attrs

from cre.api.labels import (
    API_VERSION,
    GPU_PRESENT,
    GROUP_NODES,
    JOB,
    JOBSET_NAME,
    LAUNCHER,
    REPLICATED_JOB_NAME,
)
from cre.api.meta import format_time
from cre.controller.job.controller import JobController
from cre.core.common.plan import DEFAULT_SETTINGS, JobSettings
from cre.core.job.workload import workload_name
from cre.kube.client import EVENTS, JOBS, NAMESPACES, NODES, PODS, TRAINJOBS, ApiError, KubeClient

AppendLog = Callable[[str, str, str, str], None]

IMAGE: Final = "ghcr.io/cre/stub:1"


def _utcnow() -> datetime:
    return datetime.now(UTC)


class WorkloadScript:
    """Writes the pod and TrainJob transitions of one Job's workload in ``namespace``."""

    def __init__(self, client: KubeClient, *, namespace: str, append_log: AppendLog,
                 clock: Callable[[], datetime] = _utcnow) -> None:
        self.client = client
        self.namespace = namespace
        self.append_log = append_log
        self._clock = clock

    async def create_pod(self, name: str, *, job: str, launcher: bool, node: str,
                         container: str = "node") -> dict[str, Any]:
        """A pod of ``job``'s workload, bound to ``node``, with one running container."""
        labels = {JOBSET_NAME: workload_name(job),
                  REPLICATED_JOB_NAME: "launcher" if launcher else "node"}
        labels[LAUNCHER if launcher else JOB] = job
        body = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels},
            "spec": {"nodeName": node, "restartPolicy": "Never",
                     "containers": [{"name": container, "image": IMAGE}]},
        }
        await self.client.create(PODS, body, namespace=self.namespace)
        return await self._status(name, lambda pod: {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": container, "image": IMAGE, "ready": True,
                                   "restartCount": 0, "imageID": "",
                                   "state": {"running": {"startedAt": self._now()}}}],
        })

    async def unschedulable_pod(self, name: str, *, job: str, message: str,
                                container: str = "node") -> dict[str, Any]:
        """A worker pod of ``job``'s workload the scheduler cannot place: Pending, not bound,
        ``PodScheduled=False/Unschedulable`` with ``message`` (as kube-scheduler, and the
        simulator's scheduler, report it)."""
        labels = {JOBSET_NAME: workload_name(job), REPLICATED_JOB_NAME: "node", JOB: job}
        body = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels},
            "spec": {"restartPolicy": "Never", "containers": [{"name": container,
                                                                 "image": IMAGE}]},
        }
        await self.client.create(PODS, body, namespace=self.namespace)
        return await self._status(name, lambda pod: {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False",
                            "reason": "Unschedulable", "message": message,
                            "lastTransitionTime": self._now()}],
        })

    async def workload_event(self, job: str, *, reason: str, message: str,
                             type_: str = "Warning") -> None:
        """An Event about ``job``'s TrainJob, as Trainer writes one (a missing runtime is
        reported only as ``TrainJobResourcesCreationFailed``)."""
        tj = await self.client.get(TRAINJOBS, workload_name(job), namespace=self.namespace)
        now = self._now()
        await self.client.create(EVENTS, {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{workload_name(job)}.{reason.lower()}",
                         "namespace": self.namespace},
            "involvedObject": {"apiVersion": tj["apiVersion"], "kind": "TrainJob",
                               "name": tj["metadata"]["name"], "namespace": self.namespace,
                               "uid": tj["metadata"]["uid"]},
            "type": type_, "reason": reason, "message": message,
            "source": {"component": "trainjob-controller"}, "count": 1,
            "firstTimestamp": now, "lastTimestamp": now,
        }, namespace=self.namespace)

    async def terminate(self, name: str, *, exit_code: int, log: str, reason: str = "Error",
                        container: str = "node", finished_at: datetime | None = None
                        ) -> dict[str, Any]:
        """The container writes ``log`` and exits with ``exit_code`` at ``finished_at``."""
        if log:
            self.append_log(self.namespace, name, container, log)
        finished = format_time(finished_at or self._clock())
        phase = "Failed" if exit_code else "Succeeded"
        return await self._status(name, lambda pod: {
            **(pod.get("status") or {}),
            "phase": phase,
            "containerStatuses": [{"name": container, "image": IMAGE, "ready": False,
                                   "restartCount": 0, "imageID": "",
                                   "state": {"terminated": {
                                       "exitCode": exit_code, "reason": reason,
                                       "startedAt": finished, "finishedAt": finished}}}],
        })

    async def crashloop(self, name: str, *, exit_code: int, log: str, container: str = "node",
                        finished_at: datetime | None = None) -> dict[str, Any]:
        """The container writes ``log``, exits with ``exit_code`` and is restarted in place
        (``restartPolicy: OnFailure``): that run's log becomes the ``previous=true`` log, its
        exit moves to ``lastState.terminated`` and the container waits in
        ``CrashLoopBackOff``, as the kubelet reports it between restarts."""
        if log:
            self.append_log(self.namespace, name, container, log)
        await self.client.request(
            "POST", f"/_emulator/logs/{self.namespace}/{name}/{container}/rotate", body=b"",
            content_type="text/plain")
        finished = format_time(finished_at or self._clock())
        return await self._status(name, lambda pod: {
            **(pod.get("status") or {}),
            "phase": "Running",
            "containerStatuses": [{
                "name": container, "image": IMAGE, "ready": False, "restartCount": 1,
                "imageID": "",
                "state": {"waiting": {"reason": "CrashLoopBackOff",
                                      "message": f"back-off 10s restarting failed "
                                                 f"container={container}"}},
                "lastState": {"terminated": {"exitCode": exit_code, "reason": "Error",
                                             "startedAt": finished, "finishedAt": finished}},
            }],
        })

    async def waiting(self, name: str, *, reason: str, message: str = "",
                      container: str = "node") -> dict[str, Any]:
        """The container cannot start: it waits with ``reason`` (``ImagePullBackOff``...)."""
        return await self._status(name, lambda pod: {
            **(pod.get("status") or {}),
            "phase": "Pending",
            "containerStatuses": [{"name": container, "image": IMAGE, "ready": False,
                                   "restartCount": 0, "imageID": "",
                                   "state": {"waiting": {"reason": reason,
                                                         "message": message}}}],
        })

    async def disrupt(self, name: str, reason: str = "EvictionByEvictionAPI") -> dict[str, Any]:
        """Mark the pod as a disruption target (evicted or preempted)."""
        def status(pod: dict[str, Any]) -> dict[str, Any]:
            current = dict(pod.get("status") or {})
            conditions = [c for c in current.get("conditions") or []
                          if c.get("type") != "DisruptionTarget"]
            conditions.append({"type": "DisruptionTarget", "status": "True", "reason": reason,
                               "lastTransitionTime": self._now()})
            return {**current, "conditions": conditions}
        return await self._status(name, status)

    async def delete_pod(self, name: str) -> None:
        """Delete the pod now (as JobSet does with a failed launcher's Job)."""
        try:
            await self.client.delete(PODS, name, namespace=self.namespace,
                                     grace_period_seconds=0)
        except ApiError as exc:
            if not exc.not_found:
                raise

    async def finish_workload(self, job: str, *, failed: bool, message: str = "") -> None:
        """Set the TrainJob's terminal condition (``Failed`` or ``Complete``)."""
        name = workload_name(job)
        current = await self.client.get(TRAINJOBS, name, namespace=self.namespace)
        cond = {"type": "Failed" if failed else "Complete", "status": "True",
                "reason": "JobsFailed" if failed else "JobsCompleted", "message": message,
                "lastTransitionTime": self._now()}
        current["status"] = {**(current.get("status") or {}), "conditions": [cond]}
        await self.client.replace(TRAINJOBS, current, subresource="status")

    async def delete_workload(self, job: str) -> None:
        """Delete the TrainJob as someone other than the Job controller would."""
        await self.client.delete(TRAINJOBS, workload_name(job), namespace=self.namespace)

    async def trainjob(self, job: str) -> dict[str, Any] | None:
        """The Job's TrainJob as served, or ``None``."""
        try:
            return await self.client.get(TRAINJOBS, workload_name(job), namespace=self.namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def _now(self) -> str:
        return format_time(self._clock())

    async def _status(self, name: str, change: Callable[[dict[str, Any]], dict[str, Any]]
                      ) -> dict[str, Any]:
        for _ in range(5):
            pod = await self.client.get(PODS, name, namespace=self.namespace)
            pod["status"] = change(pod)
            try:
                return await self.client.replace(PODS, pod, subresource="status")
            except ApiError as exc:
                if not exc.conflict:
                    raise
        raise RuntimeError(f"pod {self.namespace}/{name}: status kept conflicting")


class ServesLogs(Protocol):
    """What the harness needs from an API emulator: a kubeconfig and a way to write logs."""

    @property
    def kubeconfig_path(self) -> Path: ...

    def append_log(self, namespace: str, pod: str, container: str, text: str) -> None: ...


@attrs.define
class JobHarness:
    """A running JobController, its client and the workload script, in one namespace."""

    client: KubeClient
    controller: JobController
    script: WorkloadScript
    namespace: str

    async def create_job(self, name: str, *, group_nodes: tuple[str, ...] = (),
                         timeout: str | None = None, launcher: bool = True,
                         max_restarts: int | None = None) -> dict[str, Any]:
        """Create a Job whose TrainJob runtime has a launcher (or only nodes), optionally with a
        checkpoint allowing ``max_restarts`` restarts."""
        replicated = [{"name": "node"}]
        if launcher:
            replicated.insert(0, {"name": "launcher"})
        spec: dict[str, Any] = {"workload": {"trainJob": {
            "runtimeRef": {"name": "mpi-runtime"},
            "runtimePatches": [{"manager": "cre.dev/renderer", "trainingRuntimeSpec": {
                "template": {"spec": {"replicatedJobs": replicated}}}}],
        }}}
        if timeout:
            spec["timeoutPerJob"] = timeout
        if max_restarts is not None:
            spec["checkpoint"] = {"pvcName": "checkpoints", "maxRestarts": max_restarts}
        meta: dict[str, Any] = {"name": name, "namespace": self.namespace}
        if group_nodes:
            meta["annotations"] = {GROUP_NODES: ",".join(group_nodes)}
        body = {"apiVersion": API_VERSION, "kind": "Job", "metadata": meta, "spec": spec}
        return await self.client.create(JOBS, body, namespace=self.namespace)

    async def job(self, name: str) -> dict[str, Any]:
        """The Job as served now."""
        return await self.client.get(JOBS, name, namespace=self.namespace)

    async def wait_job(self, name: str, check: Callable[[dict[str, Any]], bool], *,
                       limit: float = 20.0, poll: float = 0.02) -> dict[str, Any]:
        """Poll the served Job until ``check`` holds (``limit`` is a safety net only; when it
        runs out the error shows the last status seen)."""
        last: dict[str, Any] = {}
        with anyio.move_on_after(limit):
            while True:
                last = await self.job(name)
                if check(last):
                    return last
                await anyio.sleep(poll)
        raise AssertionError(f"Job {self.namespace}/{name}: condition not reached within "
                             f"{limit}s; last status: {json.dumps(last.get('status'))}")

    async def wait_until(self, check: Callable[[], bool], *, what: str,
                         limit: float = 20.0) -> None:
        """Poll the controller's own state until ``check`` holds (``limit`` is a safety net
        only; when it runs out the error names ``what`` was awaited)."""
        with anyio.move_on_after(limit):
            while True:
                if check():
                    return
                await anyio.sleep(0.01)
        raise AssertionError(f"{self.namespace}: {what} not reached within {limit}s")

    def job_key(self, name: str) -> str:
        """The controller's key for Job ``name`` in this namespace."""
        return f"{self.namespace}/{name}"

    async def wait_job_gone(self, name: str, *, limit: float = 20.0) -> None:
        """Poll until the Job no longer exists (its finalizer was removed)."""
        with anyio.fail_after(limit):
            while True:
                try:
                    await self.job(name)
                except ApiError as exc:
                    if exc.not_found:
                        return
                    raise
                await anyio.sleep(0.02)

    async def wait_trainjob(self, name: str, *, limit: float = 20.0) -> dict[str, Any]:
        """Poll until the Job's TrainJob exists."""
        with anyio.fail_after(limit):
            while True:
                found = await self.script.trainjob(name)
                if found is not None:
                    return found
                await anyio.sleep(0.02)

    async def events(self, name: str) -> list[dict[str, Any]]:
        """The Events about the Job, oldest first."""
        page = await self.client.list(EVENTS, namespace=self.namespace)
        items = [e for e in page.get("items") or []
                 if (e.get("involvedObject") or {}).get("name") == name
                 and (e.get("involvedObject") or {}).get("kind") == "Job"]
        return sorted(items, key=lambda e: (e.get("firstTimestamp") or "",
                                             int(e["metadata"].get("resourceVersion") or 0)))

    async def wait_event(self, name: str, reason: str, *, limit: float = 20.0
                         ) -> dict[str, Any]:
        """Poll until an Event with ``reason`` about the Job exists; return it."""
        with anyio.fail_after(limit):
            while True:
                for event in await self.events(name):
                    if event.get("reason") == reason:
                        return event
                await anyio.sleep(0.02)

    async def add_gpu_node(self, name: str, *, ready: bool = True) -> None:
        """A GPU node (``nvidia.com/gpu.present=true``) with a Ready condition."""
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {GPU_PRESENT: "true"}}}
        await self.client.create(NODES, body)
        node = await self.client.get(NODES, name)
        node["status"] = {"conditions": [{"type": "Ready",
                                          "status": "True" if ready else "False"}]}
        await self.client.replace(NODES, node, subresource="status")


def condition(job: dict[str, Any], type_: str) -> dict[str, Any] | None:
    """The served Job's condition of ``type_``, if any."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def is_true(type_: str) -> Callable[[dict[str, Any]], bool]:
    """A check for ``wait_job``: the condition ``type_`` is True."""
    def check(job: dict[str, Any]) -> bool:
        cond = condition(job, type_)
        return cond is not None and cond.get("status") == "True"
    return check


@asynccontextmanager
async def running_harness(emulator: ServesLogs, *, namespace: str = "team-a",
                          settings: JobSettings = DEFAULT_SETTINGS,
                          max_concurrent_reconciles: int = 4) -> AsyncIterator[JobHarness]:
    """Start a JobController on ``emulator`` for ``namespace`` and stop it on exit."""
    client = await KubeClient.from_kubeconfig(str(emulator.kubeconfig_path))
    try:
        with contextlib.suppress(ApiError):
            await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": namespace}})
        controller = JobController(client, namespaces=[namespace], settings=settings,
                                   max_concurrent_reconciles=max_concurrent_reconciles)
        script = WorkloadScript(client, namespace=namespace, append_log=emulator.append_log)
        async with anyio.create_task_group() as tg:
            tg.start_soon(controller.run, name="job controller")
            with anyio.fail_after(20):
                await controller.wait_synced()
            yield JobHarness(client=client, controller=controller, script=script,
                             namespace=namespace)
            tg.cancel_scope.cancel()
    finally:
        await client.close()
