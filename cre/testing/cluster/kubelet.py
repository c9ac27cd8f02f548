"""The kubelet of every simulated node, as a pure step over the pods bound to those nodes.

Follows ``kubernetes/kubernetes`` ``pkg/kubelet`` (``kubelet_pods.go`` getPhase,
``status/generate.go``, ``kuberuntime_manager.go``): a bound pod gets ``startTime``, host/pod
IPs, ``PodReadyToStartContainers``, ``Initialized`` (``ContainersNotInitialized`` while init
containers run), ``ContainersReady`` / ``Ready`` (``ContainersNotReady``, ``containers with
unready status: [...]``; ``PodCompleted`` / ``PodFailed`` at the end); containers wait in
``ContainerCreating`` (``PodInitializing`` when there are init containers), then run the stub
program chosen for them (:mod:`cre.testing.cluster.stubs`), writing its output through the log
API; init containers run one at a time; a container that exits gets ``terminated`` with
exitCode, reason (``Completed`` / ``Error`` / ``OOMKilled``), message, startedAt, finishedAt
and containerID; with ``OnFailure`` a failed container restarts in place (first restart
immediately, then ``CrashLoopBackOff`` with ``back-off 10s restarting failed container=<c>
pod=<pod>_<ns>(<uid>)``, doubling to 5 min), ``restartCount`` + 1 and ``lastState``; with
``Never`` the pod turns ``Failed``. A deleted pod's running containers get SIGTERM (exit 143,
``Error``), the pod its terminal phase, then the kubelet deletes it with grace 0. Terminal
phases never change.

Image pulls (``pkg/kubelet/images``): an image, a repository or a registry marked unavailable
(:func:`unavailable_key`, on some nodes or all: ``SimulatedCluster.set_image_pull``, the
scenario verb ``imagePull``) keeps a container that is due to start waiting: ``ErrImagePull``
with ``Failed to pull image "X": <why>``, then ``ImagePullBackOff`` with ``Back-off pulling
image "X": ErrImagePull: <why>`` (the wording of kubelets since 1.31) for the back-off (10 s
doubling to 5 min, the crash-loop back-off's bounds), then another attempt, for as long as the
pod lives. Marked available again, the next attempt pulls and the container starts.

Left out: probes other than a fixed "ready N s after start", a successful pull's duration,
sidecars (init containers with ``restartPolicy: Always``), resource admission (``OutOf...``),
the 10-minute back-off reset, Events.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from cre.api import labels
from cre.kube.client import NODES, PODS
from cre.testing.cluster.argv import expand_container
from cre.testing.cluster.clock import fmt_time
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.jobset import JOBSET_NAME, RJOB_NAME
from cre.testing.cluster.model import (
    AppendLog,
    Delete,
    Mark,
    Obj,
    Patch,
    RotateLog,
    Step,
    StepBuilder,
    World,
    condition,
    deep,
    deleting,
    labels_of,
    name_of,
    ns_of,
    uid_of,
)
from cre.testing.cluster.program import Program, Role, StubContext
from cre.testing.cluster.stubs import Override, choose, override_matches

TERMINAL = ("Succeeded", "Failed")


def step(world: World, now: float, cfg: SimConfig) -> Step:
    """One sync of every simulated kubelet over the pods bound to its node."""
    b = StepBuilder()
    nodes = {name_of(n): n for n in world.all(NODES)}
    # Override uses counted across this whole step: two pods starting at the same instant must
    # not both take an override limited to one use.
    uses = {k: int(v) for k, v in world.marks.items() if k.startswith("ovuse/")}
    for pod in world.all(PODS):
        node = (pod.get("spec") or {}).get("nodeName")
        if node not in nodes or world.marks.get(f"kubelet-down/{node}"):
            continue
        _sync_pod(world, pod, nodes[str(node)], now, cfg, b, uses)
    return b.build()


#: Marks saying an image, repository or registry is unavailable: ``imageunavailable/<ref>``
#: -> ``(nodes, why)``; ``nodes`` empty means every node.
UNAVAILABLE_PREFIX = "imageunavailable/"


def unavailable_key(ref: str) -> str:
    """The mark that makes ``ref`` (an image, a repository or a registry host) unavailable."""
    return f"{UNAVAILABLE_PREFIX}{ref}"


def _pull_failure(world: World, image: str, node: str) -> str | None:
    """Why pulling ``image`` on ``node`` fails now (``None``: it pulls)."""
    for key, value in world.marks.items():
        if not key.startswith(UNAVAILABLE_PREFIX):
            continue
        ref = key[len(UNAVAILABLE_PREFIX):]
        if not (image == ref or image.startswith((f"{ref}/", f"{ref}:", f"{ref}@"))):
            continue
        nodes, why = value
        if not nodes or node in nodes:
            return str(why) or (f'rpc error: code = Unknown desc = failed to pull and unpack '
                                f'image "{image}": failed to resolve reference "{image}": '
                                f'{ref} is unavailable')
    return None


def _pulling(world: World, key: str, c: Obj, cs: Obj, why: str, now: float, cfg: SimConfig,
             b: StepBuilder) -> None:
    """One kubelet sync of a container whose image cannot be pulled: ErrImagePull, then
    ImagePullBackOff for the back-off, then another attempt."""
    image = str(c.get("image", ""))
    waiting = (cs.get("state") or {}).get("waiting") or {}
    reason = waiting.get("reason")
    due = float(world.marks.get(f"pullat/{key}", now))
    if reason in ("ErrImagePull", "ImagePullBackOff") and now < due:
        b.wake(due)
        return
    if reason == "ErrImagePull":
        tries = int(world.marks.get(f"pulls/{key}", 1))
        backoff = min(cfg.crashloop_backoff * 2 ** (tries - 1), cfg.crashloop_backoff_cap)
        cs["state"] = {"waiting": {"reason": "ImagePullBackOff",
                                   "message": f'Back-off pulling image "{image}": '
                                              f'ErrImagePull: {why}'}}
        b.add(Mark(f"pullat/{key}", now + backoff))
        b.wake(now + backoff)
        return
    tries = int(world.marks.get(f"pulls/{key}", 0)) + 1
    cs["state"] = {"waiting": {"reason": "ErrImagePull",
                               "message": f'Failed to pull image "{image}": {why}'}}
    b.add(Mark(f"pulls/{key}", tries), Mark(f"pullat/{key}", now + cfg.container_start_delay))
    b.wake(now + cfg.container_start_delay)


def _cid(pod: Mapping[str, Any], cname: str, restarts: int) -> str:
    digest = hashlib.sha256(f"{uid_of(pod)}/{cname}/{restarts}".encode()).hexdigest()
    return f"containerd://{digest}"


def _image_id(c: Mapping[str, Any]) -> str:
    digest = hashlib.sha256(str(c.get("image", "")).encode()).hexdigest()
    return f"{str(c.get('image', '')).split(':')[0]}@sha256:{digest}"


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase", "Pending"))


def _sync_pod(world: World, pod: Obj, node: Obj, now: float, cfg: SimConfig,
              b: StepBuilder, uses: dict[str, int]) -> None:
    status: Obj = deep(pod.get("status") or {})
    if _phase(pod) in TERMINAL:
        if deleting(pod) and f"kdel/{uid_of(pod)}" not in world.marks:
            b.add(*final_delete(pod, now))
        return
    spec = pod.get("spec") or {}
    inits = list(spec.get("initContainers") or [])
    mains = list(spec.get("containers") or [])
    if not status.get("startTime"):
        _start_pod(pod, node, status, inits, mains, now, cfg, b)
        return
    if deleting(pod):
        _kill(world, pod, status, now, b)
        return
    policy = str(spec.get("restartPolicy", "Always"))
    init_st = {c["name"]: c for c in status.get("initContainerStatuses") or []}
    main_st = {c["name"]: c for c in status.get("containerStatuses") or []}
    may_start = True
    for c in inits:
        cs = init_st[c["name"]]
        _advance(world, pod, node, c, cs, now, cfg, b, role=Role.INIT, policy=policy,
                 may_start=may_start, uses=uses)
        term = (cs.get("state") or {}).get("terminated") or {}
        may_start = may_start and term.get("exitCode") == 0
    inits_done = may_start
    for c in mains:
        _advance(world, pod, node, c, main_st[c["name"]], now, cfg, b, role=None, policy=policy,
                 may_start=inits_done, uses=uses)
    if inits_done:
        for cs in main_st.values():
            if (cs.get("state") or {}).get("waiting", {}).get("reason") == "PodInitializing":
                cs["state"] = {"waiting": {"reason": "ContainerCreating"}}
    phase = _compute_phase(init_st, main_st, policy=policy, inits_done=inits_done)
    status["initContainerStatuses"] = [init_st[c["name"]] for c in inits] or None
    status["containerStatuses"] = [main_st[c["name"]] for c in mains]
    status["phase"] = phase
    status["conditions"] = _conditions(status, init_st, main_st, phase, inits_done, now)
    if phase in TERMINAL:
        b.add(Mark(f"finish/{uid_of(pod)}", now))
    if {k: v for k, v in status.items() if v is not None} != (pod.get("status") or {}):
        b.add(Patch(PODS, ns_of(pod), name_of(pod), {"status": status}, subresource="status"))


def _start_pod(pod: Obj, node: Obj, status: Obj, inits: list[Obj], mains: list[Obj], now: float,
               cfg: SimConfig, b: StepBuilder) -> None:
    first = "PodInitializing" if inits else "ContainerCreating"
    index = sum(ord(ch) for ch in uid_of(pod)) % 250 + 2
    status.update(
        phase="Pending", startTime=fmt_time(now), hostIP=_node_ip(node), podIP=f"10.244.0.{index}",
        initContainerStatuses=[_fresh(c, "PodInitializing") for c in inits] or None,
        containerStatuses=[_fresh(c, first) for c in mains])
    status["conditions"] = _conditions(status, {}, {}, "Pending", not inits, now)
    b.add(Patch(PODS, ns_of(pod), name_of(pod), {"status": status}, subresource="status"),
          Mark(f"created/{uid_of(pod)}", now))
    b.wake(now + cfg.container_start_delay)


def _node_ip(node: Mapping[str, Any]) -> str:
    return f"192.168.0.{sum(ord(ch) for ch in name_of(node)) % 250 + 2}"


def _fresh(c: Mapping[str, Any], reason: str) -> Obj:
    return {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False,
            "started": False, "restartCount": 0, "state": {"waiting": {"reason": reason}},
            "lastState": {}}


def _advance(world: World, pod: Obj, node: Obj, c: Obj, cs: Obj, now: float, cfg: SimConfig,
             b: StepBuilder, *, role: Role | None, policy: str, may_start: bool,
             uses: dict[str, int]) -> None:
    """Move one container along its life: wait -> run -> terminate -> maybe restart."""
    state = cs.get("state") or {}
    restarts = int(cs.get("restartCount", 0))
    key = f"{uid_of(pod)}/{c['name']}"
    if "waiting" in state:
        reason = state["waiting"].get("reason")
        if reason == "CrashLoopBackOff":
            due = float(world.marks.get(f"restartat/{key}", now))
            if now < due:
                b.wake(due)
                return
            cs["restartCount"] = restarts = restarts + 1
        elif not may_start:
            return
        else:
            due = float(world.marks.get(f"created/{uid_of(pod)}", now)) + cfg.container_start_delay
            if now < due:
                b.wake(due)
                return
        why = _pull_failure(world, str(c.get("image", "")), name_of(node))
        if why is not None:
            _pulling(world, key, c, cs, why, now, cfg, b)
            return
        program = _pick(world, pod, node, c, role, cfg, b, uses)
        b.add(Mark(f"prog/{key}/{restarts}", program), Mark(f"start/{key}/{restarts}", now))
        if program.start_text:
            b.add(AppendLog(ns_of(pod), name_of(pod), c["name"], program.start_text))
        cs.update(state={"running": {"startedAt": fmt_time(now)}}, started=True,
                  ready=program.ready_after == 0.0, imageID=_image_id(c),
                  containerID=_cid(pod, c["name"], restarts))
        state = cs["state"]
        world = world.with_marks({**world.marks, f"prog/{key}/{restarts}": program,
                                  f"start/{key}/{restarts}": now})
    if "running" in state:
        running = world.marks.get(f"prog/{key}/{restarts}")
        started = world.marks.get(f"start/{key}/{restarts}")
        if not isinstance(running, Program) or not isinstance(started, float):
            return  # started by an earlier simulator process: leave it running
        _run(world, pod, c, cs, running, started, now, b)
        state = cs["state"]
    term = state.get("terminated")
    if term and term.get("exitCode") != 0 and policy in ("OnFailure", "Always") and not \
            deleting(pod):
        if restarts == 0:
            due = now
        else:
            due = now + min(cfg.crashloop_backoff * 2 ** (restarts - 1), cfg.crashloop_backoff_cap)
        cs["lastState"] = {"terminated": term}
        # The dead run's log is what `previous=true` answers from now on (the kubelet reads
        # lastState.terminated's container), also while the container waits in CrashLoopBackOff.
        b.add(RotateLog(ns_of(pod), name_of(pod), c["name"]))
        if due <= now:
            cs["restartCount"] = restarts + 1
            cs["state"] = {"waiting": {"reason": "ContainerCreating"}}
            b.wake(now)
            return
        delay = int(due - now)
        cs.update(ready=False, started=False, state={"waiting": {
            "reason": "CrashLoopBackOff",
            "message": f"back-off {_duration(delay)} restarting failed container={c['name']} "
                       f"pod={name_of(pod)}_{ns_of(pod)}({uid_of(pod)})"}})
        b.add(Mark(f"restartat/{key}", due))
        b.wake(due)


def _duration(seconds: int) -> str:
    minutes, sec = divmod(seconds, 60)
    return f"{minutes}m{sec}s" if minutes else f"{sec}s"


def _emit_lines(world: World, pod: Obj, c: Obj, cs: Obj, program: Program, started: float,
                upto: float, b: StepBuilder) -> None:
    """Write the program's timed lines due by ``upto`` (each once); wake for the next one."""
    key = f"lines/{uid_of(pod)}/{c['name']}/{int(cs.get('restartCount', 0))}"
    done = int(world.marks.get(key, 0))
    due = [ln for ln in program.lines[done:] if started + ln.at <= upto]
    if due:
        b.add(*(AppendLog(ns_of(pod), name_of(pod), c["name"], ln.text, at=started + ln.at)
                for ln in due),
              Mark(key, done + len(due)),
              *(Mark(ln.mark, ln.value) for ln in due if ln.mark))
    rest = program.lines[done + len(due):]
    if rest:
        b.wake(started + rest[0].at)


