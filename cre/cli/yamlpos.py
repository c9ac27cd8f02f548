"""YAML documents with the line of every field, for ``file:line: field.path: message``.

Validators speak in field paths (``spec.categories[0].domain``, ``.spec.trainer.numNodes``,
``spec.thresholds[busBandwidthGBps]``, kube-schema ``.spec.containers.0.image``); a person
fixing a file wants a line. ruamel.yaml's round-trip loader keeps each key's and item's
position, so a path is walked through the loaded nodes as far as it goes and the deepest
node's line is reported (a missing field points at its parent). Validators get plain dicts and
lists converted from the nodes, so they never see ruamel types.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from cre.cli.exitcodes import CliError, ExitCode

_TOKEN = re.compile(r"\[([^\]]*)\]|([^.\[\]]+)")


@attrs.frozen(kw_only=True)
class Document:
    """One YAML document of a file: its plain value, its node tree and where it starts."""

    file: str
    index: int
    value: Any
    node: Any
    line: int

    def line_of(self, path: str) -> int:
        """The 1-based line of the deepest node ``path`` reaches in this document."""
        return line_of(self.node, path, default=self.line)


def plain(node: Any) -> Any:
    """A ruamel node as plain dicts, lists and scalars (timestamps as RFC 3339 strings)."""
    if isinstance(node, Mapping):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    if isinstance(node, bool):
        return bool(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    if isinstance(node, dt.datetime):
        text = node.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if isinstance(node, dt.date):
        return node.isoformat()
    return node


STDIN = "-"
STDIN_NAME = "<stdin>"


def load_documents(path: str) -> list[Document]:
    """Every non-empty document of a YAML (or JSON) file (``-``: standard input, reported as
    ``<stdin>``); :class:`CliError` when the file is missing, unreadable or not YAML, naming
    the file and line."""
    try:
        if path == STDIN:
            path = STDIN_NAME
            text = sys.stdin.read()
        else:
            text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(ExitCode.INPUT, f"{path}: no such file") from None
    except IsADirectoryError:
        raise CliError(ExitCode.INPUT, f"{path}: is a directory, not a file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(ExitCode.INPUT, f"{path}: cannot read: {exc}") from None
    yaml = YAML(typ="rt", pure=True)
    docs = []
    try:
        for i, node in enumerate(yaml.load_all(text)):
            if node is None:
                continue
            line = node.lc.line + 1 if isinstance(node, CommentedMap | CommentedSeq) else 1
            docs.append(Document(file=path, index=i, value=plain(node), node=node, line=line))
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        problem = exc.problem or "invalid YAML"
        if exc.context:
            started = exc.context_mark
            at = f" (line {started.line + 1})" if started is not None and started != mark else ""
            problem = f"{exc.context}{at}: {problem}"
        raise CliError(ExitCode.INPUT, f"{where}: invalid YAML: {problem}") from None
    except YAMLError as exc:
        raise CliError(ExitCode.INPUT, f"{path}: invalid YAML: {exc}") from None
    return docs


def tokens(path: str) -> list[str | int]:
    """``spec.a[0].b[x.y/z]`` or ``.spec.a.0.b`` as keys and indexes."""
    out: list[str | int] = []
    for bracket, bare in _TOKEN.findall(path.strip().removeprefix("(root)")):
        token = bracket if bracket else bare
        out.append(int(token) if token.isdigit() else token)
    return out


def line_of(node: Any, path: str | list[str | int], *, default: int = 1) -> int:
    """The 1-based line of the deepest node of ``path`` that exists under ``node``."""
    return resolve(node, path, default=default)[0]


def resolve(
    node: Any, path: str | list[str | int], *, default: int = 1
) -> tuple[int, list[str | int]]:
    """``(line, keys)``: the line of the deepest node ``path`` reaches, and the path as real
    keys and indexes (dotted keys joined back; the unreached rest kept as given)."""
    parts = tokens(path) if isinstance(path, str) else list(path)
    line = default
    keys: list[str | int] = []
    i = 0
    while i < len(parts):
        part = parts[i]
        if isinstance(node, CommentedMap):
            key, used = _match_key(node, parts, i)
            if key is None:
                break
            line = node.lc.key(key)[0] + 1
            node = node[key]
            keys.append(str(key))
            i += used
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and part < len(node):
            line = node.lc.item(part)[0] + 1
            node = node[part]
            keys.append(part)
            i += 1
        else:
            break
    return line, keys + parts[i:]


def show_path(keys: list[str | int]) -> str:
    """Keys as a field path the API's own messages use: ``spec.a[0].labels[cre.dev/job]``."""
    out = ""
    for key in keys:
        if isinstance(key, int) or (out and ("." in key or "/" in key)):
            out += f"[{key}]"
        else:
            out += f".{key}" if out else key
    return out


def _match_key(node: CommentedMap, parts: list[str | int], i: int) -> tuple[Any, int]:
    """The key of ``node`` spelled by ``parts[i:]`` (one token, or several joined by dots for
    keys such as ``cre.dev/job`` in dotted kube-schema paths), and how many tokens it used."""
    first = str(parts[i])
    if first in node:
        return first, 1
    joined = first
    for j in range(i + 1, len(parts)):
        joined = f"{joined}.{parts[j]}"
        if joined in node:
            return joined, j - i + 1
    if isinstance(parts[i], int) and parts[i] in node:
        return parts[i], 1
    return None, 0
