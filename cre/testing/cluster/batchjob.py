"""The batch Job controller, as a pure step over the simulated cluster.

Follows ``kubernetes/kubernetes`` ``pkg/controller/job`` (behaviour of 1.31+): Indexed pods
named ``<job>-<index>-<rand>`` with hostname ``<job>-<index>``, the completion-index annotation
and label, ``JOB_COMPLETION_INDEX`` env and the ``batch.kubernetes.io/job-tracking`` finalizer;
finished pods counted once (their finalizer is removed in the same step as the status write);
``restartPolicy: Never`` failures replaced after the pod-failure backoff (10 s doubling, capped)
while ``OnFailure`` restarts are left to the kubelet and bounded by the sum of restart counts;
``backoffLimit``; ``podFailurePolicy`` (Ignore / FailJob / Count on exit codes and pod
conditions, first matching rule wins); the interim ``FailureTarget`` / ``SuccessCriteriaMet``
conditions, deletion of the remaining active pods, then ``Failed`` / ``Complete`` once no pod
is terminating; ``suspend``; creation expectations (no new pod for a Job while a pod it already
asked for has not been observed, 5-minute expiry).

Simplified: failures matched by an ``Ignore`` rule neither count nor delay the replacement
(no pod-failure backoff for them); a terminating pod is counted as failed when it reaches phase
``Failed``, not already while terminating as upstream does under ``TerminatingOrFailed``.
Left out: NonIndexed work-queue semantics beyond
"completions pods", ``backoffLimitPerIndex``, ``FailIndex``, ``activeDeadlineSeconds``,
success policies, slow-start batching, the 1 s pod-event batching, ``managedBy`` other than
skipping foreign Jobs, and Events.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cre.api import labels
from cre.kube.client import BATCH_JOBS, PODS
from cre.testing.cluster.clock import fmt_time, parse_time
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.model import (
    Create,
    Delete,
    Mark,
    Obj,
    Patch,
    Step,
    StepBuilder,
    World,
    condition,
    deep,
    deleting,
    is_true,
    labels_of,
    meta,
    name_of,
    ns_of,
    owner_ref,
    set_condition,
    uid_of,
)

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
CONTROLLER = "kubernetes.io/job-controller"
TERMINAL = ("Succeeded", "Failed")
EXPECTATIONS_TTL = 300.0  # seconds; upstream's ExpectationsTimeout (5 minutes)


def step(world: World, now: float, cfg: SimConfig) -> Step:
    """One pass of the Job controller over every Job (and orphaned tracked pods)."""
    b = StepBuilder()
    job_uids = set()
    for job in world.all(BATCH_JOBS):
        job_uids.add(uid_of(job))
        managed = (job.get("spec") or {}).get("managedBy")
        if managed and managed != CONTROLLER:
            continue
        _sync(world, job, now, cfg, b)
    for pod in world.all(PODS):  # a deleted Job's pods lose the finalizer (the GC does the rest)
        refs = meta(pod).get("ownerReferences") or []
        owner = next((r for r in refs if r.get("kind") == "Job" and r.get("controller")), None)
        if owner and owner.get("uid") not in job_uids and TRACKING_FINALIZER in _finalizers(pod):
            b.add(_drop_finalizer(pod))
    return b.build()


def pod_index(pod: Mapping[str, Any]) -> int | None:
    raw = (meta(pod).get("annotations") or {}).get(labels.COMPLETION_INDEX)
    raw = raw if raw is not None else labels_of(pod).get(labels.COMPLETION_INDEX)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def finish_time(world: World, pod: Mapping[str, Any]) -> float:
    """When a pod finished: the kubelet's precise mark, else the latest finishedAt, else now-ish."""
    mark = world.marks.get(f"finish/{uid_of(pod)}")
    if isinstance(mark, float):
        return mark
    status = pod.get("status") or {}
    times = [parse_time(((c.get("state") or {}).get("terminated") or {}).get("finishedAt"))
             for c in (status.get("containerStatuses") or [])]
    found = [t for t in times if t is not None]
    if found:
        return max(found)
    return parse_time(meta(pod).get("deletionTimestamp")) or parse_time(
        meta(pod).get("creationTimestamp")) or 0.0


