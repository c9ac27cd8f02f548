"""The tiers above the Job in the chaos soak: a Certification or a WorkloadRun and the
Workflow, Jobs and TrainJobs it fans out to, under the same fault mix as a single Job.

A tier run applies, in a namespace of its own (everything the run leaves is the run's), a
Certification of ``communication/nccl-all-reduce`` over the soak's nodes in two groups
(``nodesPerJob: 4``), or the reference's example MPI WorkloadRun (``numNodes: 4``, nccl-tests'
all_reduce with a bandwidth and a goodput measurement, so each Job also makes a
BandwidthMeasurement and a GoodputMeasurement; the run's Workflow generates its
TrainingRuntime). A failing one is named ``soakfail-...``: the
simulator runs with ``--fail-launcher --fail-launcher-pod-prefix soakfail-``, so both groups'
launchers exit 1 with an NCCL error (a Workload-class failure: the groups fail, the Workflow
fails, the verdict is Failed). :func:`draw` decides a run's tier, faults, failure and deletion
from its seed. The invariants, from the emulator's journal and audit rather than the end state:

* ``verdict``: the object is terminal with the expected phase (and, for a Certification,
  verdict ``Passed`` / ``Failed``), or gone when it was deleted mid-run;
* ``single_create``: no name of a Workflow, Job or TrainJob (nor a WorkloadRun's
  measurements) was created twice (one uid per name in the journal) and the admitted
  creates of each kind equal its distinct names (audit);
* ``no_orphans``: once the object is deleted (mid-run or after its verdict) nothing of the run
  is left in its namespace: Workflows, Jobs, TrainJobs, TrainingRuntimes, measurements,
  ConfigMaps, PVCs, pods;
* ``failure_log``: in a failing run, every Job that ended Failed recorded a failureLog naming
  its launcher pod (or says why not when the manager was blind:
  :func:`failure_log_problem`);
* ``no_regression``: no object of the run (the Certification or WorkloadRun, its Workflow and
  Jobs) loses a terminal phase, a verdict or a failureLog in a later version.
"""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from typing import Any, Final, Protocol

import attrs

from cre.testing.procs import Stack, StackError, wait_until
from cre.testing.soakreport import RunResult

FAIL_PREFIX: Final = "soakfail-"
# The simulator arguments that make the launchers of failing tier runs fail (and no other).
SIM_ARGS: Final = ("--fail-launcher", "--fail-launcher-pod-prefix", FAIL_PREFIX)
TERMINAL: Final = ("Succeeded", "Failed")
FAULT_KINDS: Final = (
    "conflict_storm", "throttle_429", "server_errors", "latency", "watch_drops",
    "gone_error_event", "gone_http", "outage", "manager_sigkill", "leader_failover",
    "launcher_fails_while_down", "job_deleted", "node_not_ready",
)
TIERS: Final = ("Job", "Certification", "WorkloadRun")


@attrs.frozen(kw_only=True)
class TierKind:
    """What the soak needs to know of a tier above the Job: its kind, what it fans out to and
    what a deleted one must not leave behind."""

    tier: str
    resource: str  # kubectl's name of the kind, with its group
    prefix: str  # the name of a passing run's object starts so (a failing one: FAIL_PREFIX)
    children: tuple[tuple[str, str], ...]  # (group, resource) whose names are created once
    watched: tuple[tuple[str, str], ...]  # (group, resource) whose outcome is never lost
    leftovers: tuple[str, ...]  # kubectl kinds of which nothing may be left in the namespace
    verdict: bool  # whether the kind has a verdict besides its phase


_FANOUT: Final = (("cre.dev", "workflows"), ("cre.dev", "jobs"),
                  ("trainer.kubeflow.org", "trainjobs"))
_LEFT: Final = ("workflows.cre.dev", "jobs.cre.dev", "trainjobs.trainer.kubeflow.org",
                "trainingruntimes.trainer.kubeflow.org", "pods")
CERTIFICATION: Final = TierKind(
    tier="Certification", resource="certifications.cre.dev", prefix="soakcert-",
    children=_FANOUT, watched=(("cre.dev", "certifications"), *_FANOUT[:2]),
    leftovers=("certifications.cre.dev", *_LEFT), verdict=True)
