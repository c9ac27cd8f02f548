"""``cre validate`` reports every problem as ``file:line: field.path: message`` with the line
ruamel.yaml's round-trip positions give, checks what CRE objects carry against the upstream
and Kubernetes schemas, and exits 1 when anything is wrong."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from ruamel.yaml import YAML

from .conftest import GPU_CERT, RunCli

BAD = """\
apiVersion: cre.dev/v1alpha1
kind: Certification
metadata:
  name: bad
  namespace: default
spec:
  thresholds:
    busBandwidthGBps: "value >="
    fooGBps: "value > 1"
  categories:
  - domain: Communication
    variant: nccl-all-reduce
  nodesPerJob: 0
---
apiVersion: cre.dev/v1alpha1
kind: Job
metadata:
  name: j
  namespace: default
spec:
  workload:
    trainJob:
      runtimeRef:
        name: mpi
      trainer:
        numNodes: 2
        bogus: 1
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: c
data:
  a: 1
---
kind: Thing
"""


def _lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line]


def test_each_problem_names_file_line_path_and_message(tmp_path: Path, cre: RunCli) -> None:
    """CRE rules, the Trainer CRD (what a carried TrainJob spec would lose to pruning), the
    Kubernetes schemas and a non-object are all found, each on its own line."""
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    run = cre("validate", str(path))
    assert run.code == 1
    lines = _lines(run.out)
    f = str(path)
    assert f"{f}:8: spec.thresholds[busBandwidthGBps]: invalid CEL expression" in lines[0]
    assert lines[1].startswith(f"{f}:9: spec.thresholds[fooGBps]: unknown threshold key")
    assert lines[2] == f"{f}:11: spec.categories[0].domain: must match ^[a-z0-9]([-a-z0-9]*" \
                       "[a-z0-9])?$"
    assert lines[3] == f"{f}:13: spec.nodesPerJob: must be >= 1"
    assert lines[4] == (f"{f}:27: spec.workload.trainJob.trainer.bogus: unknown field (the API "
                        "server would prune it) [trainer-v2.2.0, trainer-latest]")
    assert lines[5] == (f"{f}:34: data.a: 1 is not of type 'string', 'null' "
                        "[kubernetes 1.30-1.37]")
    assert lines[6] == (f"{f}:36: (document): not a Kubernetes object (apiVersion and kind "
                        "are required)")
    assert len(lines) == 7
    assert run.err.strip() == "7 problems in 1 file"


def test_kubernetes_version_picks_the_release(tmp_path: Path, cre: RunCli) -> None:
    """A podFailurePolicy condition without ``status`` fails up to 1.34 only, and the batch
    Job's path is reported inside the TrainingRuntime that carries it."""
    render = cre("render", "communication/nccl-all-reduce", "--platform", "aws", "--arch",
                 "h100", "--node-count", "2")
    yaml = YAML(typ="safe", pure=True)
    docs = list(yaml.load_all(render.out))
    runtime = next(d for d in docs if d["kind"] == "TrainingRuntime")
    launcher = next(r for r in runtime["spec"]["template"]["spec"]["replicatedJobs"]
                    if r["name"] == "launcher")
    rule = launcher["template"]["spec"]["podFailurePolicy"]["rules"][0]
    del rule["onPodConditions"][0]["status"]
    out = io.StringIO()
    yaml.dump_all(docs, out)
    text = out.getvalue()
    path = tmp_path / "rendered.yaml"
    path.write_text(text)
    old = cre("validate", "--kubernetes-version", "1.33", str(path))
    assert old.code == 1
    assert all("'status' is a required property [kubernetes 1.33]" in line
               for line in _lines(old.out)), old.out
    assert all("spec.template.spec.replicatedJobs[" in line for line in _lines(old.out))
    new = cre("validate", "--kubernetes-version", "1.35", str(path))
    assert new.code == 0, new.out
    bad = cre("validate", "--kubernetes-version", "1.12", str(path))
    assert bad.code == 2 and "--kubernetes-version 1.12: not one of 1.30" in bad.err


