"""Offline schema checks: CRD structural schemas with their CEL rules, and Kubernetes releases.

What an API server would reject (or silently prune) should be found before anything is
applied. Two sources of truth are checked, and every problem names the schema set, the
object and the field path:

* a CRD's ``openAPIV3Schema`` (Trainer and JobSet upstream, CRE's own from the models): types,
  required fields, enums, bounds, and *pruning* (a field the structural schema does not allow
  is reported, because the API server would drop it without a word), plus the create-time CEL
  rules (``x-kubernetes-validations`` that do not mention ``oldSelf``);
* the Kubernetes JSON schemas shipped by ``kubernetes-validate``, strict, per release.

``cre validate`` uses these directly; the test kit (``cre.testing.schemas``) runs the same
checks over rendered manifests, with the API emulator's CEL library passed in as ``run``. Left
out: string formats, CEL cost budgets, and the Kubernetes CEL extension functions in the
default runner (the rules of the CRDs CRE checks use only the standard language).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import cel
import jsonschema  # type: ignore[import-untyped]
import yaml
from kubernetes_validate import utils as kv_utils
from referencing import Registry, Resource

# Kubernetes releases CRE supports and checks against (kubernetes-validate ships their schemas).
KUBE_VERSIONS: tuple[str, ...] = tuple(f"1.{m}.0" for m in range(30, 38))
OBJECT_META_KEYS = frozenset(
    {"name", "namespace", "labels", "annotations", "generateName", "finalizers", "ownerReferences"}
)
# (rule, value of self) -> the rule's result; raises when the rule cannot be evaluated.
CelRunner = Callable[[str, Any], Any]


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
def _compiled(rule: str) -> Any:
    return cel.compile(rule)


def plain_cel(rule: str, value: Any) -> Any:
    """Evaluate ``rule`` with ``self`` bound, in the standard CEL language only."""
    return _compiled(rule).execute({"self": value})


def crd_schemas(folder: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """``(apiVersion, kind) -> openAPIV3Schema`` for every served version of the CRDs in
    ``folder`` (cached per folder)."""
    return _crd_schemas(folder.resolve())


@functools.cache
def _crd_schemas(folder: Path) -> dict[tuple[str, str], dict[str, Any]]:
    # libyaml when present, as the API emulator loads the same files: the upstream CRDs are
    # large, and a pure-Python parser takes seconds where libyaml takes a fraction of one.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for file in sorted(folder.glob("*.yaml")):
        crd = yaml.load(file.read_text(encoding="utf-8"), Loader=loader)
        out.update(served_schemas(crd))
    return out


def served_schemas(crd: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """``(apiVersion, kind) -> openAPIV3Schema`` of one CRD object."""
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    return {
        (f"{group}/{version['name']}", kind): version["schema"]["openAPIV3Schema"]
        for version in crd["spec"]["versions"]
        if version.get("served")
    }


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


def cel_problems(
    value: Any, schema: Mapping[str, Any], where: str, *, run: CelRunner = plain_cel
) -> list[str]:
    """Create-time CEL rules of one schema node that ``value`` breaks."""
    problems = []
    for item in schema.get("x-kubernetes-validations", []):
        rule = item["rule"]
        if "oldSelf" in rule:
            continue
        try:
            result = run(rule, value)
        except Exception as exc:  # an evaluation error rejects the object, as on a server
            problems.append(f"{where}: rule could not be evaluated: {exc} (CEL: {rule})")
            continue
        if result is not True:
            message = item.get("message") or f"failed rule {rule}"
            problems.append(f"{where}: {message} (CEL: {rule})")
    return problems


def structural_problems(
    value: Any, schema: Mapping[str, Any], path: str = "", *, run: CelRunner = plain_cel
) -> list[str]:
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
    problems += cel_problems(value, schema, where, run=run)
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
            problems += structural_problems(item, schema.get("items", {}), f"{path}[{i}]", run=run)
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
                problems += structural_problems(item, props[key], sub, run=run)
            elif isinstance(extra, Mapping):
                problems += structural_problems(item, extra, sub, run=run)
            elif extra is True or preserve or schema.get("type") is None:
                continue
            else:
                problems.append(f"{sub}: unknown field (the API server would prune it)")
    return problems


def object_name(obj: Mapping[str, Any]) -> str:
    """``Kind/name`` of a raw object, for messages."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return f"{obj.get('kind')}/{name}"


def crd_problems(
    obj: Mapping[str, Any],
    schema: Mapping[str, Any],
    *,
    schema_name: str,
    run: CelRunner = plain_cel,
) -> list[SchemaProblem]:
    """Every problem of a custom object against its CRD's ``openAPIV3Schema``.

    ObjectMeta is validated by the server itself, not by the CRD schema; rules on the root
    (name length and format) still see it.
    """
    name = object_name(obj)
    raw_meta = obj.get("metadata")
    metadata: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    problems = [
        SchemaProblem(schema_name, name, f".metadata.{k}", "not an ObjectMeta field")
        for k in metadata
        if k not in OBJECT_META_KEYS
    ]
    if not metadata.get("name"):
        problems.append(SchemaProblem(schema_name, name, ".metadata.name", "required"))
    meta = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    sub = {**schema, "properties": {**schema.get("properties", {}), "metadata": meta}}
    for text in structural_problems(dict(obj), sub, run=run):
        path, _, message = text.partition(": ")
        problems.append(SchemaProblem(schema_name, name, path, message))
    return problems


@functools.cache
def kube_validator(version: str, api_version: str, kind: str) -> Any:
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


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def kube_problems(obj: Mapping[str, Any], versions: Iterable[str]) -> list[SchemaProblem]:
    """Problems of a built-in object against the strict Kubernetes schemas of ``versions``
    (each at least 1.30.0-style ``major.minor.patch``); versions older than the object's
    floor (:func:`min_kube_version`) are skipped."""
    name = object_name(obj)
    floor = _version_key(min_kube_version(obj))
    problems = []
    served = 0
    for version in versions:
        if _version_key(version) < floor:
            continue
        validator = kube_validator(version, str(obj.get("apiVersion")), str(obj.get("kind")))
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