WORKLOAD_RUN: Final = TierKind(
    tier="WorkloadRun", resource="workloadruns.cre.dev", prefix="soakrun-",
    children=(*_FANOUT, ("cre.dev", "bandwidthmeasurements"), ("cre.dev", "goodputmeasurements")),
    watched=(("cre.dev", "workloadruns"), *_FANOUT[:2]),
    leftovers=("workloadruns.cre.dev", *_LEFT, "bandwidthmeasurements.cre.dev",
               "goodputmeasurements.cre.dev", "persistentvolumeclaims"), verdict=False)
KINDS: Final = {k.tier: k for k in (CERTIFICATION, WORKLOAD_RUN)}


@attrs.frozen(kw_only=True)
class RunPlan:
    """What one run does, drawn from its seed alone (:func:`draw`)."""

    kinds: tuple[str, ...]  # its faults, in the order drawn
    fail: bool  # its launchers exit 1 (a Workload-class failure)
    deleted: bool  # its object is deleted mid-run
    tier: str


def draw(rng: random.Random) -> RunPlan:
    """A run's plan, the first draws of its ``rng`` (the rest draw the faults' details). About
    a third of the runs are tier runs, split evenly between Certifications and WorkloadRuns
    (one draw decides both, so the faults, failures and deletions of a seed are the same as
    when Certifications had the whole third); a launcher that fails while the manager is down
    is a Job-level scenario."""
    kinds = tuple(rng.sample(FAULT_KINDS, rng.choice((0, 1, 1, 2, 3))))
    fail = "launcher_fails_while_down" in kinds or rng.random() < 0.4
    deleted = "job_deleted" in kinds
    pick = rng.random()
    tier = ("Job" if pick >= 0.35 or "launcher_fails_while_down" in kinds
            else "WorkloadRun" if pick < 0.175 else "Certification")
    return RunPlan(kinds=kinds, fail=fail, deleted=deleted, tier=tier)


# Faults that leave the manager blind for a while: no manager runs (killed, failing over), or
# every watch is down and its resumes refused (410 window, API outage).
BLIND_FAULTS: Final = ("manager_sigkill", "leader_failover", "launcher_fails_while_down",
                       "gone_error_event", "outage")
# What a failure record may say when the launcher was deleted while the manager was blind.
UNSEEN_REASONS: Final = ("PodNotFound", "NoTerminatedContainer")


def failure_log_problem(status: dict[str, Any], *, blind: bool) -> str:
    """What is wrong with a failed Job's ``failureLog`` ("" when nothing): a Workload-class
    failure must record one naming the launcher pod. JobSet deletes a failed launcher's pods
    about 0.5 s after it fails (measured on Mokka, modelled by the simulator), so when the
    manager could not see the launcher then (no manager ran, or its watches were down) nobody
    can read it: the record must still be there and say why no pod is named (``PodNotFound``,
    or ``NoTerminatedContainer`` when only the workers were left)."""
    if ((status.get("failureClass") or {}).get("scope")) not in (None, "Workload"):
        return ""
    log = status.get("failureLog") or {}
    if "launcher" in str(log.get("podName") or ""):
        return ""
    if blind and log.get("reason") in UNSEEN_REASONS:
        return ""
    return (f"failureLog names {log.get('podName')!r} (reason {log.get('reason')!r}) "
            f"{'after the manager was blind' if blind else 'with the manager watching'}")


# A group whose Job failed naming a NotReady node waits this long (the Workflow's
# failurePolicy.nodeNotReadyGraceSeconds, which a Certification and a WorkloadRun both pass on)
# for the node to come back before it blames it; the soak keeps its NotReady node down for the
# whole run, so that wait is part of the verdict's.
NOT_READY_GRACE: Final = 30
FAILURE_POLICY: Final = f"  failurePolicy: {{nodeNotReadyGraceSeconds: {NOT_READY_GRACE}}}\n"


def verdict_wait(soak: SoakDriver, faults: list[str]) -> float:
    """How long a tier run may take to its verdict: the soak's verdict timeout, plus the NotReady
    grace when a node is NotReady for the whole run (a run waits at most that long: no run waits
    forever, but none blames a node before its grace is over)."""
    if "node_not_ready" not in faults:
        return soak.verdict_timeout
    return soak.verdict_timeout + NOT_READY_GRACE


