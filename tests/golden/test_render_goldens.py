"""Every reviewed render golden passes every schema set and carries the fail-fast fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from cre.api import from_dict, validate
from cre.api import labels as L
from cre.testing.schemas import structural_problems, validate_job_documents

ROOT = Path(__file__).resolve().parents[2]
GOLDENS = sorted((ROOT / "goldens" / "render").glob("*.json"))
RULE = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _runtime(objects: dict[str, Any]) -> dict[str, Any]:
    runtimes: list[dict[str, Any]] = [o for o in objects.values() if o["kind"] == "TrainingRuntime"]
    (runtime,) = runtimes
    return runtime


def test_render_suite_size() -> None:
    """The render suite has at least 40 goldens, one per case folder."""
    cases = sorted((ROOT / "integration" / "cases" / "render").glob("*/input.yaml"))
    assert len(GOLDENS) >= 40
    assert [p.stem for p in GOLDENS] == [c.parent.name for c in cases]


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.stem)
def test_golden_validates_against_every_schema_set(path: Path) -> None:
    """Trainer (oldest, latest), JobSet (oldest, latest) and Kubernetes 1.30-1.37 accept it."""
    objects = _load(path)["objects"]
    assert [str(p) for p in validate_job_documents(objects.values())] == []


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.stem)
def test_golden_has_fail_fast_fields(path: Path) -> None:
    """MPI launchers and single pods: Never + the Ignore rule; backoff 1, 0 under KAI or single."""
    data = _load(path)
    objects = data["objects"]
    (job,) = [o for o in objects.values() if o["kind"] == "Job"]
    kai = job["spec"].get("workloadMetadata", {}).get("labels", {}).get("kai.scheduler/queue")
    jobs = {j["name"]: j for j in _runtime(objects)["spec"]["template"]["spec"]["replicatedJobs"]}
    patch = job["spec"]["workload"]["trainJob"]["runtimePatches"][0]
    patched = {
        j["name"]: j["template"]["spec"]["template"]["metadata"]["labels"]
        for j in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    }
    name = job["metadata"]["name"]
    assert patched["node"] == {L.JOB: name}
    if "launcher" in jobs:
        launcher = jobs["launcher"]["template"]["spec"]
        assert launcher["template"]["spec"]["restartPolicy"] == "Never"
        assert launcher["podFailurePolicy"]["rules"] == [RULE]
        explicit = "launcher-backoff" in path.stem
        assert launcher["backoffLimit"] == (0 if kai and not explicit else 1)
        worker = jobs["node"]["template"]["spec"]
        assert worker["template"]["spec"]["restartPolicy"] == "OnFailure"
        assert 0 <= worker["backoffLimit"] <= 5
        assert patched["launcher"] == {L.LAUNCHER: name}
    else:
        single = jobs["node"]["template"]["spec"]
        assert single["template"]["spec"]["restartPolicy"] == "Never"
        assert single["backoffLimit"] == 0
        assert single["podFailurePolicy"]["rules"] == [RULE]
        assert set(patched) == {"node"}


JOB_CRD_PATH = ROOT / "deploy" / "crds" / "cre.dev_jobs.yaml"
JOB_SCHEMA = yaml.load(JOB_CRD_PATH.read_text(), Loader=yaml.CSafeLoader)["spec"]["versions"][0][
    "schema"
]["openAPIV3Schema"]


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.stem)
def test_golden_cre_job_is_a_valid_cre_job(path: Path) -> None:
    """The rendered CRE Job parses, passes the model checks and CRE's own generated CRD schema."""
    (job,) = [o for o in _load(path)["objects"].values() if o["apiVersion"].startswith("cre.")]
    assert [str(e) for e in validate(from_dict(job))] == []
    # The CRD leaves metadata to the API server (``type: object``); check everything else.
    body = {**job, "metadata": {}}
    assert structural_problems(body, JOB_SCHEMA) == []
