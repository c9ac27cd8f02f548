"""Command-line front of the manager (the process wiring lands with the manager issue)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from cre import __version__


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cre-manager", description="CRE manager")
    p.add_argument("--version", action="version", version=f"cre-manager {__version__}")
    p.add_argument("--kubeconfig", help="path to a kubeconfig (default: in-cluster config)")
    p.add_argument("--metrics-bind-address", default=":8080")
    p.add_argument("--health-probe-bind-address", default=":8081")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    print(f"cre-manager {__version__}: {vars(args)}")
    return 0