def test_rendered_output_and_the_fixture_are_valid(tmp_path: Path, cre: RunCli) -> None:
    """What ``cre render`` prints validates clean, and so does the golden Certification."""
    render = cre("render", "communication/nccl-all-reduce", "--platform", "gcp", "--arch",
                 "gb200", "--node-count", "2", "--kai")
    path = tmp_path / "rendered.yaml"
    path.write_text(render.out)
    run = cre("validate", str(path), str(GPU_CERT))
    assert run.code == 0, run.out
    assert run.out == ""
    note, summary = run.err.strip().splitlines()
    assert note.startswith(f"note: {path}:") and "ComputeDomain: no schema known offline" in note
    assert summary == "2 files valid"


def test_what_a_workflow_carries_is_checked_where_it_is_written(tmp_path: Path,
                                                                 cre: RunCli) -> None:
    """A Workflow's job template TrainJob spec and its dependency objects are validated as the
    objects they become, with paths and lines inside the Workflow."""
    render = cre("render", "communication/nccl-all-reduce", "--platform", "aws", "--arch",
                 "h100", "--node-count", "2")
    yaml = YAML(typ="safe", pure=True)
    job, runtime = list(yaml.load_all(render.out))[:2]
    runtime["spec"]["template"]["spec"]["bogusJobSetField"] = True
    job["spec"]["workload"]["trainJob"]["trainer"]["bogusTrainerField"] = 1
    workflow = {
        "apiVersion": "cre.dev/v1alpha1", "kind": "Workflow",
        "metadata": {"name": "wf", "namespace": "default"},
        "spec": {"jobTemplate": {"spec": job["spec"]},
                 "orchestration": {"target": {"nodeNames": ["node-01", "node-02"]}},
                 "dependencies": [runtime]},
    }
    out = io.StringIO()
    yaml.dump(workflow, out)
    path = tmp_path / "workflow.yaml"
    path.write_text(out.getvalue())
    lines_of = {text.strip().split(":")[0]: i + 1
                for i, text in enumerate(out.getvalue().splitlines())}
    run = cre("validate", str(path))
    assert run.code == 1
    problems = _lines(run.out)
    assert f"{path}:{lines_of['bogusJobSetField']}: " \
           "spec.dependencies[0].spec.template.spec.bogusJobSetField: unknown field" in \
           "\n".join(problems)
    assert any(p.startswith(f"{path}:{lines_of['bogusTrainerField']}: spec.jobTemplate.spec."
                            "workload.trainJob.trainer.bogusTrainerField: unknown field")
               for p in problems), problems
    assert len(problems) == 2, problems


EVERY = """\
apiVersion: cre.dev/v1alpha1
kind: Certification
metadata:
  name: every
spec:
  nodesPerJob: many
  categories:
  - domain: communication
    variant: nccl-all-reduse
  - domain: 7
    variant: dcgm-level1
  thresholds:
    busBandwidthGBps: "value >="
"""


def test_every_problem_of_a_file_at_once(tmp_path: Path, cre: RunCli) -> None:
    """Two type errors do not hide the rules behind them (a CEL syntax error) nor the catalog
    check: one run lists all four, the misspelt entry with the closest real one."""
    path = tmp_path / "every.yaml"
    path.write_text(EVERY)
    run = cre("validate", str(path))
    assert run.code == 1
    lines = _lines(run.out)
    f = str(path)
    assert lines[0] == f"{f}:6: spec.nodesPerJob: expected integer, got string"
    assert lines[1].startswith(
        f"{f}:9: spec.categories[0].variant: communication/nccl-all-reduse: not in the catalog "
        "(did you mean communication/nccl-all-reduce? known: communication/nccl-all-gather, ")
    assert lines[1].endswith("training/nemotron5-8b) [catalog]")
    assert lines[2] == f"{f}:10: spec.categories[1].domain: expected string, got number"
    assert lines[3].startswith(f"{f}:13: spec.thresholds[busBandwidthGBps]: invalid CEL "
                               "expression")
    assert len(lines) == 4
    assert run.err.strip() == "4 problems in 1 file"


def test_dash_reads_standard_input() -> None:
    """``cat f | cre validate -`` checks standard input and names it ``<stdin>``."""
    result = subprocess.run([sys.executable, "-m", "cre.cli", "validate", "-"], input=EVERY,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines()[0] == \
        "<stdin>:6: spec.nodesPerJob: expected integer, got string"
    good = subprocess.run([sys.executable, "-m", "cre.cli", "validate", "-"],
                          input=GPU_CERT.read_text(), capture_output=True, text=True,
                          timeout=120, check=False)
    assert good.returncode == 0, good.stdout
    assert good.stderr == "1 file valid\n"
