"""Exit codes and the start-up error that carries one.

A crash-looping pod shows only its exit code and last log line, so each class of start-up failure
gets its own code and a message that says what to fix. The codes are part of the CLI contract
(documented in docs/design/008-manager.md and docs/guide/manager.md).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    CRASHED = 1  # a component failed at run time (logged with its traceback)
    BAD_CONFIG = 2  # a flag or environment value is invalid (argparse uses 2 as well)
    API_UNREACHABLE = 3
    CREDENTIALS_REFUSED = 4  # 401 / 403 from the API server
    CRDS_MISSING = 5
    CATALOG_INVALID = 6
    LEADERSHIP_LOST = 7  # as controller-runtime: exit so Kubernetes restarts us clean


class StartupError(Exception):
    """A failure before the manager starts work; ``code`` is the process exit code."""

    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ConfigError(StartupError):
    """An invalid flag or environment value; the message names the flag."""

    def __init__(self, flag: str, problem: str, *, env: str | None = None) -> None:
        source = f" (from ${env})" if env else ""
        super().__init__(ExitCode.BAD_CONFIG, f"invalid {flag}{source}: {problem}")
        self.flag = flag
