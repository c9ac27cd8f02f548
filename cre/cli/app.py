"""The ``cre`` command line (click), assembled and run: commands, flags, help with examples,
exit codes.

:mod:`cre.cli.root` defines the root group and its own commands; the command groups defined in
their own modules register themselves on it when imported here (the kind-aware ``status``,
``report`` and ``render`` replace root's). Every bad input comes back as
:class:`~cre.cli.exitcodes.CliError` and :func:`main` prints it as one line on stderr
(``cre: <what and where>``) and exits with its code. click's own usage errors are printed the
same way (one line, exit 2); a bug prints one line too, with the traceback behind
``CRE_DEBUG=1``. Installed as ``cre`` and as the kubectl plugin ``kubectl-cre``.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

import click

from cre.cli import clustercmd, kindcmd, rendercmd, runcmd  # noqa: F401  (they register on cli)
from cre.cli.exitcodes import CliError, ExitCode
from cre.cli.root import COMPLETE_VAR, cli

__all__ = ["COMPLETE_VAR", "cli", "main"]


def _prog_name(argv0: str) -> str:
    return "kubectl cre" if Path(argv0).name.startswith("kubectl-cre") else "cre"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (never raises for bad input)."""
    prog = _prog_name(sys.argv[0] if sys.argv else "cre")
    args = list(sys.argv[1:] if argv is None else argv)
    if os.environ.get(COMPLETE_VAR):  # shell completion asks; click answers and exits
        cli.main(args=args, prog_name=prog, complete_var=COMPLETE_VAR)
        return ExitCode.OK
    try:
        result = cli.main(args=args, prog_name=prog, standalone_mode=False)
    except CliError as exc:
        click.echo(f"{prog}: {exc.message}", err=True)
        return exc.code
    except click.exceptions.Exit as exc:  # --help, --version
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo(f"{prog}: interrupted", err=True)
        return ExitCode.INTERRUPTED
    except click.ClickException as exc:
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else prog
        message = " ".join(exc.format_message().split())
        click.echo(f"{where}: {message} (see '{where} --help')", err=True)
        return ExitCode.USAGE
    except KeyboardInterrupt:
        click.echo(f"{prog}: interrupted", err=True)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:  # `cre catalog list | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.OK
    except Exception as exc:  # a bug: one line, the traceback on request
        if os.environ.get("CRE_DEBUG"):
            traceback.print_exc()
        click.echo(f"{prog}: internal error: {type(exc).__name__}: {exc} "
                   "(CRE_DEBUG=1 shows the traceback)", err=True)
        return ExitCode.INTERNAL
    return int(result) if isinstance(result, int) else ExitCode.OK

