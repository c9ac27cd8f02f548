"""Check rendered objects against the real schemas a cluster would apply.

Rendering can produce YAML that looks right and still fails on a cluster: a field the CRD's
structural schema does not know is silently pruned by the API server (so a fail-fast setting
just vanishes), and a batch Job that JobSet creates from a runtime is validated by Kubernetes'
own schema (``status`` of a podFailurePolicy pod condition is required up to 1.34). This module
checks both, and reports every problem with the schema set, object and field path:

* TrainingRuntime and TrainJob against the vendored Trainer CRDs (oldest and latest), the
  runtime's embedded JobSet spec against the JobSet CRDs (oldest and latest): types, required
  fields, enums, bounds, and *pruning* (any field the structural schema does not allow);
* every replicated job's batch Job, and any core object (ResourceClaimTemplate), against the
  Kubernetes JSON schemas of ``kubernetes-validate`` in strict mode for 1.30 through 1.37.

CEL rules (``x-kubernetes-validations``) that do not mention ``oldSelf`` (create-time rules) are
evaluated with the API emulator's CEL implementation; transition rules need an old object and
are skipped. Left out: string formats; ComputeDomain has no vendored CRD and is not checked.
The checks themselves live in ``cre.cli.schemas`` (``cre validate`` runs them too); this module
binds them to the vendored CRD sets and to the API emulator's CEL library.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cre._vendor import crds
from cre.cli import schemas as _checks
from cre.cli.schemas import (
    KUBE_VERSIONS,
    OBJECT_META_KEYS,
    SchemaProblem,
    embedded_batch_jobs,
    min_kube_version,
)
from cre.testing.apiserver import CelProgram, compile_cel

CRD_SETS: Mapping[str, Path] = {
    "trainer-v2.2.0": crds.TRAINER_OLDEST,
    "trainer-latest": crds.TRAINER_LATEST,
    "jobset-v0.11.1": crds.JOBSET_OLDEST,
    "jobset-latest": crds.JOBSET_LATEST,
}

__all__ = [
    "CRD_SETS",
    "KUBE_VERSIONS",
    "OBJECT_META_KEYS",
    "SchemaProblem",
    "cel_problems",
    "embedded_batch_jobs",
    "min_kube_version",
    "structural_problems",
    "validate_job_documents",
    "validate_rendered",
]


@functools.cache
def _cel_program(rule: str) -> CelProgram:
    return compile_cel(rule)


def _run(rule: str, value: Any) -> Any:
    """The API emulator's CEL (with the Kubernetes extension library) for schema rules."""
    return _cel_program(rule).run({"self": value})


def cel_problems(value: Any, schema: Mapping[str, Any], where: str) -> list[str]:
    """Create-time CEL rules of one schema node that ``value`` breaks."""
    return _checks.cel_problems(value, schema, where, run=_run)


def structural_problems(value: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Every way ``value`` breaks a CRD structural schema, as ``path: message`` strings.

    Unknown fields are errors unless the schema preserves unknown fields, because the API
    server would prune them without a word.
    """
    return _checks.structural_problems(value, schema, path, run=_run)


def _crd_problems(obj: Mapping[str, Any], set_name: str) -> list[SchemaProblem]:
    key = (str(obj.get("apiVersion")), str(obj.get("kind")))
    schema = _checks.crd_schemas(CRD_SETS[set_name]).get(key)
    if schema is None:
        name = _checks.object_name(obj)
        return [SchemaProblem(set_name, name, "", f"{key} is not served by this CRD set")]
    return _checks.crd_problems(obj, schema, schema_name=set_name, run=_run)


def _kube_problems(obj: Mapping[str, Any], versions: Iterable[str]) -> list[SchemaProblem]:
    return _checks.kube_problems(obj, versions)


def validate_rendered(
    objects: Iterable[Mapping[str, Any]],
    *,
    train_job_specs: Iterable[tuple[str, Mapping[str, Any]]] = (),
    kube_versions: Iterable[str] = KUBE_VERSIONS,
) -> list[SchemaProblem]:
    """All problems of rendered objects and TrainJob specs against every schema set.

    ``train_job_specs`` are ``(name, spec)`` pairs for specs embedded in CRE Jobs.
    """
    versions = tuple(kube_versions)
    problems: list[SchemaProblem] = []
    for obj in objects:
        api = str(obj.get("apiVersion", ""))
        if api.startswith("trainer.kubeflow.org/"):
            for set_name in ("trainer-v2.2.0", "trainer-latest"):
                problems += _crd_problems(obj, set_name)
            if obj.get("kind") == "TrainingRuntime":
                jobset = {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "metadata": {"name": obj["metadata"]["name"]},
                    "spec": obj["spec"]["template"]["spec"],
                }
                for set_name in ("jobset-v0.11.1", "jobset-latest"):
                    problems += _crd_problems(jobset, set_name)
                for job in embedded_batch_jobs(obj):
                    problems += _kube_problems(job, versions)
        elif "." not in api.split("/")[0] or api.startswith("resource.k8s.io/"):
            problems += _kube_problems(obj, versions)
    for name, spec in train_job_specs:
        train_job = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name},
            "spec": spec,
        }
        for set_name in ("trainer-v2.2.0", "trainer-latest"):
            problems += _crd_problems(train_job, set_name)
    return problems


def validate_job_documents(docs: Iterable[Mapping[str, Any]]) -> list[SchemaProblem]:
    """Validate the output of ``render_job_manifest``: the CRE Job's TrainJob and its objects."""
    docs = list(docs)
    specs = [
        (f"{d['metadata']['name']}-workload", d["spec"]["workload"]["trainJob"])
        for d in docs
        if d.get("kind") == "Job" and d.get("apiVersion", "").startswith("cre.")
    ]
    return validate_rendered(
        [d for d in docs if not d.get("apiVersion", "").startswith("cre.")], train_job_specs=specs
    )
