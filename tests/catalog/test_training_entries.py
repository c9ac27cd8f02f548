"""Training entries (``runtime: torch`` with ``training`` settings and a goodput measurement):
malformed ones fail at load naming file and key; the shipped ones resolve and render their
checkpoint only when asked."""

from __future__ import annotations

import pytest

from cre.catalog import CatalogError, load_catalog, parse_catalog
from cre.catalog.model import MeasurementKind, RuntimeShape
from cre.render.job import render_job_manifest
from cre.render.options import RenderError, RenderOptions
from cre.testing.schemas import validate_job_documents

from .texts import files

TRAIN = """\
description: test trainer
runtime: torch
measurement: {kind: goodput, logProfile: megatron-training, sampleInterval: 10s}
training:
  stallMultiplier: 3
  startupStallTimeoutSeconds: 600
  checkpoint:
    mountPath: /ckpt
    args: [--save, /ckpt, --save-interval, "${every}"]
    maxRestarts: 2
    storageSize: 1Ti
parameters:
  every: {default: 50, description: save interval}
spec:
  image: img:1
  command: [torchrun, pretrain_gpt.py, --train-iters, "100"]
"""


def _error(text: str) -> CatalogError:
    with pytest.raises(CatalogError) as info:
        parse_catalog(files(**{"training/t.yaml": text}))
    assert info.value.file == "training/t.yaml"
    return info.value


def test_training_entry_loads_with_its_settings() -> None:
    """The fixture loads: torch shape, goodput measurement without testType, its training
    settings, and the checkpoint args resolved with the entry's parameters."""
    catalog = parse_catalog(files(**{"training/t.yaml": TRAIN}))
    entry = catalog.entries["training/t"]
    assert entry.runtime is RuntimeShape.TORCH
    assert entry.measurement is not None and entry.measurement.kind is MeasurementKind.GOODPUT
    assert entry.measurement.job_fields() == {"goodputMeasurement": {
        "logProfileRef": "megatron-training", "sampleInterval": "10s"}}
    assert entry.training is not None and entry.training.stall_multiplier == 3
    resolved = catalog.resolve("training/t", platform="aws", arch="h100", num_nodes=2,
                               parameters={"every": 7})
    assert resolved.checkpoint_args == ("--save", "/ckpt", "--save-interval", "7")


@pytest.mark.parametrize(("old", "new", "path", "problem"), [
    ("  stallMultiplier: 3\n", "  stallMultiplier: 0\n", "training.stallMultiplier",
     "expected an integer >= 1"),
    ("  startupStallTimeoutSeconds: 600\n", "", "training.startupStallTimeoutSeconds",
     "required key is missing"),
    ("    mountPath: /ckpt\n", "    mountPath: ckpt\n", "training.checkpoint.mountPath",
     "expected an absolute path"),
    ('"${every}"', '"${often}"', "training.checkpoint.args[3]", "${often} is neither"),
    ("    maxRestarts: 2\n", "    maxRestarts: 2\n    retries: 1\n",
     "training.checkpoint.retries", "unknown key"),
    ("kind: goodput", "kind: tflops", "measurement.kind", "expected one of"),
    ("kind: goodput, ", "", "measurement.testType", "required key is missing"),
    ("runtime: torch", "runtime: single-pod", "training", "only a torch entry"),
    ("  stallMultiplier: 3\n", "  stallMultiplier: 3\n  minGpus: 0\n", "training.minGpus",
     "expected an integer >= 1"),
])
def test_bad_training_entry_names_file_and_key(old: str, new: str, path: str,
                                               problem: str) -> None:
    """Each malformed training setting fails at load with its key path and the problem."""
    assert old in TRAIN
    err = _error(TRAIN.replace(old, new))
    assert err.path == path
    assert problem in err.problem


def test_shipped_nemotron_entries_render_checkpoint_only_when_asked() -> None:
    """nemotron5-8b and -56b render torchrun on every node with one rank per GPU; the
    checkpoint PVC mount and save/load arguments appear only with a checkpoint claim, and an
    entry that does not checkpoint refuses a claim."""
    catalog = load_catalog()
    for name, layers in (("training/nemotron5-8b", "32"), ("training/nemotron5-56b", "79")):
        plain, ckpt = (render_job_manifest(
            job_name="t", namespace="ns", catalog=catalog, entry=name, platform="aws",
            arch="h100", nodes=["a", "b"], options=RenderOptions(checkpoint_claim=claim))
            for claim in (None, "t-checkpoint"))
        trainer = plain[0]["spec"]["workload"]["trainJob"]["trainer"]
        args = trainer["args"]
        assert trainer["command"] == ["torchrun"] and trainer["numProcPerNode"] == 8
        assert args[args.index("--num-layers") + 1] == layers
        assert "--save" not in args and "checkpoint" not in plain[0]["spec"]
        assert plain[0]["spec"]["goodputMeasurement"]["logProfileRef"] == "megatron-training"
        assert plain[0]["spec"]["stallMultiplier"] == 3
        cargs = ckpt[0]["spec"]["workload"]["trainJob"]["trainer"]["args"]
        assert cargs[len(args):][:4] == ["--save", "/checkpoint", "--load", "/checkpoint"]
        assert ckpt[0]["spec"]["checkpoint"] == {"pvcName": "t-checkpoint", "maxRestarts": 3}
        pod = ckpt[1]["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"][
            "template"]["spec"]
        assert {"name": "checkpoint", "persistentVolumeClaim": {"claimName": "t-checkpoint"}} \
            in pod["volumes"]
        # The checkpointing rendering passes the vendored Trainer / JobSet / batch schemas too.
        assert [str(p) for p in validate_job_documents(ckpt)] == []
    with pytest.raises(RenderError, match="does not checkpoint"):
        render_job_manifest(job_name="t", namespace="ns", catalog=catalog,
                            entry="communication/nccl-loopback", platform="aws", arch="h100",
                            nodes=["a"], options=RenderOptions(checkpoint_claim="x"))


def test_tensor_parallelism_follows_the_architecture() -> None:
    """nemotron5-8b takes the reference's tensor parallelism per architecture (h100 2, a100
    8, b200 1) and one sample per GPU as its global batch."""
    catalog = load_catalog()
    for platform, arch, tp in (("aws", "h100", "2"), ("azure", "a100", "8"),
                               ("nscale", "b200", "1")):
        resolved = catalog.resolve("training/nemotron5-8b", platform=platform, arch=arch,
                                   num_nodes=4)
        command = list(resolved.spec["command"])
        assert command[command.index("--tensor-model-parallel-size") + 1] == tp
        assert command[command.index("--global-batch-size") + 1] == "32"