def _run(world: World, pod: Obj, c: Obj, cs: Obj, program: Program, started: float, now: float,
         b: StepBuilder) -> None:
    if program.lines:
        end_at = started + program.duration if program.duration is not None else now
        _emit_lines(world, pod, c, cs, program, started, min(now, end_at), b)
    if program.ready_after is not None:
        if now >= started + program.ready_after:
            cs["ready"] = True
        else:
            b.wake(started + program.ready_after)
    end: float | None = None
    exit_code, reason, message = program.exit_code, program.reason, program.message
    if program.wait_for_workers is not None:
        if _workers_ready(world, pod):
            end, exit_code, reason, message = now, 0, "Completed", ""
        elif now >= started + program.wait_for_workers:
            end = now
        else:
            b.wake(started + program.wait_for_workers)
    elif program.duration is not None:
        if now >= started + program.duration:
            end = now
        else:
            b.wake(started + program.duration)
    if end is None:
        return
    text = program.end_text
    if program.wait_for_workers is not None and exit_code != 0:
        text, message = message, ""
    if c.get("terminationMessagePolicy") == "FallbackToLogsOnError" and exit_code != 0:
        message = message or "\n".join(text.splitlines()[-80:])
    if text:
        b.add(AppendLog(ns_of(pod), name_of(pod), c["name"], text))
    term: Obj = {"exitCode": exit_code, "reason": reason, "startedAt": fmt_time(started),
                 "finishedAt": fmt_time(now), "containerID": cs.get("containerID", "")}
    if message:
        term["message"] = message
    cs.update(state={"terminated": term}, ready=False, started=False)


