"""User strings in a WorkloadRun reach the program as literal argv, proved with a real bash:
the ``bash -c`` script a platform pre-command forces passes every string as exactly one
argument and executes nothing in it; the kubelet's ``$(VAR)`` escape round-trips."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cre.render.runplatform import BLOCKS
from cre.render.workloadrun import k8s_literal, wrap_script
from cre.testing.cluster.argv import effective_argv, expand

BASH = shutil.which("bash")
# Any text bash can carry in argv: everything but NUL (and lone surrogates, not encodable).
ARG = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
              max_size=40)
NASTY = st.sampled_from(["$(touch {m})", "`touch {m}`", "'; touch {m}; '", "\"; touch {m}; \"",
                         "\n touch {m}\n", "$((1+1))", "${{PATH}}", "\\", "'\"'\"'", "*", "~",
                         "!!", "a b\tc", "-c", "--", ""])
# The real pre-command lines, less the one that deletes files.
PRE = [line for b in BLOCKS for line in b.pre_command if not line.startswith("rm ")]


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.lists(st.one_of(ARG, NASTY), max_size=6))
def test_wrapped_script_passes_each_string_as_one_argument(args: list[str], tmp_path: Path
                                                           ) -> None:
    """``bash -n`` accepts the script; run, printf sees each string as one argument, byte for
    byte, and no command substitution or injected command ran (no marker file appeared)."""
    assert BASH is not None
    marker = tmp_path / "marker"
    args = [a.replace("{m}", str(marker)) for a in args]
    argv = ["printf", "%s\\0", "START", *args]
    script = wrap_script(PRE, argv)
    assert subprocess.run([BASH, "-n", "-c", script], capture_output=True).returncode == 0
    done = subprocess.run([BASH, "-c", script], capture_output=True, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(b"\0")[:-1] == [b"START", *(a.encode() for a in args)]
    assert not marker.exists()
    # The simulator reads the same argv out of the script.
    assert effective_argv({"command": ["/bin/bash", "-c"], "args": [script]}) == argv


@given(text=ARG, env=st.dictionaries(st.from_regex(r"[A-Z_]{1,5}", fullmatch=True), ARG))
def test_kubelet_escape_round_trips(text: str, env: dict[str, str]) -> None:
    """Whatever the container's env, the kubelet expands the escaped text back to the text."""
    assert expand(k8s_literal(text), env) == text


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("$(A)", {"A": "1"}, "1"),
        ("$(B)", {"A": "1"}, "$(B)"),
        ("$$(A)", {"A": "1"}, "$(A)"),
        ("$(A", {"A": "1"}, "$(A"),
        ("a$", {}, "a$"),
        ("$x $$ $", {}, "$x $ $"),
    ],
)
def test_kubelet_expansion_table(text: str, env: dict[str, str], expected: str) -> None:
    """The kubelet's rules: defined names expand, undefined stay, $$ is one $."""
    assert expand(text, env) == expected
