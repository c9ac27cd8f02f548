"""Fixtures for the manager tests: the anyio backend and a throw-away kubeconfig."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    """A syntactically valid kubeconfig with one context, ``emu``, pointing nowhere useful."""
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: not-a-secret}}]\n"
        "contexts: [{name: emu, context: {cluster: c, user: u}}]\n"
        "current-context: emu\n")
    return path
