"""Two cre-manager processes with leader election: one reconciles, a killed leader hands over."""

from __future__ import annotations

import signal
from datetime import datetime

from e2e_helpers import apply_job, create_namespace, gpu_nodes, metric, wait_phase

from cre.kube.leader import LeaderRecord
from cre.testing.procs import ManagerProc, Stack, wait_until

LEASE_NS, LEASE = "cre-system", "cre-manager.cre.dev"
# Short timings so the hand-over happens quickly; same ratios as the 15 s / 10 s / 2 s defaults.
LEASE_SECONDS, RETRY_SECONDS = 3.0, 0.5
TIMINGS = ("--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s",
           "--leader-elect-retry-period", "500ms")


def _holder(stack: Stack) -> str:
    lease = stack.kubectl_json("get", "lease", "-n", LEASE_NS, LEASE)
    return LeaderRecord.from_lease(lease).holder_identity


def _reconciles(manager: ManagerProc) -> float:
    status, text = manager.get("metrics", "/metrics")
    assert status == 200
    return metric(text, "controller_runtime_reconcile_total", controller="job")


def _start(stack: Stack, identity: str) -> ManagerProc:
    return stack.start_manager("--leader-elect", "--leader-elect-lease-namespace", LEASE_NS,
                               "--leader-elect-identity", identity, *TIMINGS, name=identity)


def test_only_the_leader_reconciles_and_a_killed_leader_hands_over(
        cluster_stack: Stack) -> None:
    """One replica reconciles; after SIGKILL the standby takes the lease and carries on,
    with exactly one TrainJob per Job and no status lost."""
    stack = cluster_stack
    create_namespace(stack, LEASE_NS)
    first = _start(stack, "alpha")
    wait_until(lambda: _holder(stack) == "alpha", timeout=30, what="alpha to lead")
    second = _start(stack, "beta")
    assert _holder(stack) == "alpha"

    nodes = gpu_nodes(stack)
    apply_job(stack, "le-one", nodes=nodes)
    wait_phase(stack, "le-one", "Succeeded")
    assert _reconciles(first) > 0
    assert _reconciles(second) == 0  # the standby never reconciled

    first.send(signal.SIGKILL)  # no release: the standby must wait the lease out
    first.wait(30)
    last = stack.kubectl_json("get", "lease", "-n", LEASE_NS, LEASE)["spec"]
    assert last["holderIdentity"] == "alpha"
    wait_until(lambda: _holder(stack) == "beta", timeout=60, what="beta to take over")
    taken = stack.kubectl_json("get", "lease", "-n", LEASE_NS, LEASE)["spec"]
    assert taken["leaseTransitions"] == 1
    # Hand-over one lease duration after alpha's last renewal, read from the Lease itself: beta
    # counts the lease from when it saw that renewal (up to one jittered retry later) and takes it
    # at its next try (one more), plus 2 s of scheduling slack on shared CPUs.
    gap = (datetime.fromisoformat(taken["acquireTime"])
           - datetime.fromisoformat(last["renewTime"])).total_seconds()
    assert LEASE_SECONDS - 0.5 <= gap <= LEASE_SECONDS + 2 * RETRY_SECONDS * 1.2 + 2.0, gap

    apply_job(stack, "le-two", nodes=nodes)
    wait_phase(stack, "le-two", "Succeeded")
    assert _reconciles(second) > 0
    assert stack.kubectl_json("get", "jobs.cre.dev", "le-one")["status"]["phase"] == "Succeeded"

    trainjobs = stack.kubectl_json("get", "trainjobs")["items"]
    owners = sorted(o["name"] for t in trainjobs
                    for o in t["metadata"].get("ownerReferences") or [] if o["kind"] == "Job")
    assert owners == ["le-one", "le-two"]  # one TrainJob per Job, none duplicated

    second.send(signal.SIGTERM)
    assert second.wait(30) == 0
    assert _holder(stack) == ""


def test_losing_the_lease_exits_non_zero(cluster_stack: Stack) -> None:
    """A leader that cannot renew (its lease taken by force) stops with exit code 7."""
    stack = cluster_stack
    create_namespace(stack, LEASE_NS)
    leader = _start(stack, "alpha")
    wait_until(lambda: _holder(stack) == "alpha", timeout=30, what="alpha to lead")
    # An operator (or a split brain) overwrites the lease for a long time.
    lease = stack.kubectl_json("get", "lease", "-n", LEASE_NS, LEASE)
    stack.kubectl("patch", "lease", "-n", LEASE_NS, LEASE, "--type", "merge", "-p",
                  '{"spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 3600}}')
    assert lease["spec"]["holderIdentity"] == "alpha"
    assert leader.wait(60) == 7
    assert any(r["msg"] == "leadership lost, stopping so that Kubernetes restarts us"
               for r in leader.json_records())
