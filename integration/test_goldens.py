"""Every golden case under integration/cases/<suite>/<case>/ matches goldens/<suite>/<case>.json.

``pytest --update-goldens`` (``make goldens``) rewrites the goldens instead; review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cre.testing.golden import compare

CASES = sorted(p.parent for p in (Path(__file__).parent / "cases").glob("*/*/input.yaml"))


@pytest.mark.parametrize("case_dir", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden(case_dir: Path, request: pytest.FixtureRequest) -> None:
    """The case's normalised output equals its reviewed golden file."""
    diff = compare(case_dir, update=bool(request.config.getoption("--update-goldens")))
    if diff is not None:
        pytest.fail(f"golden mismatch for {case_dir.name}:\n{diff}", pytrace=False)
