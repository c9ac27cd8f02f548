"""Exit codes of the ``cre`` command, and the one error type that carries them.

A person or a script reading ``$?`` must tell a bad flag from a missing file, an unknown
catalog entry, a cluster that cannot be reached and a Certification that does not exist,
without parsing text. Every command raises :class:`CliError` for bad input; ``cre.cli.app``
prints its message as one line on stderr and exits with its code, never with a traceback.
The user guide's table (docs/guide/cli.md) lists the same codes.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """What ``cre`` exits with."""

    OK = 0
    # `cre validate` found at least one problem (each printed as file:line: path: message).
    PROBLEMS = 1
    # A flag or argument is missing, unknown or malformed (click's own usage errors too).
    USAGE = 2
    # An input file is missing or unreadable, or is not valid YAML/JSON.
    INPUT = 3
    # The catalog does not have the entry, platform, architecture or parameter asked for.
    CATALOG = 4
    # No API server could be reached: no kubeconfig, an unknown context, connection refused.
    UNREACHABLE = 5
    # The Certification (or the CRD serving it) does not exist.
    NOT_FOUND = 6
    # The API server refused the request (credentials, RBAC, any other error status).
    API = 7
    # The CLI's optional dependencies are missing: pip install 'cre[cli]'.
    MISSING_EXTRA = 8
    # `--exit-code`: a Certification's verdict is Failed.
    VERDICT_FAILED = 9
    # `--exit-code`: not certified: the verdict is Incomplete, or the run has not finished.
    NOT_CERTIFIED = 10
    # A bug in cre itself (the message says how to see the traceback: CRE_DEBUG=1).
    INTERNAL = 70
    # Interrupted (Ctrl-C), as shells report SIGINT.
    INTERRUPTED = 130


class CliError(Exception):
    """Bad input: one line saying what and where, and the exit code it maps to."""

    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
