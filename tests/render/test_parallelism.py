"""A training entry's Megatron split (tensor x pipeline x context parallel, expert parallel,
batch sizes) is refused at render when the GPUs or the model cannot take it, naming the entry,
the parameter or command flag, and the numbers; a Certification's refusal names its category."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cre.catalog import load_catalog, parse_catalog, read_catalog_files
from cre.catalog.loader import default_catalog_dir
from cre.core.certification.build import BuildError, build_workflow, discover_for
from cre.core.workflow.discovery import DiscoveryFailure
from cre.render import RenderError, RenderOptions, render_job_manifest
from tests.catalog.texts import files
from tests.core.tierworld import certification, nodes

CATALOG = load_catalog()


def _render(entry: str = "training/nemotron5-8b", *, platform: str = "aws", arch: str = "h100",
            count: int = 2, catalog: object = CATALOG, **parameters: object) -> None:
    render_job_manifest(job_name="t", namespace="ns", catalog=catalog,  # type: ignore[arg-type]
                        entry=entry, platform=platform, arch=arch,
                        nodes=[f"n{i}" for i in range(count)],
                        options=RenderOptions(parameters=parameters))  # type: ignore[arg-type]


def _refusal(**kwargs: object) -> str:
    with pytest.raises(RenderError) as info:
        _render(**kwargs)  # type: ignore[arg-type]
    return str(info.value)


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"count": 1, "tensorParallel": 3},
     "training/nemotron5-8b on aws/h100, 1 node(s) x 8 GPUs = 8: parameters.tensorParallel "
     "(--tensor-model-parallel-size) 3 x parameters.pipelineParallel "
     "(--pipeline-model-parallel-size) 1 = 3 does not divide the world size 8; run on a "
     "multiple of 3 node(s)"),
    ({"count": 3, "tensorParallel": 2, "pipelineParallel": 16},
     "= 32 does not divide the world size 24; run on a multiple of 4 node(s)"),
    ({"count": 2, "tensorParallel": 16},
     "parameters.tensorParallel (--tensor-model-parallel-size) 16 is more than the 8 GPUs of "
     "one node"),
    ({"entry": "training/nemotron5-56b", "count": 4, "pipelineParallel": 2},
     "spec.command --num-layers 79 is not a multiple of parameters.pipelineParallel "
     "(--pipeline-model-parallel-size) 2"),
    ({"entry": "training/nemotron5-56b", "platform": "aws", "arch": "gb200", "count": 4,
      "tensorParallel": 3},
     "4 node(s) x 4 GPUs = 16: parameters.tensorParallel (--tensor-model-parallel-size) 3"),
])
def test_a_split_the_gpus_or_the_model_cannot_take_is_refused(kwargs: dict[str, object],
                                                              says: str) -> None:
    """World size, TP within a node and layers per stage: each refusal names entry, field and
    numbers (the node count that would do, for the world size)."""
    assert says in _refusal(**kwargs)


ENTRY = """\
description: a Megatron entry
runtime: torch
parameters:
  tp: {default: 1, description: tensor parallel}
  ep: {default: 1, description: expert parallel}
  batch: {default: 16, description: global batch}
spec:
  image: trainer:1
  command: [torchrun, pretrain_gpt.py, --num-attention-heads, "12", --num-query-groups, "6",
            --group-query-attention, --tensor-model-parallel-size, "${tp}",
            --context-parallel-size, "2", --expert-model-parallel-size, "${ep}",
            --micro-batch-size, "2", --global-batch-size, "${batch}"]
"""
TEST_CATALOG = parse_catalog(files(entry=ENTRY))


@pytest.mark.parametrize(("parameters", "says"), [
    ({"tp": 8}, "spec.command --num-attention-heads 12 is not a multiple of parameters.tp "
                "(--tensor-model-parallel-size) 8"),
    ({"tp": 4}, "spec.command --num-query-groups 6 is not a multiple of parameters.tp"),
    ({"ep": 3}, "the data-parallel size 16 / 2 = 8 is not a multiple of parameters.ep "
                "(--expert-model-parallel-size) 3"),
    ({"batch": 12}, "parameters.batch (--global-batch-size) 12 is not a multiple of "
                    "spec.command --micro-batch-size 2 x the data-parallel size 8"),
    ({"tp": 0}, "parameters.tp (--tensor-model-parallel-size) is 0, must be at least 1"),
])
def test_megatron_model_rules_name_the_flag(parameters: dict[str, object], says: str) -> None:
    """Heads and query groups per TP rank, DP per expert group and the batch split are
    Megatron's start-up assertions, refused at render instead."""
    assert says in _refusal(entry="comm/test", count=2, catalog=TEST_CATALOG, **parameters)


