"""Public client test suites against the emulator and a real kube-apiserver, side by side.

The clients CRE's users run have their own live tests, written against real clusters. They are
taken at test time from the pinned source distributions on PyPI (``pip download --no-binary
:all: --no-deps``, into a cache outside the repository: ``$CRE_CLIENTSUITES_CACHE``, else
``${XDG_CACHE_HOME:-~/.cache}/cre/clientsuites``), never copied here.

What the distributions hold: neither ships upstream's ``e2e_test`` package (its
``test_utils``, ``test_client``, ``test_watch``, ... live only in the GitHub tree, which is not
reachable from here). What they do ship are the live tests of the dynamic client and its
discovery (``kubernetes/dynamic/test_client.py`` and ``test_discovery.py``, the asyncio copies
in ``kubernetes/aio/dynamic/`` and ``kubernetes_asyncio/dynamic/``), which import
``<package>.e2e_test.base`` for their configuration; :mod:`._e2e_base` provides that module.
A suite's selection is every test module of the distribution that imports that base, less the
tests needing a kubelet, exec, attach or port-forward (:data:`DESELECT`), the same on both
servers. :func:`compare` sets the two runs side by side: a test that passes on the real server
and not on the emulator is a regression and fails the run; tests failing on both are listed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .build import Unavailable

REPO_ROOT = Path(__file__).resolve().parents[3]
DESELECT = ("exec", "attach", "port_forward", "portforward", "kubelet", "pod_log")
"""Keywords of tests that need a kubelet, exec, attach or port-forward (``-k 'not ...'``)."""
_IMPORTS_BASE = re.compile(r"^from [\w.]+\.e2e_test import base$", re.MULTILINE)


@attrs.frozen
class Suite:
    """One client's live tests: its PyPI distribution at a pinned version."""

    name: str
    distribution: str
    version: str


SUITES: tuple[Suite, ...] = (
    Suite(name="kubernetes", distribution="kubernetes", version="37.0.3"),
    Suite(name="kubernetes_asyncio", distribution="kubernetes_asyncio", version="36.1.0"),
)
"""The official client and kubernetes_asyncio, pinned to the versions CRE installs."""


def cache_root() -> Path:
    override = os.environ.get("CRE_CLIENTSUITES_CACHE")
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "cre" / "clientsuites"


def fetch(suite: Suite, *, cache: Path | None = None) -> Path:
    """The unpacked source distribution of ``suite`` (downloaded once with pip); raises
    :class:`~.build.Unavailable` when PyPI cannot be reached."""
    cache = cache or cache_root()
    tree = cache / f"{suite.distribution}-{suite.version}"
    if (tree / "PKG-INFO").is_file():
        return tree
    cache.mkdir(parents=True, exist_ok=True)
    archive = _archive(cache, suite)
    if archive is None:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
             "--disable-pip-version-check", "-d", str(cache),
             f"{suite.distribution}=={suite.version}"],
            capture_output=True, text=True, timeout=600, check=False)
        archive = _archive(cache, suite)
        if proc.returncode != 0 or archive is None:
            raise Unavailable(f"pip could not download the {suite.distribution}=={suite.version} "
                              f"source distribution: {proc.stderr.strip()[-400:]}")
    with tarfile.open(archive) as tar, tempfile.TemporaryDirectory(dir=cache) as tmp:
        tar.extractall(tmp, filter="data")
        (top,) = Path(tmp).iterdir()
        try:
            top.rename(tree)
        except OSError:  # another process unpacked it first
            if not (tree / "PKG-INFO").is_file():
                raise
    return tree


def _archive(cache: Path, suite: Suite) -> Path | None:
    names = {suite.distribution, suite.distribution.replace("-", "_"),
             suite.distribution.replace("_", "-")}
    for name in names:
        path = cache / f"{name}-{suite.version}.tar.gz"
        if path.is_file():
            return path
    return None


def selection(tree: Path) -> list[str]:
    """The live test modules of an unpacked distribution: those importing ``e2e_test.base``,
    as paths relative to ``tree``."""
    found = []
    for path in sorted(tree.rglob("*.py")):
        name = path.name
        if (name.startswith("test_") or name.endswith("_test.py")) and \
                _IMPORTS_BASE.search(path.read_text(encoding="utf-8", errors="replace")):
            found.append(str(path.relative_to(tree)))
    return found