def manifest(kind: TierKind, name: str, namespace: str) -> str:
    """The object a tier run applies (YAML): a Certification of
    ``communication/nccl-all-reduce``, or the reference's example MPI WorkloadRun (nccl-tests'
    all_reduce with a bandwidth measurement) also asking for a goodput measurement (of an NCCL
    log it finds no training step: it must not change the verdict), both over the soak's nodes
    in two groups of 4. Both shorten the NotReady grace to :data:`NOT_READY_GRACE`, see
    :func:`verdict_wait`."""
    head = (f"apiVersion: cre.dev/v1alpha1\nkind: {kind.tier}\n"
            f"metadata: {{name: {name}, namespace: {namespace}}}\n")
    if kind is CERTIFICATION:
        return (head + "spec:\n  nodesPerJob: 4\n" + FAILURE_POLICY
                + "  categories:\n  - {domain: communication, variant: nccl-all-reduce}\n")
    return (head + "spec:\n  image: nvcr.io/nvidia/pytorch:26.01-py3\n  numNodes: 4\n"
            + FAILURE_POLICY
            + "  framework:\n    mpi: {binary: /usr/local/bin/all_reduce_perf_mpi, "
            "mpirunPath: /usr/local/mpi/bin/mpirun,\n"
            '          args: ["-b", "8", "-e", "1G", "-f", "2", "-n", "20"]}\n'
            "  bandwidthMeasurement: {logProfileRef: nccl-bandwidth, testType: all_reduce}\n"
            "  goodputMeasurement: {logProfileRef: megatron-training}\n")


class SoakDriver(Protocol):
    """What a tier run needs of the soak's driver (:class:`cre.testing.soak.Soak`)."""

    stack: Stack
    verdict_timeout: float

    def kubectl(self, *args: str, stdin: str | None = None, tries: int = 20) -> str: ...
    def get_json(self, *args: str) -> dict[str, Any] | None: ...
    def inject(self, kinds: list[str], rng: random.Random) -> None: ...
    def supervised(self, done: bool) -> bool: ...
    def diagnose(self, namespace: str) -> str: ...
    def settle(self) -> None: ...
    def blind(self, result: RunResult) -> bool: ...


def run_tier(soak: SoakDriver, result: RunResult, rng: random.Random, *, kind: TierKind,
             index: int, fail: bool, deleted: bool, started: float,
             audit_from: int) -> RunResult:
    """One tier run (see the module docstring); the faults are the Job runs' own."""
    namespace = f"soak-{kind.tier[0].lower()}{index}"
    name = f"{FAIL_PREFIX if fail else kind.prefix}{index}-{result.seed % 100000}"
    kinds = result.faults
    soak.kubectl("apply", "-f", "-", stdin=f"{{apiVersion: v1, kind: Namespace, "
                                            f"metadata: {{name: {namespace}}}}}")
    try:
        soak.kubectl("apply", "-f", "-", stdin=manifest(kind, name, namespace))
        soak.inject(kinds, rng)
        if deleted:
            soak.kubectl("delete", kind.resource, name, "-n", namespace, "--wait=false")
            wait_until(lambda: soak.supervised(
                phase_and_verdict(soak, kind, name, namespace) is None),
                timeout=soak.verdict_timeout, what=f"{namespace}/{name} to be gone",
                interval=0.5)
        else:
            wait_until(lambda: soak.supervised(
                (phase_and_verdict(soak, kind, name, namespace) or ("",))[0] in TERMINAL),
                timeout=verdict_wait(soak, kinds),
                what=f"{namespace}/{name} to reach a verdict",
                interval=0.5)
    except StackError as exc:
        result.violations["verdict"] = f"{exc}; {soak.diagnose(namespace)}"
    result.seconds = time.monotonic() - started
    soak.settle()
    got = phase_and_verdict(soak, kind, name, namespace)
    result.phase = "Deleted" if got is None else got[0]
    want_verdict = {"Succeeded": "Passed", "Failed": "Failed"}.get(result.expected)
    if "verdict" not in result.violations and not (result.expected == "Terminal"
                                                   and result.phase in TERMINAL):
        if result.phase != result.expected:
            result.violations["verdict"] = f"expected {result.expected}, got {result.phase}"
        elif got is not None and kind.verdict and want_verdict and got[1] != want_verdict:
            result.violations["verdict"] = f"phase {got[0]} with verdict {got[1]!r}"
    # Everything the object made goes with it (its finalizer, then owner references).
    if got is not None:
        soak.kubectl("delete", kind.resource, name, "-n", namespace, "--wait=false")
    try:
        wait_until(lambda: soak.supervised(not leftovers(soak, kind, namespace)),
                   timeout=soak.verdict_timeout, what=f"{namespace} to be emptied",
                   interval=0.5)
    except StackError:
        result.violations["no_orphans"] = f"left behind: {leftovers(soak, kind, namespace)}"
    audit = soak.stack.emulator_control("GET", f"audit?since={audit_from}")["records"]
    versions = soak.stack.emulator_control("GET", "journal")["objects"]
    check(result, namespace=namespace, versions=versions, audit=audit, fail=fail,
          blind=soak.blind(result), kind=kind)
    if result.violations:
        result.journal = [{"resource": v["resource"], **v["object"]} for v in versions
                          if (v["object"].get("metadata") or {}).get("namespace") == namespace
                          and (v["group"], v["resource"]) in kind.watched]
    return result