def test_a_command_without_megatron_parallel_flags_is_not_checked() -> None:
    """NCCL and DCGM entries render on any node count (no parallel flags to check)."""
    _render("communication/nccl-all-reduce", count=3)
    _render("diagnostics/dcgm-level1", count=1)


def test_tensor_parallel_may_span_nodes_when_the_entry_says_so() -> None:
    """``training.tensorAcrossNodes: true`` lifts the one-node limit, not the world rule."""
    entry = ENTRY.replace("runtime: torch\n", "runtime: torch\ntraining: {stallMultiplier: 3, "
                          "startupStallTimeoutSeconds: 60, tensorAcrossNodes: true}\n")
    entry = entry.replace('"12"', '"48"').replace('"6"', '"48"')
    catalog = parse_catalog(files(entry=entry))
    _render("comm/test", count=4, catalog=catalog, tp=16, batch=4)
    with pytest.raises(RenderError, match="does not divide the world size 32"):
        _render("comm/test", count=4, catalog=catalog, tp=24, batch=4)


@settings(max_examples=150, deadline=None)
@given(tp=st.integers(1, 16), pp=st.integers(1, 8), count=st.integers(1, 6))
def test_render_accepts_exactly_the_splits_megatron_accepts(tp: int, pp: int,
                                                            count: int) -> None:
    """For the 8B entry (32 layers, 32 heads, 8 query groups, one sample per GPU) on aws/h100,
    a render succeeds iff TP x PP divides nodes x 8, TP <= 8 and TP divides the heads and
    groups and PP the layers; a refusal always names the entry and a parameter."""
    world = count * 8
    ok = (world % (tp * pp) == 0 and tp <= 8 and 32 % tp == 0 and 8 % tp == 0
          and 32 % pp == 0)
    try:
        _render(count=count, tensorParallel=tp, pipelineParallel=pp)
    except RenderError as exc:
        assert not ok, exc
        assert "training/nemotron5-8b on aws/h100" in str(exc)
        assert "parameters." in str(exc)
    else:
        assert ok
        assert (world // (tp * pp)) * tp * pp == world and math.gcd(tp, 8) == tp


def test_a_certification_names_its_category_when_the_split_does_not_fit() -> None:
    """A Certification whose training entry asks for TP 3 on 8-GPU nodes is a BuildError
    naming ``spec.categories[0]``, the entry, the parameter and the numbers."""
    texts = read_catalog_files(default_catalog_dir())
    path = "training/nemotron5-8b.yaml"
    texts[path] = texts[path].replace("tensorParallel: {default: 1,",
                                      "tensorParallel: {default: 3,").replace(
        "  parameters: {tensorParallel: 2}", "  parameters: {tensorParallel: 3}")
    catalog = parse_catalog(texts)
    cert = certification(("training", "nemotron5-8b"))
    found = discover_for(cert, 0, nodes(2), catalog)
    assert not isinstance(found, DiscoveryFailure), found
    with pytest.raises(BuildError) as info:
        build_workflow(cert, 0, found=found, catalog=catalog)
    message = str(info.value)
    assert message.startswith("spec.categories[0] (training/nemotron5-8b): ")
    assert "parameters.tensorParallel (--tensor-model-parallel-size) 3" in message
    assert "does not divide the world size 16" in message


def test_a_repeated_flag_is_read_as_megatron_reads_it_the_last_one() -> None:
    """argparse keeps the last value of a repeated flag: an earlier TP 8 (which 12 heads
    cannot take) followed by the parameter's 1 renders; the parameter is the field named."""
    entry = ENTRY.replace('--group-query-attention, --tensor-model-parallel-size, "${tp}"',
                          '--tensor-model-parallel-size, "8", --group-query-attention, '
                          '--tensor-model-parallel-size, "${tp}"')
    catalog = parse_catalog(files(entry=entry))
    _render("comm/test", count=2, catalog=catalog)
    assert "parameters.tp (--tensor-model-parallel-size) 4" in _refusal(
        entry="comm/test", count=2, catalog=catalog, tp=4)