def _workers_ready(world: World, pod: Obj) -> bool:
    """Whether every worker pod of the pod's JobSet (or CRE job) exists and is Ready."""
    mine = labels_of(pod)
    group = mine.get(JOBSET_NAME)
    workers = [p for p in (world.labelled(PODS, ns_of(pod), JOBSET_NAME, group) if group
                           else ()) if p is not pod
               and labels_of(p).get(RJOB_NAME) != mine.get(RJOB_NAME)
               and not deleting(p) and _phase(p) not in TERMINAL]
    ready = [p for p in workers if (condition(p, "Ready") or {}).get("status") == "True"]
    return bool(workers) and len(ready) == len(workers)


def _pick(world: World, pod: Obj, node: Obj, c: Obj, role: Role | None, cfg: SimConfig,
          b: StepBuilder, uses: dict[str, int]) -> Program:
    pod_labels = labels_of(pod)
    if role is None:
        launcher = (labels.LAUNCHER in pod_labels or pod_labels.get(RJOB_NAME) == "launcher")
        role = Role.LAUNCHER if launcher else Role.WORKER
    group_nodes = _group_nodes(world, pod) or [name_of(node)]
    prof = cfg.profile
    ctx = StubContext(
        pod_name=name_of(pod), container=expand_container(c), role=role, node_name=name_of(node),
        node_busbw=prof.loopback_gbps * cfg.node_factor(name_of(node)),
        group_busbw=prof.busbw_gbps * min(cfg.node_factor(n) for n in group_nodes),
        group_size=len(group_nodes), gpus_per_node=prof.gpus, gpu_product=prof.gpu_product,
        peers=_peers(world, pod), wait_timeout=cfg.wait_for_workers_timeout,
        namespace=ns_of(pod),
        state={k: v for k, v in world.marks.items() if k.startswith("trainer/")},
        group_nodes=tuple(group_nodes))
    chosen: Override | None = None
    for ov in cfg.overrides:
        used = uses.get(f"ovuse/{ov.id}", 0)
        if (ov.times is None or used < ov.times) and override_matches(ov, ctx):
            chosen = ov
            uses[f"ovuse/{ov.id}"] = used + 1
            b.add(Mark(f"ovuse/{ov.id}", used + 1))
            break
    return choose(ctx, chosen)


