"""Scenario DSL validation and the command-line entry point."""

from __future__ import annotations

import pytest

from cre.testing.cluster.__main__ import parse_args
from cre.testing.cluster.scenario import (
    ScenarioError,
    _satisfied,
    build_config,
    resource_for,
)


def test_cluster_section_builds_the_config() -> None:
    """Profile, timing knobs, overrides and bad nodes land in SimConfig."""
    cfg = build_config({"profile": "gcp-h100", "config": {"waitForWorkersTimeout": 30},
                        "overrides": [{"behaviour": "fail", "role": "launcher"}],
                        "badNodes": {"gcp-h100-node-1": 0.5}})
    assert cfg.profile.name == "gcp-h100" and cfg.wait_for_workers_timeout == 30
    assert cfg.overrides[0].id == "cluster.overrides-0"
    assert cfg.node_factor("gcp-h100-node-1") == 0.5 and cfg.node_factor("x") == 1.0


def test_bad_scenario_input_names_the_field() -> None:
    """Unknown config keys and kinds are rejected with their location."""
    with pytest.raises(ScenarioError, match=r"cluster.config: unknown fields \['speed'\]"):
        build_config({"config": {"speed": 2}})
    with pytest.raises(ScenarioError, match=r"timeline\[0\]\.kind: unknown kind 'Deployment'"):
        resource_for({"kind": "Deployment"}, where="timeline[0]")
    assert resource_for({"kind": "Job", "apiVersion": "cre.dev/v1alpha1"},
                        where="x").group == "cre.dev"


def test_wait_predicates() -> None:
    """Waits match conditions (status defaults to True), phases, counts and absence."""
    done = {"status": {"phase": "Succeeded", "conditions": [
        {"type": "Complete", "status": "True", "reason": "AllJobsCompleted"}]}}
    assert _satisfied([done], {"condition": {"type": "Complete"}})
    assert not _satisfied([done], {"condition": {"type": "Complete", "reason": "Other"}})
    assert _satisfied([done, done], {"phase": "Succeeded", "count": 2})
    assert _satisfied([], {"absent": True}) and not _satisfied([done], {"absent": True})
    assert not _satisfied([], {"condition": {"type": "Complete"}})
    tainted = {"spec": {"taints": [{"key": "node.kubernetes.io/not-ready"}]}}
    assert _satisfied([tainted], {"field": "spec.taints.0.key",
                                  "equals": "node.kubernetes.io/not-ready"})
    assert not _satisfied([tainted], {"field": "spec.taints.1.key", "equals": "x"})


def test_cli_arguments() -> None:
    """The CLI needs a kubeconfig and rejects a non-positive scale or node count."""
    args = parse_args(["--kubeconfig", "kc", "--profile", "oci-gb300", "--nodes", "8",
                       "--time-scale", "10"])
    assert (args.profile, args.nodes, args.time_scale) == ("oci-gb300", 8, 10.0)
    with pytest.raises(SystemExit):
        parse_args(["--kubeconfig", "kc", "--time-scale", "0"])
    with pytest.raises(SystemExit):
        parse_args(["--kubeconfig", "kc", "--profile", "nope"])
