"""Every user string that reaches a rendered command is literal argv, never shell text.

Arbitrary strings (shell metacharacters, quotes, newlines, unicode) are rendered as every
parameter of every catalog entry on every platform. The proof, per rendered manifest:

* every ``sh -c``/``bash -c`` script is one of the fixed scripts of :mod:`cre.render.scripts`
  (no user string was spliced into shell text) and parses (``bash -n``);
* every other command line, run through a real ``exec`` that echoes its argv, comes back
  exactly as rendered (argv is passed as is: nothing splits or re-quotes it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cre.catalog import load_catalog
from cre.render import scripts
from cre.render.job import render_job_manifest
from cre.render.options import RenderOptions

CATALOG = load_catalog()
SCRIPTS = {v for k, v in vars(scripts).items() if k.isupper() and isinstance(v, str)
           and "\n" in v}
# One architecture per (entry, platform): the command lines do not depend on it.
CASES = sorted({(e, p): a for e, p, a in reversed(CATALOG.combinations())}.items())
CASES = [(e, p, a) for (e, p), a in CASES]
NASTY = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                min_size=1, max_size=40) | st.sampled_from([
                    "$(touch /tmp/pwned)", "`id`", "a; rm -rf /", "' \" \\", "x\ny", "*", "~",
                    "$HOME", "--help", "-e", "a b\tc", "${IFS}", "&&", "|", ">out"])


def _commands(doc: Any) -> Iterator[list[str]]:
    """Every command line (command + args) of every container-like mapping in ``doc``."""
    if isinstance(doc, dict):
        if "command" in doc and isinstance(doc["command"], list):
            yield [*doc["command"], *(doc.get("args") or [])]
        elif "args" in doc and isinstance(doc["args"], list):
            yield list(doc["args"])
        for value in doc.values():
            yield from _commands(value)
    elif isinstance(doc, list):
        for value in doc:
            yield from _commands(value)


def _echo(argv: list[str]) -> list[str]:
    """``argv`` through a real exec (what the kubelet does with command + args)."""
    out = subprocess.run([sys.executable, "-c",
                          "import json, sys; print(json.dumps(sys.argv[1:]))", *argv],
                         capture_output=True, text=True, check=True,
                         errors="surrogateescape")
    result: list[str] = json.loads(out.stdout)
    return result


def _bash_n(script: str) -> None:
    done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("entry", "platform", "arch"), CASES)
@settings(max_examples=4, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_user_strings_stay_literal_argv(entry: str, platform: str, arch: str,
                                        data: st.DataObject) -> None:
    params = CATALOG.entries[entry].parameters
    # String parameters take arbitrary text; the others keep their (typed) defaults.
    values = {n: data.draw(NASTY, label=n) for n in sorted(params)
              if isinstance(params[n].default, str)}
    docs = render_job_manifest(job_name="fz", namespace="ns", catalog=CATALOG, entry=entry,
                               platform=platform, arch=arch, nodes=["n0", "n1"],
                               options=RenderOptions(parameters=values))
    rendered = json.dumps(docs)
    for value in values.values():  # each string reached the manifest
        assert json.dumps(value)[1:-1] in rendered
    lines = [line for doc in docs for line in _commands(doc)]
    assert lines
    for line in lines:
        if len(line) == 3 and line[0] in ("sh", "bash", "/bin/sh", "/bin/bash") \
                and line[1] == "-c":
            assert line[2] in SCRIPTS, f"a shell script that is not a fixed one: {line[2]!r}"
            _bash_n(line[2])
            continue
        assert _echo(line) == line
