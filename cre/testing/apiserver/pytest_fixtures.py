"""pytest fixtures for the API emulator (re-exported by ``cre.testing.pytest_plugin``).

``kube_emulator`` is an async fixture for anyio's pytest plugin: it starts an emulator with the
upstream Trainer and JobSet CRDs (and CRE's own ``deploy/crds`` when present) and yields the
:class:`~cre.testing.apiserver.Emulator`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cre._vendor import crds as upstream_crds

from .emulator import Emulator, serve


def default_crd_sources() -> list[Path]:
    """The vendored upstream CRDs (latest Trainer and JobSet) plus CRE's own ``deploy/crds``.

    ``CRE_UPSTREAM_CRDS`` may name another folder holding ``trainer-latest``/``jobset-latest``.
    """
    root = Path(__file__).resolve().parents[3]
    override = os.environ.get("CRE_UPSTREAM_CRDS")
    if override:
        out = [Path(override) / "trainer-latest", Path(override) / "jobset-latest"]
    else:
        out = list(upstream_crds.LATEST)
    out = [p for p in out if p.exists()]
    own = root / "deploy" / "crds"
    if own.is_dir() and any(own.glob("*.yaml")):
        out.append(own)
    return out


@pytest.fixture
async def kube_emulator() -> AsyncIterator[Emulator]:
    """A running emulator with the upstream CRDs and CRE's CRDs installed."""
    async with serve(crds=default_crd_sources()) as emu:
        yield emu
