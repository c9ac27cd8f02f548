"""``python -m cre.testing.golden run CASE_DIR``: print one case's normalised JSON."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cre.testing.golden.harness import run_case
from cre.testing.golden.normalise import to_json


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; the JSON goes to stdout exactly as the golden would hold it."""
    parser = argparse.ArgumentParser(prog="python -m cre.testing.golden")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one case folder and print its normalised output")
    run.add_argument("case_dir", type=Path)
    args = parser.parse_args(argv)
    sys.stdout.write(to_json(run_case(args.case_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
