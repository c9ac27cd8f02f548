"""Log reads are bounded whatever the server sends, and what is kept is sanitized."""

from __future__ import annotations

from pathlib import Path

import pytest

from cre.core.common.plan import LIMIT_BYTES, ReadLog
from cre.core.job.logtext import FORBIDDEN
from cre.kube.client import NAMESPACES, PODS, KubeClient
from cre.kube.pods import read_pod_log
from cre.testing.apiserver import serve
from cre.testing.apiserver.emulator import write_kubeconfig
from cre.testing.logserver import flooding_log_server

pytestmark = pytest.mark.anyio


def _kubeconfig(url: str, tmp: Path) -> str:
    path = tmp / "kubeconfig"
    write_kubeconfig(path, url=url, ca_path=None)
    return str(path)


async def test_a_server_ignoring_limit_bytes_is_cut_at_the_limit(tmp_path: Path) -> None:
    sent = [0]
    chunk = "é".encode() * (64 * 1024)  # 128 KiB, two-byte characters: a cut splits one
    async with flooding_log_server(chunk, 2048, sent) as url:  # 256 MiB offered
        client = await KubeClient.from_kubeconfig(_kubeconfig(url, tmp_path))
        try:
            text = await client.read_text("/api/v1/namespaces/n/pods/p/log",
                                          limit_bytes=100_001)
            assert len(text.encode()) == 100_000  # the split character dropped, not replaced
            assert set(text) == {"é"}
            tail = await read_pod_log(client, ReadLog(namespace="n", pod="p",
                                                         container="c"))
            assert tail.error is None and len(tail.text.encode()) == LIMIT_BYTES
        finally:
            await client.close()
    assert sent[0] < 64 * 1024 * 1024  # the stream was closed, not drained


async def test_emulator_log_with_escapes_and_no_newline_is_kept_clean_and_bounded() -> None:
    async with serve() as emu:
        client = await KubeClient.from_kubeconfig(str(emu.kubeconfig_path))
        try:
            await client.create(NAMESPACES, {"metadata": {"name": "n"}})
            await client.create(PODS, {"metadata": {"name": "p"}, "spec": {
                "nodeName": "node-0", "containers": [{"name": "c", "image": "x"}]}},
                namespace="n")
            body = "\x1b]0;pwned\x07\x1b[31m" + "#" * (3 * 1024 * 1024) + "\rEND\x00"
            emu.append_log("n", "p", "c", body)
            tail = await read_pod_log(client, ReadLog(namespace="n", pod="p", container="c"))
            assert tail.error is None
            assert len(tail.text.encode()) <= LIMIT_BYTES
            assert not FORBIDDEN & set(tail.text)
            # The API server keeps the first limitBytes of a line: the head, not "END".
            assert tail.text.startswith("#")
        finally:
            await client.close()
