"""Fixtures for the informer-layer tests: the anyio backend and a controllable clock."""

from __future__ import annotations

import pytest
from kube_fakes import FakeClock


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
