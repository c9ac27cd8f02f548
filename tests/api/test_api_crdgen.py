"""The generated CRDs match the models, are structural, and accept what the converter writes."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cel
import jsonschema  # type: ignore[import-untyped]
import kubernetes_validate
import pytest
from hypothesis import HealthCheck, given, settings
from ruamel.yaml import YAML

from cre.api import crdgen
from cre.api.converter import to_dict
from cre.api.kinds import KINDS, KindInfo
from cre.testing.strategies.api import models

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "deploy" / "crds"
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Short names of built-in resources a CRE short name must never shadow.
BUILTIN_SHORT_NAMES = {
    "job",
    "jobs",
    "cj",
    "po",
    "deploy",
    "svc",
    "no",
    "ns",
    "cm",
    "wf",
    "rs",
    "ds",
    "sts",
    "pv",
    "pvc",
    "sa",
    "ev",
    "ing",
    "crd",
    "crds",
    "cert",
    "certs",
}


def _schema(info: KindInfo) -> dict[str, Any]:
    schema: dict[str, Any] = crdgen.build_crd(info)["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"
    ]
    return schema


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for key, sub in schema.get("properties", {}).items():
        yield from _nodes(sub, f"{path}.{key}")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}[*]")
    if "items" in schema:
        yield from _nodes(schema["items"], f"{path}[]")


def test_checked_in_crds_match_generation() -> None:
    """deploy/crds holds exactly what `python -m cre.api.crdgen` writes today."""
    rendered = crdgen.render_all()
    on_disk = {p.name for p in CRD_DIR.glob("cre.dev_*.yaml")}
    assert on_disk == set(rendered), "run `python -m cre.api.crdgen` to refresh deploy/crds"
    for name, text in rendered.items():
        assert (CRD_DIR / name).read_text() == text, (
            f"{name} drifted from the models: run `python -m cre.api.crdgen`"
        )


def test_main_writes_and_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command writes one file per kind and --check reports stale files with exit 1."""
    assert crdgen.main(["--out", str(tmp_path), "--check"]) == 1
    assert crdgen.main(["--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(crdgen.render_all())
    assert crdgen.main(["--out", str(tmp_path), "--check"]) == 0
    (tmp_path / "cre.dev_jobs.yaml").write_text("stale\n")
    assert crdgen.main(["--out", str(tmp_path), "--check"]) == 1
    assert "stale:" in capsys.readouterr().out


def test_files_parse_as_yaml_crds() -> None:
    """Each file is one apiextensions.k8s.io/v1 CRD document named after its plural."""
    for info in KINDS:
        doc = YAML(typ="safe").load((CRD_DIR / crdgen.file_name(info)).read_text())
        assert doc["kind"] == "CustomResourceDefinition"
        assert doc["metadata"]["name"] == f"{info.plural}.cre.dev"


@pytest.mark.parametrize("info", KINDS, ids=lambda i: i.kind)
def test_crd_is_valid_kubernetes_object(info: KindInfo) -> None:
    """The CRD validates against the published apiextensions schema (strict: no unknown keys)."""
    kubernetes_validate.validate(crdgen.build_crd(info), "1.32", strict=True)


@pytest.mark.parametrize("info", KINDS, ids=lambda i: i.kind)
def test_schema_is_structural(info: KindInfo) -> None:
    """Every node has a type, properties never meet additionalProperties, metadata is bare."""
    schema = _schema(info)
    assert schema["properties"]["metadata"] == {"type": "object"}
    for path, node in _nodes(schema):
        assert "type" in node, f"{info.kind}{path} has no type"
        assert not ("properties" in node and "additionalProperties" in node), path
        if node.get("x-kubernetes-preserve-unknown-fields"):
            assert node["type"] == "object", path
        if "default" in node:
            jsonschema.validate(node["default"], {k: v for k, v in node.items() if k != "default"})
        if node.get("x-kubernetes-list-type") == "map":
            required = set(node["items"].get("required", []))
            assert set(node["x-kubernetes-list-map-keys"]) <= required, path


@pytest.mark.parametrize("info", KINDS, ids=lambda i: i.kind)
def test_names_scope_and_subresources(info: KindInfo) -> None:
    """Short names avoid built-ins, category is cre, status subresource where there is status."""
    spec = crdgen.build_crd(info)["spec"]
    names = spec["names"]
    assert names["categories"] == ["cre"]
    assert not set(names["shortNames"]) & BUILTIN_SHORT_NAMES
    assert spec["scope"] == ("Namespaced" if info.namespaced else "Cluster")
    version = spec["versions"][0]
    assert ("subresources" in version) == info.status
    assert ("status" in _schema(info)["properties"]) == info.status


def test_short_names_are_unique() -> None:
    """No two CRE kinds share a short name."""
    names = [n for info in KINDS for n in info.short_names]
    assert len(names) == len(set(names))


def _column_target(schema: dict[str, Any], json_path: str) -> dict[str, Any] | None:
    node: dict[str, Any] | None = schema
    for part in re.sub(r"\[[^\]]*\]", ".[]", json_path).strip(".").split("."):
        if node is None:
            return None
        node = node.get("items") if part == "[]" else node.get("properties", {}).get(part)
    return node


@pytest.mark.parametrize("info", KINDS, ids=lambda i: i.kind)
def test_printer_columns_point_at_schema_fields(info: KindInfo) -> None:
    """Every printer column reads a field the schema declares, with a matching type."""
    schema = _schema(info)
    schema["properties"]["metadata"] = {"properties": {"creationTimestamp": {"type": "string"}}}
    columns = crdgen.build_crd(info)["spec"]["versions"][0]["additionalPrinterColumns"]
    for col in columns:
        target = _column_target(schema, col["jsonPath"])
        assert target is not None, f"{info.kind}: {col['jsonPath']}"
        expected = col["type"] if col["type"] in ("integer", "boolean") else "string"
        assert target["type"] == expected, col
    names = [c["name"] for c in columns]
    if info.kind in ("Certification", "Workflow"):
        assert names[:2] == ["Phase", "Verdict"]
    elif info.kind == "NodeCertification":  # no lifecycle: the node and its state first
        assert names[:2] == ["Node", "State"]
    elif info.kind == "CertificationSchedule":  # no lifecycle: when it runs first, as CronJob
        assert names[:2] == ["Schedule", "Interval"]
    elif info.kind == "ReportExportPolicy":  # no status: where the reports go first
        assert names[:2] == ["URL", "Suspended"]
    elif info.kind == "ReportExport":  # the source, then where its delivery stands
        assert names[:2] == ["Source", "Phase"]
    elif info.status and info.kind not in ("BandwidthMeasurement", "GoodputMeasurement"):
        assert names[:2] == ["Phase", "Reason"]
    age = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    assert age in columns
    assert all(c.get("priority") for c in columns[columns.index(age) + 1 :]), "Age ends -o default"


def _pruned(obj: Any, schema: dict[str, Any], path: str) -> list[str]:
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(obj, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        out: list[str] = []
        for key, value in obj.items():
            if props is not None and key in props:
                out += _pruned(value, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                out += _pruned(value, extra, f"{path}[{key}]")
            else:
                out.append(f"{path}.{key}")
        return out
    if isinstance(obj, list):
        return [p for i, v in enumerate(obj) for p in _pruned(v, schema["items"], f"{path}[{i}]")]
    return []


@pytest.mark.parametrize("info", KINDS, ids=lambda i: i.kind)
def test_schema_accepts_converter_output_without_pruning(info: KindInfo) -> None:
    """Generated objects validate against the CRD schema and lose no field to pruning."""
    schema = _schema(info)
    validator = jsonschema.Draft7Validator(schema)

    @SETTINGS
    @given(models(info.model))
    def check(model: Any) -> None:
        data = to_dict(model)
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(data)]
        assert errors == []
        body = {k: v for k, v in data.items() if k != "metadata"}
        assert _pruned(body, schema, "") == []

    check()


def test_schema_rejects_what_validate_rejects() -> None:
    """Bounds, patterns, enums and required fields are enforced by the schema too."""
    schema = _schema(next(i for i in KINDS if i.kind == "Job"))
    base: dict[str, Any] = {
        "apiVersion": "cre.dev/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"workload": {"trainJob": {}}},
    }
    jsonschema.validate(base, schema)
    bad_values: list[tuple[str, Any]] = [
        ("schedulingStallGraceSeconds", 0),
        ("measurementTimeout", "soon"),
        ("workload", {}),
        ("checkpoint", {"maxRestarts": 1}),
    ]
    for key, value in bad_values:
        obj = copy.deepcopy(base)
        obj["spec"][key] = value
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(obj, schema)
    obj = copy.deepcopy(base)
    obj["status"] = {"phase": "Done"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(obj, schema)


def _rules(
    schema: dict[str, Any], path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], str, str]]:
    for rule in schema.get("x-kubernetes-validations", []):
        yield path, rule["rule"], rule["message"]
    for key, sub in schema.get("properties", {}).items():
        yield from _rules(sub, (*path, key))


def _at(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def _violations(info: KindInfo, old: dict[str, Any] | None, new: dict[str, Any]) -> list[str]:
    """Evaluate the CRD's CEL rules the way the server does (transition rules on update)."""
    out = []
    for path, rule, message in _rules(_schema(info)):
        current, previous = _at(new, path), _at(old, path) if old is not None else None
        if current is None:
            continue
        if "oldSelf" in rule:
            if previous is None:
                continue
            ok = cel.evaluate(rule, {"self": current, "oldSelf": previous})
        else:
            ok = cel.evaluate(rule, {"self": current})
        if not ok:
            out.append(f"{'.'.join(path)}: {message}")
    return out


@pytest.mark.parametrize("info", KINDS, ids=lambda i: i.kind)
def test_cel_rules_compile(info: KindInfo) -> None:
    """Every x-kubernetes-validations rule compiles with the CEL implementation CRE tests use."""
    for _, rule, _ in _rules(_schema(info)):
        cel.compile(rule)


JOB = next(i for i in KINDS if i.kind == "Job")
WORKFLOW = next(i for i in KINDS if i.kind == "Workflow")
CERT = next(i for i in KINDS if i.kind == "Certification")
RUN = next(i for i in KINDS if i.kind == "WorkloadRun")


def _job_obj(**spec: Any) -> dict[str, Any]:
    return {"spec": {"workload": {"trainJob": {"runtimeRef": {"name": "rt"}}}, **spec}}


def test_job_immutability_rules() -> None:
    """Job workload and the four optional blocks are fixed; thresholds stay editable."""
    old = _job_obj(bandwidthMeasurement={"logProfileRef": "nccl-bandwidth"})
    assert (
        _violations(
            JOB,
            old,
            _job_obj(
                bandwidthMeasurement={"logProfileRef": "nccl-bandwidth"}, thresholds={"x": "y"}
            ),
        )
        == []
    )
    changed = _job_obj(bandwidthMeasurement={"logProfileRef": "nccl-bandwidth"})
    changed["spec"]["workload"]["trainJob"]["runtimeRef"]["name"] = "other"
    assert _violations(JOB, old, changed) == ["spec.workload: workload cannot change once set"]
    assert _violations(JOB, old, _job_obj(bandwidthMeasurement={"logProfileRef": "other"})) == [
        "spec.bandwidthMeasurement: bandwidthMeasurement cannot change once set"
    ]
    assert _violations(
        JOB,
        old,
        _job_obj(
            bandwidthMeasurement={"logProfileRef": "nccl-bandwidth"},
            nodeHealthMonitor={"cel": {"expression": "true"}},
        ),
    ) == ["spec: nodeHealthMonitor can only be set when the object is created"]
    assert _violations(JOB, old, _job_obj()) == [
        "spec: bandwidthMeasurement can only be set when the object is created"
    ]
    assert _violations(JOB, None, _job_obj(nodeHealthMonitor={"cel": {"expression": "x"}})) == []


def test_workflow_gang_scheduler_rules() -> None:
    """A Workflow's gangScheduler cannot be added, removed or changed; nor its Job workload."""
    base: dict[str, Any] = {"spec": {"jobTemplate": _job_obj(), "orchestration": {}}}
    gang = copy.deepcopy(base)
    gang["spec"]["gangScheduler"] = {"schedulerName": "kai-scheduler"}
    assert _violations(WORKFLOW, base, gang) == [
        "spec: gangScheduler can only be set when the object is created"
    ]
    other = copy.deepcopy(gang)
    other["spec"]["gangScheduler"]["schedulerName"] = "runai-scheduler"
    assert _violations(WORKFLOW, gang, other) == [
        "spec.gangScheduler: gangScheduler cannot change once set"
    ]
    moved = copy.deepcopy(base)
    moved["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"] = {}
    assert _violations(WORKFLOW, base, moved) == [
        "spec.jobTemplate.spec.workload: workload cannot change once set"
    ]
    edited = copy.deepcopy(base)
    edited["spec"]["overrides"] = [{"when": {}}]
    assert _violations(WORKFLOW, base, edited) == []


def test_certification_and_run_specs_are_immutable() -> None:
    """Any change to a Certification or WorkloadRun spec is refused."""
    old = {"spec": {"categories": [{"domain": "d", "variant": "v"}]}}
    new = {"spec": {"categories": [{"domain": "d", "variant": "w"}]}}
    assert _violations(CERT, old, new) == ["spec: spec cannot change once set"]
    run = {"spec": {"image": "a", "numNodes": 1, "framework": {"exec": {"command": ["x"]}}}}
    run2 = copy.deepcopy(run)
    run2["spec"]["numNodes"] = 2
    assert _violations(RUN, run, run2) == ["spec: spec cannot change once set"]


def test_class_rules_agree_with_validate() -> None:
    """The CEL forms of the cross-field rules reject what ``cre.api.validate`` rejects."""
    run = {
        "spec": {
            "framework": {"torch": {"script": "a", "module": "b"}},
            "config": {"inline": {"a": "b"}, "configMapRef": {"name": "c"}},
            "gangScheduler": {"schedulerName": "kai", "queueLabelKey": "cre.dev/q"},
            "workloadMetadata": {"labels": {"cre.dev/job": "x"}},
            "target": {"matchExpressions": [{"key": "k", "operator": "In"}]},
        }
    }
    assert sorted(_violations(RUN, None, run)) == [
        "spec.config: inline and configMapRef are mutually exclusive",
        "spec.framework.torch: set exactly one of script, module",
        "spec.gangScheduler: queueLabelKey is reserved for CRE",
        "spec.workloadMetadata: labels may not use keys reserved for CRE "
        "(app.kubernetes.io/managed-by, cre.dev/*)",
    ]


def test_node_selector_requirement_rule() -> None:
    """In/NotIn need values and Exists/DoesNotExist take none, in CEL as in validate."""
    target = _schema(RUN)["properties"]["spec"]["properties"]["target"]
    item = target["properties"]["matchExpressions"]["items"]
    (rule,) = [r["rule"] for r in item["x-kubernetes-validations"]]
    assert cel.evaluate(rule, {"self": {"key": "k", "operator": "In"}}) is False
    assert cel.evaluate(rule, {"self": {"key": "k", "operator": "In", "values": ["a"]}}) is True
    assert cel.evaluate(rule, {"self": {"key": "k", "operator": "Exists"}}) is True
    assert (
        cel.evaluate(rule, {"self": {"key": "k", "operator": "Exists", "values": ["a"]}}) is False
    )
