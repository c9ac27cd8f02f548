"""Bad input fuzz: Jobs generated from CRE's own CRD schema plus targeted mutations, applied
through the API emulator to a running Job controller.

Each object is either refused at admission (422 naming the field path) or accepted and then
reconciled to a status: ``Failed`` with a reason and the field named in the message, or
``InProgress`` when it is valid. The controller never stops reconciling (a valid Job applied
after the barrage is reconciled) and no log record above DEBUG carries a traceback. Bounded:
a fixed seed (``derandomize``) and a modest number of generated examples.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

import hypothesis_jsonschema._from_schema as _hjs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis.internal.conjecture import utils as _cu
from hypothesis_jsonschema import from_schema
from ruamel.yaml import YAML

from cre.api.labels import API_VERSION
from cre.kube.client import JOBS, ApiError
from cre.testing.jobharness import JobHarness, condition, is_true
from cre.testing.procs import CRE_CRDS

pytestmark = pytest.mark.anyio
GENERATED = 30
# Issue 11 defect 4 (durations bounded in the schema and validation) lands on another branch,
# with cre.api.durations; until then an overflowing duration is a known retry loop. Remove this
# guard after that merge.
try:
    import cre.api.durations  # type: ignore[import-not-found]  # noqa: F401
    KNOWN_LOOPING: frozenset[str] = frozenset()
except ImportError:
    KNOWN_LOOPING = frozenset({"invalid duration: overflow hours",
                               "invalid duration: overflow seconds"})


class _Many:
    """``many`` as hypothesis-jsonschema 0.23 calls it (``more()``/``reject()``), which current
    Hypothesis replaced by a context manager: the previous implementation, on public
    ``ConjectureData.draw_boolean``. Test-only shim, installed for this module's generator."""

    def __init__(self, data: Any, min_size: int, max_size: float, average_size: float) -> None:
        self.data, self.min_size, self.max_size = data, min_size, max_size
        self.p_continue = _cu._calc_p_continue(average_size - min_size, max_size - min_size)
        self.count = self.rejections = 0
        self.force_stop = False

    def more(self) -> bool:
        if self.min_size == self.max_size:
            go = self.count < self.min_size
        else:
            forced = (False if self.force_stop else True if self.count < self.min_size
                      else False if self.count >= self.max_size else None)
            go = bool(self.data.draw_boolean(self.p_continue, forced=forced))
        if go:
            self.count += 1
        return go

    def reject(self, why: str | None = None) -> None:
        self.count -= 1
        self.rejections += 1
        if self.rejections > max(3, 2 * self.count):
            if self.count < self.min_size:
                self.data.mark_invalid(why)
            else:
                self.force_stop = True


class _CompatUtils:
    many = _Many

    def __getattr__(self, name: str) -> Any:
        return getattr(_cu, name)


if not hasattr(_cu.many, "more"):
    _hjs.cu = _CompatUtils()  # type: ignore[assignment]


