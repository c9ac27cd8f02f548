"""Workflow overrides: matching by platform, the four patch kinds in order, the applied record,
and a patch that cannot apply failing the Workflow with the field named."""

from __future__ import annotations

from typing import Any

import attrs

from cre.api.conditions import WorkflowReason
from cre.api.converter import structure
from cre.api.workflow import OverrideSpec, Workflow
from cre.core.workflow.overrides import apply_overrides, merge_dependency, merge_patch
from tests.core.tierworld import WorkflowWorld, always_succeed, at, nodes, workflow


def _with(wf: Workflow, *overrides: dict[str, Any]) -> Workflow:
    specs = tuple(structure(o, OverrideSpec) for o in overrides)
    return attrs.evolve(wf, spec=attrs.evolve(wf.spec, overrides=specs))


ENV_PATCH = {"when": {"platform": {"equals": "aws"}},
             "jobTemplatePatch": [{"op": "add", "path": "/spec/workload/trainJob/trainer/env",
                                   "value": [{"name": "X", "value": "1"}]}]}


def test_matching_override_reaches_every_group_job() -> None:
    """An aws-only JSON patch applies on aws: every Job carries it, the status records it and
    an OverrideApplied event says so; a gcp-only one does not apply."""
    pool = nodes(4)
    gcp = {"when": {"platform": {"equals": "gcp"}},
           "orchestration": {"iterations": 5}}
    world = WorkflowWorld(wf=_with(workflow(pool, nodesPerJob=2), ENV_PATCH, gcp), nodes=pool)
    world.run(always_succeed)
    for job in world.jobs.values():
        assert job.spec.workload.train_job is not None
        assert job.spec.workload.train_job["trainer"]["env"] == [{"name": "X", "value": "1"}]
    orch = world.wf.status.orchestration
    assert orch is not None
    assert [(a.index, a.patches, a.no_op) for a in orch.applied_overrides] == [
        (0, "jobTemplatePatch", False)]
    assert orch.completed_iterations == 1
    assert WorkflowReason.OVERRIDE_APPLIED in [r for r, _ in world.events]


def test_unappliable_patch_fails_naming_the_override() -> None:
    """A JSON patch that cannot apply fails OverrideError naming the override; nothing is
    created."""
    pool = nodes(2)
    bad = {"when": {}, "jobTemplatePatch": [{"op": "replace", "path": "/spec/nope/x",
                                             "value": 1}]}
    world = WorkflowWorld(wf=_with(workflow(pool), bad), nodes=pool)
    world.step(at(0))
    failed = world.condition("Failed")
    assert failed.reason == WorkflowReason.OVERRIDE_ERROR
    assert failed.message.startswith("spec.overrides[0].jobTemplatePatch:")
    assert world.created == []


def test_an_override_may_not_repeat_or_unpin_a_diagnose_run() -> None:
    """Under testScale diagnose an override setting iterations 3 (or Unpinned placement),
    even one whose platform would not match, fails the Workflow InvalidSpec before anything
    is created, the message naming the Workflow and the override's field path; iterations 1
    is accepted."""
    pool = nodes(4)
    base = workflow(pool, testScale="diagnose")
    for orchestration, field in (({"iterations": 3}, "iterations"),
                                 ({"placement": "Unpinned"}, "placement")):
        bad = _with(base, {"when": {"platform": {"equals": "gcp"}},
                           "orchestration": orchestration})
        world = WorkflowWorld(wf=bad, nodes=pool)
        world.step(at(0))
        failed = world.condition("Failed")
        assert failed.reason == WorkflowReason.INVALID_SPEC
        assert failed.message.startswith(
            f"Workflow certs/{base.metadata.name} has an invalid spec: "
            f"spec.overrides[0].orchestration.{field}: spec.orchestration.diagnose is set")
        assert world.created == []
    once = WorkflowWorld(wf=_with(base, {"when": {}, "orchestration": {"iterations": 1}}),
                         nodes=pool)
    once.step(at(0))
    assert once.wf.status.groups


def test_orchestration_and_dependency_overrides() -> None:
    """Orchestration fields replace; a dependency merges by apiVersion/kind/name (named lists
    by name), a new one is appended; a no-op override is marked so."""
    pool = nodes(2)
    wf = workflow(pool)
    runtime = wf.spec.dependencies[0]
    dep = {"apiVersion": runtime["apiVersion"], "kind": runtime["kind"],
           "metadata": {"name": runtime["metadata"]["name"], "labels": {"extra": "yes"}}}
    extra = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "extra-cm"}}
    wf = _with(wf, {"when": {}, "orchestration": {"iterations": 3}, "dependencies": [dep, extra]},
               {"when": {"gpuArchitecture": {"in": ["h100"]}}, "jobTemplate": {}})
    effective, applied = apply_overrides(wf, platform="aws", arch="h100")
    assert effective.spec.orchestration.iterations == 3
    assert effective.spec.dependencies[0]["metadata"]["labels"]["extra"] == "yes"
    assert effective.spec.dependencies[-1]["metadata"]["name"] == "extra-cm"
    assert [(a.patches, a.no_op) for a in applied] == [
        ("2 dependencies, orchestration", False), ("jobTemplate", True)]
    assert effective.spec.overrides == ()


def test_merge_rules() -> None:
    """Merge patch: null deletes, objects merge, lists replace; dependency merge: named lists
    merge by name keeping base order."""
    assert merge_patch({"a": 1, "b": {"c": 1, "d": 2}, "l": [1]},
                       {"a": None, "b": {"c": 3}, "l": [2]}) == {"b": {"c": 3, "d": 2},
                                                                 "l": [2]}
    base = {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
    patch = {"env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]}
    assert merge_dependency(base, patch) == {"env": [
        {"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}]}
