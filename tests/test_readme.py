"""The README and the user guide cannot rot: their examples run as written, and every command,
flag, make target and repository path they show exists.

The README is the short entry point (what CRE is, the two commands, a five-minute walk-through,
links); the manual is ``docs/guide/``. The library examples live in the guide's library page
and run verbatim; the golden walk-through is the configmap-fanout example's first case; every
command line in a code block or a code span of either is checked against what ships:
``make`` targets against the Makefile, ``python -m`` modules against the import system and
their argparse parsers, ``cre`` against its click commands, ``cre-manager`` against its parser.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import io
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GUIDE = ROOT / "docs" / "guide"
PAGES = (README, *sorted(GUIDE.glob("*.md")))

#: Make targets the docs name that another open branch of the same issue adds (issue 24 §1:
#: the test tiers). Allowed to be missing until it lands; once present they are checked as
#: any other target is.
PENDING_MAKE_TARGETS: frozenset[str] = frozenset({"test-fast"})


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def library_examples(page: str) -> list[str]:
    """The ```python blocks of the guide's library page, in order."""
    return re.findall(r"^```python\n(.*?)^```$", page, flags=re.DOTALL | re.MULTILINE)


EXAMPLES = library_examples(_text(GUIDE / "library.md"))


def test_the_section_has_the_two_examples() -> None:
    """The core example and the embedded-controller example are both there."""
    assert len(EXAMPLES) == 2
    assert "reconcile_job(" in EXAMPLES[0] and "JobController(" in EXAMPLES[1]


@pytest.mark.parametrize(("index", "expected"), [
    (0, "Failed: nccl-workload-launcher-0-0-x7k2p exited 1 on gpu-0\n"
        "NCCL WARN Net : Connection closed\n"),
    (1, "TrainJob nccl-workload owned by Job nccl\n"),
], ids=["job-core", "embedded-controller"])
def test_a_library_example_runs_as_written(tmp_path: Path, index: int, expected: str) -> None:
    """The block runs as a script outside the source tree and prints what the guide implies."""
    script = tmp_path / "example.py"
    script.write_text(EXAMPLES[index])
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.endswith(expected), result.stdout


def test_the_golden_walkthrough_case_is_the_example_case() -> None:
    """The guide's controller case is, verbatim, the first case of examples/configmap-fanout
    (whose golden suite tests/test_examples.py runs)."""
    page = _text(GUIDE / "test-kit.md")
    section = page[page.index("## Golden-file testing for your controller"):]
    block = re.search(r"^```yaml\n(.*?)^```$", section, flags=re.DOTALL | re.MULTILINE)
    assert block is not None
    case = (ROOT / "examples" / "configmap-fanout" / "integration" / "cases" / "fanout"
            / "copies-to-targets" / "input.yaml")
    assert case.read_text() == block.group(1)
    walkthrough = section[:section.index("\n## ", 5)]
    assert len(walkthrough.strip().splitlines()) <= 30


# --- the README's shape ---------------------------------------------------------------------


def test_the_readme_says_what_cre_is_before_any_command() -> None:
    """The first paragraph, before any code block, says what CRE is and does."""
    readme = _text(README)
    intro = readme[:readme.index("```")]
    assert "certifies GPU clusters on Kubernetes" in intro
    assert "verdict per node" in intro


def test_the_readme_stays_short() -> None:
    """The README is an entry point of about 150 lines, not the manual."""
    assert len(_text(README).splitlines()) <= 160


def _links(page: Path) -> Iterator[str]:
    for target in re.findall(r"\]\(([^)\s]+)\)", _text(page)):
        if not re.match(r"[a-z]+:", target) and not target.startswith("#"):
            yield target.partition("#")[0]


