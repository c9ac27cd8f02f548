"""Golden-case runner ``type: job``: the real Job controller against the API emulator.

A case's input.yaml names a Job, the GPU nodes, and a list of scripted steps that play the
cluster's part (pods start, exit with a log, are disrupted or deleted; the TrainJob completes,
fails or is deleted from outside). ``waitFor`` steps poll the served Job until a named state
holds, so the recorded output does not depend on timing; ``sleep`` is scripted cluster time
(JobSet deleting a failed launcher 0.5 s after it exits). The output is the served Job
(metadata and status), its events (type, reason, message) and the TrainJob it created.

Steps (one key each): ``waitFor: <state>``, ``createPod: {name, launcher, node}``,
``terminate: {pod, exitCode, log, reason}``, ``waiting: {pod, reason, message}``,
``crashloop: {pod, exitCode, log}`` (exit moved to lastState, CrashLoopBackOff),
``disrupt: <pod>``, ``deletePod: <pod>``, ``waitPrefetched: <pod>`` (the controller holds the
failed container's log), ``waitTombstone: <pod>`` (the controller saw the failed pod deleted),
``log: {pod, text}``, ``sleep: <seconds>``, ``finishWorkload: {failed, message}``,
``deleteWorkload: {}``, ``deleteJob: {}``, ``createForeignWorkload: {}``, ``waitTrainJob: {}``,
``waitNewTrainJob: {}`` (a TrainJob other than the one the Job referenced), ``waitGone: {}``,
``waitTrainJobGone: {}`` (the controller's delete of the workload landed: it follows the status
write, so a case that records a deleted workload waits for it rather than racing it).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import anyio

from cre.core.job.workload import TRAINJOB_API_VERSION, workload_name
from cre.kube.client import JOBS, TRAINJOBS, ApiError
from cre.testing.apiserver import serve
from cre.testing.apiserver.pytest_fixtures import default_crd_sources
from cre.testing.jobharness import JobHarness, condition, is_true, running_harness

Check = Callable[[dict[str, Any]], bool]


def _reason_is(type_: str, reason: str) -> Check:
    def check(job: dict[str, Any]) -> bool:
        cond = condition(job, type_)
        return cond is not None and cond.get("status") == "True" and cond.get("reason") == reason
    return check


def _has_failure_log(pod: str | None = None) -> Check:
    def check(job: dict[str, Any]) -> bool:
        log = (job.get("status") or {}).get("failureLog") or {}
        return bool(log) and (pod is None or log.get("podName") == pod)
    return check


STATES: Final[dict[str, Check]] = {
    "inProgress": is_true("InProgress"),
    "running": _reason_is("InProgress", "WorkloadRunning"),
    "failed": is_true("Failed"),
    "succeeded": is_true("Succeeded"),
    "failureLog": _has_failure_log(),
    "noFailureLog": lambda job: not (job.get("status") or {}).get("failureLog"),
    "workloadUid": lambda job: bool(((job.get("status") or {}).get("workloadRef") or {})
                                    .get("uid")),
    "draining": lambda job: bool((job.get("status") or {}).get("drainStartTime")),
}


def _state(spec: Any) -> Check:
    if isinstance(spec, dict) and "failureLogPod" in spec:
        return _has_failure_log(str(spec["failureLogPod"]))
    if isinstance(spec, str) and spec in STATES:
        return STATES[spec]
    raise ValueError(f"waitFor: unknown state {spec!r} (known: {', '.join(sorted(STATES))}, "
                     f"or {{failureLogPod: <pod>}})")


async def _foreign_workload(h: JobHarness, job: str) -> None:
    body = {"apiVersion": TRAINJOB_API_VERSION, "kind": "TrainJob",
            "metadata": {"name": workload_name(job), "namespace": h.namespace},
            "spec": {"runtimeRef": {"name": "someone-elses-runtime"}}}
    await h.client.create(TRAINJOBS, body, namespace=h.namespace)


async def _wait_new_trainjob(h: JobHarness, job: str) -> None:
    """Wait until the Job's workloadRef names a TrainJob other than the one it had."""
    before = ((await h.job(job)).get("status") or {}).get("workloadRef") or {}
    with anyio.fail_after(20):
        while True:
            current = await h.script.trainjob(job)
            uid = (current or {}).get("metadata", {}).get("uid")
            if uid and uid != before.get("uid"):
                return
            await anyio.sleep(0.02)


async def _wait_trainjob_gone(h: JobHarness, job: str, *, limit: float = 20.0) -> None:
    with anyio.fail_after(limit):
        while True:
            if await h.script.trainjob(job) is None:
                return
            await anyio.sleep(0.02)


