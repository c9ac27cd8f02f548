"""``python -m cre.render``: print the Job and its dependencies for one catalog entry.

The command-line edge of the pure renderer: it loads the shipped catalog (file reads) and
prints multi-document YAML; all decisions stay in ``cre.render.job``. People use ``cre render``
(``cre.cli``), which prints the same bytes for the same inputs; this stays as a thin alias.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ruamel.yaml import YAML

from cre.catalog import CatalogError, load_catalog
from cre.render.job import render_job_manifest
from cre.render.options import (
    DEFAULT_QUEUE,
    DEFAULT_WORKER_BACKOFF_LIMIT,
    GangScheduler,
    RenderError,
    RenderOptions,
)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags, render, print; exit 2 with a message on bad input."""
    parser = argparse.ArgumentParser(prog="python -m cre.render", description=__doc__)
    parser.add_argument("--entry", required=True, help="e.g. communication/nccl-all-reduce")
    parser.add_argument("--platform", required=True)
    parser.add_argument("--arch", required=True)
    parser.add_argument("--nodes", required=True, help="comma-separated node names")
    parser.add_argument("--job-name", required=True)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--kai", action="store_true", help="schedule with the KAI gang scheduler")
    parser.add_argument("--queue", default=DEFAULT_QUEUE, help="gang queue (with --kai)")
    parser.add_argument("--image", help="replace the workload image")
    parser.add_argument("--worker-backoff-limit", type=int, default=DEFAULT_WORKER_BACKOFF_LIMIT)
    args = parser.parse_args(argv)
    nodes = [n for n in args.nodes.split(",") if n]
    try:
        options = RenderOptions(
            image=args.image,
            gang_scheduler=GangScheduler(queue=args.queue) if args.kai else None,
            worker_backoff_limit=args.worker_backoff_limit,
        )
        docs = render_job_manifest(
            job_name=args.job_name,
            namespace=args.namespace,
            catalog=load_catalog(),
            entry=args.entry,
            platform=args.platform,
            arch=args.arch,
            nodes=nodes,
            options=options,
        )
    except (CatalogError, RenderError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.dump_all(docs, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
