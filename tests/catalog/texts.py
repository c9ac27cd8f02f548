"""A minimal valid catalog as text, for error-path tests that break one thing at a time."""

from __future__ import annotations

GPU = """\
architectures:
  h100: {gpusPerNode: 8, mlnxPerNode: 8}
  gb200: {gpusPerNode: 4, mlnxPerNode: 8}
"""
PLATFORM = """\
name: aws
description: test platform
architectures:
  h100: {}
  gb200: {mlnxPerNode: 2}
fabric:
- arch: h100
  spec:
    env: {FABRIC: efa, SHARED: fabric}
"""
ENTRY = """\
description: test entry
runtime: mpi
fabric: true
parameters:
  size: {default: 16G, description: max bytes}
  iters: {default: 5, description: iterations}
spec:
  image: img:1
  timeoutSeconds: 60
  mpirun: {path: /bin/mpirun}
  command: [perf, -e, "${size}", -n, "${iters}", -g, "${gpusPerNode}"]
  env: {SHARED: entry, MNNVL: "${mnnvl}"}
when:
- platform: aws
  arch: h100
  spec:
    env: {SHARED: when0}
- platform: aws
  spec:
    env: {SHARED: when1}
  parameters: {iters: 7}
"""


def files(**overrides: str | None) -> dict[str, str]:
    """The minimal catalog, with some files replaced (value) or removed (None)."""
    base = {
        "_lib/gpu-defaults.yaml": GPU,
        "_lib/platforms/aws.yaml": PLATFORM,
        "comm/test.yaml": ENTRY,
    }
    for key, value in overrides.items():
        path = {
            "gpu": "_lib/gpu-defaults.yaml",
            "platform": "_lib/platforms/aws.yaml",
            "entry": "comm/test.yaml",
        }.get(key, key)
        if value is None:
            base.pop(path, None)
        else:
            base[path] = value
    return base
