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
Test-kit grade: it reads the CRD files, so it lives here and not in the pure layers.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import jsonschema  # type: ignore[import-untyped]
from kubernetes_validate import utils as kv_utils
from referencing import Registry, Resource
from ruamel.yaml import YAML

from cre.testing import crds
from cre.testing.apiserver._cel import Program, compile_expression

KUBE_VERSIONS: tuple[str, ...] = tuple(f"1.{m}.0" for m in range(30, 38))
CRD_SETS: Mapping[str, Path] = {
    "trainer-v2.2.0": crds.TRAINER_OLDEST,
    "trainer-latest": crds.TRAINER_LATEST,
    "jobset-v0.11.1": crds.JOBSET_OLDEST,
    "jobset-latest": crds.JOBSET_LATEST,
}
OBJECT_META_KEYS = frozenset(
    {"name", "namespace", "labels", "annotations", "generateName", "finalizers", "ownerReferences"}
)


@attrs.frozen
class SchemaProblem:
    """One way an object fails one schema."""

    schema: str
    object: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"[{self.schema}] {self.object}: {self.path}: {self.message}"


@functools.cache
def _crd_schemas(folder: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """``(apiVersion, kind) -> openAPIV3Schema`` for every served version in ``folder``."""
    yaml = YAML(typ="safe", pure=True)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for file in sorted(folder.glob("*.yaml")):
        crd = yaml.load(file.read_text(encoding="utf-8"))
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version.get("served"):
                out[(f"{group}/{version['name']}", kind)] = version["schema"]["openAPIV3Schema"]
    return out


def _type_ok(value: Any, schema: Mapping[str, Any]) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, str | int) and not isinstance(value, bool)
    kind = schema.get("type")
    checks = {
        "object": lambda v: isinstance(v, Mapping),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
    }
    return kind is None or checks[kind](value)


@functools.cache
def _cel_program(rule: str) -> Program:
    return compile_expression(rule)


def cel_problems(value: Any, schema: Mapping[str, Any], where: str) -> list[str]:
    """Create-time CEL rules of one schema node that ``value`` breaks."""
    problems = []
    for item in schema.get("x-kubernetes-validations", []):
        rule = item["rule"]
        if "oldSelf" in rule:
            continue
        result = _cel_program(rule).run({"self": value})
        if result is not True:
            message = item.get("message") or f"failed rule {rule}"
            problems.append(f"{where}: {message} (CEL: {rule})")
    return problems


