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