def phase_and_verdict(soak: SoakDriver, kind: TierKind, name: str,
                      namespace: str) -> tuple[str, str] | None:
    obj = soak.get_json("get", kind.resource, name, "-n", namespace)
    if obj is None:
        return None
    status = obj.get("status") or {}
    return str(status.get("phase") or ""), str(status.get("verdict") or "")


def leftovers(soak: SoakDriver, kind: TierKind, namespace: str) -> list[str]:
    """``kind/name`` of everything of the run still in ``namespace`` (ConfigMaps: CRE's)."""
    out: list[str] = []
    for left in kind.leftovers:
        for item in (soak.get_json("get", left, "-n", namespace) or {}).get("items") or []:
            out.append(f"{left}/{item['metadata']['name']}")
    for item in (soak.get_json("get", "configmaps", "-n", namespace) or {}).get("items") or []:
        if any(k.startswith("cre.dev/") for k in (item["metadata"].get("labels") or {})):
            out.append(f"configmaps/{item['metadata']['name']}")
    return out


def check(result: RunResult, *, namespace: str, versions: list[dict[str, Any]],
          audit: list[dict[str, Any]], fail: bool, blind: bool,
          kind: TierKind = CERTIFICATION) -> None:
    """The journal and audit invariants of one tier run (``versions``: the journal's entries,
    each ``{"group", "resource", "object"}``), recorded in ``result.violations``."""
    mine = [v for v in versions
            if (v["object"].get("metadata") or {}).get("namespace") == namespace]
    uids: dict[tuple[str, str], set[str]] = defaultdict(set)
    for v in mine:
        meta = v["object"]["metadata"]
        uids[(v["resource"], meta["name"])].add(str(meta.get("uid")))
    twice = sorted(f"{res}/{name}" for (res, name), seen in uids.items()
                   if len(seen) > 1 and (_group(mine, res), res) in kind.children)
    creates = Counter(r["resource"] for r in audit if r["verb"] == "create"
                      and r["code"] == 201 and r["namespace"] == namespace
                      and (r["group"], r["resource"]) in kind.children)
    names = Counter(res for (res, _name) in uids if (_group(mine, res), res) in kind.children)
    extra = {res: (n, names[res]) for res, n in creates.items() if n > names[res]}
    if twice or extra:
        result.violations["single_create"] = (
            f"created twice: {twice}; admitted creates vs names: {extra}")
    if fail:
        final: dict[str, dict[str, Any]] = {}
        for v in mine:
            if (v["group"], v["resource"]) == ("cre.dev", "jobs"):
                final[v["object"]["metadata"]["name"]] = v["object"]
        bad = sorted(f"{name}: {problem}" for name, job in final.items()
                     if (job.get("status") or {}).get("phase") == "Failed"
                     and (problem := failure_log_problem(job.get("status") or {},
                                                         blind=blind)))
        if bad:
            result.violations["failure_log"] = "; ".join(bad)
    lost = _regressions(mine, kind.watched)
    if lost:
        result.violations["no_regression"] = "; ".join(lost)


def _group(versions: list[dict[str, Any]], resource: str) -> str:
    for v in versions:
        if v["resource"] == resource:
            return str(v["group"])
    return ""


def _regressions(versions: list[dict[str, Any]],
                 watched: tuple[tuple[str, str], ...]) -> list[str]:
    """Objects whose terminal phase, verdict or failureLog disappeared in a later version."""
    seen: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    lost: list[str] = []
    for v in versions:
        if (v["group"], v["resource"]) not in watched:
            continue
        meta = v["object"]["metadata"]
        key = (v["resource"], meta["name"], str(meta.get("uid")))
        status = v["object"].get("status") or {}
        now = set()
        if status.get("phase") in TERMINAL:
            now.add("terminal phase")
        if status.get("verdict"):
            now.add("verdict")
        if status.get("failureLog"):
            now.add("failureLog")
        for gone in sorted(seen[key] - now):
            lost.append(f"{key[0]}/{key[1]} lost its {gone}")
        seen[key] |= now
    return lost