def _peers(world: World, pod: Obj) -> tuple[str, ...]:
    """``<hostname>.<subdomain> slots=<gpus>`` of the group's worker pods, as the hostfile."""
    group = labels_of(pod).get(JOBSET_NAME)
    out = []
    for p in world.labelled(PODS, ns_of(pod), JOBSET_NAME, group) if group else ():
        spec = p.get("spec") or {}
        if labels_of(p).get(RJOB_NAME) == "node" and spec.get("hostname"):
            out.append(f"{spec['hostname']}.{spec.get('subdomain', group)}")
    return tuple(sorted(set(out)))


def _group_nodes(world: World, pod: Obj) -> list[str]:
    group = labels_of(pod).get(JOBSET_NAME)
    if not group:
        return []
    found = {str((p.get("spec") or {}).get("nodeName"))
             for p in world.labelled(PODS, ns_of(pod), JOBSET_NAME, group)
             if labels_of(p).get(RJOB_NAME) != "launcher" and (p.get("spec") or {}).get(
                 "nodeName") and _phase(p) not in TERMINAL}
    return sorted(found)


def _kill(world: World, pod: Obj, status: Obj, now: float, b: StepBuilder) -> None:
    del world
    for group in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(group) or []:
            running = (cs.get("state") or {}).get("running")
            if running:
                cs["state"] = {"terminated": {
                    "exitCode": 143, "reason": "Error", "startedAt": running.get("startedAt"),
                    "finishedAt": fmt_time(now), "containerID": cs.get("containerID", "")}}
            cs.update(ready=False, started=False)
    mains = status.get("containerStatuses") or []
    ok = bool(mains) and all(((cs.get("state") or {}).get("terminated") or {}).get("exitCode")
                             == 0 for cs in mains)
    phase = "Succeeded" if ok else "Failed"
    status["phase"] = phase
    status["conditions"] = _conditions(status, {}, {}, phase, True, now)
    b.add(Patch(PODS, ns_of(pod), name_of(pod), {"status": status}, subresource="status"),
          Mark(f"finish/{uid_of(pod)}", now), *final_delete(pod, now))


