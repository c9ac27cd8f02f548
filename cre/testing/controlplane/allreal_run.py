"""One CRE Job run end to end on the all-real stack (:mod:`.allreal`), with its timeline.

:func:`run_job` takes a rendered CRE Job and its TrainingRuntime (a ``goldens/render`` file),
puts them in their own namespace with the launcher's pod template annotated for KWOK (exit code
and run time), starts CRE's Job controller on that namespace, writes the launcher's output into
the kubelet log server when its pod appears, and waits (through watches) until the CRE Job is
Succeeded or Failed - and, when it failed, until its ``status.failureLog`` is recorded. It then
keeps watching for ``settle`` seconds so the timeline shows what JobSet, the Job controller,
the garbage collector and KWOK do to the finished launcher afterwards.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import attrs

from cre.api.labels import GROUP_NODES
from cre.core.common.plan import JobSettings
from cre.kube.client import JOBS, NAMESPACES, TRAINING_RUNTIMES, ApiError, KubeClient
from cre.kube.informer import Informer
from cre.testing.jobharness import running_harness

from . import kwok as K
from .allreal import WATCHED, LauncherLogs, Timeline, resource_of
from .backend import RealBackend


@attrs.frozen
class Rendered:
    """A rendered CRE Job and the TrainingRuntime it references."""

    job: dict[str, Any]
    runtime: dict[str, Any]

    @classmethod
    def load(cls, path: Path) -> Rendered:
        objects = json.loads(path.read_text(encoding="utf-8"))["objects"]
        jobs = [o for k, o in objects.items() if k.startswith("Job/")]
        runtimes = [o for k, o in objects.items() if k.startswith("TrainingRuntime/")]
        if len(jobs) != 1 or len(runtimes) != 1:
            raise ValueError(f"{path}: objects: expected one Job and one TrainingRuntime, "
                             f"found {len(jobs)} and {len(runtimes)}")
        return cls(job=jobs[0], runtime=runtimes[0])

    def unpinned(self) -> Rendered:
        """The same without node pinning (the group-nodes annotation and the pod templates'
        node affinity in the Job's runtime patches): the scheduler places it on any node."""
        job = copy.deepcopy(self.job)
        (job["metadata"].get("annotations") or {}).pop(GROUP_NODES, None)
        for patch in job["spec"]["workload"]["trainJob"].get("runtimePatches") or []:
            template = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
            for rjob in (template.get("spec") or {}).get("replicatedJobs") or []:
                pod = ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
                (pod.get("spec") or {}).pop("affinity", None)
        return Rendered(job=job, runtime=self.runtime)

    def scripted(self, namespace: str, *, name: str | None = None,
                 launcher: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The Job and runtime moved to ``namespace`` (the Job renamed to ``name``), the
        runtime's launcher pod template carrying the KWOK annotations ``launcher``."""
        job, runtime = copy.deepcopy(self.job), copy.deepcopy(self.runtime)
        job["metadata"]["namespace"] = runtime["metadata"]["namespace"] = namespace
        if name is not None:
            job["metadata"]["name"] = name
        found = False
        for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
            if rjob["name"] == "launcher":
                meta = rjob["template"]["spec"]["template"].setdefault("metadata", {})
                meta.setdefault("annotations", {}).update(launcher)
                found = True
        if not found:
            raise ValueError(f"TrainingRuntime {runtime['metadata']['name']}: "
                             "spec.template.spec.replicatedJobs has no 'launcher'")
        return job, runtime


@attrs.frozen
class RunResult:
    """The finished CRE Job, the timeline of the run and when the launcher log was written."""

    job: dict[str, Any]
    timeline: Timeline
    started: float
    log_written: dict[str, float]

    def outcome(self) -> str:
        for cond in (self.job.get("status") or {}).get("conditions") or []:
            if cond.get("type") in ("Succeeded", "Failed") and cond.get("status") == "True":
                return str(cond["type"])
        return "Unfinished"


def _finished(job: dict[str, Any], *, want_log: bool) -> bool:
    status = job.get("status") or {}
    done = any(c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True"
               for c in status.get("conditions") or [])
    failed = any(c.get("type") == "Failed" and c.get("status") == "True"
                 for c in status.get("conditions") or [])
    return done and (not failed or not want_log or bool(status.get("failureLog")))


async def run_job(backend: RealBackend, rendered: Rendered, *, namespace: str,
                  exit_code: int, run_seconds: float, log_text: Callable[[dict[str, Any]],
                                                                         str | None],
                  limit: float = 300.0, settle: float = 10.0,
                  settings: JobSettings | None = None, in_process: bool = True,
                  until: Callable[[Timeline], bool] | None = None,
                  launcher_annotations: dict[str, str] | None = None) -> RunResult:
    """Run ``rendered`` in ``namespace`` with a launcher exiting ``exit_code`` after
    ``run_seconds``; see the module docstring. ``limit`` is a safety net only.
    ``in_process``: CRE's Job controller runs here on ``namespace`` (the Job harness); False:
    something else runs it (a ``cre-manager`` process the caller started). ``until``: once the
    Job finished, also wait (within ``limit``) until the timeline satisfies it, then watch
    ``settle`` seconds more. ``launcher_annotations``: more KWOK annotations for the launcher
    (e.g. :data:`.kwok.IMAGE_PULL_ERROR`)."""
    job, runtime = rendered.scripted(namespace, launcher={**K.pod_annotations(
        exit_code=exit_code, run_seconds=run_seconds), **(launcher_annotations or {})})
    name = job["metadata"]["name"]
    timeline = Timeline()
    writer = LauncherLogs(logs=backend.logs, text_for=log_text)
    started = time.monotonic()
    async with contextlib.AsyncExitStack() as stack:
        if in_process:
            h = await stack.enter_async_context(running_harness(
                backend, namespace=namespace, settings=settings or JobSettings()))
            client = h.client
        else:
            client = await KubeClient.from_kubeconfig(str(backend.kubeconfig_path))
            stack.push_async_callback(client.close)
            with contextlib.suppress(ApiError):
                await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": namespace}})
        informers: list[Informer[dict[str, Any]]] = []
        for kind, selector in WATCHED:
            inf: Informer[dict[str, Any]] = Informer(
                client, resource_of(kind, cre_jobs=JOBS), transform=dict,
                namespace=namespace, label_selector=selector,
                name=f"allreal-{kind.lower()}", caller=__name__)
            inf.add_handler(timeline.handler(kind))
            if kind == "Pod":
                inf.add_handler(writer.handler)
            informers.append(inf)
        async with anyio.create_task_group() as tg:
            for inf in informers:
                tg.start_soon(inf.run)
            for inf in informers:
                await inf.wait_synced()
            await client.create(TRAINING_RUNTIMES, runtime, namespace=namespace)
            await client.create(JOBS, job, namespace=namespace)
            served = await _wait_finished(client, namespace, name, want_log=exit_code != 0,
                                          limit=limit)
            if until is not None:
                with anyio.move_on_after(limit):
                    await timeline.wait_for(until)
            await anyio.sleep(settle)
            tg.cancel_scope.cancel()
    return RunResult(job=served, timeline=timeline, started=started,
                     log_written=dict(writer.written))


async def _wait_finished(client: KubeClient, namespace: str, name: str, *, want_log: bool,
                         limit: float) -> dict[str, Any]:
    last: dict[str, Any] = {}
    with anyio.move_on_after(limit):
        while True:
            last = await client.get(JOBS, name, namespace=namespace)
            if _finished(last, want_log=want_log):
                return last
            await anyio.sleep(0.2)
    raise AssertionError(f"Job {namespace}/{name}: not finished within {limit:g}s; last "
                         f"status: {json.dumps(last.get('status'))}")