def _finalizers(obj: Mapping[str, Any]) -> list[str]:
    return list(meta(obj).get("finalizers") or [])


def _drop_finalizer(pod: Mapping[str, Any]) -> Patch:
    rest = [f for f in _finalizers(pod) if f != TRACKING_FINALIZER]
    return Patch(PODS, ns_of(pod), name_of(pod), {"metadata": {"finalizers": rest or None}})


def failure_action(job: Mapping[str, Any], pod: Mapping[str, Any]) -> tuple[str, str]:
    """(action, message) of the first podFailurePolicy rule matching a failed pod ("Count", "")."""
    policy = (job.get("spec") or {}).get("podFailurePolicy") or {}
    pod_ref = f"{ns_of(pod)}/{name_of(pod)}"
    status = pod.get("status") or {}
    for i, rule in enumerate(policy.get("rules") or []):
        action = str(rule.get("action", "Count"))
        on_codes = rule.get("onExitCodes")
        if on_codes:
            values = {int(v) for v in on_codes.get("values") or []}
            only = on_codes.get("containerName")
            for cs in (*(status.get("containerStatuses") or []),
                       *(status.get("initContainerStatuses") or [])):
                if only and cs.get("name") != only:
                    continue
                term = (cs.get("state") or {}).get("terminated") or {}
                code = term.get("exitCode")
                if code is None or code == 0:
                    continue
                op_in = on_codes.get("operator", "In") == "In"
                hit = code in values if op_in else code not in values
                if hit:
                    return action, (f"Container {cs.get('name')} for pod {pod_ref} failed with "
                                    f"exit code {code} matching {action} rule at index {i}")
        for want in rule.get("onPodConditions") or []:
            for c in status.get("conditions") or []:
                if c.get("type") == want.get("type") and c.get("status") == want.get("status",
                                                                                   "True"):
                    return action, (f"Pod {pod_ref} has condition {c.get('type')} matching "
                                    f"{action} rule at index {i}")
    return "Count", ""


def _indexes_text(done: set[int]) -> str:
    """``0-2,4`` style, as ``status.completedIndexes``."""
    out: list[str] = []
    ordered = sorted(done)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def _parse_indexes(text: str | None) -> set[int]:
    done: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        done.update(range(int(lo), int(hi or lo) + 1))
    return done


def _cond(ctype: str, reason: str, message: str, now: float, status: str = "True") -> Obj:
    ts = fmt_time(now)
    return {"type": ctype, "status": status, "reason": reason, "message": message,
            "lastProbeTime": ts, "lastTransitionTime": ts}