@attrs.frozen
class SuiteRun:
    """The outcome of every selected test of one suite on one server: ``passed``,
    ``failed`` (failure or error) or ``skipped``, with the first line of the failure."""

    outcomes: Mapping[str, str]
    messages: Mapping[str, str]


def run(tree: Path, kubeconfig: Path, *, timeout: float = 900.0) -> SuiteRun:
    """Run the suite unpacked in ``tree`` against the server of ``kubeconfig``."""
    files = selection(tree)
    if not files:
        raise ValueError(f"{tree.name}: no test module imports e2e_test.base")
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        env = {**os.environ, "CRE_CLIENTSUITE_KUBECONFIG": str(kubeconfig),
               "PYTHONPATH": os.pathsep.join([str(tree), str(REPO_ROOT)]),
               "PYTHONDONTWRITEBYTECODE": "1"}
        subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "cre.testing.controlplane._e2e_base",
             "-p", "no:cacheprovider", "-q", "-o", "addopts=", "--rootdir", str(tree),
             "--junitxml", str(report), "-k", "not (" + " or ".join(DESELECT) + ")", *files],
            cwd=tree, env=env, capture_output=True, timeout=timeout, check=False)
        if not report.is_file():
            raise RuntimeError(f"{tree.name}: pytest wrote no report")
        return parse_junit(report.read_text(encoding="utf-8"))


def parse_junit(xml: str) -> SuiteRun:
    """Outcomes by ``module.Class::test`` from a pytest JUnit XML report (a test with an
    error in setup or teardown counts as failed)."""
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    for case in ET.fromstring(xml).iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            outcomes[test_id] = "failed"
            text = (bad.get("message") or bad.text or "").strip()
            messages[test_id] = text.splitlines()[0][:300] if text else ""
        elif skipped is not None:
            outcomes[test_id] = "skipped"
            messages[test_id] = (skipped.get("message") or "")[:300]
        else:
            outcomes[test_id] = "passed"
    return SuiteRun(outcomes=outcomes, messages=messages)


@attrs.frozen
class SuiteOutcome:
    """One suite on both servers: ``regressions`` pass on the real server and not on the
    emulator (they fail the run); ``both_fail`` fail on both; ``emulator_only_passes`` pass
    on the emulator alone (listed: the emulator is more lenient there)."""

    suite: str
    emulator: SuiteRun
    real: SuiteRun
    modules: tuple[str, ...] = ()
    """The test modules run (the distribution's live tests)."""

    def _ids(self, want_real: str, want_emulator: set[str]) -> list[str]:
        return sorted(t for t, o in self.real.outcomes.items()
                      if o == want_real and self.emulator.outcomes.get(t, "missing")
                      in want_emulator)

    @property
    def regressions(self) -> list[str]:
        return self._ids("passed", {"failed", "skipped", "missing"})

    @property
    def both_fail(self) -> list[str]:
        return self._ids("failed", {"failed"})

    @property
    def emulator_only_passes(self) -> list[str]:
        return self._ids("failed", {"passed"})

    def table(self) -> dict[str, Any]:
        real = list(self.real.outcomes.values())
        return {
            "modules": list(self.modules),
            "tests": len(self.real.outcomes),
            "passed_on_real": real.count("passed"),
            "passed_on_emulator": list(self.emulator.outcomes.values()).count("passed"),
            "regressions": {t: self.emulator.messages.get(t, "missing on the emulator")
                            for t in self.regressions},
            "fail_on_both": {t: self.real.messages.get(t, "") for t in self.both_fail},
            "pass_on_emulator_only": {t: self.real.messages.get(t, "")
                                      for t in self.emulator_only_passes},
        }


def compare(suite: str, emulator: SuiteRun, real: SuiteRun, *,
            modules: Sequence[str] = ()) -> SuiteOutcome:
    return SuiteOutcome(suite=suite, emulator=emulator, real=real, modules=tuple(modules))


def run_suites(emulator: Path, real: Path, *, suites: Sequence[Suite] = SUITES
               ) -> list[SuiteOutcome]:
    """Every suite on the emulator, then on the real server (kubeconfig paths), compared."""
    outcomes = []
    for suite in suites:
        tree = fetch(suite)
        outcomes.append(compare(f"{suite.distribution}=={suite.version}", run(tree, emulator),
                                run(tree, real), modules=selection(tree)))
    return outcomes