def structural_problems(value: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Every way ``value`` breaks a CRD structural schema, as ``path: message`` strings.

    Unknown fields are errors unless the schema preserves unknown fields, because the API
    server would prune them without a word.
    """
    problems: list[str] = []
    where = path or "(root)"
    if value is None:
        if not schema.get("nullable"):
            problems.append(f"{where}: null is not allowed")
        return problems
    if not _type_ok(value, schema):
        want = "int-or-string" if schema.get("x-kubernetes-int-or-string") else schema.get("type")
        return [f"{where}: expected {want}, got {type(value).__name__}"]
    problems += cel_problems(value, schema, where)
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{where}: longer than {schema['maxLength']}")
        if "minLength" in schema and len(value) < schema["minLength"]:
            problems.append(f"{where}: shorter than {schema['minLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            problems.append(f"{where}: does not match {schema['pattern']}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where}: below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where}: above the maximum {schema['maximum']}")
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(f"{where}: more than {schema['maxItems']} items")
        if "minItems" in schema and len(value) < schema["minItems"]:
            problems.append(f"{where}: fewer than {schema['minItems']} items")
        for i, item in enumerate(value):
            problems += structural_problems(item, schema.get("items", {}), f"{path}[{i}]")
    if isinstance(value, Mapping):
        props: Mapping[str, Any] = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields", False)
        for key in schema.get("required", []):
            if key not in value:
                problems.append(f"{path}.{key}: required field is missing")
        for key, item in value.items():
            sub = f"{path}.{key}"
            if key in props:
                problems += structural_problems(item, props[key], sub)
            elif isinstance(extra, Mapping):
                problems += structural_problems(item, extra, sub)
            elif extra is True or preserve or schema.get("type") is None:
                continue
            else:
                problems.append(f"{sub}: unknown field (the API server would prune it)")
    return problems


def _crd_problems(obj: Mapping[str, Any], set_name: str) -> list[SchemaProblem]:
    key = (str(obj.get("apiVersion")), str(obj.get("kind")))
    name = f"{key[1]}/{obj.get('metadata', {}).get('name')}"
    schema = _crd_schemas(CRD_SETS[set_name]).get(key)
    if schema is None:
        return [SchemaProblem(set_name, name, "", f"{key} is not served by this CRD set")]
    problems = [
        SchemaProblem(set_name, name, f".metadata.{k}", "not an ObjectMeta field")
        for k in obj.get("metadata", {})
        if k not in OBJECT_META_KEYS
    ]
    if not obj.get("metadata", {}).get("name"):
        problems.append(SchemaProblem(set_name, name, ".metadata.name", "required"))
    # ObjectMeta is validated by the server itself, not by the CRD schema; rules on the root
    # (name length and format) still see it.
    meta = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    sub = {**schema, "properties": {**schema.get("properties", {}), "metadata": meta}}
    for text in structural_problems(dict(obj), sub):
        path, _, message = text.partition(": ")
        problems.append(SchemaProblem(set_name, name, path, message))
    return problems


@functools.cache
def _kube_validator(version: str, api_version: str, kind: str) -> Any:
    """A cached strict validator from kubernetes-validate's data; None when not served."""
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    folder = f"kubernetes-json-schema/v{version}-local-strict"
    try:
        schema = kv_utils.schema_contents(f"{folder}/{kind.lower()}-{api}.json", version)
    except FileNotFoundError:
        return None
    defs = kv_utils.schema_contents(f"{folder}/_definitions.json", version)
    registry = Resource.from_contents(defs) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def min_kube_version(obj: Mapping[str, Any]) -> str:
    """The oldest Kubernetes an object can run on, by the APIs it uses.

    Pod-level DRA claims (``resourceClaims[].resourceClaimTemplateName``) took their current
    shape in 1.31 and the NVIDIA DRA driver behind ComputeDomains needs 1.32, so objects that
    use them are checked from 1.32 on; everything else from the oldest version checked.
    """
    spec = obj.get("spec", {}).get("template", {}).get("spec", {})
    return "1.32.0" if spec.get("resourceClaims") else KUBE_VERSIONS[0]


def _kube_problems(obj: Mapping[str, Any], versions: Iterable[str]) -> list[SchemaProblem]:
    name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    floor = tuple(int(x) for x in min_kube_version(obj).split("."))
    problems = []
    served = 0
    for version in versions:
        if tuple(int(x) for x in version.split(".")) < floor:
            continue
        validator = _kube_validator(version, str(obj.get("apiVersion")), str(obj.get("kind")))
        if validator is None:
            continue
        served += 1
        for error in sorted(validator.iter_errors(dict(obj)), key=lambda e: list(e.path)):
            path = "." + ".".join(str(p) for p in error.path) if error.path else "(root)"
            problems.append(SchemaProblem(f"kubernetes-{version}", name, path, error.message))
    if not served:
        problems.append(SchemaProblem("kubernetes", name, "", "no Kubernetes version serves it"))
    return problems


def embedded_batch_jobs(runtime: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The batch/v1 Jobs JobSet would create from a TrainingRuntime (one per replicated job)."""
    jobs = []
    for rjob in runtime["spec"]["template"]["spec"].get("replicatedJobs", []):
        template = rjob.get("template", {})
        metadata = {"name": f"{runtime['metadata']['name']}-{rjob.get('name')}"}
        if "labels" in template.get("metadata", {}):
            metadata["labels"] = template["metadata"]["labels"]
        jobs.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": metadata,
                "spec": template.get("spec", {}),
            }
        )
    return jobs


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
