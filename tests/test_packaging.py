"""What a library user of CRE relies on: typed package, one version, a small pure front door."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap
from pathlib import Path

import cre
import cre.core

ROOT = Path(__file__).resolve().parents[1]

USER = """\
import cre
from cre.core import Observation, Plan, pod_view, reconcile_job

version: str = cre.__version__
plan: Plan[cre.JobStatus] = reconcile_job(cre.Job.__new__(cre.Job), Observation(), now=None)
"""


def _mypy_strict(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    """mypy --strict on a user's module outside the source tree (CRE found as installed)."""
    (tmp_path / "user.py").write_text(textwrap.dedent(source))
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         "user.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)


def test_a_strict_mypy_user_sees_cres_annotations(tmp_path: Path) -> None:
    """Thanks to py.typed, mypy analyses cre (no "missing library stubs") and checks calls."""
    result = _mypy_strict(tmp_path, USER)
    out = result.stdout + result.stderr
    assert "py.typed" not in out and "import-untyped" not in out, out
    # now=None is the one deliberate error: it is found only if cre's signature was read.
    assert 'Argument "now" to "reconcile_job" has incompatible type "None"' in out, out
    assert "Found 1 error in 1 file" in out, out


def test_the_version_lives_in_one_place() -> None:
    """The installed metadata's version is cre.__version__, and pyproject declares it dynamic."""
    assert importlib.metadata.version("cre") == cre.__version__
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and '\nversion = "' not in pyproject


def test_importing_cre_does_no_io_setup() -> None:
    """`import cre` loads the pure layers only: no HTTP client, event loop or metrics registry."""
    code = ("import sys, cre; print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'aiohttp', 'anyio', 'kubernetes_asyncio', 'prometheus_client'}) + "
            "sorted(m for m in sys.modules if m.startswith(('cre.kube', 'cre.controller'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.strip()
    assert out == "[]"


def test_the_front_doors_export_what_they_list() -> None:
    """Every name in cre.__all__ and cre.core.__all__ resolves; the core exports its views."""
    for module in (cre, cre.core):
        missing = [name for name in module.__all__ if not hasattr(module, name)]
        assert not missing, (module.__name__, missing)
    assert {"PodView", "NodeView", "TrainJobView", "pod_view", "node_view", "trainjob_view",
            "Observation", "Plan", "reconcile_job"} <= set(cre.core.__all__)


def test_the_pytest_plugin_names_the_extra_when_the_test_kit_cannot_import(
        tmp_path: Path) -> None:
    """Without the testing extra, pytest still starts and the fixtures say what to install."""
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""\
        def test_uses_the_emulator(kube_emulator):
            pass

        def test_unrelated():
            pass
        """))
    # sys.modules[name] = None makes `import name` raise ModuleNotFoundError, as if absent.
    code = ("import sys; sys.modules['orjson'] = None; import pytest; "
            "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'test_user.py']))")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, check=False)
    out = result.stdout + result.stderr
    assert "1 passed, 1 error" in out, out  # the fixture errors at set-up
    assert "the kube_emulator fixture needs CRE's test kit dependencies: " \
           "pip install 'cre[testing]' (orjson is not installed)" in out, out
