"""The steps of a ``type: controller`` case: what happens to the cluster, and what to wait for.

The runner plays the user and the parts of Kubernetes a case does not simulate (a kubelet
setting a pod's phase or a container's exit, a node condition). Its own reads and writes go
through the emulator's Python API (``emu.objects``): the same storage, defaulting, validation,
finalizers and watch events as over HTTP, but never hit by the faults a case injects for the
controller. Eviction goes over HTTP (it is an API subresource) and retries injected errors.

``waitFor`` re-checks the object whenever the emulator's resourceVersion moves, until the
condition holds or ``timeout`` *simulated* seconds pass (and at least ``WAIT_WALL_FLOOR`` wall
seconds: a loaded machine is not a hang); on timeout it fails with the object's last state.
``advance`` lets simulated time pass (``seconds / timeScale`` of wall time).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import anyio

from cre.kube.client import PODS, ApiError, KubeClient
from cre.testing.cluster.clock import WAIT_WALL_FLOOR, SimClock, fmt_time
from cre.testing.golden.controller.case import DEFAULT_WAIT, ControllerCaseError, Step
from cre.testing.golden.jsonpath import parse as parse_jsonpath

POLL = 0.005  # wall seconds between checks of the emulator's resourceVersion
# A wait (or a settle that keeps seeing writes) fails only once its simulated bound AND
# WAIT_WALL_FLOOR wall seconds have passed; for the same reason (a loaded machine is not a hang)
# a quiet window lasts at least QUIET_WALL_FLOOR wall seconds before the controller counts as
# at rest.
QUIET_WALL_FLOOR = 0.25


class WaitTimeout(AssertionError):
    """A ``waitFor`` did not hold in time; the message has the object's last state."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _ns(arg: Mapping[str, Any]) -> str:
    return str(arg.get("namespace") or "default")


def _get(emu: Any, arg: Mapping[str, Any], *, where: str, kind: str = "",
         api_version: str = "", name: str = "") -> dict[str, Any]:
    api_version = api_version or str(arg["apiVersion"])
    kind = kind or str(arg["kind"])
    name = name or str(arg["name"])
    namespace = "" if kind in ("Node", "Namespace") else _ns(arg)
    try:
        obj = emu.objects.get(api_version, kind, name, namespace)
    except KeyError as exc:
        raise ControllerCaseError(f"{where}: {exc.args[0]}") from None
    if obj is None:
        raise ControllerCaseError(f"{where}: {kind} {namespace + '/' if namespace else ''}"
                                  f"{name} does not exist")
    return dict(obj)


def put_object(emu: Any, obj: Mapping[str, Any], *, where: str) -> None:
    """Create or replace ``obj`` (status included) without HTTP, so without faults."""
    try:
        emu.objects.put(dict(obj))
    except KeyError as exc:
        raise ControllerCaseError(f"{where}: {exc.args[0]}") from None
    except Exception as exc:  # the emulator's ApiError: a rejected object
        raise ControllerCaseError(f"{where}: the API server rejected it: {exc}") from None


def _pod_status(emu: Any, arg: Mapping[str, Any], where: str) -> dict[str, Any]:
    return _get(emu, arg, where=where, api_version="v1", kind="Pod", name=str(arg["pod"]))


def _container_exit(emu: Any, arg: Mapping[str, Any], clock: SimClock, where: str) -> None:
    pod = _pod_status(emu, arg, where)
    containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    name = str(arg.get("container") or (containers[0] if containers else ""))
    if name not in containers:
        raise ControllerCaseError(f"{where}.container: pod {arg['pod']} has no container "
                                  f"{name!r} (containers: {containers})")
    code = int(arg["exitCode"])
    now = fmt_time(clock.now())
    status = dict(pod.get("status") or {})
    statuses = {s.get("name"): s for s in status.get("containerStatuses") or []}
    statuses[name] = {
        "name": name, "ready": False, "restartCount": 0, "image": "",
        "imageID": "", "started": False,
        "state": {"terminated": {"exitCode": code, "reason": str(arg.get("reason") or (
            "Completed" if code == 0 else "Error")), "startedAt": now, "finishedAt": now}}}
    status["containerStatuses"] = [statuses.get(c) or {"name": c, "ready": False,
                                                        "restartCount": 0, "image": "",
                                                        "imageID": "",
                                                        "state": {"running": {"startedAt": now}}}
                                   for c in containers]
    done = [s for s in status["containerStatuses"] if "terminated" in (s.get("state") or {})]
    if len(done) == len(containers):
        failed = any(s["state"]["terminated"]["exitCode"] != 0 for s in done)
        status["phase"] = "Failed" if failed else "Succeeded"
    if arg.get("log"):
        emu.append_log(_ns(arg), str(arg["pod"]), name, str(arg["log"]))
    put_object(emu, {**pod, "status": status}, where=where)


def _node_condition(emu: Any, arg: Mapping[str, Any], clock: SimClock, where: str) -> None:
    node = _get(emu, arg, where=where, api_version="v1", kind="Node", name=str(arg["node"]))
    status = dict(node.get("status") or {})
    now = fmt_time(clock.now())
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != arg["type"]]
    conditions.append({"type": arg["type"], "status": arg["status"],
                       "reason": str(arg.get("reason", "")), "message": str(arg.get("message", "")),
                       "lastHeartbeatTime": now, "lastTransitionTime": now})
    status["conditions"] = conditions
    put_object(emu, {**node, "status": status}, where=where)


