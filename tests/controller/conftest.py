"""Fixtures for the Job controller tests: one emulator per module, a controller per test.

Starting the emulator (and loading the Trainer and JobSet CRDs) dominates the cost of these
tests, so a module shares one; each test gets its own namespace and its own JobController.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import pytest

from cre.testing.apiserver import Emulator, serve
from cre.testing.apiserver.pytest_fixtures import default_crd_sources
from cre.testing.jobharness import JobHarness, running_harness

_namespaces = itertools.count()


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def shared_emulator() -> AsyncIterator[Emulator]:
    """One API emulator with the upstream and CRE CRDs for the whole module."""
    async with serve(crds=default_crd_sources()) as emu:
        yield emu


@pytest.fixture
async def job_harness(shared_emulator: Emulator) -> AsyncIterator[JobHarness]:
    """A JobController running against the emulator in a fresh namespace."""
    async with running_harness(shared_emulator, namespace=f"ns-{next(_namespaces)}") as harness:
        yield harness