def _sync(world: World, job: Obj, now: float, cfg: SimConfig, b: StepBuilder) -> None:
    spec = job.get("spec") or {}
    status: Obj = deep(job.get("status") or {})
    before = deep(status)
    uid = uid_of(job)
    pods = world.owned_by(PODS, uid)
    if deleting(job) or is_true(job, "Complete") or is_true(job, "Failed"):
        b.add(*(_drop_finalizer(p) for p in pods if TRACKING_FINALIZER in _finalizers(p)))
        return
    parallelism = int(spec.get("parallelism", 1))
    completions = int(spec.get("completions") or parallelism)
    backoff_limit = int(spec.get("backoffLimit", 6))
    template = spec.get("template") or {}
    restart_policy = (template.get("spec") or {}).get("restartPolicy", "Never")
    has_pfp = bool(spec.get("podFailurePolicy"))
    conds = list(status.get("conditions") or [])

    active = [p for p in pods if _phase(p) not in TERMINAL and not deleting(p)]
    terminating = [p for p in pods if _phase(p) not in TERMINAL and deleting(p)]
    if spec.get("suspend"):
        b.add(*(Delete(PODS, ns_of(p), name_of(p), uid=uid_of(p)) for p in active))
        if not is_true(job, "Suspended"):
            conds = set_condition(conds, _cond("Suspended", "JobSuspended", "Job suspended", now))
        status.update(conditions=conds, active=0, ready=0)
        _write(b, job, before, status)
        return
    if condition(job, "Suspended") and is_true(job, "Suspended"):
        conds = set_condition(conds, _cond("Suspended", "JobResumed", "Job resumed", now,
                                           status="False"))
        status["startTime"] = fmt_time(now)
    status.setdefault("startTime", fmt_time(now))

    done = _parse_indexes(status.get("completedIndexes"))
    failed = int(status.get("failed", 0))
    fail_job_msg = ""
    streak_key, last_key = f"jobfailures/{uid}", f"joblastfailure/{uid}"
    streak = int(world.marks.get(streak_key, 0))
    last_failure = float(world.marks.get(last_key, 0.0))
    for pod in sorted(pods, key=lambda p: finish_time(world, p)):
        if _phase(pod) not in TERMINAL or TRACKING_FINALIZER not in _finalizers(pod):
            continue
        if _phase(pod) == "Succeeded":
            idx = pod_index(pod)
            done.add(idx if idx is not None else len(done))
            streak = 0
        else:
            action, msg = failure_action(job, pod)
            if action == "FailJob" and not fail_job_msg:
                fail_job_msg = msg
            if action != "Ignore":
                failed += 1
                streak += 1
                last_failure = max(last_failure, finish_time(world, pod))
        b.add(_drop_finalizer(pod))
    if streak != int(world.marks.get(streak_key, 0)):
        b.add(Mark(streak_key, streak))
    if last_failure != float(world.marks.get(last_key, 0.0)):
        b.add(Mark(last_key, last_failure))
    status.update(failed=failed, succeeded=len(done), completedIndexes=_indexes_text(done) or None)

    restarts = sum(int(cs.get("restartCount", 0))
                   for p in active for cs in (*((p.get("status") or {}).get("containerStatuses")
                                                or []),
                                              *((p.get("status") or {}).get(
                                                  "initContainerStatuses") or [])))
    target = _terminal_target(job)
    interim_new = target is None
    if target is None:
        if fail_job_msg:
            target = ("FailureTarget", "PodFailurePolicy", fail_job_msg)
        elif failed > backoff_limit or (restart_policy == "OnFailure" and restarts > 0
                                        and restarts >= backoff_limit):
            target = ("FailureTarget", "BackoffLimitExceeded",
                      "Job has reached the specified backoff limit")
        elif len(done) >= completions:
            target = ("SuccessCriteriaMet", "CompletionsReached",
                      "Reached expected number of succeeded pods")
        if target is not None:
            conds = set_condition(conds, _cond(*target, now))
    if target is not None:
        b.add(*(Delete(PODS, ns_of(p), name_of(p), uid=uid_of(p)) for p in active))
        # The terminal condition follows the interim one in a later status write, never the
        # same one: upstream writes the interim condition with the finished pods still in
        # uncountedTerminatedPods, removes their finalizers, and only the next sync (no pod
        # terminating) adds Failed / Complete; observers see SuccessCriteriaMet alone first.
        if not active and not terminating and not interim_new:
            final = "Failed" if target[0] == "FailureTarget" else "Complete"
            conds = set_condition(conds, _cond(final, target[1], target[2], now))
            if final == "Complete":
                status["completionTime"] = fmt_time(now)
        status.update(conditions=conds, active=0, ready=0, terminating=len(terminating),
                      uncountedTerminatedPods={})
        _write(b, job, before, status)
        return

    # Create the missing indexes, after the pod-failure backoff.
    busy = {pod_index(p) for p in active}
    if has_pfp or restart_policy == "OnFailure":
        busy |= {pod_index(p) for p in terminating}
    missing = [i for i in range(completions) if i not in done and i not in busy]
    missing = missing[: max(0, parallelism - len(active))]
    if missing and streak > 0:
        delay = min(cfg.pod_failure_backoff * 2 ** (streak - 1), cfg.pod_failure_backoff_cap)
        if now < last_failure + delay:
            b.wake(last_failure + delay)
            missing = []
    pending = _pending_creations(world, job, pods, completions, now, b)
    if pending:  # expectations not yet satisfied: wait for the pods already asked for
        missing = []
        b.wake(min(pending) + EXPECTATIONS_TTL)
    for idx in missing:
        key = _expect_key(uid, idx)
        b.add(Mark(key, now), Create(PODS, new_pod(job, idx), on_failure=(Mark(key, None),)))
    ready = sum(1 for p in active if _ready(p))
    status.update(conditions=conds or None, active=len(active) + len(missing), ready=ready,
                  terminating=len(terminating),
                      uncountedTerminatedPods={})
    _write(b, job, before, status)


