"""``cre.api.validate`` reports every rule violation with its field path."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from cre.api.errors import FieldError, ValidationError
from cre.api.job import Job
from cre.api.validate import parse_quantity, validate, validated

T = "2026-01-01T00:00:00Z"


def job() -> dict[str, Any]:
    return {
        "apiVersion": "cre.dev/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"workload": {"trainJob": {"runtimeRef": {"name": "rt"}}}},
    }


def workflow() -> dict[str, Any]:
    return {
        "apiVersion": "cre.dev/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"jobTemplate": {"spec": job()["spec"]}, "orchestration": {}},
    }


def cert() -> dict[str, Any]:
    return {
        "apiVersion": "cre.dev/v1alpha1",
        "kind": "Certification",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"categories": [{"domain": "communication", "variant": "nccl-all-reduce"}]},
    }


def run() -> dict[str, Any]:
    return {
        "apiVersion": "cre.dev/v1alpha1",
        "kind": "WorkloadRun",
        "metadata": {"name": "r", "namespace": "ns"},
        "spec": {"image": "img", "numNodes": 2, "framework": {"exec": {"command": ["true"]}}},
    }


def bwm() -> dict[str, Any]:
    return {
        "apiVersion": "cre.dev/v1alpha1",
        "kind": "BandwidthMeasurement",
        "metadata": {"name": "b", "namespace": "ns"},
        "spec": {"jobRef": {"kind": "Job", "name": "j"}, "logProfileRef": "nccl-bandwidth"},
    }


def profile() -> dict[str, Any]:
    return {
        "apiVersion": "cre.dev/v1alpha1",
        "kind": "LogProfile",
        "metadata": {"name": "nccl-bandwidth"},
        "spec": {
            "patterns": {
                "bandwidthResult": {
                    "regex": r"^\s*(?P<size>\d+)\s+(?P<busBW>[\d.]+)",
                    "example": " 8  1.5",
                }
            }
        },
    }


def cond(kind: str, status: str) -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": "R", "lastTransitionTime": T}


def _set(base: Callable[[], dict[str, Any]], path: str, value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(base())
    *parents, last = path.split(".")
    node: Any = obj
    for key in parents:
        node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return obj


_DELETE = object()

CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("apiVersion", _set(job, "apiVersion", "v1"), "apiVersion", "must be 'cre.dev/v1alpha1'"),
    (
        "name missing",
        _set(job, "metadata", {"namespace": "ns"}),
        "metadata.name",
        "name or generateName is required",
    ),
    ("name syntax", _set(job, "metadata.name", "Bad_Name"), "metadata.name", "DNS subdomain"),
    (
        "metadata label",
        _set(job, "metadata.labels", {"a": "b c"}),
        "metadata.labels[a]",
        "label value",
    ),
    (
        "workload empty",
        _set(job, "spec.workload", {}),
        "spec.workload",
        "must set at least 1 field(s)",
    ),
    (
        "threshold key",
        _set(job, "spec.thresholds", {"speed": "value > 1"}),
        "spec.thresholds[speed]",
        "unknown threshold key",
    ),
    (
        "threshold cel",
        _set(job, "spec.thresholds", {"busBandwidthGBps": "value >="}),
        "spec.thresholds[busBandwidthGBps]",
        "invalid CEL expression",
    ),
    (
        "threshold empty",
        _set(job, "spec.thresholds", {"busBandwidthGBps": " "}),
        "spec.thresholds[busBandwidthGBps]",
        "threshold expression is empty",
    ),
    (
        "stall needs goodput",
        _set(job, "spec.stallMultiplier", 2),
        "spec.stallMultiplier",
        "needs goodputMeasurement",
    ),
    (
        "minimum",
        _set(job, "spec.schedulingStallGraceSeconds", 0),
        "spec.schedulingStallGraceSeconds",
        "must be >= 1",
    ),
    (
        "pattern",
        _set(job, "spec.measurementTimeout", "5 minutes"),
        "spec.measurementTimeout",
        "must match",
    ),
    (
        "min length",
        _set(job, "spec.nodeHealthMonitor", {"cel": {"expression": ""}}),
        "spec.nodeHealthMonitor.cel.expression",
        "at least 1 characters",
    ),
    (
        "max length",
        _set(job, "spec.nodeHealthMonitor", {"cel": {"expression": "x" * 2049}}),
        "spec.nodeHealthMonitor.cel.expression",
        "at most 2048 characters",
    ),
    (
        "reserved label",
        _set(job, "spec.workloadMetadata", {"labels": {"cre.dev/job": "x"}}),
        "spec.workloadMetadata.labels[cre.dev/job]",
        "reserved for CRE",
    ),
    (
        "managed-by reserved",
        _set(job, "spec.workloadMetadata", {"labels": {"app.kubernetes.io/managed-by": "me"}}),
        "spec.workloadMetadata.labels[app.kubernetes.io/managed-by]",
        "reserved for CRE",
    ),
    (
        "label key syntax",
        _set(job, "spec.workloadMetadata", {"labels": {"-x": "y"}}),
        "spec.workloadMetadata.labels[-x]",
        "qualified name",
    ),
    (
        "too many labels",
        _set(job, "spec.workloadMetadata", {"labels": {f"k{i}": "v" for i in range(33)}}),
        "spec.workloadMetadata.labels",
        "at most 32 field(s)",
    ),
    (
        "two trio true",
        _set(job, "status", {"conditions": [cond("InProgress", "True"), cond("Failed", "True")]}),
        "status.conditions",
        "at most one of InProgress, Succeeded, Failed",
    ),
    (
        "duplicate condition",
        _set(job, "status", {"conditions": [cond("Failed", "False"), cond("Failed", "False")]}),
        "status.conditions[1]",
        "duplicate entry (type=Failed)",
    ),
    (
        "duplicate failed node",
        _set(
            job,
            "status",
            {
                "failedNodes": [
                    {"name": "n", "reason": "WorkloadFailed"},
                    {"name": "n", "reason": "WorkloadFailed"},
                ]
            },
        ),
        "status.failedNodes[1]",
        "duplicate entry (name=n, reason=WorkloadFailed)",
    ),
    (
        "negative restarts",
        _set(job, "status", {"restartCount": -1}),
        "status.restartCount",
        "must be >= 0",
    ),
    (
        "dependency shape",
        _set(workflow, "spec.dependencies", [{"kind": "ConfigMap", "metadata": {"name": "cm"}}]),
        "spec.dependencies[0].apiVersion",
        "required string is missing",
    ),
    (
        "dependency name",
        _set(
            workflow,
            "spec.dependencies",
            [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}],
        ),
        "spec.dependencies[0].metadata.name",
        "DNS subdomain",
    ),
    (
        "patch op",
        _set(
            workflow,
            "spec.overrides",
            [{"when": {}, "jobTemplatePatch": [{"op": "merge", "path": "/spec"}]}],
        ),
        "spec.overrides[0].jobTemplatePatch[0].op",
        "must be one of",
    ),
    (
        "patch path",
        _set(
            workflow,
            "spec.overrides",
            [{"when": {}, "jobTemplatePatch": [{"op": "remove", "path": "spec"}]}],
        ),
        "spec.overrides[0].jobTemplatePatch[0].path",
        "JSON pointer",
    ),
    (
        "patch value",
        _set(
            workflow,
            "spec.overrides",
            [{"when": {}, "jobTemplatePatch": [{"op": "add", "path": "/a"}]}],
        ),
        "spec.overrides[0].jobTemplatePatch[0].value",
        "add needs value",
    ),
    (
        "patch from",
        _set(
            workflow,
            "spec.overrides",
            [{"when": {}, "jobTemplatePatch": [{"op": "move", "path": "/a"}]}],
        ),
        "spec.overrides[0].jobTemplatePatch[0].from",
        "move needs from",
    ),
    (
        "override dependency",
        _set(
            workflow,
            "spec.overrides",
            [{"when": {}, "dependencies": [{"apiVersion": "v1", "metadata": {"name": "x"}}]}],
        ),
        "spec.overrides[0].dependencies[0].kind",
        "required string is missing",
    ),
    (
        "unpinned diagnose",
        _set(workflow, "spec.orchestration", {"placement": "Unpinned", "diagnose": {}}),
        "spec.orchestration.diagnose",
        "needs Pinned placement",
    ),
    (
        "diagnose iterations",
        _set(workflow, "spec.orchestration", {"iterations": 2, "diagnose": {}}),
        "spec.orchestration.iterations",
        "iterations must be 1",
    ),
    (
        "diagnose override iterations",
        _set(lambda: _set(workflow, "spec.orchestration", {"diagnose": {}}), "spec.overrides",
             [{"when": {}, "orchestration": {"iterations": 2}}]),
        "spec.overrides[0].orchestration.iterations",
        "diagnose runs its rounds once: iterations must be 1",
    ),
    (
        "diagnose override unpinned",
        _set(lambda: _set(workflow, "spec.orchestration", {"diagnose": {}}), "spec.overrides",
             [{"when": {}}, {"when": {}, "orchestration": {"placement": "Unpinned"}}]),
        "spec.overrides[1].orchestration.placement",
        "diagnose needs Pinned placement",
    ),
    (
        "unpinned strict",
        _set(
            workflow,
            "spec.orchestration",
            {"placement": "Unpinned", "topology": {"topologyKey": "k", "strictDomain": True}},
        ),
        "spec.orchestration.topology.strictDomain",
        "needs Pinned placement",
    ),
    (
        "template label",
        _set(workflow, "spec.jobTemplate.metadata", {"labels": {"a": "-"}}),
        "spec.jobTemplate.metadata.labels[a]",
        "label value",
    ),
    (
        "template job spec",
        _set(workflow, "spec.jobTemplate.spec.thresholds", {"x": "value > 1"}),
        "spec.jobTemplate.spec.thresholds[x]",
        "unknown threshold key",
    ),
    (
        "performance thresholds",
        _set(
            workflow,
            "spec.validation",
            {"performance": {"thresholds": {"thresholds": {"x": "value > 1"}}}},
        ),
        "spec.validation.performance.thresholds.thresholds[x]",
        "unknown threshold key",
    ),
    (
        "gang reserved",
        _set(
            workflow,
            "spec.gangScheduler",
            {"schedulerName": "kai", "queueLabelKey": "cre.dev/queue"},
        ),
        "spec.gangScheduler.queueLabelKey",
        "reserved for CRE",
    ),
    (
        "gang queue pattern",
        _set(workflow, "spec.gangScheduler", {"schedulerName": "kai", "queue": "-bad"}),
        "spec.gangScheduler.queue",
        "must match",
    ),
    (
        "requirement needs values",
        _set(
            workflow,
            "spec.orchestration",
            {"target": {"matchExpressions": [{"key": "k", "operator": "In"}]}},
        ),
        "spec.orchestration.target.matchExpressions[0].values",
        "In needs values",
    ),
    (
        "requirement takes none",
        _set(
            workflow,
            "spec.orchestration",
            {"target": {"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["a"]}]}},
        ),
        "spec.orchestration.target.matchExpressions[0].values",
        "Exists takes no values",
    ),
    ("no categories", _set(cert, "spec.categories", []), "spec.categories", "at least 1 items"),
    (
        "too many categories",
        _set(cert, "spec.categories", [{"domain": "d", "variant": "v"}] * 65),
        "spec.categories",
        "at most 64 items",
    ),
    (
        "category option",
        _set(
            cert,
            "spec.categories",
            [{"domain": "d", "variant": "v", "options": {"nodesPerJob": 0}}],
        ),
        "spec.categories[0].options.nodesPerJob",
        "must be >= 1",
    ),
    (
        "global thresholds",
        _set(cert, "spec.thresholds", {"x": "value > 1"}),
        "spec.thresholds[x]",
        "unknown threshold key",
    ),
    (
        "category thresholds",
        _set(
            cert,
            "spec.categories",
            [{"domain": "d", "variant": "v", "options": {"thresholds": {"x": "value"}}}],
        ),
        "spec.categories[0].options.thresholds[x]",
        "unknown threshold key",
    ),
    (
        "requests over limits",
        _set(
            cert,
            "spec.resources",
            {
                "limits": {"cpu": "2", "memory": "1Gi"},
                "requests": {"cpu": "2500m", "memory": "1Gi"},
            },
        ),
        "spec.resources.requests.cpu",
        "request 2500m exceeds limit 2",
    ),
    (
        "quantity pattern",
        _set(cert, "spec.resources", {"limits": {"memory": "lots"}}),
        "spec.resources.limits.memory",
        "must match",
    ),
    ("image length", _set(cert, "spec.image", ""), "spec.image", "at least 1 characters"),
    (
        "framework two",
        _set(run, "spec.framework", {"exec": {"command": ["a"]}, "torch": {"script": "s"}}),
        "spec.framework",
        "at most 1 field(s)",
    ),
    (
        "torch exclusive",
        _set(run, "spec.framework", {"torch": {"script": "a", "module": "b"}}),
        "spec.framework.torch",
        "exactly one of script, module",
    ),
    (
        "exec command",
        _set(run, "spec.framework", {"exec": {"command": []}}),
        "spec.framework.exec.command",
        "at least 1 items",
    ),
    (
        "config exclusive",
        _set(run, "spec.config", {"inline": {"a": "b"}, "configMapRef": {"name": "c"}}),
        "spec.config",
        "mutually exclusive",
    ),
    (
        "run thresholds",
        _set(run, "spec.thresholds", {"x": "value > 1"}),
        "spec.thresholds[x]",
        "unknown threshold key",
    ),
    (
        "priority class",
        _set(run, "spec.priorityClassName", "Not_DNS"),
        "spec.priorityClassName",
        "must match",
    ),
    (
        "bandwidth decimal",
        _set(bwm, "status", {"results": [{"sizeBytes": 8, "algBW": "fast", "busBW": "1.00"}]}),
        "status.results[0].algBW",
        "must match",
    ),
    (
        "regex compiles",
        _set(profile, "spec.patterns.bandwidthResult.regex", "(unclosed"),
        "spec.patterns.bandwidthResult.regex",
        "invalid regex",
    ),
    (
        "example matches",
        _set(profile, "spec.patterns.bandwidthResult.example", "nothing"),
        "spec.patterns.bandwidthResult.example",
        "does not match",
    ),
    (
        "unit capture",
        _set(profile, "spec.patterns.bandwidthResult.units", {"stepTiming": "ms"}),
        "spec.patterns.bandwidthResult.units[stepTiming]",
        "no capture group",
    ),
    (
        "cluster scoped",
        _set(profile, "metadata.namespace", "ns"),
        "metadata.namespace",
        "cluster-scoped",
    ),
    ("no patterns", _set(profile, "spec.patterns", {}), "spec.patterns", "at least 1 field(s)"),
]


@pytest.mark.parametrize(
    ("obj", "path", "fragment"),
    [(c[1], c[2], c[3]) for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_each_rule_reports_its_path(obj: dict[str, Any], path: str, fragment: str) -> None:
    """Breaking one rule yields exactly one error, at the rule's field path."""
    errors = validate(obj)
    assert [e.path for e in errors] == [path], errors
    assert fragment in errors[0].message


