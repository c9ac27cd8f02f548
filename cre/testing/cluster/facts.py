"""Facts about run-dependent numbers, for goldens: ``status.result < 1`` -> ``true``.

Some figures a scenario must pin are measured on scaled wall time (a goodput ratio, seconds of
lost work): their exact value moves by milliseconds from run to run, so a golden cannot hold
it, yet the behaviour is a comparison ("goodput below 1", "some work was lost"). A
``facts`` collect item evaluates such comparisons on one object and the golden records the
booleans::

    - facts: {kind: GoodputMeasurement, name: train-goodput,
              checks: ["status.result < 1", "status.lostWorkTimeSec > 0"]}

A check is ``<dotted path> <op> <number>`` with op one of ``< <= > >= == !=``; the value at
the path may be a number or a decimal string (CRE keeps measured figures as ``"%.3f"``
strings). A missing or non-numeric value makes the fact false.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

_CHECK: Final = re.compile(r"^\s*(?P<path>[\w.]+)\s*(?P<op><=|>=|==|!=|<|>)\s*"
                           r"(?P<value>-?\d+(\.\d+)?)\s*$")
_OPS: Final[dict[str, Callable[[float, float], bool]]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne}


class FactError(ValueError):
    """A check that is not ``<path> <op> <number>``; the message names where."""


def _value(obj: Any, path: str) -> float | None:
    for part in path.split("."):
        if isinstance(obj, list) and part.isdigit():
            obj = obj[int(part)] if int(part) < len(obj) else None
        elif isinstance(obj, Mapping):
            obj = obj.get(part)
        else:
            return None
    if isinstance(obj, bool) or obj is None:
        return None
    try:
        return float(obj)
    except (TypeError, ValueError):
        return None


def check_facts(obj: Mapping[str, Any], checks: Sequence[str], *, where: str
                ) -> dict[str, bool]:
    """Each check as written -> whether it holds on ``obj``."""
    out: dict[str, bool] = {}
    for i, check in enumerate(checks):
        found = _CHECK.match(str(check))
        if found is None:
            raise FactError(f"{where}.checks[{i}]: {check!r} is not '<path> <op> <number>' "
                            f"(op one of {', '.join(_OPS)})")
        value = _value(obj, found["path"])
        out[str(check)] = value is not None and _OPS[found["op"]](value,
                                                                  float(found["value"]))
    return out
