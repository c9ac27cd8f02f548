"""Golden-file testing: run a case folder, normalise its output, compare it with a reviewed file.

The pieces: a project's layout and defaults (``[tool.cre.golden]``, :mod:`.config`), runners
picked by a case's ``type`` (entry points and :func:`golden_runner`, :mod:`.runners`), the
normaliser (:mod:`.normalise`), the comparison (:mod:`.harness`, :mod:`.diff`) and the pytest
plugin that collects cases (:mod:`.plugin`). The case format is documented in
``docs/reference/golden-cases.md``.
"""

from cre.testing.golden.config import ConfigError, GoldenConfig, config_for_case, find_config
from cre.testing.golden.harness import (
    CaseError,
    Outcome,
    Status,
    check,
    compare,
    golden_path,
    load_input,
    run_case,
)
from cre.testing.golden.normalise import (
    CRE_LEGACY,
    Mode,
    Normalisation,
    NormaliseError,
    SortRule,
    normalise,
    to_json,
)
from cre.testing.golden.runners import (
    ENTRY_POINT_GROUP,
    Runner,
    RunnerConflictError,
    UnknownRunnerError,
    available_runners,
    get_runner,
    golden_runner,
    register_runner,
)

__all__ = [
    "CRE_LEGACY",
    "ENTRY_POINT_GROUP",
    "CaseError",
    "ConfigError",
    "GoldenConfig",
    "Mode",
    "Normalisation",
    "NormaliseError",
    "Outcome",
    "Runner",
    "RunnerConflictError",
    "SortRule",
    "Status",
    "UnknownRunnerError",
    "available_runners",
    "check",
    "compare",
    "config_for_case",
    "find_config",
    "get_runner",
    "golden_path",
    "golden_runner",
    "load_input",
    "normalise",
    "register_runner",
    "run_case",
    "to_json",
]
