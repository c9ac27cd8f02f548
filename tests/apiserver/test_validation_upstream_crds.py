"""Every vendored upstream CRD (JobSet, Trainer; ``cre._vendor.crds``) compiles, passes the
CRD checks, accepts a valid object and rejects invalid ones as a real server would, using each
CRD's own OpenAPI constraints and x-kubernetes-validations rules."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from cre._vendor.crds import ALL, crd_files
from cre.testing.apiserver.validation import Cause, CRDSchema, validate_crd_definition

CRD_FILES = crd_files(*ALL)

_POD_TEMPLATE = {"spec": {"restartPolicy": "Never",
                          "containers": [{"name": "node", "image": "busybox"}]}}
SAMPLES: dict[str, dict[str, Any]] = {
    "JobSet": {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "d"},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2,
                                     "template": {"spec": {"template": _POD_TEMPLATE}}}]},
    },
    "TrainJob": {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "d"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}},
    },
    "TrainingRuntime": {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
        "metadata": {"name": "rt", "namespace": "d"},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}},
                 "template": {"spec": {"replicatedJobs": [
                     {"name": "node", "template": {"spec": {"template": _POD_TEMPLATE}}}]}}},
    },
}
SAMPLES["ClusterTrainingRuntime"] = {**SAMPLES["TrainingRuntime"],
                                     "kind": "ClusterTrainingRuntime",
                                     "metadata": {"name": "rt"}}


@functools.cache
def _parsed(path: Path) -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd: dict[str, Any] = yaml.load(path.read_text(), Loader=loader)
    return crd


def _load(path: Path) -> dict[str, Any]:
    return copy.deepcopy(_parsed(path))


@functools.cache
def _compiled(path: Path, version: str) -> CRDSchema:
    return CRDSchema.from_crd(_parsed(path), version)


def _versions() -> list[tuple[Path, str]]:
    return [(path, v["name"]) for path in CRD_FILES for v in _parsed(path)["spec"]["versions"]
            if v.get("served")]


def _admit(schema: CRDSchema, obj: dict[str, Any],
           old: dict[str, Any] | None = None) -> list[Cause]:
    return schema.validate(schema.default(schema.prune(obj)), old)


def _schema_for(kind: str, folder: str = "trainer-latest") -> CRDSchema:
    for path in CRD_FILES:
        crd = _parsed(path)
        if crd["spec"]["names"]["kind"] == kind and path.parent.name == folder:
            return _compiled(path, crd["spec"]["versions"][0]["name"])
    raise AssertionError(f"no {kind} CRD in {folder}")


def test_the_upstream_crds_are_present() -> None:
    """All four folders of upstream CRDs are found."""
    assert {p.parent.name for p in CRD_FILES} == {
        "jobset-latest", "jobset-v0.11.1", "trainer-latest", "trainer-v2.2.0"}


@pytest.mark.parametrize("path", CRD_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_crd_definition_is_accepted(path: Path) -> None:
    """Each upstream CRD passes the checks the server runs on CRDs themselves."""
    assert validate_crd_definition(_load(path)) == []


@pytest.mark.parametrize(("path", "version"), _versions(),
                         ids=lambda v: v if isinstance(v, str) else f"{v.parent.name}/{v.name}")
def test_valid_sample_is_accepted_for_every_served_version(path: Path, version: str) -> None:
    """A minimal valid object of the CRD's kind is admitted unchanged apart from defaults."""
    crd = _parsed(path)
    schema = CRDSchema.from_crd(crd, version)
    sample = SAMPLES[crd["spec"]["names"]["kind"]]
    admitted = schema.default(schema.prune(sample))
    assert schema.validate(admitted) == []
    assert schema.validate(admitted, admitted) == []
    assert schema.prune(admitted) == admitted


@pytest.mark.parametrize("folder", ["jobset-latest", "jobset-v0.11.1"])
def test_jobset_startup_policy_and_depends_on_are_exclusive(folder: str) -> None:
    """JobSet's spec rule rejects InOrder startup together with dependsOn."""
    schema = _schema_for("JobSet", folder)
    obj = copy.deepcopy(SAMPLES["JobSet"])
    obj["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    obj["spec"]["replicatedJobs"].append({
        "name": "late", "dependsOn": [{"name": "workers", "status": "Ready"}],
        "template": {"spec": {"template": _POD_TEMPLATE}}})
    assert _admit(schema, obj) == [Cause(
        "FieldValueInvalid",
        'Invalid value: "object": StartupPolicy and DependsOn APIs are mutually exclusive',
        "spec")]


