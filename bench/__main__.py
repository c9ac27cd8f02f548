"""``python -m bench <name> [args...]``: run ``bench.<name>.main()`` (JSON on stdout)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def available() -> list[str]:
    folder = str(Path(__file__).parent)
    return sorted(m.name for m in pkgutil.iter_modules([folder]) if not m.name.startswith("_"))


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: python -m bench <{'|'.join(available())}> [args...]", file=sys.stderr)
        return 0 if argv else 2
    name = argv[0]
    if name not in available():
        print(f"error: unknown benchmark {name!r}; available: {', '.join(available())}",
              file=sys.stderr)
        return 2
    module = importlib.import_module(f"bench.{name}")
    sys.argv = [f"bench {name}", *argv[1:]]
    module.main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
