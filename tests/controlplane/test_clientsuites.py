"""The Python clients' live tests on the emulator and kube-apiserver: no emulator regressions.

The suites come from the pinned PyPI source distributions at test time
(:mod:`cre.testing.controlplane.clientsuites`); where PyPI or the real control plane cannot be
reached the live test skips naming why. The other tests check the comparison itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cre.testing.controlplane import ControlPlane, clientsuites, default_crds
from cre.testing.controlplane.build import Unavailable
from cre.testing.controlplane.clientsuites import SuiteRun, compare, parse_junit, selection
from cre.testing.procs import Stack

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="pkg.dynamic.test_client.TestDynamicClient" name="test_ok" time="0.1"/>
<testcase classname="pkg.dynamic.test_client.TestDynamicClient" name="test_bad" time="0.1">
<failure message="AssertionError: 'A' != 'B'">trace</failure></testcase>
<testcase classname="pkg.dynamic.test_client.TestDynamicClient" name="test_err" time="0.1">
<error message="setup failed">trace</error></testcase>
<testcase classname="pkg.dynamic.test_client.TestDynamicClient" name="test_skip" time="0">
<skipped message="no kubelet"/></testcase>
</testsuite></testsuites>"""


def test_parse_junit_reads_every_outcome() -> None:
    """Passed, failed (failure or error) and skipped are read with the failure's first line."""
    run = parse_junit(JUNIT)
    prefix = "pkg.dynamic.test_client.TestDynamicClient::"
    assert run.outcomes == {prefix + "test_ok": "passed", prefix + "test_bad": "failed",
                            prefix + "test_err": "failed", prefix + "test_skip": "skipped"}
    assert run.messages[prefix + "test_bad"] == "AssertionError: 'A' != 'B'"


def test_compare_classifies_regressions() -> None:
    """Passing on the real server only is a regression; failing on both, or on the real
    server only, is listed but is not."""
    real = SuiteRun(outcomes={"a": "passed", "b": "failed", "c": "failed", "d": "passed",
                             "e": "passed"}, messages={})
    emulator = SuiteRun(outcomes={"a": "failed", "b": "failed", "c": "passed", "d": "passed"},
                       messages={"a": "boom"})
    outcome = compare("s", emulator, real)
    assert outcome.regressions == ["a", "e"]
    assert outcome.both_fail == ["b"]
    assert outcome.emulator_only_passes == ["c"]
    assert outcome.table()["regressions"] == {"a": "boom", "e": "missing on the emulator"}


def test_selection_is_the_modules_importing_the_e2e_base(tmp_path: Path) -> None:
    """Only test modules that import ``<package>.e2e_test.base`` (the live ones) are run."""
    (tmp_path / "pkg" / "dynamic").mkdir(parents=True)
    (tmp_path / "pkg" / "dynamic" / "test_client.py").write_text(
        "from pkg.e2e_test import base\n")
    (tmp_path / "pkg" / "dynamic" / "client_test.py").write_text(
        "import unittest\nfrom pkg.aio.e2e_test import base\n")
    (tmp_path / "pkg" / "watch_test.py").write_text("import unittest\n")
    (tmp_path / "pkg" / "helper.py").write_text("from pkg.e2e_test import base\n")
    assert selection(tmp_path) == ["pkg/dynamic/client_test.py", "pkg/dynamic/test_client.py"]


@pytest.fixture(scope="module")
def emulator_kubeconfig(real_control_plane: ControlPlane) -> Iterator[Path]:
    minor = ".".join(real_control_plane.binaries.versions.kubernetes[1:].split(".")[:2])
    with Stack() as stack:
        stack.start_emulator(crds=default_crds(), args=["--kubernetes-version", minor])
        yield stack.kubeconfig


@pytest.mark.parametrize("suite", clientsuites.SUITES, ids=[s.name for s in clientsuites.SUITES])
def test_client_suite_has_no_emulator_regressions(
        suite: clientsuites.Suite, emulator_kubeconfig: Path,
        real_control_plane: ControlPlane) -> None:
    """Every live test of the client that passes on kube-apiserver passes on the emulator."""
    try:
        tree = clientsuites.fetch(suite)
    except Unavailable as exc:
        pytest.skip(f"client suite unavailable: {exc}")
    emulator = clientsuites.run(tree, emulator_kubeconfig)
    real = clientsuites.run(tree, real_control_plane.kubeconfig)
    outcome = compare(suite.name, emulator, real)
    assert real.outcomes, "no test ran on the real server"
    assert not outcome.regressions, json.dumps(outcome.table(), indent=1)