async def _step(h: JobHarness, job: str, step: dict[str, Any], index: int) -> None:
    if len(step) != 1:
        raise ValueError(f"steps[{index}]: expected exactly one key, got {sorted(step)}")
    ((verb, arg),) = step.items()
    if verb == "waitFor":
        await h.wait_job(job, _state(arg))
    elif verb == "createPod":
        await h.script.create_pod(arg["name"], job=job, launcher=bool(arg.get("launcher")),
                                  node=arg.get("node", "gpu-0"))
    elif verb == "terminate":
        await h.script.terminate(arg["pod"], exit_code=int(arg["exitCode"]),
                                 log=str(arg.get("log", "")), reason=arg.get("reason", "Error"))
    elif verb == "crashloop":
        await h.script.crashloop(arg["pod"], exit_code=int(arg["exitCode"]),
                                 log=str(arg.get("log", "")))
    elif verb == "waitPrefetched":
        # The controller read the failed container's log (before the pod is deleted).
        await h.wait_until(lambda: str(arg) in h.controller.prefetcher.pods_of(h.job_key(job)),
                           what=f"steps[{index}]: log prefetch of {arg}")
    elif verb == "waitTombstone":
        # The controller saw the failed pod's deletion and kept its last state.
        await h.wait_until(lambda: str(arg) in h.controller.tombstones(h.job_key(job)),
                           what=f"steps[{index}]: tombstone of {arg}")
    elif verb == "log":
        h.script.append_log(h.namespace, arg["pod"], arg.get("container", "node"),
                            str(arg["text"]))
    elif verb == "waiting":
        await h.script.waiting(arg["pod"], reason=str(arg["reason"]),
                               message=str(arg.get("message", "")))
    elif verb == "disrupt":
        await h.script.disrupt(str(arg))
    elif verb == "deletePod":
        await h.script.delete_pod(str(arg))
    elif verb == "sleep":
        await anyio.sleep(float(arg))
    elif verb == "finishWorkload":
        await h.script.finish_workload(job, failed=bool(arg.get("failed")),
                                       message=str(arg.get("message", "")))
    elif verb == "deleteWorkload":
        await h.script.delete_workload(job)
    elif verb == "deleteJob":
        await h.client.delete(JOBS, job, namespace=h.namespace)
    elif verb == "createForeignWorkload":
        await _foreign_workload(h, job)
    elif verb == "waitTrainJob":
        await h.wait_trainjob(job)
    elif verb == "waitNewTrainJob":
        await _wait_new_trainjob(h, job)
    elif verb == "waitGone":
        await h.wait_job_gone(job)
    elif verb == "waitTrainJobGone":
        await _wait_trainjob_gone(h, job)
    else:
        raise ValueError(f"steps[{index}]: unknown step {verb!r}")


def _job_record(job: dict[str, Any] | None) -> dict[str, Any] | None:
    if job is None:
        return None
    meta = job.get("metadata") or {}
    status = dict(job.get("status") or {})
    if status.get("drainStartTime"):
        status["drainStartTime"] = "<set>"
    ref = status.get("workloadRef")
    if isinstance(ref, dict) and ref.get("uid"):
        status["workloadRef"] = {**ref, "uid": "<set>"}
    return {"metadata": {k: meta[k] for k in ("name", "annotations", "finalizers") if k in meta},
            "status": status}


async def _run(case: dict[str, Any]) -> dict[str, Any]:
    spec = case["job"]
    name = str(spec.get("name", "j1"))
    async with serve(crds=default_crd_sources()) as emu, running_harness(emu) as h:
        for node in case.get("nodes") or ():
            await h.add_gpu_node(node["name"], ready=bool(node.get("ready", True)))
        pre = [s for s in case.get("before") or ()]
        for i, step in enumerate(pre):
            await _step(h, name, step, i)
        await h.create_job(name, group_nodes=tuple(spec.get("groupNodes") or ()),
                           timeout=spec.get("timeoutPerJob"),
                           launcher=bool(spec.get("launcher", True)),
                           max_restarts=spec.get("maxRestarts"))
        for i, step in enumerate(case.get("steps") or ()):
            await _step(h, name, step, i)
        try:
            job: dict[str, Any] | None = await h.job(name)
        except ApiError as exc:
            if not exc.not_found:
                raise
            job = None
        trainjob = await h.script.trainjob(name)
        events = await h.events(name)
    created = None
    if trainjob is not None:
        meta = trainjob.get("metadata") or {}
        created = {"metadata": {k: meta[k] for k in ("name", "labels", "ownerReferences")
                                if k in meta},
                   "spec": trainjob.get("spec")}
    return {
        "job": _job_record(job),
        "events": [{"type": e.get("type"), "reason": e.get("reason"),
                    "message": e.get("message")} for e in events],
        "trainJob": created,
    }


def run(case_dir: Path, data: dict[str, Any]) -> dict[str, Any]:
    """Run the case in ``case_dir`` (already loaded as ``data``) and return its record."""
    if not isinstance(data.get("job"), dict):
        raise ValueError(f"{case_dir / 'input.yaml'}: 'job' must be a mapping with a 'name'")
    result: dict[str, Any] = anyio.run(_run, data)
    return result
