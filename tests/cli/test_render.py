"""``cre render`` prints exactly what the render goldens hold for the same inputs, and
``python -m cre.render`` (the thin alias) prints the same YAML bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from cre.render.__main__ import main as render_alias
from cre.testing.golden.normalise import to_json

from .conftest import ROOT, RunCli

CASES = sorted((ROOT / "integration" / "cases" / "render").iterdir())
GOLDENS = ROOT / "goldens" / "render"


def _case(case_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = YAML(typ="safe", pure=True).load(
        (case_dir / "input.yaml").read_text(encoding="utf-8"))
    return data


def argv_for(case_dir: Path) -> list[str]:
    """The ``cre render`` flags that ask for what a render golden case's input.yaml asks."""
    data = _case(case_dir)
    args = [data["entry"], "--platform", data["platform"], "--arch", data["arch"],
            "--job-name", data.get("jobName", case_dir.name),
            "--namespace", data.get("namespace", "default")]
    if "nodes" in data:
        args += ["--nodes", ",".join(str(n) for n in data["nodes"])]
    else:
        args += ["--node-count", str(data.get("nodeCount", 2))]
    kai = data.get("kai")
    if kai is True:
        args.append("--kai")
    elif isinstance(kai, dict):
        args += ["--gang-scheduler", kai.get("schedulerName", "kai-scheduler")]
        if "queue" in kai:
            args += ["--queue", kai["queue"]]
        if "queueLabelKey" in kai:
            args += ["--queue-label-key", kai["queueLabelKey"]]
    for key, flag in (("image", "--image"), ("workerBackoffLimit", "--worker-backoff-limit"),
                      ("launcherBackoffLimit", "--launcher-backoff-limit"),
                      ("nicResourceName", "--nic-resource-name")):
        if key in data:
            args += [flag, str(data[key])]
    for key, value in data.get("parameters", {}).items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        args += ["--option", f"{key}={text}"]
    return args


@pytest.mark.parametrize("case_dir", CASES, ids=[c.name for c in CASES])
def test_render_json_is_byte_identical_to_the_golden_objects(case_dir: Path, cre: RunCli) -> None:
    """Each rendered object, serialised as goldens are, equals the golden's object byte for
    byte, in render order (Job first), and nothing is missing or extra."""
    run = cre("render", *argv_for(case_dir), "-o", "json")
    assert run.code == 0, run.err
    listing = json.loads(run.out)
    assert listing["kind"] == "List"
    golden = json.loads((GOLDENS / f"{case_dir.name}.json").read_text(encoding="utf-8"))
    items = listing["items"]
    keys = [f"{d['kind']}/{d['metadata']['name']}" for d in items]
    assert sorted(keys) == sorted(golden["objects"]), keys
    assert items[0]["kind"] == "Job"
    for key, item in zip(keys, items, strict=True):
        assert to_json(item) == to_json(golden["objects"][key]), key


@pytest.mark.parametrize("case", ["all-reduce-aws-h100", "kai-all-reduce-gcp-h100-queue",
                                  "nodes-1-all-reduce-aws-h100", "dcgm-level3-azure-h100"])
def test_render_yaml_is_what_the_python_m_alias_prints(case: str, cre: RunCli,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """``cre render`` and ``python -m cre.render`` print the same YAML bytes."""
    case_dir = ROOT / "integration" / "cases" / "render" / case
    data = _case(case_dir)
    run = cre("render", *argv_for(case_dir))
    assert run.code == 0, run.err
    nodes = [str(n) for n in data["nodes"]] if "nodes" in data else [
        f"node-{i:02d}" for i in range(1, int(data.get("nodeCount", 2)) + 1)]
    alias = ["--entry", data["entry"], "--platform", data["platform"], "--arch", data["arch"],
             "--nodes", ",".join(nodes), "--job-name", case]
    kai = data.get("kai")
    if kai:
        alias.append("--kai")
        if isinstance(kai, dict) and "queue" in kai:
            alias += ["--queue", kai["queue"]]
    capsys.readouterr()
    assert render_alias(alias) == 0
    assert capsys.readouterr().out == run.out
    docs = list(YAML(typ="safe", pure=True).load_all(run.out))
    assert docs[0]["kind"] == "Job" and docs[0]["metadata"]["name"] == case


def test_options_are_typed_by_the_entry_defaults(cre: RunCli) -> None:
    """``--option iterations=20`` becomes the int 20 in the launcher command; a value that is
    not an int is a usage error naming the option."""
    run = cre("render", "communication/nccl-all-reduce", "--platform", "aws", "--arch", "h100",
              "--node-count", "2", "--option", "iterations=20", "-o", "json")
    assert run.code == 0, run.err
    job = json.loads(run.out)["items"][0]
    args = job["spec"]["workload"]["trainJob"]["trainer"]["args"]
    assert args[args.index("-n") + 1] == "20"
    bad = cre("render", "communication/nccl-all-reduce", "--platform", "aws", "--arch", "h100",
              "--node-count", "2", "--option", "iterations=many")
    assert bad.code == 2
    assert bad.err.strip() == "cre: --option iterations=many: expected an integer like 100"
