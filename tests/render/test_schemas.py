"""Rendered objects validate against the upstream CRDs and Kubernetes 1.30-1.37, and the
validator itself catches what a real server would reject or prune."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cre.render import GangScheduler, RenderOptions, render_job_manifest
from cre.testing.schemas import (
    KUBE_VERSIONS,
    embedded_batch_jobs,
    structural_problems,
    validate_job_documents,
    validate_rendered,
)

from .helpers import CATALOG, by_kind, render, rjob


def _runtime_problems(runtime: dict[str, Any]) -> list[str]:
    return [str(p) for p in validate_rendered([runtime])]


def test_dropping_status_true_is_caught_up_to_1_34() -> None:
    """Without ``status: "True"`` the launcher's batch Job fails on 1.30-1.34 and passes later."""
    runtime = copy.deepcopy(by_kind(render("communication/nccl-all-reduce"), "TrainingRuntime"))
    assert _runtime_problems(runtime) == []
    launcher = rjob([runtime], "launcher")
    del launcher["template"]["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"]
    problems = validate_rendered([runtime])
    failing = sorted({p.schema for p in problems})
    assert failing == [f"kubernetes-1.{m}.0" for m in range(30, 35)]
    assert all("'status' is a required property" in p.message for p in problems)
    assert all(p.path == ".spec.podFailurePolicy.rules.0.onPodConditions.0" for p in problems)


def test_unknown_field_would_be_pruned() -> None:
    """A field the Trainer schema does not know is reported as pruned, in both Trainer sets."""
    runtime = copy.deepcopy(by_kind(render("diagnostics/dcgm-level1"), "TrainingRuntime"))
    runtime["spec"]["mlPolicy"]["torch"]["numProcPerNode"] = 1
    problems = validate_rendered([runtime])
    assert {p.schema for p in problems} == {"trainer-v2.2.0", "trainer-latest"}
    assert {p.path for p in problems} == {".spec.mlPolicy.torch.numProcPerNode"}
    assert all("prune" in p.message for p in problems)


def test_jobset_enum_and_required_fields_are_checked() -> None:
    """A bad dependsOn status and a missing replicated job name fail the JobSet schemas."""
    runtime = copy.deepcopy(by_kind(render("communication/nccl-all-reduce"), "TrainingRuntime"))
    rjob([runtime], "launcher")["dependsOn"][0]["status"] = "Running"
    messages = " ".join(str(p) for p in validate_rendered([runtime]))
    assert "[jobset-v0.11.1]" in messages and "[jobset-latest]" in messages
    assert "'Running' is not one of ['Ready', 'Complete']" in messages


def test_train_job_spec_is_checked_with_types() -> None:
    """A TrainJob spec with a string numNodes fails both Trainer sets."""
    docs = render("communication/nccl-all-reduce")
    by_kind(docs, "Job")["spec"]["workload"]["trainJob"]["trainer"]["numNodes"] = "2"
    problems = validate_job_documents(docs)
    assert {(p.schema, p.path) for p in problems} == {
        ("trainer-v2.2.0", ".spec.trainer.numNodes"),
        ("trainer-latest", ".spec.trainer.numNodes"),
    }


def test_batch_job_strict_schema_rejects_unknown_pod_field() -> None:
    """An unknown pod-spec field fails Kubernetes' strict schema for every version."""
    runtime = copy.deepcopy(by_kind(render("diagnostics/dcgm-level2"), "TrainingRuntime"))
    rjob([runtime], "node")["template"]["spec"]["template"]["spec"]["restartPolcy"] = "Never"
    schemas = {p.schema for p in validate_rendered([runtime]) if p.schema.startswith("kube")}
    assert schemas == {f"kubernetes-{v}" for v in KUBE_VERSIONS}


def test_embedded_batch_jobs_one_per_replicated_job() -> None:
    """JobSet makes one batch Job per replicated job; the validator sees the same."""
    runtime = by_kind(render("communication/nccl-alltoall"), "TrainingRuntime")
    jobs = embedded_batch_jobs(runtime)
    assert [j["metadata"]["name"] for j in jobs] == ["j-runtime-node", "j-runtime-launcher"]
    assert jobs[1]["spec"]["backoffLimit"] == 1