def final_delete(pod: Obj, now: float) -> tuple[Mark, Delete]:
    """The kubelet's grace-0 delete of a finished pod, remembered so it is sent once; a delete
    that fails forgets the mark, so the next tick sends it again (no pod stuck Terminating)."""
    mark = f"kdel/{uid_of(pod)}"
    return (Mark(mark, now), Delete(PODS, ns_of(pod), name_of(pod), uid=uid_of(pod),
                                    grace_seconds=0, on_failure=(Mark(mark, None),)))


def _will_restart(cs: Mapping[str, Any], policy: str) -> bool:
    state = cs.get("state") or {}
    term = state.get("terminated")
    if term is not None:
        return policy == "Always" or (policy == "OnFailure" and term.get("exitCode") != 0)
    return True


def _compute_phase(init_st: Mapping[str, Obj], main_st: Mapping[str, Obj], *, policy: str,
                   inits_done: bool) -> str:
    if not inits_done:
        for cs in init_st.values():
            term = (cs.get("state") or {}).get("terminated")
            if term and term.get("exitCode") != 0 and policy == "Never":
                return "Failed"
        return "Pending"
    states = [cs.get("state") or {} for cs in main_st.values()]
    if states and all("terminated" in s for s in states) and not any(
            _will_restart(cs, policy) for cs in main_st.values()):
        return "Succeeded" if all(s["terminated"].get("exitCode") == 0 for s in states) \
            else "Failed"
    if any("running" in s or ("terminated" in s) or
           (s.get("waiting") or {}).get("reason") == "CrashLoopBackOff" for s in states):
        return "Running"
    return "Pending"


