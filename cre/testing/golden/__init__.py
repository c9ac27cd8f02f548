"""Golden-file harness: run a case folder, normalise, compare with ``goldens/``.

Runners are registered by case ``type`` in ``runners.RUNNERS``; ``render`` ships here.
"""

from cre.testing.golden.harness import CaseError, compare, golden_path, load_input, run_case
from cre.testing.golden.normalise import normalise, to_json
from cre.testing.golden.runners import RUNNERS, Runner, UnknownRunnerError, get_runner

__all__ = [
    "RUNNERS",
    "CaseError",
    "Runner",
    "UnknownRunnerError",
    "compare",
    "get_runner",
    "golden_path",
    "load_input",
    "normalise",
    "run_case",
    "to_json",
]
