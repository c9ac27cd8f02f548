"""Every command has ``--help`` with an example, shell completion works for bash, zsh, fish
and kubectl's plugin completion, and the kubectl plugin names itself ``kubectl cre``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from cre.cli.app import cli

from .conftest import ROOT, RunCli


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            out += _commands(command, (*prefix, name))
        else:
            out.append((*prefix, name))
    return out


COMMANDS = _commands(cli)


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) or "cre" for p in COMMANDS])
def test_every_command_has_help_with_an_example(path: tuple[str, ...], cre: RunCli) -> None:
    """``cre ... --help`` exits 0 and shows an ``Example:`` block with a ``cre`` line."""
    run = cre(*path, "--help")
    assert run.code == 0, run.err
    assert "Example:" in run.out
    example = run.out.split("Example:", 1)[1]
    assert "cre " in example


def test_the_guide_documents_every_exit_code() -> None:
    """The user guide's exit-code table of ``cre`` lists every ExitCode value."""
    from cre.cli.exitcodes import ExitCode

    page = (ROOT / "docs" / "guide" / "cli.md").read_text(encoding="utf-8")
    section = page.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    for code in ExitCode:
        assert f"| {int(code)} |" in section, code


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(shell: str, cre: RunCli) -> None:
    """``cre completion SHELL`` prints a script wired to ``_CRE_COMPLETE``."""
    run = cre("completion", shell)
    assert run.code == 0
    assert "_CRE_COMPLETE" in run.out


def _complete(words: str, cword: int) -> list[str]:
    env = {**os.environ, "_CRE_COMPLETE": "bash_complete", "COMP_WORDS": words,
           "COMP_CWORD": str(cword)}
    out = subprocess.run([sys.executable, "-m", "cre.cli"], env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return [line.split(",", 1)[1] for line in out.splitlines()]


def test_completion_offers_entries_platforms_and_architectures() -> None:
    """Catalog names complete from the shipped catalog."""
    assert _complete("cre render communication/nccl-all-r", 2) == ["communication/nccl-all-reduce"]
    assert _complete("cre render x --platform o", 4) == ["oci", "onprem"]
    assert "gb200" in _complete("cre render x --platform aws --arch ", 6)
    assert _complete("cre cat", 1) == ["catalog"]


def test_kubectl_plugin_completion_speaks_cobra() -> None:
    """``kubectl_complete-cre`` prints candidates and the no-file directive."""
    script = Path(sys.executable).parent / "kubectl_complete-cre"
    out = subprocess.run([str(script), "render", "--platform", "gc"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert out.splitlines() == ["gcp", ":4"]


def test_the_kubectl_plugin_names_itself(tmp_path: Path) -> None:
    """Run as ``kubectl-cre`` (how kubectl finds plugins), usage reads ``kubectl cre``."""
    script = Path(sys.executable).parent / "kubectl-cre"
    result = subprocess.run([str(script), "render", "--help"], capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout.startswith("Usage: kubectl cre render [OPTIONS] ENTRY")
    bad = subprocess.run([str(script), "render"], capture_output=True, text=True, timeout=60,
                         check=False)
    assert bad.returncode == 2
    assert bad.stderr.startswith("kubectl cre render: Missing argument 'ENTRY'")