def _strip(node: Any) -> Any:
    """The structural schema as plain JSON Schema: no x-kubernetes-* extensions (CEL rules are
    the API server's business), no Kubernetes-only formats."""
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items()
                if not k.startswith("x-kubernetes-") and k != "format"}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _spec_schema() -> dict[str, Any]:
    crd = YAML(typ="safe").load((CRE_CRDS / "cre.dev_jobs.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    schema: dict[str, Any] = _strip(version["schema"]["openAPIV3Schema"]["properties"]["spec"])
    return schema


def _generated(count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    @settings(max_examples=count, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(from_schema(_spec_schema()))
    def collect(spec: dict[str, Any]) -> None:
        out.append(spec)

    collect()
    return out


def _valid() -> dict[str, Any]:
    return {"workload": {"trainJob": {"runtimeRef": {"name": "mpi-runtime"}, "runtimePatches": [
        {"manager": "cre.dev/renderer", "trainingRuntimeSpec": {"template": {"spec": {
            "replicatedJobs": [{"name": "launcher"}, {"name": "node"}]}}}}]}}}


def _with(**fields: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def apply(spec: dict[str, Any]) -> dict[str, Any]:
        spec.update(fields)
        return spec
    return apply


def _without_workload(spec: dict[str, Any]) -> dict[str, Any]:
    spec.pop("workload")
    return spec


def _runtime(name: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def apply(spec: dict[str, Any]) -> dict[str, Any]:
        spec["workload"]["trainJob"]["runtimeRef"]["name"] = name
        return spec
    return apply


MEGABYTE = "x" * (1024 * 1024)
SHELL = "$(touch /tmp/pwned); `id`; rm -rf / && echo ' \" \\ | > < & * ? ~ #"
CONTROL = "a\x00b\x1b[31mc\u202ed\r\n\t"
MUTATIONS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "wrong type: thresholds is a number": _with(thresholds=5),
    "wrong type: workload is a string": _with(workload="trainJob"),
    "wrong type: timeoutPerJob is a number": _with(timeoutPerJob=12),
    "wrong type: stallMultiplier is a string": _with(stallMultiplier="three"),
    "missing required: workload": _without_workload,
    "missing required: checkpoint.pvcName": _with(checkpoint={"maxRestarts": 1}),
    "missing required: nodeHealthMonitor.cel": _with(nodeHealthMonitor={}),
    "1 MB string: threshold": _with(thresholds={"busBandwidthGBps": MEGABYTE}),
    "1 MB string: checkpoint pvcName": _with(checkpoint={"pvcName": MEGABYTE}),
    "1 MB string: runtime name": _runtime(MEGABYTE),
    "control characters: threshold key and value": _with(thresholds={CONTROL: CONTROL}),
    "control characters: runtime name": _runtime(CONTROL),
    "unicode: pvcName": _with(checkpoint={"pvcName": "检查点-✓-🚀"}),
    "shell metacharacters: runtime name": _runtime(SHELL),
    "shell metacharacters: threshold": _with(thresholds={"busBandwidthGBps": SHELL}),
    "shell metacharacters: pvcName": _with(checkpoint={"pvcName": SHELL}),
    "negative number: stallMultiplier": _with(stallMultiplier=-1),
    "negative number: maxRestarts": _with(checkpoint={"pvcName": "c", "maxRestarts": -5}),
    "huge number: startupStallTimeoutSeconds": _with(startupStallTimeoutSeconds=2**63),
    "huge number: schedulingStallGraceSeconds": _with(schedulingStallGraceSeconds=10**40),
    "invalid duration: words": _with(timeoutPerJob="one hour"),
    "invalid duration: negative": _with(timeoutPerJob="-5m"),
    "invalid duration: overflow hours": _with(timeoutPerJob="99999999999h"),
    "invalid duration: overflow seconds": _with(measurementTimeout="900000000000s"),
    "CEL syntax error: threshold": _with(thresholds={"busBandwidthGBps": "value >= ("}),
    "CEL syntax error: 65k threshold": _with(
        thresholds={"busBandwidthGBps": "(" * 32_800 + ")" * 32_799}),
    "CEL syntax error: node health monitor": _with(
        nodeHealthMonitor={"cel": {"expression": "node.(("}}),
    "unknown threshold key (catalog category)": _with(thresholds={"noSuchMetric": "value>1"}),
    "unknown log profile": _with(bandwidthMeasurement={"logProfileRef": "no-such-profile"}),
    "missing runtime": _runtime("no-such-runtime"),
}


def _named_field(message: str) -> bool:
    return "spec" in message


async def _apply(h: JobHarness, name: str, spec: Any) -> str | None:
    """Create the Job; ``None`` if accepted, else the refusal (asserted to be a 422 naming a
    field path)."""
    body = {"apiVersion": API_VERSION, "kind": "Job",
            "metadata": {"name": name, "namespace": h.namespace}, "spec": spec}
    try:
        await h.client.create(JOBS, body, namespace=h.namespace)
    except ApiError as exc:
        assert exc.status == 422, f"{name}: {exc}"
        causes = (exc.body.get("details") or {}).get("causes") or []
        fields = [str(c.get("field") or "") for c in causes]
        assert any(f.startswith("spec") for f in fields) or _named_field(exc.message), \
            f"{name}: refusal names no field path: {exc}"
        return exc.message
    return None


def _settled(job: dict[str, Any]) -> bool:
    return is_true("Failed")(job) or is_true("InProgress")(job)


async def test_generated_and_mutated_jobs_are_refused_or_failed_and_never_stop_the_controller(
        job_harness: JobHarness, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="cre")
    h = job_harness
    objects: dict[str, Any] = {f"gen-{i}": spec for i, spec in enumerate(
        _generated(GENERATED))}
    for i, (label, mutate) in enumerate(MUTATIONS.items()):
        objects[f"mut-{i}"] = (label, mutate(copy.deepcopy(_valid())))
    accepted: dict[str, str] = {}
    refused: dict[str, str] = {}
    for name, entry in objects.items():
        label, spec = entry if name.startswith("mut-") else (name, entry)
        outcome = await _apply(h, name, spec)
        if outcome is None:
            accepted[name] = label
        else:
            refused[name] = label
    for name, label in accepted.items():
        job = await h.wait_job(name, _settled, limit=30)
        failed = condition(job, "Failed")
        if failed and failed.get("status") == "True":
            assert failed.get("reason"), f"{label}: Failed without a reason"
            assert _named_field(str(failed.get("message"))), \
                f"{label}: Failed message names no field: {failed.get('message')}"
    # Every class of mutation was exercised one way or the other.
    assert accepted and refused
    # The controller still reconciles: a valid Job after the barrage gets its workload.
    await h.create_job("after-barrage")
    await h.wait_job("after-barrage", is_true("InProgress"), limit=30)
    assert await h.script.trainjob("after-barrage") is not None
    tracebacks = [r for r in caplog.records if r.levelno > logging.DEBUG and r.exc_info]
    assert not tracebacks, [f"{r.levelname} {r.name}: {r.getMessage()}" for r in tracebacks]
    # No fault is injected here: a reconcile that fails is a bad object breaking the
    # controller (a retry loop), not a transient error.
    looping = sorted({r.getMessage().split(":", 1)[0] for r in caplog.records
                      if r.levelno >= logging.WARNING and "reconcile failed" in r.getMessage()})
    labelled = [(name, objects_label(objects, name)) for name in looping]
    assert not [x for x in labelled if x[1] not in KNOWN_LOOPING], labelled


def objects_label(objects: dict[str, Any], key: str) -> str:
    name = key.rsplit("/", 1)[-1]
    entry = objects.get(name)
    return str(entry[0]) if isinstance(entry, tuple) else name
