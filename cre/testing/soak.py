"""The chaos soak: Jobs, Certifications and WorkloadRuns run on the simulated cluster while the
API server and the manager fail.

``python -m bench soak`` (and the short seeded soak in ``make test``) drive the real processes
of :mod:`cre.testing.procs`: the API emulator, the cluster simulator and ``cre-manager``. Each
run applies one NCCL Job, or (about a third of the runs) a Certification or a WorkloadRun in two
groups (:mod:`cre.testing.soaktiers`), whose expected verdict is known (it succeeds, or its
launchers exit 1), injects a seeded mix of faults through the emulator's fault API and the
process table, waits for the verdict, clears the faults and checks the invariants, each a named
check:

* ``verdict``: the object is terminal with the expected phase (a real failure never becomes a
  success, nor the reverse); an object deleted mid-run is gone instead;
* ``single_create``: at most one TrainJob create was admitted per Job (counted from the
  emulator's audit, not from the end state); for a tier run, no Workflow, Job or TrainJob name
  (nor a WorkloadRun's BandwidthMeasurement) was created twice;
* ``no_orphans``: after a deletion no TrainJob or pod of the Job is left (its TrainingRuntime is
  the user's, applied with it); nothing of a tier run is left in its namespace (Workflows,
  Jobs, TrainJobs, the TrainingRuntimes made for it, measurements, ConfigMaps, PVCs, pods);
* ``failure_log``: a Workload-class failure records ``failureLog`` naming the launcher pod; a
  launcher that failed while the manager was blind (none ran, or its watches were down) is
  deleted by JobSet about 0.5 s later, before anyone can read it, and then the record must say
  why no pod is named (``PodNotFound``, or ``NoTerminatedContainer`` when only workers were
  left);
* ``no_regression``: in the journal of every version written, a terminal phase, a verdict or a
  recorded failureLog is never lost afterwards;
* ``retries`` (over the soak): the manager's metrics count retries when faults were injected.

A run's faults come from ``random.Random(run_seed)``; a violating run carries its seed and the
emulator's journal of its objects' versions, and ``--replay SEED`` runs exactly that run again.
The driver never hangs: every wait is bounded, each run starts on an idle cluster (no pod of an
earlier run left), and after two runs in a row that timed out (each reported with the managers
alive and the pods that did not run, with the scheduler's message) the soak stops with
``stuck`` naming the next run and its seed.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from typing import Any, Final

from cre.core.job.workload import workload_name
from cre.testing import soaktiers as tiers
from cre.testing.procs import REPO, ManagerProc, Stack, StackError, wait_until
from cre.testing.soakreport import RunResult, summarize
from cre.testing.soaktiers import BLIND_FAULTS, FAULT_KINDS, draw, failure_log_problem

__all__ = ["FAULT_KINDS", "Soak", "run_soak"]

NODES: Final = 8
TERMINAL: Final = ("Succeeded", "Failed")


class SoakStuck(StackError):
    """The cluster cannot get back to idle between runs: the soak ends with its report."""


class Soak:
    """One stack for all runs; managers restarted as the faults demand."""

    def __init__(self, stack: Stack, *, time_scale: float, outage_seconds: float,
                 verdict_timeout: float) -> None:
        self.stack = stack
        self.time_scale = time_scale
        self.outage_seconds = outage_seconds
        self.verdict_timeout = verdict_timeout
        self.managers: list[ManagerProc] = []
        self._incarnation = 0
        self.metrics: dict[str, float] = {}
        self._not_ready: list[str] = []
        self.startup_exits = 0
        self.timeouts_in_a_row = 0
        self.exits_during_runs = 0
        self._exits_at_start = 0

    # -- processes -------------------------------------------------------------------------

    def start(self) -> None:
        self.stack.start_emulator()
        sim = self.stack.start_cluster(nodes=NODES, time_scale=self.time_scale,
                                       extra_args=tiers.SIM_ARGS)
        wait_until(lambda: len(self.gpu_nodes()) >= NODES, timeout=60, what="GPU nodes",
                   interval=0.2, alive=sim.check_alive)
        self.kubectl("apply", "-f", "-", stdin="{apiVersion: v1, kind: Namespace, "
                                                "metadata: {name: cre-system}}")
        # The LogProfiles a WorkloadRun's bandwidth measurement reads.
        self.kubectl("apply", "-k", str(REPO / "deploy" / "logprofiles"))
        self.stack.emulator_control("POST", "journal")
        self.managers.append(self._manager())

    def _manager(self, *, wait_ready: bool = True) -> ManagerProc:
        """A new manager; one that exits while starting (an API brown-out at start-up) is
        started again after a pause, as a Deployment's pod restarts (counted)."""
        for attempt in range(30):
            try:
                return self._start_manager(wait_ready=wait_ready)
            except StackError as exc:
                if "exited with code" not in str(exc):
                    raise
                self.startup_exits += 1
                time.sleep(min(0.5 * (attempt + 1), 5.0))
        raise StackError("the manager kept exiting at start-up")

    def _start_manager(self, *, wait_ready: bool) -> ManagerProc:
        self._incarnation += 1
        return self.stack.start_manager(
            "--leader-elect", "--leader-elect-lease-namespace", "cre-system",
            "--leader-elect-identity", f"soak-{self._incarnation}",
            "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s",
            "--leader-elect-retry-period", "0.5s",
            name=f"manager-{self._incarnation}", wait_ready=wait_ready, timeout=120)

    def _scrape(self, manager: ManagerProc) -> None:
        status, text = manager.get("metrics", "/metrics")
        if status != 200:
            return
        for line in text.splitlines():
            if line.startswith(("workqueue_retries_total", "cre_informer_relists_total",
                                "cre_informer_reconnects_total",
                                "controller_runtime_reconcile_errors_total")):
                series, _, value = line.rpartition(" ")
                metric = series.split("{", 1)[0]
                key = f"{manager.name}:{series}"
                self.metrics[key] = float(value)
                self.metrics.setdefault(f"metric:{metric}", 0.0)

    def retries_seen(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for key, value in self.metrics.items():
            if not key.startswith("metric:"):
                metric = key.split(":", 1)[1].split("{", 1)[0]
                out[metric] = out.get(metric, 0.0) + value
        return out

    def _kill(self, sig: signal.Signals) -> None:
        for m in self.managers:
            self._scrape(m)
            m.send(sig)
            m.wait(60)
        self.managers.clear()

    def supervised(self, done: bool) -> bool:
        """``done``, after restarting managers that exited (a leader that lost its lease in
        an outage exits on purpose; its Deployment starts it again)."""
        if not done:
            dead = [m for m in self.managers if m.returncode() is not None]
            if dead:
                self.exits_during_runs += len(dead)
                self._ensure_manager()
        return done

    def _ensure_manager(self) -> None:
        self.managers = [m for m in self.managers if m.returncode() is None]
        if not self.managers:
            self.managers.append(self._manager())

    # -- cluster helpers -------------------------------------------------------------------

    def kubectl(self, *args: str, stdin: str | None = None, tries: int = 20) -> str:
        """kubectl, retried: the soak's own calls go through the same faulty server."""
        for attempt in range(tries):
            try:
                return self.stack.kubectl(*args, stdin=stdin).stdout
            except (StackError, subprocess.TimeoutExpired):
                if attempt == tries - 1:
                    raise
                time.sleep(0.5)
        raise AssertionError("unreachable")

    def get_json(self, *args: str) -> dict[str, Any] | None:
        import json

        for _ in range(20):
            out = self.stack.kubectl(*args, "-o", "json", check=False)
            if out.returncode == 0:
                doc: dict[str, Any] = json.loads(out.stdout)
                return doc
            if "NotFound" in out.stderr or "not found" in out.stderr:
                return None
            time.sleep(0.5)
        raise StackError(f"kubectl get {args} kept failing")

    def gpu_nodes(self) -> list[str]:
        doc = self.get_json("get", "nodes", "-l", "nvidia.com/gpu.present=true") or {}
        return sorted(n["metadata"]["name"] for n in doc.get("items") or [])

    def phase(self, name: str) -> str | None:
        job = self.get_json("get", "jobs.cre.dev", name)
        return None if job is None else str((job.get("status") or {}).get("phase") or "")

    def apply_job(self, name: str, *, fail: bool) -> None:
        rendered = subprocess.run(
            [sys.executable, "-m", "cre.render", "--entry", "communication/nccl-all-reduce",
             "--platform", "aws", "--arch", "h100", "--nodes", ",".join(self.gpu_nodes()),
             "--job-name", name], capture_output=True, text=True, check=True).stdout
        if fail:
            rendered = rendered.replace("\n        - 16G\n", "\n        - infG\n")
        self.kubectl("apply", "-f", "-", stdin=rendered)

    def faults(self, spec: dict[str, Any]) -> None:
        self.stack.emulator_control("POST", "faults", spec)

    def clear_faults(self) -> None:
        self.stack.emulator_control("DELETE", "faults")

    # -- one run ---------------------------------------------------------------------------

    def run(self, index: int, seed: int) -> RunResult:
        """One run (its faults, verdict and invariants drawn from ``seed`` alone)."""
        self._exits_at_start = self.exits_during_runs
        result = self._run(index, seed)
        timed_out = "timed out" in result.violations.get("verdict", "")
        self.timeouts_in_a_row = self.timeouts_in_a_row + 1 if timed_out else 0
        return result

    def _run(self, index: int, seed: int) -> RunResult:
        rng = random.Random(seed)
        # A third of the runs are tier runs (a Certification or a WorkloadRun -> Workflow ->
        # Jobs): :func:`cre.testing.soaktiers.draw`.
        plan = draw(rng)
        kinds, fail, deleted, tier = list(plan.kinds), plan.fail, plan.deleted, plan.tier
        name = f"soak-{index}-{seed % 100000}"
        # A node going NotReady under the Job may fail it (Node class) or not: any verdict.
        expected = ("Deleted" if deleted else "Terminal" if "node_not_ready" in kinds
                    else "Failed" if fail else "Succeeded")
        result = RunResult(run=index, seed=seed, faults=sorted(kinds), expected=expected,
                           tier=tier)
        self._ensure_manager()
        self._wait_idle(result)
        started = time.monotonic()
        audit_from = self.stack.emulator_control("GET", "audit?since=999999999")["seq"]
        self.stack.emulator_control("DELETE", "journal")  # this run's writes only
        self.stack.emulator_control("POST", "journal")
        if tier in tiers.KINDS:
            return tiers.run_tier(self, result, rng, kind=tiers.KINDS[tier], index=index,
                                  fail=fail, deleted=deleted, started=started,
                                  audit_from=audit_from)
        try:
            self.apply_job(name, fail=fail)
            if "launcher_fails_while_down" in kinds:
                # The workload is created, the manager dies, the launcher runs and exits while
                # no manager runs; the restarted one must still record it, naming the launcher.
                wait_until(lambda: self.supervised(self._trainjob(name) is not None),
                           timeout=self.verdict_timeout, what=f"{name}'s TrainJob",
                           interval=0.2)
                self._kill(signal.SIGKILL)
                wait_until(lambda: self._trainjob_failed(name), timeout=self.verdict_timeout,
                           what=f"{name}'s workload to fail", interval=0.3)
            self.inject(kinds, rng)
            if "launcher_fails_while_down" in kinds:
                self._ensure_manager()
            if deleted:
                self.kubectl("delete", "jobs.cre.dev", name, "--wait=false")
            if deleted:
                wait_until(lambda: self.supervised(self.phase(name) is None),
                           timeout=self.verdict_timeout, what=f"{name} to be gone",
                           interval=0.3)
            else:
                wait_until(lambda: self.supervised(self.phase(name) in TERMINAL),
                           timeout=self.verdict_timeout, what=f"{name} to reach a verdict",
                           interval=0.3)
        except StackError as exc:
            result.violations["verdict"] = f"{exc}; {self.diagnose('default')}"
        result.seconds = time.monotonic() - started
        self.settle()
        self._check(result, name, audit_from=audit_from, deleted=deleted, fail=fail)
        if not deleted:
            self.kubectl("delete", "jobs.cre.dev", name, "--wait=false")
        # The TrainingRuntime was applied with the Job (the user's, not CRE's to delete).
        self.kubectl("delete", "trainingruntimes.trainer.kubeflow.org", f"{name}-runtime",
                     "--wait=false", "--ignore-not-found")
        return result

    def blind(self, result: RunResult) -> bool:
        """Whether the run left the manager blind for a while (a fault that kills it or takes
        every watch down, or a manager that exited during the run)."""
        return (bool(set(result.faults) & set(BLIND_FAULTS))
                or self.exits_during_runs > self._exits_at_start)

    def settle(self) -> None:
        """After a run's verdict: faults cleared, nodes Ready, a manager running (scraped)."""
        self.clear_faults()
        self._restore_nodes()
        self._ensure_manager()
        for m in self.managers:
            self._scrape(m)

    def diagnose(self, namespace: str) -> str:
        """Why a run may not progress: managers alive, the run's pods that are not running
        (with the scheduler's message), for the report of a run that timed out."""
        alive = [m.name for m in self.managers if m.returncode() is None]
        pods = []
        for pod in (self.get_json("get", "pods", "-n", namespace) or {}).get("items") or []:
            status = pod.get("status") or {}
            if status.get("phase") != "Running":
                why = "; ".join(str(c.get("message")) for c in status.get("conditions") or []
                                if c.get("status") == "False" and c.get("message"))
                pods.append(f"{pod['metadata']['name']}: {status.get('phase')} {why}".strip())
        return f"managers alive: {alive}; pods not running: {pods}"

    def _wait_idle(self, result: RunResult) -> None:
        """Every run starts on an idle cluster: no pod of an earlier run holds a node. A
        cluster that does not get there ends the soak, loudly, rather than failing every
        later run with a timeout (the first soak's stall)."""
        def busy() -> list[str]:
            doc = self.get_json("get", "pods", "-A") or {}
            return [f"{p['metadata']['namespace']}/{p['metadata']['name']}"
                    for p in doc.get("items") or []
                    if (p.get("status") or {}).get("phase") not in TERMINAL]
        if self.timeouts_in_a_row >= 2:
            raise SoakStuck(f"run {result.run} (seed {result.seed}) not started: the last "
                            f"{self.timeouts_in_a_row} runs timed out waiting for a verdict; "
                            "see their diagnosis in failing_runs")
        try:
            wait_until(lambda: self.supervised(not busy()), timeout=self.verdict_timeout,
                       what="the previous runs' pods to be gone", interval=0.5)
        except StackError as exc:
            raise SoakStuck(f"run {result.run} (seed {result.seed}) cannot start: {exc}: "
                            f"{busy()}") from exc

    def _trainjob(self, name: str) -> dict[str, Any] | None:
        return self.get_json("get", "trainjobs.trainer.kubeflow.org", workload_name(name))

    def _trainjob_failed(self, name: str) -> bool:
        """The workload ended Failed (its launcher exited non-zero; JobSet may already have
        deleted the launcher pod)."""
        tj = self._trainjob(name) or {}
        return any(c.get("type") == "Failed" and c.get("status") == "True"
                   for c in (tj.get("status") or {}).get("conditions") or [])

    def inject(self, kinds: list[str], rng: random.Random) -> None:
        spec: dict[str, Any] = {"seed": rng.randrange(1 << 30), "errors": []}
        for kind in kinds:
            if kind == "conflict_storm":
                spec["errors"].append({"code": 409, "rate": rng.uniform(0.3, 0.7),
                                       "verb": "update", "resource": "jobs"})
            elif kind == "throttle_429":
                spec["errors"].append({"code": 429, "rate": rng.uniform(0.1, 0.3),
                                       "retryAfter": 1})
            elif kind == "server_errors":
                spec["errors"].append({"code": rng.choice((500, 503)),
                                       "rate": rng.uniform(0.1, 0.3)})
            elif kind == "latency":
                spec["latency"] = rng.uniform(0.02, 0.2)
            elif kind == "watch_drops":
                spec["watch"] = {"afterEvents": rng.randint(3, 20)}
            elif kind == "gone_error_event":
                # Every open watch ends and every resume in the next seconds is answered with
                # an ERROR 410 event (a watch cache that moved on); relisted informers resume.
                spec["force410OnResume"] = True
                spec["dropWatches"] = True
            elif kind == "gone_http":
                spec["watchGoneStatus"] = rng.randint(1, 4)
                spec["dropWatches"] = True
        self.faults(spec)
        if "gone_error_event" in kinds:
            time.sleep(rng.uniform(1.0, 3.0))
            self.faults({"force410OnResume": False})
        if "outage" in kinds:
            time.sleep(rng.uniform(0.5, 2.0))
            self.faults({"outageSeconds": self.outage_seconds})
        if "manager_sigkill" in kinds:
            time.sleep(rng.uniform(0.5, 3.0))
            self._kill(signal.SIGKILL)
            self.managers.append(self._manager(wait_ready=False))
        if "leader_failover" in kinds:
            standby = self._manager(wait_ready=False)
            time.sleep(rng.uniform(0.5, 2.0))
            self._kill(signal.SIGTERM)  # the leader releases; the standby takes over
            self.managers.append(standby)
        if "node_not_ready" in kinds:
            time.sleep(rng.uniform(0.5, 2.0))
            node = rng.choice(self.gpu_nodes())
            self._set_ready(node, ready=False)
            self._not_ready.append(node)

    def _set_ready(self, node: str, *, ready: bool) -> None:
        import json

        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        cond = {"type": "Ready", "status": "True" if ready else "False",
                "reason": "KubeletReady" if ready else "KubeletNotReady",
                "message": "soak" if ready else "soak: node NotReady",
                "lastHeartbeatTime": now, "lastTransitionTime": now}
        self.kubectl("patch", "node", node, "--subresource=status", "--type=strategic", "-p",
                     json.dumps({"status": {"conditions": [cond]}}))

    def _restore_nodes(self) -> None:
        for node in self._not_ready:
            self._set_ready(node, ready=True)
        self._not_ready = []

    def _check(self, result: RunResult, name: str, *, audit_from: int, deleted: bool,
               fail: bool) -> None:
        job = self.get_json("get", "jobs.cre.dev", name)
        phase = "" if job is None else str((job.get("status") or {}).get("phase") or "")
        result.phase = "Deleted" if job is None else phase
        if result.expected == "Terminal" and result.phase in TERMINAL:
            pass
        elif "verdict" not in result.violations and result.phase != result.expected:
            result.violations["verdict"] = f"expected {result.expected}, got {result.phase}"
        audit = self.stack.emulator_control("GET", f"audit?since={audit_from}")["records"]
        # Runs are sequential: every TrainJob create admitted in this run's window is this
        # Job's (one generation: the soak never edits a Job's spec).
        creates = [r for r in audit if r["verb"] == "create" and r["resource"] == "trainjobs"
                   and r["code"] == 201 and r["namespace"] == "default"]
        if len(creates) > 1:
            result.violations["single_create"] = f"{len(creates)} TrainJob creates admitted"
        if deleted:
            try:
                wait_until(lambda: not self._leftovers(name), timeout=60,
                           what=f"{name}'s objects to be collected", interval=0.5)
            except StackError:
                result.violations["no_orphans"] = f"left behind: {self._leftovers(name)}"
        if fail and job is not None and phase == "Failed":
            problem = failure_log_problem(job.get("status") or {},
                                          blind=self.blind(result))
            if problem:
                result.violations["failure_log"] = problem
        versions = [o["object"] for o in self.stack.emulator_control("GET", "journal")["objects"]
                    if o["resource"] == "jobs" and o["object"]["metadata"]["name"] == name]
        seen_terminal = seen_log = False
        for v in versions:
            status = v.get("status") or {}
            if seen_terminal and status.get("phase") not in TERMINAL:
                result.violations["no_regression"] = "a terminal phase was lost"
            if seen_log and not status.get("failureLog"):
                result.violations["no_regression"] = "a recorded failureLog was lost"
            seen_terminal = seen_terminal or status.get("phase") in TERMINAL
            seen_log = seen_log or bool(status.get("failureLog"))
        if result.violations:
            result.journal = versions

    def _leftovers(self, name: str) -> list[str]:
        left: list[str] = []
        if self.get_json("get", "trainjobs.trainer.kubeflow.org", workload_name(name)):
            left.append("trainjob")
        for label in (f"cre.dev/job={name}", f"cre.dev/launcher={name}"):
            if (self.get_json("get", "pods", "-l", label) or {}).get("items"):
                left.append(f"pods {label}")
        return left


def run_soak(*, runs: int, seed: int, time_scale: float, outage_seconds: float,
             verdict_timeout: float, replay: int | None = None,
             budget_seconds: float | None = None) -> dict[str, Any]:
    """The soak's JSON report. It never hangs: every wait is bounded, a cluster that cannot
    get back to idle ends the soak (``stuck`` in the report, with the seed), and past
    ``budget_seconds`` (a watchdog, not a performance figure) no further run starts
    (``runs_not_started``)."""
    master = random.Random(seed)
    seeds = [replay] if replay is not None else [master.randrange(1 << 31) for _ in range(runs)]
    started = time.monotonic()
    results: list[RunResult] = []
    stuck = ""
    with Stack() as stack:
        soak = Soak(stack, time_scale=time_scale, outage_seconds=outage_seconds,
                    verdict_timeout=verdict_timeout)
        soak.start()
        for i, s in enumerate(seeds):
            if budget_seconds is not None and time.monotonic() - started > budget_seconds:
                stuck = f"the soak's budget of {budget_seconds:g}s ran out before run {i}"
                break
            try:
                results.append(soak.run(i, s))
            except SoakStuck as exc:
                stuck = str(exc)
                break
            last = results[-1]
            print(f"soak: run {i} seed {s} {last.tier} {last.faults} -> {last.phase} in "
                  f"{last.seconds:.1f}s {last.violations or ''}", file=sys.stderr, flush=True)
        report = summarize(results, seed=seed, fault_kinds=FAULT_KINDS,
                           retries=soak.retries_seen(), startup_exits=soak.startup_exits,
                           exits_during_runs=soak.exits_during_runs)
    report["stuck"] = stuck
    report["runs_not_started"] = len(seeds) - len(results)
    if stuck:
        report["violations"] += 1
    return report
