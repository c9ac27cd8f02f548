"""Megatron's model-parallel arithmetic, checked before a training Job is rendered.

A training entry passes Megatron-LM its tensor-, pipeline- (and optionally context- and
expert-) parallel sizes on the command line. A combination the GPUs cannot hold does not fail
until Megatron starts on every node, after the image pull and the source clone, as an
assertion in one rank's log. These are Megatron's own rules, checked on the resolved command
so the refusal names the entry, the parameter (or command flag) and the numbers:

* tensor x pipeline x context parallel divides the world size (nodes x GPUs per node);
* tensor parallel fits on one node (its all-reduces ride NVLink), unless the entry says
  ``training.tensorAcrossNodes: true``;
* the attention heads and the GQA query groups divide among the tensor-parallel ranks;
* the layers divide among the pipeline stages (unless the command sets an uneven first or last
  stage);
* the data-parallel size divides by expert parallel, and the global batch by micro batch x
  data-parallel size.

A command without Megatron's parallel flags is not checked. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from cre.catalog.model import ResolvedWorkload
from cre.render.options import RenderError

TP = "--tensor-model-parallel-size"
PP = "--pipeline-model-parallel-size"
CP = "--context-parallel-size"
EP = "--expert-model-parallel-size"
LAYERS = "--num-layers"
HEADS = "--num-attention-heads"
GROUPS = "--num-query-groups"
GQA = "--group-query-attention"
GLOBAL_BATCH = "--global-batch-size"
MICRO_BATCH = "--micro-batch-size"
UNEVEN = ("--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
          "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split")
PARALLEL_FLAGS = (TP, PP, CP, EP)


def check_parallelism(resolved: ResolvedWorkload) -> None:
    """``RenderError`` naming the entry, the field and the numbers when the resolved command
    asks Megatron for a split the GPUs or the model cannot take (see the module docstring)."""
    argv = [str(a) for a in resolved.spec.get("command", ())]
    if not any(flag in argv for flag in PARALLEL_FLAGS):
        return
    source = [str(a) for a in resolved.entry.spec.get("command", ())]
    gpus = resolved.gpus_per_node
    world = resolved.num_nodes * gpus
    where = (f"{resolved.entry.name} on {resolved.platform}/{resolved.arch}, "
             f"{resolved.num_nodes} node(s) x {gpus} GPUs = {world}")

    def value(flag: str, default: int | None = 1) -> int | None:
        text = _last(argv, flag)
        if text is None:
            return default
        try:
            number = int(text)
        except ValueError:
            raise RenderError(f"{where}: {field(flag)} is {text!r}, not an integer") from None
        if number < 1:
            raise RenderError(f"{where}: {field(flag)} is {number}, must be at least 1")
        return number

    def field(flag: str) -> str:
        """The entry parameter that feeds ``flag`` (``parameters.<name> (flag)``), else
        the flag in ``spec.command``."""
        token = _last(source, flag)
        if token is not None and token.startswith("${") and token.endswith("}"):
            return f"parameters.{token[2:-1]} ({flag})"
        return f"spec.command {flag}"

    tp, pp, cp = value(TP), value(PP), value(CP)
    assert tp is not None and pp is not None and cp is not None
    model = tp * pp * cp
    split = " x ".join(f"{field(f)} {n}" for f, n in ((TP, tp), (PP, pp), (CP, cp))
                       if f in argv)
    if world % model:
        step = model // math.gcd(model, gpus)
        raise RenderError(f"{where}: {split} = {model} does not divide the world size "
                          f"{world}; run on a multiple of {step} node(s)")
    training = resolved.entry.training
    if tp > gpus and not (training is not None and training.tensor_across_nodes):
        raise RenderError(f"{where}: {field(TP)} {tp} is more than the {gpus} GPUs of one "
                          "node (tensor parallelism stays inside a node unless the entry "
                          "sets training.tensorAcrossNodes)")
    _divides(where, tp, field(TP), [(value(HEADS, None), field(HEADS)),
                                    *([(value(GROUPS, None), field(GROUPS))]
                                      if GQA in argv else [])])
    if not any(flag in argv for flag in UNEVEN):
        _divides(where, pp, field(PP), [(value(LAYERS, None), field(LAYERS))])
    data = world // model
    ep = value(EP)
    assert ep is not None
    if data % ep:
        raise RenderError(f"{where}: the data-parallel size {world} / {model} = {data} is not "
                          f"a multiple of {field(EP)} {ep}")
    batch, micro = value(GLOBAL_BATCH, None), value(MICRO_BATCH)
    assert micro is not None
    if batch is not None and batch % (micro * data):
        raise RenderError(f"{where}: {field(GLOBAL_BATCH)} {batch} is not a multiple of "
                          f"{field(MICRO_BATCH)} {micro} x the data-parallel size {data}")


def _last(argv: Sequence[str], flag: str) -> str | None:
    """The value after the last ``flag`` in ``argv`` (argparse keeps the last), or ``None``."""
    at = [i for i, a in enumerate(argv) if a == flag and i + 1 < len(argv)]
    return argv[at[-1] + 1] if at else None


def _divides(where: str, size: int, name: str,
             counts: Sequence[tuple[int | None, str]]) -> None:
    """Each model dimension in ``counts`` (absent: ``None``) splits evenly into ``size``."""
    for count, field in counts:
        if count is not None and count % size:
            raise RenderError(f"{where}: {field} {count} is not a multiple of {name} {size}")
