"""The worked examples in examples/ pass their own golden suites, as a user would run them.

Each example is a small installable project (``make venv`` installs them editable); its suite
runs in a separate pytest process with the example as rootdir, so the plugin reads the
example's own ``[tool.cre.golden]``, exactly as in a user's checkout.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {"configmap-fanout": "fanout", "kopf-tenants": "tenants"}


@pytest.mark.parametrize(("example", "package"), sorted(EXAMPLES.items()))
def test_example_golden_suite_passes(example: str, package: str) -> None:
    """Every golden case of the example matches its reviewed golden."""
    folder = ROOT / "examples" / example
    if importlib.util.find_spec(package) is None:
        pytest.fail(f"example {example} is not installed: pip install -e {folder} "
                    f"(make venv does)", pytrace=False)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
         str(folder), "-c", str(folder / "pyproject.toml")],
        cwd=folder, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    cases = list((folder / "integration" / "cases").glob("*/*/input.yaml"))
    assert f"{len(cases)} passed" in result.stdout, result.stdout[-2000:]