def test_every_guide_page_is_linked_from_the_readme() -> None:
    """Each page of docs/guide/ is one click from the README."""
    linked = {(ROOT / target).resolve() for target in _links(README)}
    missing = [p.name for p in sorted(GUIDE.glob("*.md")) if p.resolve() not in linked]
    assert not missing, f"guide pages the README does not link: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    """A relative link in the README or the guide points at a file that exists."""
    broken = [t for t in _links(page) if not (page.parent / t).exists()]
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"


# --- commands -------------------------------------------------------------------------------


def _code(page: str) -> Iterator[str]:
    """Each logical command line of the page: code-block lines (continuations joined, comments
    and prompts dropped, split at pipes and `&&`) and inline code spans."""
    for lang, body in re.findall(r"^```(\w*)\n(.*?)^```$", page, flags=re.DOTALL | re.MULTILINE):
        if lang not in ("sh", "console"):
            continue
        for line in body.replace("\\\n", " ").splitlines():
            if lang == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            line = re.sub(r"(^|\s)#.*$", "", line)
            yield from (part.strip() for part in re.split(r"\s(?:\||&&|;)\s", line))
    prose = re.sub(r"^```.*?^```$", "", page, flags=re.DOTALL | re.MULTILINE)
    yield from (" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose))


def _command(words: list[str]) -> tuple[str, list[str]] | None:
    """(program, its arguments) for a command this file checks, else None."""
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # VAR=value prefixes
        words = words[1:]
    if not words:
        return None
    prog, args = words[0], words[1:]
    if prog.endswith("/python") or prog == "python":
        if len(args) >= 2 and args[0] == "-m":
            return f"python -m {args[1]}", args[2:]
        return None
    if prog == "kubectl" and args[:1] == ["cre"]:
        return "cre", args[1:]
    if prog in ("make", "cre", "cre-manager"):
        return prog, args
    return None


def _commands() -> list[tuple[str, str, list[str]]]:
    found: dict[tuple[str, str], tuple[str, str, list[str]]] = {}
    for page in PAGES:
        for line in _code(_text(page)):
            try:
                words = shlex.split(line.replace("\\|", "|"))
            except ValueError:
                words = line.split()
            cmd = _command(words)
            if cmd is not None:
                found.setdefault((cmd[0], line), (str(page.relative_to(ROOT)), cmd[0], cmd[1]))
    return sorted(found.values(), key=lambda c: (c[1], c[2]))


COMMANDS = _commands()


def _flags(args: list[str]) -> list[str]:
    return sorted({m for a in args for m in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", a)})


def _words(args: list[str]) -> list[str]:
    """The leading subcommand words (lower-case names, before any flag or placeholder)."""
    out = []
    for a in args:
        if not re.fullmatch(r"[a-z][a-z0-9-]*", a):
            break
        out.append(a)
    return out


@functools.cache
def make_targets() -> frozenset[str]:
    text = (ROOT / "Makefile").read_text()
    return frozenset(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", text, flags=re.MULTILINE))


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__(parser.prog)
        self.parser = parser


def _capture(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
    raise _Parsed(self)


@functools.cache
def module_parser(module: str, argv: tuple[str, ...]) -> argparse.ArgumentParser:
    """The argparse parser ``python -m module *argv`` parses with, taken when it parses (the
    module's main runs only up to that point)."""
    saved_argv, saved = sys.argv, (argparse.ArgumentParser.parse_args,
                                   argparse.ArgumentParser.parse_known_args)
    sys.argv = [module, *argv]
    argparse.ArgumentParser.parse_args = _capture  # type: ignore[method-assign,assignment]
    argparse.ArgumentParser.parse_known_args = _capture  # type: ignore[method-assign,assignment]
    spec = importlib.util.find_spec(module)
    if spec is not None and spec.submodule_search_locations is not None:
        spec = importlib.util.find_spec(f"{module}.__main__")
    assert spec is not None and spec.origin is not None, f"python -m {module}: not runnable"
    # What runpy does, without asking the loader for code (pytest's assertion-rewriting loader,
    # which owns the modules of installed plugins such as cre's, cannot give it).
    code = compile(Path(spec.origin).read_text(encoding="utf-8"), spec.origin, "exec")
    namespace = {"__name__": "__main__", "__file__": spec.origin, "__spec__": spec,
                 "__package__": spec.parent, "__builtins__": __builtins__}
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            exec(code, namespace)
    except _Parsed as parsed:
        return parsed.parser
    except SystemExit as exc:
        raise AssertionError(f"python -m {module} {' '.join(argv)} exited {exc.code} "
                             "before parsing its arguments") from None
    finally:
        sys.argv = saved_argv
        argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args = saved  # type: ignore[method-assign]
    raise AssertionError(f"python -m {module} parses no arguments")


def _argparse_flags(parser: argparse.ArgumentParser, words: list[str]) -> tuple[set[str], str]:
    """The option strings of the (sub)command ``words`` name, and the words left over."""
    flags = set(parser._option_string_actions)
    for word in words:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            break
        assert word in subs[0].choices, f"{parser.prog}: no subcommand {word!r}"
        parser = subs[0].choices[word]
        flags |= set(parser._option_string_actions)
    return flags, parser.prog


def _click_flags(words: list[str]) -> tuple[set[str], str]:
    from cre.cli.app import cli

    cmd: Any = cli
    flags = {"--help"}
    for word in words:
        if not hasattr(cmd, "commands"):
            break
        assert word in cmd.commands, f"cre: no command {word!r} (has {sorted(cmd.commands)})"
        cmd = cmd.commands[word]
    for param in cmd.params:
        flags |= {o for o in (*param.opts, *param.secondary_opts) if o.startswith("--")}
    return flags, f"cre {' '.join(words)}"


def test_the_docs_show_commands() -> None:
    """The scan finds the commands the docs are built around (so the checks below are not
    vacuous)."""
    progs = {(prog, tuple(_words(args))[:1]) for _, prog, args in COMMANDS}
    for expected in [("make", ("demo",)), ("make", ("test",)), ("cre", ("status",)),
                     ("cre", ("report",)), ("cre-manager", ()),
                     ("python -m cre.testing.apiserver", ()), ("python -m bench", ("soak",))]:
        assert expected in progs, expected


@pytest.mark.parametrize(("page", "prog", "args"), COMMANDS,
                         ids=[f"{p}: {prog} {' '.join(a)}"[:90] for p, prog, a in COMMANDS])
def test_a_documented_command_exists(page: str, prog: str, args: list[str]) -> None:
    """Every make target, python -m module (with its subcommand and flags), cre command and
    cre-manager flag the README or the guide shows is one that ships."""
    words, flags = _words(args), _flags(args)
    if prog == "make":
        for target in words:
            assert target in make_targets() or target in PENDING_MAKE_TARGETS, (
                f"{page}: make {target}: no such target in the Makefile")
        scenario = [a for a in args if a.startswith("SCENARIO=")]
        if scenario:
            from cre.testing.demo import Scenario

            assert scenario[0].partition("=")[2] in {s.value for s in Scenario}, page
        return
    if prog == "cre":
        known, where = _click_flags(words)
    elif prog == "cre-manager":
        from cre_manager.config import build_parser

        known, where = _argparse_flags(build_parser(), [])
    else:
        module = prog.removeprefix("python -m ")
        assert importlib.util.find_spec(module) is not None, f"{page}: {prog}: no such module"
        if module == "bench" and words:
            from bench.__main__ import available

            assert words[0] in available(), f"{page}: no benchmark {words[0]!r}"
        if not flags and (not words or (module == "bench" and len(words) == 1)):
            return  # nothing more to check, and running the module could do real work
        if module == "bench" and not words:
            known, where = {"--help"}, prog  # bench's own usage line, no parser
        else:
            sub = words[:1] if module == "bench" else []  # bench hands over to the module's main
            parser = module_parser(module, tuple(sub))
            known, where = _argparse_flags(parser, words[len(sub):])
    unknown = [f for f in flags if f not in known]
    assert not unknown, f"{page}: {where} has no {unknown}"


# --- repository paths -----------------------------------------------------------------------

_TOP = ("cre", "cre_manager", "tests", "integration", "deploy", "bench", "docs", "examples",
        "goldens", "tools", "image", "catalog")


def _paths() -> list[tuple[str, str]]:
    found = set()
    for page in PAGES:
        for span in _code(_text(page)):
            for word in span.replace("\\|", " ").split():
                word = word.strip("`'\",;:()[]").partition("::")[0].removesuffix("'s")
                if (word.partition("/")[0] in _TOP and "/" in word
                        and not re.search(r"[<>*{}$]|\.\.\.", word)):
                    found.add((str(page.relative_to(ROOT)), word))
    return sorted(found)


PATHS = _paths()


@pytest.mark.parametrize(("page", "path"), PATHS, ids=[f"{p}: {q}" for p, q in PATHS])
def test_a_documented_path_exists(page: str, path: str) -> None:
    """A file or folder of this repository that the README or the guide names exists."""
    # The golden walk-through runs inside an example project (`cd examples/<name>`).
    bases = [ROOT, *sorted(p for p in (ROOT / "examples").iterdir() if p.is_dir())]
    assert any((base / path).exists() for base in bases), f"{page}: {path} does not exist"


def test_the_manager_page_names_only_real_flags() -> None:
    """Every flag the manager page lists on its own (`--flag`) is one cre-manager accepts."""
    from cre_manager.config import build_parser

    known = set(build_parser()._option_string_actions)
    listed = {f for span in _code(_text(GUIDE / "manager.md")) if span.startswith("--")
              for f in _flags([span])}
    assert len(listed) >= 15
    assert not listed - known, f"not cre-manager flags: {sorted(listed - known)}"


def test_the_manager_page_documents_every_exit_code() -> None:
    """The manager page's exit-code table lists every code cre-manager exits with."""
    from cre_manager.errors import ExitCode

    section = _text(GUIDE / "manager.md").split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    for code in ExitCode:
        assert f"| {int(code)} |" in section, code
