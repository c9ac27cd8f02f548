"""pytest collects a project's golden cases from [tool.cre.golden], with no test file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

PYPROJECT = """
[tool.cre.golden]
cases = "integration/cases"
goldens = "goldens"
runners = ["echo_runner"]
"""

# An in-repo runner: the case's `value`, plus a uid the normaliser must replace.
RUNNER = """
from cre.testing.golden import golden_runner

@golden_runner("echo")
def run(case_dir, data):
    if "boom" in data:
        raise RuntimeError("the runner failed: " + str(data["boom"]))
    return {"case": case_dir.name, "value": data["value"],
            "metadata": {"uid": "0f8fad5b-d9cb-469f-a165-70867728950e", "name": "x"}}
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.makepyfile(echo_runner=RUNNER)
    pytester.syspathinsert()
    for suite, case, value in (("alpha", "one", 1), ("alpha", "two", [1, {"a": "b"}]),
                               ("beta", "three", "x")):
        folder = pytester.path / "integration" / "cases" / suite / case
        folder.mkdir(parents=True)
        (folder / "input.yaml").write_text(f"type: echo\nvalue: {json.dumps(value)}\n")
    return pytester


def _golden(p: pytest.Pytester, suite: str, case: str) -> Path:
    return p.path / "goldens" / suite / f"{case}.json"


def test_every_input_yaml_is_a_test_item(project: pytest.Pytester) -> None:
    """Three case folders, no test file: three items named <cases>/<suite>::<case>."""
    result = project.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(["integration/cases/alpha::one", "integration/cases/alpha::two",
                                 "integration/cases/beta::three", "3 tests collected*"])


def test_missing_goldens_fail_then_update_writes_them(project: pytest.Pytester) -> None:
    """Without goldens every case fails naming the command; --update-goldens writes and lists
    them; the next run passes."""
    result = project.runpytest()
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(["*goldens/alpha/one.json: golden missing; run pytest with "
                                 "--update-goldens*"])
    result = project.runpytest("--update-goldens")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*goldens updated*", "written: goldens/alpha/one.json"])
    golden = json.loads(_golden(project, "alpha", "one").read_text())
    assert golden == {"case": "one", "value": 1, "metadata": {"name": "x", "uid": "<uid-1>"}}
    project.runpytest().assert_outcomes(passed=3)


def test_a_mismatch_names_the_first_differing_field(project: pytest.Pytester) -> None:
    """A changed output fails with the JSONPath of the first difference and a unified diff,
    without a Python traceback."""
    project.runpytest("--update-goldens").assert_outcomes(passed=3)
    case = project.path / "integration" / "cases" / "alpha" / "two" / "input.yaml"
    case.write_text('type: echo\nvalue: [1, {"a": "c"}]\n')
    result = project.runpytest("integration/cases/alpha/two")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "output differs from goldens/alpha/two.json",
        "first difference at $.value[1].a:",
        '  golden: "b"',
        '  actual: "c"',
        "--- goldens/alpha/two.json",
        "+++ actual",
        '-      "a": "b"',
        '+      "a": "c"',
    ])
    assert "Traceback" not in result.stdout.str()


def test_a_golden_without_a_case_is_stale(project: pytest.Pytester) -> None:
    """A golden whose case folder is gone fails; --update-goldens deletes it."""
    project.runpytest("--update-goldens").assert_outcomes(passed=3)
    for golden in (_golden(project, "alpha", "gone"), _golden(project, "gamma", "old")):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text("{}\n")
    result = project.runpytest()
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines(["*stale golden goldens/alpha/gone.json: there is no case "
                                 "integration/cases/alpha/gone/input.yaml*"])
    result = project.runpytest("--update-goldens")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["deleted (no case): goldens/alpha/gone.json"])
    assert not _golden(project, "alpha", "gone").exists()
    assert not _golden(project, "gamma", "old").exists()


def test_a_suite_or_case_can_be_selected(project: pytest.Pytester) -> None:
    """A suite folder, a case folder and -k select as for ordinary tests."""
    project.runpytest("--update-goldens").assert_outcomes(passed=3)
    project.runpytest("integration/cases/alpha").assert_outcomes(passed=2)
    project.runpytest("integration/cases/beta/three").assert_outcomes(passed=1)
    project.runpytest("-k", "beta").assert_outcomes(passed=1)


def test_bad_cases_fail_with_their_message(project: pytest.Pytester) -> None:
    """An unknown type or a bad normalise key names the file; a runner error keeps its
    traceback (it is a bug to debug, not a malformed case)."""
    cases = project.path / "integration" / "cases" / "alpha"
    (cases / "one" / "input.yaml").write_text("type: nope\n")
    (cases / "two" / "input.yaml").write_text("type: echo\nvalue: 1\nnormalise: {uidz: drop}\n")
    (project.path / "integration" / "cases" / "beta" / "three" / "input.yaml").write_text(
        "type: echo\nboom: here\n")
    result = project.runpytest()
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    assert "no golden runner for type 'nope' (known: " in out
    assert "echo" in out.split("no golden runner for type 'nope'")[1].splitlines()[0]
    assert "two/input.yaml: normalise: unknown keys ['uidz']" in out
    assert "RuntimeError: the runner failed: here" in out


def test_case_normalise_settings_apply(project: pytest.Pytester) -> None:
    """A case's normalise block overrides the defaults (here: keep the uid, drop a field)."""
    (project.path / "integration" / "cases" / "alpha" / "one" / "input.yaml").write_text(
        "type: echo\nvalue: 1\nnormalise:\n  uids: keep\n  drop: ['$.case']\n")
    project.runpytest("--update-goldens", "integration/cases/alpha/one").assert_outcomes(passed=1)
    assert json.loads(_golden(project, "alpha", "one").read_text()) == {
        "value": 1, "metadata": {"name": "x", "uid": "0f8fad5b-d9cb-469f-a165-70867728950e"}}


def test_without_the_table_nothing_is_collected(pytester: pytest.Pytester) -> None:
    """The plugin is inert in a project that has no [tool.cre.golden]."""
    pytester.makefile(".toml", pyproject="[tool.other]\nx = 1\n")
    folder = pytester.path / "integration" / "cases" / "s" / "c"
    folder.mkdir(parents=True)
    (folder / "input.yaml").write_text("type: echo\n")
    result = pytester.runpytest("--collect-only", "-q")
    assert "no tests collected" in result.stdout.str()


def test_a_bad_table_is_a_usage_error(pytester: pytest.Pytester) -> None:
    """An unknown key in [tool.cre.golden] stops the run with the file and the key."""
    pytester.makefile(".toml", pyproject="[tool.cre.golden]\ncase = 'x'\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "pyproject.toml: [tool.cre.golden]: unknown keys ['case']" in result.stderr.str()
