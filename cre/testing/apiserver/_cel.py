"""CEL rules of CRD schemas (`x-kubernetes-validations`), compiled once and evaluated per write.

Uses the `common-expression-language` package (module `cel`, a Rust CEL interpreter): it covers
the standard language and macros (`has`, `all`, `exists`, `exists_one`, `map`, `filter`, `size`,
`matches`, `startsWith`, ...) and evaluates in microseconds, where `cel-python` takes
milliseconds. The Kubernetes CEL library functions a CRD rule may call on top of that are added
here as Python functions (strings ext, list ext, regex `find`/`findAll`, `isSorted`, `sum`,
`min`, `max`, `indexOf`, `lastIndexOf`, `quantity`-free helpers). Only the functions a rule
references are passed to it.

Left out: cost estimation and budgets (rules always run), the optional field syntax (`.?`;
optional values themselves work, for `optionalOldSelf`), and the
URL, IP/CIDR, quantity, semver and format libraries, which the upstream CRDs CRE loads do not use.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import cel

from cre.api.cel import is_panic


class CelCompileError(ValueError):
    """A rule does not compile; the CRD carrying it is invalid."""


def _index_of(target: Any, item: Any, start: int = 0) -> int:
    if isinstance(target, str):
        return target.find(item, start)
    for i, value in enumerate(target):
        if value == item:
            return i
    return -1


def _last_index_of(target: Any, item: Any) -> int:
    if isinstance(target, str):
        return target.rfind(item)
    for i in range(len(target) - 1, -1, -1):
        if target[i] == item:
            return i
    return -1


def _substring(text: str, start: int, end: int | None = None) -> str:
    if start < 0 or start > len(text) or (end is not None and (end < start or end > len(text))):
        raise ValueError(f"substring: index out of range: {start}")
    return text[start:end]


def _replace(text: str, old: str, new: str, count: int = -1) -> str:
    return text.replace(old, new, count)


def _split(text: str, sep: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    if sep == "":
        return list(text)
    return text.split(sep, limit - 1) if limit > 0 else text.split(sep)


def _join(items: list[str], sep: str = "") -> str:
    return sep.join(items)


def _find(text: str, pattern: str) -> str:
    match = re.search(pattern, text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    found = [m.group(0) for m in re.finditer(pattern, text)]
    return found if limit < 0 else found[:limit]


def _is_sorted(items: list[Any]) -> bool:
    return all(items[i] <= items[i + 1] for i in range(len(items) - 1))


def _sum(items: list[Any]) -> Any:
    return sum(items)


def _min(items: list[Any]) -> Any:
    if not items:
        raise ValueError("min called on empty list")
    return min(items)


def _max(items: list[Any]) -> Any:
    if not items:
        raise ValueError("max called on empty list")
    return max(items)


LIBRARY: Mapping[str, Callable[..., Any]] = {
    "charAt": lambda s, i: s[i] if i < len(s) else "",
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": lambda s: s.lower() if s.isascii() else "".join(
        c.lower() if c.isascii() else c for c in s),
    "upperAscii": lambda s: s.upper() if s.isascii() else "".join(
        c.upper() if c.isascii() else c for c in s),
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "trim": lambda s: s.strip(),
    "join": _join,
    "reverse": lambda v: v[::-1],
    "find": _find,
    "findAll": _find_all,
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _min,
    "max": _max,
    "distinct": lambda v: [x for i, x in enumerate(v) if x not in v[:i]],
    "flatten": lambda v: [y for x in v for y in (x if isinstance(x, list) else [x])],
    "first": lambda v: v[0] if v else None,
    "last": lambda v: v[-1] if v else None,
}


@attrs.frozen
class Program:
    """One compiled expression and the library functions it needs."""

    source: str
    program: Any
    functions: Mapping[str, Callable[..., Any]]
    variables: frozenset[str]

    def run(self, variables: Mapping[str, Any]) -> Any:
        """Evaluate with `variables` bound (raises on evaluation errors)."""
        return self.program.execute({**self.functions, **variables})


def compile_expression(source: str) -> Program:
    """Compile a CEL expression; raises CelCompileError with the parser's message."""
    try:
        program = cel.compile(source)
    except ValueError as exc:
        raise CelCompileError(str(exc)) from exc
    except BaseException as exc:  # a Rust panic (pyo3 PanicException) is no Exception
        if not is_panic(exc):
            raise
        raise CelCompileError(f"the CEL library failed: {exc}") from None
    refs = program.references()
    functions = {name: LIBRARY[name] for name in refs.get("functions", ()) if name in LIBRARY}
    return Program(source=source, program=program, functions=functions,
                   variables=frozenset(refs.get("variables", ())))


def optional(value: Any, *, present: bool) -> Any:
    """A CEL optional (`optionalOldSelf: true` binds `oldSelf` to one)."""
    return cel.OptionalValue.of(value) if present else cel.OptionalValue.none()


def error_text(exc: Exception) -> str:
    """An evaluation error in the words of the Go CEL runtime, where they differ."""
    if isinstance(exc, KeyError):
        return f"no such key: {exc.args[0] if exc.args else ''}"
    text = str(exc)
    if text.startswith("Function 'duration' error"):  # a string that is no duration
        return "type conversion error from 'string' to 'google.protobuf.Duration'"
    return text