@pytest.mark.parametrize("base", [job, workflow, cert, run, bwm, profile])
def test_valid_examples_pass(base: Callable[[], dict[str, Any]]) -> None:
    """The minimal example of each kind is valid."""
    assert validate(base()) == []


def test_all_errors_not_only_the_first() -> None:
    """Several independent problems are all reported in one pass."""
    obj = _set(job, "spec.thresholds", {"speed": "value > 1"})
    obj["spec"]["measurementTimeout"] = "soon"
    obj["metadata"]["name"] = "UPPER"
    paths = sorted(e.path for e in validate(obj))
    assert paths == ["metadata.name", "spec.measurementTimeout", "spec.thresholds[speed]"]


def test_structural_errors_come_back_as_a_list() -> None:
    """Type errors from the converter are returned, not raised, by ``validate``."""
    obj = _set(job, "spec.stallMultiplier", "two")
    obj["spec"]["bogus"] = 1
    assert sorted(e.path for e in validate(obj)) == ["spec.bogus", "spec.stallMultiplier"]


def test_wrong_kind_field_on_model() -> None:
    """A model whose apiVersion or kind was changed is reported."""
    model = validated(job())
    import attrs

    broken = attrs.evolve(model, kind="Pod", api_version="v1")
    assert [e.path for e in validate(broken)] == ["apiVersion", "kind"]


def test_validated_raises_with_every_error() -> None:
    """``validated`` raises one ValidationError naming the object and each problem."""
    obj = _set(job, "spec.thresholds", {"speed": "value > 1", "goodputRatio": ""})
    with pytest.raises(ValidationError) as info:
        validated(obj)
    text = str(info.value)
    assert text.splitlines() == [
        "Job ns/j: spec.thresholds[speed]: unknown threshold key (expected one of "
        "algBandwidthGBps, avgStepTimeSec, avgTFLOPsPerGPU, busBandwidthGBps, goodputRatio)",
        "Job ns/j: spec.thresholds[goodputRatio]: threshold expression is empty",
    ]
    assert isinstance(validated(job()), Job)


def test_field_error_str() -> None:
    """A field error prints as ``path: message``."""
    assert str(FieldError(path="spec.x", message="bad")) == "spec.x: bad"
    assert str(FieldError(path="", message="bad")) == "bad"


def test_parse_quantity() -> None:
    """Quantities with decimal and binary suffixes compare by value."""
    assert parse_quantity("500m") < parse_quantity("1")
    assert parse_quantity("1Gi") == 1024 * parse_quantity("1Mi")
    assert parse_quantity("2k") == 2000
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity("1Xi")
