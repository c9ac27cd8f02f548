"""Validation of the Workflow and Certification fields issue 12 added or relies on: every
error names its field path."""

from __future__ import annotations

import copy
from typing import Any

from cre.api.validate import validate

WORKFLOW: dict[str, Any] = {
    "apiVersion": "cre.dev/v1alpha1", "kind": "Workflow",
    "metadata": {"name": "wf", "namespace": "ns"},
    "spec": {
        "jobTemplate": {"spec": {"workload": {"trainJob": {"trainer": {"numNodes": 2}}}}},
        "orchestration": {},
        "dependencies": [{"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "cm"}, "when": {"expression": "platform == 'aws'"}}],
        "failurePolicy": {"mode": "FailFast", "infraRetries": 2, "infraScopedFailFast": False},
    },
}
CERT: dict[str, Any] = {
    "apiVersion": "cre.dev/v1alpha1", "kind": "Certification",
    "metadata": {"name": "c", "namespace": "ns"},
    "spec": {"categories": [{"domain": "communication", "variant": "nccl-all-reduce"}],
             "failurePolicy": {"mode": "Continue"}},
}


def _paths(obj: dict[str, Any]) -> list[str]:
    return [e.path for e in validate(obj)]


def test_valid_documents_pass() -> None:
    """The reference documents carry no error."""
    assert validate(WORKFLOW) == []
    assert validate(CERT) == []


def test_failure_policy_bounds_and_enum() -> None:
    """infraRetries above 10 and an unknown mode are named by path."""
    wf = copy.deepcopy(WORKFLOW)
    wf["spec"]["failurePolicy"]["infraRetries"] = 11
    assert _paths(wf) == ["spec.failurePolicy.infraRetries"]
    wf["spec"]["failurePolicy"] = {"mode": "Sometimes"}
    errors = validate(wf)
    assert errors and errors[0].path == "spec.failurePolicy.mode"


def test_bad_dependency_when_expression_is_named() -> None:
    """A dependency's when.expression that does not compile is reported at its path."""
    wf = copy.deepcopy(WORKFLOW)
    wf["spec"]["dependencies"][0]["when"]["expression"] = "platform == "
    assert _paths(wf) == ["spec.dependencies[0].when.expression"]
    wf["spec"]["dependencies"][0]["when"] = {"platform": {"equals": 3}}
    assert _paths(wf) == ["spec.dependencies[0].when.platform.equals"]


def test_over_long_dependency_when_expression_is_bounded_not_compiled() -> None:
    """A dependency's when.expression past its 4096 characters is one length error at its path
    (the schema walk does not reach the opaque dependency; the CEL library never sees it, as a
    ~65,600-character expression once made it panic)."""
    wf = copy.deepcopy(WORKFLOW)
    wf["spec"]["dependencies"][0]["when"]["expression"] = "platform == " * 6000
    errors = validate(wf)
    assert [(e.path, e.message) for e in errors] == [
        ("spec.dependencies[0].when.expression", "must have at most 4096 characters")]


def test_template_num_nodes_must_be_positive() -> None:
    """trainer.numNodes (nodes per Job) must be a positive integer."""
    wf = copy.deepcopy(WORKFLOW)
    wf["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]["numNodes"] = "two"
    assert _paths(wf) == ["spec.jobTemplate.spec.workload.trainJob.trainer.numNodes"]


def test_certification_category_names_are_catalog_names() -> None:
    """A malformed variant name is reported at its index (a repeat is allowed: it may carry
    other options)."""
    cert = copy.deepcopy(CERT)
    cert["spec"]["categories"] += [{"domain": "communication", "variant": "nccl-all-reduce"},
                                   {"domain": "communication", "variant": "NCCL_x"}]
    assert _paths(cert) == ["spec.categories[2].variant"]


def test_per_category_failure_policy_is_checked() -> None:
    """A per-category override is validated at its own path."""
    cert = copy.deepcopy(CERT)
    cert["spec"]["categories"][0]["options"] = {"failurePolicy": {"infraRetries": -1}}
    assert _paths(cert) == ["spec.categories[0].options.failurePolicy.infraRetries"]


def test_workloadrun_failure_policy_is_the_certifications() -> None:
    """A WorkloadRun's failurePolicy is checked like a Certification's (a grace over a day is
    named at its path) and its CRD schema is the Certification's, description included."""
    from cre.api import crdgen
    from cre.api.kinds import KINDS

    run = {"apiVersion": "cre.dev/v1alpha1", "kind": "WorkloadRun",
           "metadata": {"name": "wr", "namespace": "ns"},
           "spec": {"image": "img:1", "numNodes": 2, "framework": {"exec": {"command": ["x"]}},
                    "failurePolicy": {"nodeNotReadyGraceSeconds": 30}}}
    assert validate(run) == []
    run["spec"]["failurePolicy"]["nodeNotReadyGraceSeconds"] = 86401
    assert _paths(run) == ["spec.failurePolicy.nodeNotReadyGraceSeconds"]

    def spec_schema(kind: str) -> dict[str, Any]:
        info = next(k for k in KINDS if k.kind == kind)
        root = crdgen.build_crd(info)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        props: dict[str, Any] = root["properties"]["spec"]["properties"]
        return props

    assert spec_schema("WorkloadRun")["failurePolicy"] == \
        spec_schema("Certification")["failurePolicy"]