def test_structural_null_and_int_or_string() -> None:
    """Nulls need ``nullable`` and int-or-string accepts both forms but not booleans."""
    schema = {"type": "object", "properties": {"q": {"x-kubernetes-int-or-string": True}}}
    assert structural_problems({"q": 1}, schema) == []
    assert structural_problems({"q": "1Gi"}, schema) == []
    assert structural_problems({"q": True}, schema) == [".q: expected int-or-string, got bool"]
    assert structural_problems({"q": None}, schema) == [".q: null is not allowed"]


def test_resource_claim_template_checked_where_served() -> None:
    """resource.k8s.io/v1 exists from 1.34; the RoCE claim template validates there."""
    docs = render("communication/nccl-all-reduce", "aws", "gb300")
    rct = copy.deepcopy(by_kind(docs, "ResourceClaimTemplate"))
    assert validate_rendered([rct]) == []
    rct["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = "8"
    assert {p.schema for p in validate_rendered([rct])} == {
        f"kubernetes-1.{m}.0" for m in range(34, 38)
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    combo=st.sampled_from(CATALOG.combinations()),
    kai=st.booleans(),
    node_count=st.integers(min_value=1, max_value=4),
    image=st.sampled_from([None, "registry.example.com/x:1"]),
)
def test_every_renderable_combination_validates(
    combo: tuple[str, str, str], kai: bool, node_count: int, image: str | None
) -> None:
    """Any (entry, platform, arch), with or without KAI or an image, passes every schema."""
    entry, platform, arch = combo
    docs = render_job_manifest(
        job_name="prop",
        namespace="default",
        catalog=CATALOG,
        entry=entry,
        platform=platform,
        arch=arch,
        nodes=[f"node-{i}" for i in range(node_count)],
        options=RenderOptions(image=image, gang_scheduler=GangScheduler() if kai else None),
    )
    assert [str(p) for p in validate_job_documents(docs)] == []


COMBINATIONS = CATALOG.combinations()


@pytest.mark.parametrize(
    ("index", "combo"), list(enumerate(COMBINATIONS)), ids=["-".join(c) for c in COMBINATIONS]
)
def test_each_renderable_combination_validates(index: int, combo: tuple[str, str, str]) -> None:
    """Every (entry, platform, arch) the catalog supports passes every schema set, KAI alternating.

    The hypothesis property above samples the same space with more options; this walks all of
    it once so no combination can go unchecked.
    """
    entry, platform, arch = combo
    kai = GangScheduler() if index % 2 else None
    docs = render(entry, platform, arch, options=RenderOptions(gang_scheduler=kai))
    assert [str(p) for p in validate_job_documents(docs)] == []


def test_create_time_cel_rules_are_evaluated() -> None:
    """Trainer's CEL rules run: two ML policies at once, or a bad TrainJob name, are caught."""
    runtime = copy.deepcopy(by_kind(render("communication/nccl-all-reduce"), "TrainingRuntime"))
    runtime["spec"]["mlPolicy"]["torch"] = {}
    problems = validate_rendered([runtime])
    assert {p.schema for p in problems} == {"trainer-v2.2.0", "trainer-latest"}
    assert all(p.path == ".spec.mlPolicy" and "CEL" in p.message for p in problems)
    docs = render("diagnostics/dcgm-level1")
    spec = by_kind(docs, "Job")["spec"]["workload"]["trainJob"]
    named = validate_rendered([], train_job_specs=[("Bad_Name", spec)])
    assert named and all("CEL" in p.message and p.path == "(root)" for p in named)


def test_create_time_cel_rules_are_evaluated_and_transition_rules_skipped() -> None:
    """A broken create-time x-kubernetes-validations rule is reported with its message; an
    oldSelf rule needs an old object and is skipped."""
    from cre.testing.schemas import cel_problems

    schema = {"x-kubernetes-validations": [
        {"rule": "self.a > 1", "message": "a too small"},
        {"rule": "size(self.n) <= 3"},
        {"rule": "self == oldSelf", "message": "immutable"},
    ]}
    assert cel_problems({"a": 0, "n": "abcd"}, schema, "spec") == [
        "spec: a too small (CEL: self.a > 1)",
        "spec: failed rule size(self.n) <= 3 (CEL: size(self.n) <= 3)",
    ]
    assert cel_problems({"a": 5, "n": "ab"}, schema, "spec") == []