async def _evict(client: KubeClient, arg: Mapping[str, Any], where: str) -> None:
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": arg["pod"], "namespace": _ns(arg)}}
    path = PODS.path(namespace=_ns(arg), name=str(arg["pod"]), subresource="eviction")
    for _ in range(50):  # the case's own faults may refuse it: retry those
        try:
            await client.request("POST", path, body=body)
            return
        except ApiError as exc:
            if not exc.retryable:
                raise ControllerCaseError(f"{where}: eviction refused: {exc}") from None
            await anyio.sleep(0.02)
    raise ControllerCaseError(f"{where}: eviction kept failing under injected faults")


def _holds(obj: dict[str, Any] | None, arg: Mapping[str, Any]) -> bool:
    if arg.get("absent"):
        return obj is None
    if obj is None:
        return False
    found = parse_jsonpath(str(arg["jsonpath"])).values(obj)
    if "equals" in arg:
        return any(v == arg["equals"] for v in found)
    return bool(found) == bool(arg.get("exists", True))


async def wait_for(emu: Any, arg: Mapping[str, Any], clock: SimClock, where: str) -> None:
    api_version, kind, name = str(arg["apiVersion"]), str(arg["kind"]), str(arg["name"])
    namespace = "" if kind in ("Node", "Namespace") else _ns(arg)
    timeout = float(arg.get("timeout", DEFAULT_WAIT))
    deadline = clock.now() + timeout
    wall_deadline = time.monotonic() + WAIT_WALL_FLOOR
    seen = -1
    obj: dict[str, Any] | None = None
    while True:
        rv = emu.resource_version
        if rv != seen:
            seen = rv
            try:
                obj = emu.objects.get(api_version, kind, name, namespace)
            except KeyError as exc:
                raise ControllerCaseError(f"{where}: {exc.args[0]}") from None
            if _holds(obj, arg):
                return
        if clock.now() >= deadline and time.monotonic() >= wall_deadline:
            break
        await anyio.sleep(POLL)
    want = "to be absent" if arg.get("absent") else (
        f"{arg['jsonpath']} == {json.dumps(arg['equals'])}" if "equals" in arg else
        f"{arg['jsonpath']} {'to exist' if arg.get('exists', True) else 'to be absent'}")
    state = json.dumps(obj, indent=2, sort_keys=True)[:4000] if obj is not None else \
        "(the object does not exist)"
    raise WaitTimeout(f"{where}: {kind} {namespace + '/' if namespace else ''}{name}: waited "
                      f"{timeout:g} simulated seconds for {want}; its last state:\n{state}")


async def settle(emu: Any, clock: SimClock, quiet: float, *, where: str,
                 limit: float = 300.0) -> None:
    """Return once no object changed for ``quiet`` simulated seconds (the controller came to
    rest); fail after ``limit`` simulated seconds of activity."""
    if quiet <= 0:
        return
    deadline = clock.now() + limit
    wall_deadline = time.monotonic() + WAIT_WALL_FLOOR
    while clock.now() < deadline or time.monotonic() < wall_deadline:
        before = emu.resource_version
        await anyio.sleep(max(clock.wall_delay(quiet), QUIET_WALL_FLOOR))
        if emu.resource_version == before:
            return
    raise WaitTimeout(f"{where}: the cluster did not come to rest ({quiet:g} simulated seconds "
                      f"without a write) within {limit:g} simulated seconds")


async def run_step(step: Step, *, emu: Any, client: KubeClient, clock: SimClock) -> None:
    arg, where = step.arg, f"{step.where}.{step.verb}"
    if step.verb == "apply":
        put_object(emu, arg, where=where)
    elif step.verb == "patch":
        obj = _get(emu, arg, where=where)
        put_object(emu, merge_patch(obj, arg["patch"]), where=where)
    elif step.verb == "delete":
        kind = str(arg["kind"])
        namespace = "" if kind in ("Node", "Namespace") else _ns(arg)
        try:
            gone = emu.objects.delete(str(arg["apiVersion"]), kind, str(arg["name"]), namespace)
        except KeyError as exc:
            raise ControllerCaseError(f"{where}: {exc.args[0]}") from None
        if gone is None:
            raise ControllerCaseError(f"{where}: {kind} {arg['name']} does not exist")
    elif step.verb == "podPhase":
        pod = _pod_status(emu, arg, where)
        status = {**(pod.get("status") or {}), "phase": str(arg["phase"])}
        for key in ("reason", "message"):
            if key in arg:
                status[key] = str(arg[key])
        put_object(emu, {**pod, "status": status}, where=where)
    elif step.verb == "containerExit":
        _container_exit(emu, arg, clock, where)
    elif step.verb == "evict":
        await _evict(client, arg, where)
    elif step.verb == "nodeCondition":
        _node_condition(emu, arg, clock, where)
    elif step.verb == "advance":
        await anyio.sleep(clock.wall_delay(float(arg)))
    elif step.verb == "fault":
        try:
            emu.faults.configure(dict(arg))
        except (KeyError, ValueError, TypeError) as exc:
            raise ControllerCaseError(f"{where}: not a fault spec: {exc}") from None
    elif step.verb == "waitFor":
        await wait_for(emu, arg, clock, where)
    else:  # read_case rejects unknown verbs
        raise ControllerCaseError(f"{where}: unknown step")


__all__ = ["WaitTimeout", "merge_patch", "put_object", "run_step", "settle", "wait_for"]
