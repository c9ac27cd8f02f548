"""The one door through which CRE compiles and runs the CEL expressions users write.

Users write CEL in ``thresholds`` (over ``value``) and ``nodeHealthMonitor`` (over ``node``).
The CEL implementation (``common-expression-language``, a Rust interpreter behind pyo3) reports
a syntax error as ``ValueError``, but a panic inside the Rust code (one is formatting the
position of an error past column 65,535) reaches Python as pyo3's ``PanicException``, which
derives from ``BaseException`` and so escapes every ``except Exception``: one Job with such an
expression used to take the whole manager down. Everything here turns both, and evaluation
errors, into :class:`CelError` (a ``ValueError`` carrying the library's first line), so callers
report a field error and keep running.

Compiled programs are cached by source in a bounded LRU: compiling is pure (no I/O, no clock),
and the pure core can evaluate a Job's expression on every pass without compiling it again.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final

import attrs

# Distinct expressions kept compiled (a Job's thresholds and monitor; bounded so a stream of
# distinct bad expressions cannot grow memory).
CACHE_SIZE: Final = 512


class CelError(ValueError):
    """An expression that does not compile or whose evaluation failed; the message is the
    library's first line (never a Rust backtrace)."""


def is_panic(exc: BaseException) -> bool:
    """Whether ``exc`` is a Rust panic surfaced by pyo3 (``pyo3_runtime.PanicException``)."""
    kind = type(exc)
    return kind.__name__ == "PanicException" and kind.__module__ == "pyo3_runtime"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@attrs.frozen
class CelProgram:
    """One compiled expression; :meth:`run` evaluates it with variables bound."""

    source: str
    program: Any = attrs.field(eq=False, repr=False)

    def run(self, variables: Mapping[str, Any]) -> Any:
        """The value of the expression; :class:`CelError` when evaluation fails (missing
        key, wrong type, division by zero, a panic in the library)."""
        try:
            return self.program.execute(dict(variables))
        except Exception as exc:
            raise CelError(_first_line(exc)) from None
        except BaseException as exc:
            if not is_panic(exc):
                raise
            raise CelError(f"the CEL library failed: {_first_line(exc)}") from None


@functools.lru_cache(maxsize=CACHE_SIZE)
def compile_cel(source: str) -> CelProgram:
    """The compiled program of ``source``; :class:`CelError` with the parser's message (or the
    library's panic message) when it does not compile. Cached: the same source compiles once."""
    import cel  # imported on first use: only expressions need it

    try:
        return CelProgram(source, cel.compile(source))
    except ValueError as exc:
        raise CelError(_first_line(exc)) from None
    except BaseException as exc:
        if not is_panic(exc):
            raise
        raise CelError(f"the CEL library failed on this expression ({len(source)} characters): "
                       f"{_first_line(exc)}") from None
