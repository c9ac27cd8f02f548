"""The console scripts ``cre`` and ``kubectl-cre``: start the CLI, or say which extra is missing.

The scripts are installed with every ``pip install cre``, but the command's libraries (click,
rich, jsonschema, kubernetes-validate) come with the ``cli`` extra. Without them the command
prints one line saying what to install and exits 8 instead of a ModuleNotFoundError traceback.
"""

from __future__ import annotations

import sys

CLI_LIBRARIES = frozenset({"click", "rich", "jsonschema", "kubernetes_validate", "referencing"})


def main() -> int:
    """Run ``cre``; exit code 8 with one line when the ``cli`` extra is not installed."""
    try:
        from cre.cli.app import main as run
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in CLI_LIBRARIES:
            raise
        print(f"cre: the command needs the cli extra: pip install 'cre[cli]' ({exc.name} is "
              "not installed)", file=sys.stderr)
        return 8
    return run()


if __name__ == "__main__":
    sys.exit(main())


def kubectl_complete() -> int:
    """``kubectl_complete-cre``: what kubectl (1.26+) runs to complete ``kubectl cre ...``.

    kubectl passes the words after ``cre`` (the last one being completed) and reads cobra's
    protocol back: one candidate per line, then ``:4`` (no file completion).
    """
    try:
        from click.shell_completion import ShellComplete

        from cre.cli.app import COMPLETE_VAR, cli
    except ModuleNotFoundError:
        print(":4")
        return 0
    words = sys.argv[1:]
    incomplete = words[-1] if words else ""
    complete = ShellComplete(cli, {}, "kubectl cre", COMPLETE_VAR)
    for item in complete.get_completions(words[:-1], incomplete):
        print(item.value)
    print(":4")
    return 0
