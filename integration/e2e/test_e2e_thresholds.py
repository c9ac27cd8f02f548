"""A user's Certification with performance thresholds, applied with kubectl to the real
cre-manager on the simulated cluster (issue 13, done-when): ``busBandwidthGBps: "value >= 1"``
passes, ``"value >= 1000000"`` fails with ``ThresholdViolated`` and the measured value."""

from __future__ import annotations

import re
from typing import Any

import pytest
from e2e_helpers import create_namespace

from cre.testing.procs import REPO, Stack, wait_until

NAMESPACE = "perf"


def _certification(name: str, expression: str) -> str:
    return (f"apiVersion: cre.dev/v1alpha1\nkind: Certification\n"
            f"metadata: {{name: {name}, namespace: {NAMESPACE}}}\n"
            f"spec:\n  target: {{nodeSelector: {{nvidia.com/gpu.present: \"true\"}}}}\n"
            f"  nodesPerJob: 8\n"
            f"  thresholds: {{busBandwidthGBps: \"{expression}\"}}\n"
            f"  categories:\n  - {{domain: communication, variant: nccl-all-reduce}}\n")


def _run(stack: Stack, manager: Any, name: str, expression: str) -> dict[str, Any]:
    stack.kubectl("apply", "-f", "-", stdin=_certification(name, expression))

    def verdict() -> object:
        status = stack.kubectl_json("get", "certifications", "-n", NAMESPACE, name).get(
            "status") or {}
        return status.get("verdict")

    wait_until(lambda: verdict() is not None, timeout=300, what=f"{name}'s verdict",
               interval=0.5, alive=manager.check_alive)
    return stack.kubectl_json("get", "certifications", "-n", NAMESPACE, name)


def _job(stack: Stack, cert: str) -> dict[str, Any]:
    jobs = [j for j in stack.kubectl_json("get", "jobs.cre.dev", "-n", NAMESPACE)["items"]
            if j["metadata"]["name"].startswith(cert + "-")]
    assert len(jobs) == 1, [j["metadata"]["name"] for j in jobs]
    return jobs[0]


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == type_)


@pytest.mark.both_backends
def test_thresholds_pass_and_fail_with_the_measured_value(cluster_stack: Stack) -> None:
    stack = cluster_stack
    create_namespace(stack, NAMESPACE)
    # The LogProfiles CRE ships, as docs/guide/install.md says: after the CRDs, their own
    # kustomization.
    stack.kubectl("apply", "-k", str(REPO / "deploy" / "logprofiles"))
    manager = stack.start_manager()

    passed = _run(stack, manager, "met", "value >= 1")
    assert (passed["status"]["phase"], passed["status"]["verdict"]) == ("Succeeded", "Passed")
    job = _job(stack, "met")
    validation = _condition(job, "ValidationFailed")
    assert (validation["status"], validation["reason"]) == ("False", "ThresholdsMet")
    measured = float(job["status"]["busBandwidthGBps"])
    assert measured > 1
    groups = passed["status"]["categoryStatuses"][0]["groups"]
    assert [g["busBandwidthGBps"] for g in groups] == [job["status"]["busBandwidthGBps"]]

    failed = _run(stack, manager, "missed", "value >= 1000000")
    status = failed["status"]
    assert (status["phase"], status["verdict"]) == ("Failed", "Failed")
    cond = _condition(failed, "Failed")
    assert cond["reason"] == "WorkflowValidationFailed", cond
    found = re.search(r"measured ([0-9.]+), expression: value >= 1000000", cond["message"])
    assert found is not None, cond["message"]
    job = _job(stack, "missed")
    validation = _condition(job, "ValidationFailed")
    assert (validation["status"], validation["reason"]) == ("True", "ThresholdViolated")
    assert f"measured {float(found.group(1)):.4f}" in validation["message"]
    assert float(found.group(1)) == float(job["status"]["busBandwidthGBps"])
    assert _condition(failed, "ValidationFailed")["status"] == "True"
    # The printer column: kubectl shows the measured value next to the phase.
    table = stack.kubectl("get", "jobs.cre.dev", "-n", NAMESPACE).stdout.splitlines()
    header = table[0].split()
    assert "BUSBW" in header, table
    row = next(r.split() for r in table[1:] if r.startswith("missed-"))
    assert row[header.index("BUSBW")] == job["status"]["busBandwidthGBps"], table