def _expect_key(job_uid: str, index: int) -> str:
    return f"jobexpect/{job_uid}/{index}"


def _pending_creations(world: World, job: Obj, pods: list[Obj], completions: int, now: float,
                       b: StepBuilder) -> list[float]:
    """The Job controller's expectations: when each still-unobserved pod create was sent.

    Upstream records how many creates it sent and lowers the count as the pod informer reports
    each new pod (or as a create fails); until then it creates nothing more for that Job, so a
    late or dropped watch event cannot make it create a second pod for the same index. Here one
    mark per index holds the send time; a pod of that index seen in the world observes it, a
    failed create forgets it, and after :data:`EXPECTATIONS_TTL` it expires, as upstream's do.
    """
    seen = {pod_index(p) for p in pods}
    pending: list[float] = []
    for idx in range(completions):
        key = _expect_key(uid_of(job), idx)
        sent = world.marks.get(key)
        if sent is None:
            continue
        if idx in seen or now >= float(sent) + EXPECTATIONS_TTL:
            b.add(Mark(key, None))
        else:
            pending.append(float(sent))
    return pending


def _terminal_target(job: Mapping[str, Any]) -> tuple[str, str, str] | None:
    for ctype in ("FailureTarget", "SuccessCriteriaMet"):
        c = condition(job, ctype)
        if c and c.get("status") == "True":
            return ctype, str(c.get("reason", "")), str(c.get("message", ""))
    return None


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase", "Pending"))


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _write(b: StepBuilder, job: Obj, before: Obj, status: Obj) -> None:
    clean = {k: v for k, v in status.items() if v is not None}
    if clean != {k: v for k, v in before.items() if v is not None}:
        patch = dict(status)
        for k in before:
            patch.setdefault(k, None)
        b.add(Patch(BATCH_JOBS, ns_of(job), name_of(job), {"status": patch}, subresource="status"))


def new_pod(job: Mapping[str, Any], index: int) -> Obj:
    """The pod the Job controller creates for ``index`` (generateName, hostname, index, env)."""
    template: Obj = deep((job.get("spec") or {}).get("template") or {})
    tmeta: Obj = template.get("metadata") or {}
    name, uid = name_of(job), uid_of(job)
    pod_labels = dict(tmeta.get("labels") or {})
    pod_labels.update({"batch.kubernetes.io/controller-uid": uid,
                       "batch.kubernetes.io/job-name": name, "controller-uid": uid,
                       "job-name": name, labels.COMPLETION_INDEX: str(index)})
    annotations = dict(tmeta.get("annotations") or {})
    annotations[labels.COMPLETION_INDEX] = str(index)
    spec: Obj = template.get("spec") or {}
    spec.setdefault("hostname", f"{name}-{index}")
    for group in ("containers", "initContainers"):
        for c in spec.get(group) or []:
            env = [e for e in c.get("env") or [] if e.get("name") != "JOB_COMPLETION_INDEX"]
            env.append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                # The label, not the annotation (both carry the index): what the real Job
                # controller of 1.28+ (PodIndexLabel) writes, as the comparison showed.
                "fieldPath": f"metadata.labels['{labels.COMPLETION_INDEX}']"}}})
            c["env"] = env
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": f"{name}-{index}-", "namespace": ns_of(job),
                     "labels": pod_labels, "annotations": annotations,
                     "ownerReferences": [owner_ref({"apiVersion": "batch/v1", "kind": "Job",
                                                    "metadata": meta(job)})],
                     "finalizers": [TRACKING_FINALIZER]},
        "spec": spec,
    }
