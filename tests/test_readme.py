"""The README's "Use CRE as a library" examples run verbatim, so the README cannot rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Use CRE as a library"


def library_examples(readme: str) -> list[str]:
    """The ```python blocks of the README's library section, in order."""
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    body = readme[start:end if end != -1 else None]
    return re.findall(r"^```python\n(.*?)^```$", body, flags=re.DOTALL | re.MULTILINE)


EXAMPLES = library_examples((ROOT / "README.md").read_text())


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
    """The block runs as a script outside the source tree and prints what the README implies."""
    script = tmp_path / "example.py"
    script.write_text(EXAMPLES[index])
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.endswith(expected), result.stdout


def test_the_golden_walkthrough_case_is_the_example_case() -> None:
    """The README's controller case is, verbatim, the first case of examples/configmap-fanout
    (whose golden suite tests/test_examples.py runs)."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Golden-file testing for your controller"):]
    block = re.search(r"^```yaml\n(.*?)^```$", section, flags=re.DOTALL | re.MULTILINE)
    assert block is not None
    case = (ROOT / "examples" / "configmap-fanout" / "integration" / "cases" / "fanout"
            / "copies-to-targets" / "input.yaml")
    assert case.read_text() == block.group(1)
    walkthrough = section[:section.index("\n## ", 5)]
    assert len(walkthrough.strip().splitlines()) <= 30
