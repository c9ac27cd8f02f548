"""The emulator and a real control plane side by side, for the differential and the CLI.

:func:`pair` starts both (the emulator as its own process, at the real server's minor
version, with the same CRDs) and yields their :class:`~.differential.Target`; the real plane
runs the garbage collector and namespace controllers so owner-reference collection and
namespace deletion happen as on a cluster. :func:`differential` runs every script and returns
the table the design record reports.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

from cre.testing.procs import Stack

from . import plane
from .allowlist import ALLOWED
from .differential import Target, run_all, summary
from .scripts import SCRIPTS

DIFF_CONTROLLERS = "garbagecollector,namespace"


@contextlib.contextmanager
def pair() -> Iterator[tuple[Target, Target]]:
    """(emulator, real) targets, both stopped on exit."""
    with plane.start() as real, Stack() as stack:
        real.start_controller_manager(controllers=DIFF_CONTROLLERS)
        minor = ".".join(real.binaries.versions.kubernetes.lstrip("v").split(".")[:2])
        stack.start_emulator(crds=plane.default_crds(), args=["--kubernetes-version", minor])
        yield (Target.from_kubeconfig("emulator", stack.kubeconfig),
               Target.from_kubeconfig("real", real.kubeconfig, etcd=real.etcd_url))


def differential(*, only: Sequence[str] | None = None, details: bool = False) -> dict[str, Any]:
    scripts = [s for s in SCRIPTS if not only or s.name in only]
    with pair() as (emulator, real):
        outcomes = asyncio.run(run_all(emulator, real, scripts, ALLOWED))
    table = summary(outcomes)
    table["verdicts"] = {o.script: o.verdict for o in outcomes}
    if details:
        table["differences"] = {o.script: [attrs.asdict(d) for d in o.differences]
                                for o in outcomes if o.differences}
    return table
