"""The JobSet controller, as a pure step over the simulated cluster.

Follows ``kubernetes-sigs/jobset`` v0.11.1 ``pkg/controllers`` and its webhook defaults:
child Jobs ``<jobset>-<replicatedJob>-<index>`` carrying the ``jobset.sigs.k8s.io/*`` keys as
labels and annotations on the Job and its pod template (jobset-name/-uid, replicatedjob-name,
restart-attempt, replicas, job-index, global index, job-key, group keys); Indexed completion
mode and ``restartPolicy: OnFailure`` by default; the headless Service; ``startupPolicy``
(AnyOrder / InOrder, with the ``StartupPolicyInProgress`` / ``StartupPolicyCompleted``
conditions) and ``dependsOn`` (Ready / Complete); ``replicatedJobsStatus`` counted in
Jobs; ``successPolicy`` (All / Any over target replicated jobs) -> ``Completed``
``AllJobsCompleted``; ``failurePolicy`` rules (FailJobSet / RestartJobSet /
RestartJobSetAndIgnoreMaxRestarts, ``maxRestarts``; a restart bumps ``status.restarts`` and
recreates every Job with ``restart-attempt`` + 1 once the previous one is gone) and the
default ``FailedJobs``; deletion of active Jobs (foreground) once the JobSet is finished;
suspend / resume.

Added from observation rather than source: the pods of a failed child Job are deleted
``failed_job_pod_deletion_delay`` (0.5 s) after the Job failed, as measured on Mokka; set it to
None for source-only behaviour. Left out: TTL, coordinator label, exclusive topology,
volumeClaimPolicies, BlockingRecreate, v0.12's RestartingJobSet condition, Events.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from cre.kube.client import BATCH_JOBS, JOBSETS, PODS, SERVICES
from cre.testing.cluster.clock import fmt_time
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
    uid_of,
)

P = "jobset.sigs.k8s.io/"
JOBSET_NAME, JOBSET_UID = P + "jobset-name", P + "jobset-uid"
RJOB_NAME, RESTART_ATTEMPT = P + "replicatedjob-name", P + "restart-attempt"
JOB_INDEX = P + "job-index"
CONTROLLER = "jobset.sigs.k8s.io/jobset-controller"


def step(world: World, now: float, cfg: SimConfig) -> Step:
    """One pass of the JobSet controller over every JobSet, plus the failed-Job pod cleanup."""
    b = StepBuilder()
    for js in world.all(JOBSETS):
        managed = (js.get("spec") or {}).get("managedBy")
        if deleting(js) or (managed and managed != CONTROLLER):
            continue
        _sync(world, js, now, b)
    if cfg.failed_job_pod_deletion_delay is not None:
        _delete_failed_job_pods(world, now, cfg.failed_job_pod_deletion_delay, b)
    return b.build()


def _delete_failed_job_pods(world: World, now: float, delay: float, b: StepBuilder) -> None:
    for job in world.all(BATCH_JOBS):
        if JOBSET_NAME not in labels_of(job) or not is_true(job, "Failed"):
            continue
        key = f"jobfailedat/{uid_of(job)}"
        seen = world.marks.get(key)
        if seen is None:
            b.add(Mark(key, now))
            b.wake(now + delay)
            continue
        if now < float(seen) + delay:
            b.wake(float(seen) + delay)
            continue
        for pod in world.owned_by(PODS, uid_of(job)):
            if not deleting(pod):
                b.add(Delete(PODS, ns_of(pod), name_of(pod), uid=uid_of(pod)))


def _rjobs(js: Mapping[str, Any]) -> list[Obj]:
    return list((js.get("spec") or {}).get("replicatedJobs") or [])


def _job_state(job: Mapping[str, Any]) -> str:
    if is_true(job, "Complete"):
        return "succeeded"
    if is_true(job, "Failed"):
        return "failed"
    return "active"


def replicated_jobs_status(js: Mapping[str, Any], jobs: list[Obj]) -> list[Obj]:
    """Per replicated job, counts of current-attempt Jobs (ready/succeeded/failed/active/...)."""
    out: list[Obj] = []
    for rj in _rjobs(js):
        mine = [j for j in jobs if labels_of(j).get(RJOB_NAME) == rj["name"]]
        tspec = (rj.get("template") or {}).get("spec") or {}
        par = int(tspec.get("parallelism", 1))
        want = min(par, int(tspec.get("completions") or par))
        entry = {"name": rj["name"], "ready": 0, "succeeded": 0, "failed": 0, "active": 0,
                 "suspended": 0}
        for j in mine:
            st, jstat = _job_state(j), j.get("status") or {}
            if st != "active":
                entry[st] += 1
                continue
            if int(jstat.get("succeeded", 0)) + int(jstat.get("ready", 0)) >= want:
                entry["ready"] += 1
            if int(jstat.get("active", 0)) > 0:
                entry["active"] += 1
            if (j.get("spec") or {}).get("suspend"):
                entry["suspended"] += 1
        out.append(entry)
    return out


def _cond(ctype: str, reason: str, message: str, now: float, status: str = "True") -> Obj:
    return {"type": ctype, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": fmt_time(now)}


def _first_failed(jobs: list[Obj]) -> Obj:
    return min(jobs, key=lambda j: ((condition(j, "Failed") or {}).get("lastTransitionTime", ""),
                                    name_of(j)))


def _sync(world: World, js: Obj, now: float, b: StepBuilder) -> None:
    spec = js.get("spec") or {}
    status: Obj = deep(js.get("status") or {})
    before = deep(status)
    restarts = int(status.get("restarts", 0))
    owned = world.owned_by(BATCH_JOBS, uid_of(js))
    previous = [j for j in owned if int(labels_of(j).get(RESTART_ATTEMPT, "0")) < restarts]
    current = [j for j in owned if j not in previous]
    rstatus = replicated_jobs_status(js, current)
    status["replicatedJobsStatus"] = rstatus
    conds = list(status.get("conditions") or [])
    finished = any(c.get("type") in ("Completed", "Failed") and c.get("status") == "True"
                   for c in conds)
    if finished:
        for j in current:
            if _job_state(j) == "active" and not deleting(j):
                b.add(Delete(BATCH_JOBS, ns_of(j), name_of(j), uid=uid_of(j),
                             propagation="Foreground"))
        _write(b, js, before, status)
        return
    for j in previous:
        if not deleting(j):
            b.add(Delete(BATCH_JOBS, ns_of(j), name_of(j), uid=uid_of(j),
                         propagation="Foreground"))
    failed = [j for j in current if _job_state(j) == "failed"]
    if failed:
        conds = _apply_failure_policy(js, failed, status, conds, now)
        status["conditions"] = conds
        _write(b, js, before, status)
        return
    if _success_met(js, current):
        conds.append(_cond("Completed", "AllJobsCompleted", "jobset completed successfully", now))
        status.update(conditions=conds, terminalState="Completed")
        _write(b, js, before, status)
        return
    network = spec.get("network") or {}
    subdomain = network.get("subdomain") or name_of(js)
    if network.get("enableDNSHostnames", True) and f"service/{uid_of(js)}" not in world.marks:
        b.add(Create(SERVICES, headless_service(js, subdomain)), Mark(f"service/{uid_of(js)}", 1))
    _create_jobs(world, js, owned, rstatus, restarts, subdomain, b)
    suspend = bool(spec.get("suspend"))
    if not suspend and (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder":
        conds = _startup_conditions(js, rstatus, conds, now)
    for j in current:
        if _job_state(j) == "active" and bool((j.get("spec") or {}).get("suspend")) != suspend:
            b.add(Patch(BATCH_JOBS, ns_of(j), name_of(j), {"spec": {"suspend": suspend}}))
    susp = condition(js, "Suspended")
    if suspend and not (susp and susp.get("status") == "True"):
        conds = [c for c in conds if c.get("type") != "Suspended"]
        conds.append(_cond("Suspended", "SuspendedJobs", "jobset is suspended", now))
    elif not suspend and susp and susp.get("status") == "True":
        conds = [c if c.get("type") != "Suspended" else
                 _cond("Suspended", "ResumeJobs", "jobset is resumed", now, status="False")
                 for c in conds]
    status["conditions"] = conds or None
    _write(b, js, before, status)


def _apply_failure_policy(js: Obj, failed: list[Obj], status: Obj, conds: list[Obj],
                          now: float) -> list[Obj]:
    policy = (js.get("spec") or {}).get("failurePolicy")
    first = _first_failed(failed)
    if policy is None:
        status["terminalState"] = "Failed"
        return [*conds, _cond("Failed", "FailedJobs", "jobset failed due to one or more job "
                              f"failures (first failed job: {name_of(first)})", now)]
    action = "RestartJobSet"
    for rule in policy.get("rules") or []:
        hits = [j for j in failed if _rule_matches(rule, j)]
        if hits:
            action, first = str(rule.get("action", "RestartJobSet")), _first_failed(hits)
            break
    if action == "FailJobSet":
        status["terminalState"] = "Failed"
        return [*conds, _cond("Failed", "FailJobSetFailurePolicyAction",
                              "applying FailJobSet failure policy action "
                              f"(first failed job: {name_of(first)})", now)]
    counted = int(status.get("restartsCountTowardsMax", 0))
    if action == "RestartJobSet" and counted >= int(policy.get("maxRestarts", 0)):
        status["terminalState"] = "Failed"
        return [*conds, _cond("Failed", "ReachedMaxRestarts", "jobset failed due to reaching max "
                              f"number of restarts (first failed job: {name_of(first)})", now)]
    status["restarts"] = int(status.get("restarts", 0)) + 1
    if action == "RestartJobSet":
        status["restartsCountTowardsMax"] = counted + 1
    return conds


def _startup_conditions(js: Mapping[str, Any], rstatus: list[Obj], conds: list[Obj],
                        now: float) -> list[Obj]:
    """InOrder start-up: ``StartupPolicyInProgress`` until every replicated job has started,
    then ``StartupPolicyCompleted``; setting one True flips the other to False."""
    by_name = {e["name"]: e for e in rstatus}
    done = all(_started(by_name[rj["name"]], int(rj.get("replicas", 1)), "Ready")
               for rj in _rjobs(js))
    on, off = ((("StartupPolicyCompleted", "InOrderStartupPolicyCompleted",
                 "in order startup policy has completed"), "StartupPolicyInProgress") if done
               else (("StartupPolicyInProgress", "InOrderStartupPolicyInProgress",
                      "in order startup policy is in progress"), "StartupPolicyCompleted"))
    current = next((c for c in conds if c.get("type") == on[0]), None)
    if current is not None and current.get("status") == "True":
        return conds
    out = [c for c in conds if c.get("type") != on[0]]
    out = [{**c, "status": "False", "lastTransitionTime": fmt_time(now)}
           if c.get("type") == off and c.get("status") == "True" else c for c in out]
    return [*out, _cond(*on, now)]


def _rule_matches(rule: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    failed = condition(job, "Failed") or {}
    reasons = rule.get("onJobFailureReasons") or []
    if reasons and failed.get("reason") not in reasons:
        return False
    patterns = rule.get("onJobFailureMessagePatterns") or []
    if patterns and not any(re.search(p, str(failed.get("message", ""))) for p in patterns):
        return False
    targets = rule.get("targetReplicatedJobs") or []
    return not targets or labels_of(job).get(RJOB_NAME) in targets


def _success_met(js: Mapping[str, Any], jobs: list[Obj]) -> bool:
    policy = (js.get("spec") or {}).get("successPolicy") or {}
    targets = policy.get("targetReplicatedJobs") or [rj["name"] for rj in _rjobs(js)]
    done = sum(1 for j in jobs if _job_state(j) == "succeeded"
               and labels_of(j).get(RJOB_NAME) in targets)
    if policy.get("operator", "All") == "Any":
        return done >= 1
    want = sum(int(rj.get("replicas", 1)) for rj in _rjobs(js) if rj["name"] in targets)
    return done >= want > 0


def _started(entry: Mapping[str, int], replicas: int, status: str) -> bool:
    if status == "Complete":
        return entry["succeeded"] >= replicas
    return entry["ready"] + entry["succeeded"] + entry["failed"] >= replicas


def _create_jobs(world: World, js: Obj, owned: list[Obj], rstatus: list[Obj], restarts: int,
                 subdomain: str, b: StepBuilder) -> None:
    spec = js.get("spec") or {}
    by_name = {e["name"]: e for e in rstatus}
    existing = {name_of(j) for j in owned}
    in_order = (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
    global_idx = 0
    total = sum(int(rj.get("replicas", 1)) for rj in _rjobs(js))
    blocked = False
    for rj in _rjobs(js):
        replicas = int(rj.get("replicas", 1))
        deps_ok = all(_started(by_name[d["name"]], _replicas(js, d["name"]), d.get("status",
                                                                                 "Ready"))
                      for d in rj.get("dependsOn") or [] if d["name"] in by_name)
        for idx in range(replicas):
            name = f"{name_of(js)}-{rj['name']}-{idx}"
            if name not in existing and deps_ok and not blocked:
                b.add(Create(BATCH_JOBS, child_job(js, rj, index=idx, global_index=global_idx,
                                                   global_replicas=total, restarts=restarts,
                                                   subdomain=subdomain)))
            global_idx += 1
        if in_order and not _started(by_name[rj["name"]], replicas, "Ready"):
            blocked = True


def _replicas(js: Mapping[str, Any], rjob: str) -> int:
    return next((int(rj.get("replicas", 1)) for rj in _rjobs(js) if rj["name"] == rjob), 1)


def child_job(js: Mapping[str, Any], rj: Mapping[str, Any], *, index: int, global_index: int,
              global_replicas: int, restarts: int, subdomain: str) -> Obj:
    """The batch Job JobSet creates for replica ``index`` of replicated job ``rj``."""
    tmpl: Obj = deep(rj.get("template") or {})
    name = f"{name_of(js)}-{rj['name']}-{index}"
    keys = {JOBSET_NAME: name_of(js), JOBSET_UID: uid_of(js), RJOB_NAME: str(rj["name"]),
            RESTART_ATTEMPT: str(restarts), P + "replicatedjob-replicas": str(rj.get("replicas",
                                                                                      1)),
            P + "global-replicas": str(global_replicas), JOB_INDEX: str(index),
            P + "job-global-index": str(global_index),
            P + "job-key": hashlib.sha1(f"{ns_of(js)}/{name}".encode()).hexdigest(),
            P + "group-name": str(rj.get("groupName", "default")),
            P + "group-replicas": str(global_replicas), P + "job-group-index": str(global_index)}
    jmeta: Obj = tmpl.get("metadata") or {}
    jspec: Obj = tmpl.get("spec") or {}
    jspec.setdefault("completionMode", "Indexed")
    jspec["suspend"] = bool((js.get("spec") or {}).get("suspend"))
    pod: Obj = jspec.setdefault("template", {})
    pmeta: Obj = pod.setdefault("metadata", {})
    pspec: Obj = pod.setdefault("spec", {})
    pspec.setdefault("restartPolicy", "OnFailure")
    if ((js.get("spec") or {}).get("network") or {}).get("enableDNSHostnames", True):
        pspec["subdomain"] = subdomain
    for m in (jmeta, pmeta):
        m["labels"] = {**(m.get("labels") or {}), **keys}
        m["annotations"] = {**(m.get("annotations") or {}), **keys}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns_of(js), "labels": jmeta["labels"],
                         "annotations": jmeta["annotations"],
                         "ownerReferences": [owner_ref({"apiVersion": "jobset.x-k8s.io/v1alpha2",
                                                        "kind": "JobSet", "metadata": meta(js)})]},
            "spec": jspec}


def headless_service(js: Mapping[str, Any], subdomain: str) -> Obj:
    publish = ((js.get("spec") or {}).get("network") or {}).get("publishNotReadyAddresses", True)
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": subdomain, "namespace": ns_of(js),
                         "ownerReferences": [owner_ref({"apiVersion": "jobset.x-k8s.io/v1alpha2",
                                                        "kind": "JobSet", "metadata": meta(js)})]},
            "spec": {"clusterIP": "None", "selector": {JOBSET_NAME: name_of(js)},
                     "publishNotReadyAddresses": publish}}


def _write(b: StepBuilder, js: Obj, before: Obj, status: Obj) -> None:
    if {k: v for k, v in status.items() if v is not None} != {
            k: v for k, v in before.items() if v is not None}:
        b.add(Patch(JOBSETS, ns_of(js), name_of(js), {"status": status}, subresource="status"))