def test_jobset_failure_policy_is_immutable() -> None:
    """Changing a JobSet's failurePolicy on update fails its transition rule."""
    schema = _schema_for("JobSet", "jobset-latest")
    old = schema.default(schema.prune(SAMPLES["JobSet"]))
    old["spec"]["failurePolicy"] = {"maxRestarts": 1}
    new = copy.deepcopy(old)
    new["spec"]["failurePolicy"]["maxRestarts"] = 3
    causes = _admit(schema, new, old)
    assert [c.field for c in causes] == ["spec.failurePolicy"]
    assert causes[0].message.endswith("immutable")


def test_jobset_type_error_has_the_item_path() -> None:
    """A wrongly typed replicas field names the replicated job's index."""
    schema = _schema_for("JobSet", "jobset-latest")
    obj = copy.deepcopy(SAMPLES["JobSet"])
    obj["spec"]["replicatedJobs"][0]["replicas"] = "two"
    assert _admit(schema, obj)[0].field == "spec.replicatedJobs[0].replicas"


@pytest.mark.parametrize("kind", ["TrainingRuntime", "ClusterTrainingRuntime"])
def test_runtime_allows_only_one_ml_policy(kind: str) -> None:
    """A runtime's mlPolicy may configure only one framework."""
    schema = _schema_for(kind)
    obj = copy.deepcopy(SAMPLES[kind])
    obj["spec"]["mlPolicy"]["mpi"] = {}
    assert _admit(schema, obj) == [Cause(
        "FieldValueInvalid", 'Invalid value: "object": Only one of the policy can be configured',
        "spec.mlPolicy")]


def test_runtime_num_proc_per_node_rule() -> None:
    """The flux policy's numProcPerNode must be at least 1."""
    schema = _schema_for("TrainingRuntime", "trainer-v2.2.0")
    obj = copy.deepcopy(SAMPLES["TrainingRuntime"])
    obj["spec"]["mlPolicy"] = {"numNodes": 1, "flux": {"numProcPerNode": 0}}
    assert _admit(schema, obj) == [Cause(
        "FieldValueInvalid", 'Invalid value: "integer": NumProcPerNode in fluxPolicy must be >= 1',
        "spec.mlPolicy.flux.numProcPerNode")]


@pytest.mark.parametrize("folder", ["trainer-latest", "trainer-v2.2.0"])
def test_trainjob_name_rules_report_at_the_root(folder: str) -> None:
    """TrainJob's root rules reject names that are not RFC 1035 labels, at field `<nil>`."""
    schema = _schema_for("TrainJob", folder)
    obj = copy.deepcopy(SAMPLES["TrainJob"])
    obj["metadata"]["name"] = "1-" + "x" * 70
    assert sorted(c.message for c in _admit(schema, obj)) == [
        'Invalid value: "object": metadata.name must be no more than 63 characters',
        'Invalid value: "object": metadata.name must match RFC 1035 DNS label format']
    assert {c.field for c in _admit(schema, obj)} == {"<nil>"}


def test_trainjob_managed_by_and_defaults() -> None:
    """managedBy defaults to the trainer controller and rejects other values."""
    schema = _schema_for("TrainJob")
    defaulted = schema.default(SAMPLES["TrainJob"])
    assert defaulted["spec"]["managedBy"] == "trainer.kubeflow.org/trainjob-controller"
    obj = copy.deepcopy(SAMPLES["TrainJob"])
    obj["spec"]["managedBy"] = "someone-else"
    assert [c.field for c in _admit(schema, obj)] == ["spec.managedBy"]


def test_trainjob_trainer_is_immutable_and_ratcheting_keeps_unchanged_parts() -> None:
    """Changing spec.trainer on update is rejected; an unchanged spec with new labels passes."""
    schema = _schema_for("TrainJob")
    old = schema.default(SAMPLES["TrainJob"])
    new = copy.deepcopy(old)
    new["spec"]["trainer"]["numNodes"] = 4
    assert [(c.field, c.message) for c in _admit(schema, new, old)] == [
        ("spec.trainer", 'Invalid value: "object": field is immutable')]
    relabelled = copy.deepcopy(old)
    relabelled["metadata"]["labels"] = {"a": "b"}
    assert _admit(schema, relabelled, old) == []


def test_trainjob_storage_uri_rule() -> None:
    """The latest TrainJob rejects a dataset storageUri without a scheme."""
    schema = _schema_for("TrainJob")
    obj = copy.deepcopy(SAMPLES["TrainJob"])
    obj["spec"]["initializer"] = {"dataset": {"storageUri": "no-scheme"}}
    assert [c.field for c in _admit(schema, obj)] == ["spec.initializer.dataset.storageUri"]


def test_trainjob_status_rule_on_trainer_status() -> None:
    """status.trainerStatus requires lastUpdatedTime (a rule on the status subtree)."""
    schema = _schema_for("TrainJob")
    obj = copy.deepcopy(SAMPLES["TrainJob"])
    obj["status"] = {"trainerStatus": {"progressPercentage": 10}}
    causes = _admit(schema, obj)
    assert [c.field for c in causes] == ["status.trainerStatus"]