def _conditions(status: Obj, init_st: Mapping[str, Obj], main_st: Mapping[str, Obj], phase: str,
                inits_done: bool, now: float) -> list[Obj]:
    """Upsert the kubelet-owned conditions, keeping others (PodScheduled, DisruptionTarget)."""
    ts = fmt_time(now)
    existing = {c["type"]: c for c in status.get("conditions") or []}
    unready = sorted(n for n, cs in main_st.items() if not cs.get("ready"))
    mains = [cs for cs in status.get("containerStatuses") or []]
    if not main_st:
        unready = sorted(cs["name"] for cs in mains if not cs.get("ready"))
    pending_inits = sorted(n for n, cs in init_st.items()
                           if ((cs.get("state") or {}).get("terminated") or {}).get("exitCode")
                           != 0)
    want: dict[str, tuple[str, str, str]] = {"PodReadyToStartContainers": ("True", "", "")}
    if phase in TERMINAL:
        done = "PodCompleted" if phase == "Succeeded" else "PodFailed"
        want["Initialized"] = ("True", "PodCompleted" if phase == "Succeeded" else "", "")
        want["ContainersReady"] = want["Ready"] = ("False", done, "")
        want["PodReadyToStartContainers"] = ("False", "", "")
    else:
        want["Initialized"] = ("True", "", "") if inits_done else (
            "False", "ContainersNotInitialized",
            f"containers with incomplete status: [{' '.join(pending_inits)}]")
        ready = ("True", "", "") if not unready else (
            "False", "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]")
        want["ContainersReady"] = want["Ready"] = ready
    out: list[Obj] = []
    for ctype, (st, reason, message) in want.items():
        old = existing.pop(ctype, None)
        cond: Obj = {"type": ctype, "status": st, "lastProbeTime": None,
                     "lastTransitionTime": old["lastTransitionTime"]
                     if old and old.get("status") == st and old.get("lastTransitionTime") else ts}
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        out.append(cond)
    return [*existing.values(), *out]
