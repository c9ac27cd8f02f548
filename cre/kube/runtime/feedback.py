"""The one feedback path between a pure core and its shell, with a bound on the passes.

A pure core cannot read a log or confirm an absence; it *asks*, in its Plan, and the shell
answers by running the core again on a richer Observation (the tail read, the live list, the
result of a create). The shell applies only a Plan that asks nothing. Applying can feed back
too: a create that found its name taken, or was refused for good, goes into the Observation;
a write that conflicts brings a fresh copy of the object. :func:`converge` is that loop, shared
by every controller: ``step`` runs the core once and answers it, returning either
:class:`Again` (with the object and Observation to run the core on next) or the final value.
Each pass adds something the core did not have, so a well-behaved core comes to rest in a few
passes; ``max_passes`` turns a core that keeps asking into an error (and a backoff) instead of
a spin. The contract the cores follow is written in :mod:`cre.core`'s docstring.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import attrs

O = TypeVar("O")  # noqa: E741  (the object reconciled)
B = TypeVar("B")  # its Observation
R = TypeVar("R")  # what the reconcile returns

#: Passes per reconcile before it gives up, the bound every controller uses (the Job core needs
#: at most four in practice: a log read, a live confirmation or the workload's Events, a
#: create's answer and a conflict's re-read).
DEFAULT_MAX_PASSES = 8


class PassesExhausted(RuntimeError):
    """The core kept asking (or the writes kept conflicting) past the bound."""


@attrs.frozen(slots=True)
class Again(Generic[O, B]):
    """Run the core once more, on ``obj`` and the richer ``observation``; ``why`` names the
    answer (for the error when the bound is reached)."""

    obj: O
    observation: B
    why: str


async def converge(step: Callable[[O, B], Awaitable[Again[O, B] | R]], obj: O,
                   observation: B, *, what: str,
                   max_passes: int = DEFAULT_MAX_PASSES) -> R:
    """Call ``step`` until it returns something other than :class:`Again`, at most
    ``max_passes`` times; ``what`` names the object for the error."""
    reasons: list[str] = []
    for _ in range(max_passes):
        answer = await step(obj, observation)
        if not isinstance(answer, Again):
            return answer
        obj, observation = answer.obj, answer.observation
        reasons.append(answer.why)
    raise PassesExhausted(f"{what}: no applicable plan after {max_passes} passes "
                          f"({', '.join(reasons)})")
