"""``python -m cre.testing.apiserver``: kubeconfig when ready, HTTPS, clean SIGTERM exit."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
from pathlib import Path

import anyio
import pytest

pytestmark = pytest.mark.anyio


async def _wait_for(path: Path, proc: asyncio.subprocess.Process) -> None:
    assert proc.stderr is not None
    line = await proc.stderr.readline()  # the server announces itself once serving
    assert b"serving" in line, line
    assert await anyio.Path(path).exists()


@pytest.mark.parametrize("tls", [False, True])
async def test_cli_serves_kubectl_until_sigterm(tmp_path: Path, tls: bool) -> None:
    """The CLI writes a kubeconfig kubectl can use (HTTP or HTTPS) and exits 0 on SIGTERM."""
    kc = tmp_path / "kubeconfig"
    args = [sys.executable, "-m", "cre.testing.apiserver", "--port", "0",
            "--write-kubeconfig", str(kc), "--kubernetes-version", "1.34"]
    if tls:
        args.append("--tls")
    proc = await asyncio.create_subprocess_exec(*args, stderr=asyncio.subprocess.PIPE)
    try:
        await _wait_for(kc, proc)
        kubectl = shutil.which("kubectl")
        assert kubectl is not None
        env = {**os.environ, "KUBECONFIG": str(kc), "HOME": str(tmp_path)}
        k = await asyncio.create_subprocess_exec(kubectl, "get", "namespaces", "-o", "name",
                                                 env=env, stdout=asyncio.subprocess.PIPE)
        out, _ = await k.communicate()
        assert "namespace/default" in out.decode().split()
        assert ("https://" in await anyio.Path(kc).read_text()) is tls
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await proc.wait()
    assert code == 0


async def test_cli_missing_crd_folder_fails(tmp_path: Path) -> None:
    """A --crds path that does not exist is a usage error naming the path."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cre.testing.apiserver", "--write-kubeconfig",
        str(tmp_path / "kc"), "--crds", str(tmp_path / "nope"), stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    assert proc.returncode == 2
    assert "nope: no such file or directory" in err.decode()
