"""Safe ``${name}`` substitution for catalog strings.

Catalog entries need a few values that are only known at render time (GPUs per node, node
count, parameters a user overrides). Go templates or Jinja would let a catalog file run code;
this module only replaces ``${identifier}`` with a value from a mapping, nothing else. ``$${``
writes a literal ``${``; any other ``$`` (shell's ``$PATH``) is left alone. A string that is
exactly one reference keeps the value's type, so ``"${gpusPerNode}"`` becomes the integer 8.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

Scalar = str | int | bool

_TOKEN = re.compile(r"\$\$\{|\$\{([^}]*)\}?")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class TemplateError(ValueError):
    """A string holds a malformed or unknown ``${...}`` reference."""


def references(text: str) -> list[str]:
    """The names a string refers to, in order; raises TemplateError when one is malformed."""
    names: list[str] = []
    for match in _TOKEN.finditer(text):
        if match.group(0) == "$${":
            continue
        name = match.group(1)
        if not match.group(0).endswith("}") or name is None or not _IDENT.match(name):
            raise TemplateError(f"malformed reference {match.group(0)!r} in {text!r}")
        names.append(name)
    return names


def substitute(text: str, values: Mapping[str, Scalar]) -> Scalar:
    """Replace every ``${name}`` in ``text``; a lone reference keeps the value's type."""
    names = references(text)
    for name in names:
        if name not in values:
            raise TemplateError(f"unknown reference ${{{name}}} in {text!r}")
    if len(names) == 1 and text == "${" + names[0] + "}":
        return values[names[0]]

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        value = values[match.group(1)]
        return str(value).lower() if isinstance(value, bool) else str(value)

    return _TOKEN.sub(one, text)


def substitute_tree(node: Any, values: Mapping[str, Scalar]) -> Any:
    """Substitute in every string of a JSON-like tree (keys included), returning a new tree."""
    if isinstance(node, str):
        return substitute(node, values)
    if isinstance(node, Mapping):
        return {
            str(substitute(str(k), values)): substitute_tree(v, values) for k, v in node.items()
        }
    if isinstance(node, list):
        return [substitute_tree(v, values) for v in node]
    return node
