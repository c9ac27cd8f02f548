"""What a simulated container's program receives: the kubelet's ``$(VAR)`` expansion, the argv
behind a ``bash -c`` wrapper, and the ``cre-argv-echo`` stub that prints what it received.

The kubelet expands ``$(NAME)`` in a container's command, args and env values from the
container's env (earlier entries only, for env values); ``$$`` is a literal ``$``; a reference
to an undefined name, or an unterminated ``$(``, stays as written. :func:`expand_container`
applies exactly that, so a workload that forgets to escape a user's ``$(...)`` is caught here
as it would be on a real node.

A platform pre-command turns a command into ``/bin/bash -c <script>`` that ends in ``exec`` of
the real argv, each element shell-quoted; :func:`effective_argv` reads the words from the first
line starting with ``exec`` to the end with POSIX shell word rules (``shlex``), which is what
bash does with single-quoted words (a quoted word may hold newlines).
Nothing is ever executed.

``cre-argv-echo`` (a stub binary for tests: ``mpirun ... cre-argv-echo ARGS`` or run directly)
prints ``argv[i]: <JSON string>`` for each argument it was given and ``env NAME: <JSON
string>`` for each variable an mpirun ``-x NAME`` forwards, one per line, so a golden shows
every argument exactly, newlines and quotes included.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Final

ECHO_BINARY: Final = "cre-argv-echo"
SHELLS: Final = ("bash", "/bin/bash", "sh", "/bin/sh")


def expand(text: str, env: Mapping[str, str]) -> str:
    """The kubelet's expansion of ``text`` with ``env`` (see the module docstring)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "$" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            end = text.find(")", i + 2)
            if end < 0:
                out.append("$(")
                i += 2
                continue
            name = text[i + 2:end]
            out.append(env.get(name, f"$({name})"))
            i = end + 1
        else:
            out.append("$" + nxt)
            i += 2
    return "".join(out)


def expand_container(container: Mapping[str, Any]) -> dict[str, Any]:
    """``container`` with its command, args and env values expanded as the kubelet does."""
    values: dict[str, str] = {}
    env: list[dict[str, Any]] = []
    for entry in container.get("env") or []:
        item = dict(entry)
        if isinstance(item.get("value"), str):
            item["value"] = expand(item["value"], values)
            values[str(item["name"])] = item["value"]
        env.append(item)
    out = dict(container)
    if env:
        out["env"] = env
    for key in ("command", "args"):
        if container.get(key):
            out[key] = [expand(str(a), values) for a in container[key]]
    return out


def effective_argv(container: Mapping[str, Any]) -> list[str]:
    """The argv the program runs with: command + args, or the ``exec`` line of a
    ``bash -c`` script."""
    argv = [str(a) for a in (container.get("command") or [])]
    argv += [str(a) for a in (container.get("args") or [])]
    if len(argv) == 3 and argv[0] in SHELLS and argv[1] == "-c":
        lines = argv[2].split("\n")
        at = next((i for i, ln in enumerate(lines) if ln.startswith("exec ")), None)
        if at is not None:  # the exec words may span lines (a quoted newline)
            try:
                return shlex.split("\n".join(lines[at:])[len("exec "):])
            except ValueError:
                return argv
    return argv


def _forwarded(argv: Sequence[str]) -> list[str]:
    """The names an mpirun argv forwards with a bare ``-x NAME``."""
    return [argv[i + 1] for i in range(len(argv) - 1)
            if argv[i] == "-x" and "=" not in argv[i + 1]]


def echo_text(container: Mapping[str, Any]) -> str | None:
    """What ``cre-argv-echo`` prints for this (expanded) container, or ``None`` when the
    container does not run it."""
    argv = effective_argv(container)
    at = next((i for i, a in enumerate(argv) if a.rsplit("/", 1)[-1] == ECHO_BINARY), None)
    if at is None:
        return None
    env = {str(e["name"]): str(e.get("value", "")) for e in container.get("env") or []}
    lines = [f"argv[{i}]: {json.dumps(a)}" for i, a in enumerate(argv[at + 1:], start=1)]
    lines += [f"env {n}: {json.dumps(env.get(n))}" for n in _forwarded(argv[:at])]
    return "\n".join(lines) + "\n"
