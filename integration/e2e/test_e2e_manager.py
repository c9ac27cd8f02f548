"""cre-manager as a process on the emulated cluster: ready, reconciles, metrics, clean stop."""

from __future__ import annotations

import signal

import pytest
from e2e_helpers import (
    apply_job,
    create_namespace,
    emulator_faults,
    gpu_nodes,
    metric,
    wait_phase,
)

from cre.controller.registry import BY_NAME
from cre.kube.leader import LeaderRecord
from cre.testing.procs import Stack, wait_until
from cre_manager.controllers import INFORMERS

GRACE = 10.0


@pytest.mark.both_backends
def test_manager_reconciles_serves_metrics_and_stops_cleanly(cluster_stack: Stack) -> None:
    """Ready, a Job reaches Succeeded, metrics count it, SIGTERM exits 0 and frees the lease."""
    stack = cluster_stack
    create_namespace(stack, "cre-system")
    manager = stack.start_manager("--leader-elect", "--leader-elect-lease-namespace",
                                  "cre-system", "--leader-elect-identity", "solo",
                                  "--shutdown-grace-period", f"{GRACE:g}s")
    status, body = manager.get("health", "/readyz?verbose")
    assert status == 200, body
    assert "[+]leader-election ok" in body and "[+]informers ok" in body
    assert manager.get("health", "/healthz") == (200, "ok")

    apply_job(stack, "e2e-ok", nodes=gpu_nodes(stack))
    wait_phase(stack, "e2e-ok", "Succeeded")

    status, text = manager.get("metrics", "/metrics")
    assert status == 200
    assert metric(text, "controller_runtime_reconcile_total", controller="job") > 0
    assert metric(text, "cre_job_status", job="e2e-ok", phase="Succeeded") == 1
    assert metric(text, "workqueue_adds_total", name="job") > 0
    assert metric(text, "cre_informer_relists_total") > 0
    assert metric(text, "leader_election_master_status", name="cre-manager.cre.dev") == 1

    manager.send(signal.SIGTERM)
    assert manager.wait(GRACE + 15) == 0
    lease = stack.kubectl_json("get", "lease", "-n", "cre-system", "cre-manager.cre.dev")
    assert LeaderRecord.from_lease(lease).holder_identity == ""
    records = manager.json_records()
    assert any(r["msg"] == "released the lease" for r in records)
    assert records[-1]["msg"] == "cre-manager exiting" and records[-1]["exitCode"] == 0


def test_second_signal_exits_at_once(cluster_stack: Stack) -> None:
    """While the orderly shutdown hangs (the API server stalls), a second signal exits now."""
    stack = cluster_stack
    create_namespace(stack, "cre-system")
    manager = stack.start_manager("--leader-elect", "--leader-elect-lease-namespace",
                                  "cre-system", "--shutdown-grace-period", "60s")
    emulator_faults(stack, {"latency": 60})  # releasing the lease now takes > 7 s
    manager.send(signal.SIGTERM)
    wait_until(lambda: any(r["msg"] == "signal received, shutting down"
                           for r in manager.json_records()),
               timeout=30, what="the first signal to be handled", alive=manager.check_alive)
    manager.send(signal.SIGINT)
    assert manager.wait(30) == 128 + signal.SIGINT
    assert any(r["msg"] == "second signal, exiting at once" for r in manager.json_records())


def test_logs_are_json_with_reconcile_context(cluster_stack: Stack) -> None:
    """Every manager log line is JSON; reconcile records carry controller/namespace/name."""
    stack = cluster_stack
    manager = stack.start_manager("--log-level", "debug")
    apply_job(stack, "e2e-logs", nodes=gpu_nodes(stack))
    wait_phase(stack, "e2e-logs", "Succeeded")
    manager.stop()
    lines = [ln for ln in manager.log_text().splitlines() if ln.strip()]
    records = manager.json_records()
    assert len(records) == len(lines)
    assert all({"ts", "level", "logger", "msg"} <= r.keys() for r in records)
    from_controller = [r for r in records if r["logger"].startswith(("cre.controller",
                                                                     "cre.kube.informer"))]
    assert from_controller
    # Every controller's records name it (job, workflow, certification, goodput, workloadrun...);
    # the informers, shared by the controllers, run under the manager's informer factory.
    assert all(r.get("controller") in BY_NAME for r in from_controller
               if r["logger"].startswith("cre.controller"))
    assert all(r.get("controller") == INFORMERS for r in from_controller
               if r["logger"].startswith("cre.kube.informer"))
    assert all(r.get("controller") == "job" for r in from_controller
               if r["logger"].startswith("cre.controller.job.controller"))
    assert "cre-emulator" not in manager.log_text()  # the kubeconfig's bearer token


def test_readyz_waits_for_leadership_or_healthy_standby(cluster_stack: Stack) -> None:
    """A standby replica is ready (healthy election) and reports who leads."""
    stack = cluster_stack
    create_namespace(stack, "cre-system")
    args = ("--leader-elect", "--leader-elect-lease-namespace", "cre-system")
    leader = stack.start_manager(*args, "--leader-elect-identity", "first", name="first")
    standby = stack.start_manager(*args, "--leader-elect-identity", "second", name="second")
    status, body = standby.get("health", "/readyz?verbose")
    assert status == 200, body
    assert "[+]leader-election ok" in body
    wait_until(lambda: "standing by (leader: first)" in standby.get("health", "/readyz?verbose")[1],
               timeout=30, what="the standby to report the leader")
    status, body = leader.get("health", "/readyz?verbose")
    assert status == 200 and "[+]leader-election ok (leading)" in body
