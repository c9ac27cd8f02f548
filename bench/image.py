"""Image benchmark: the cre-manager image's size and its start-to-ready time as deployed.

A cluster pulls the image on every node that runs the manager and restarts it on every
hand-over, so both its size and how soon it is ready matter. Builds the image if it is not up
to date (``make image``; cached by its inputs), then reports:

* the OCI archive ``dist/cre-manager-<version>.oci.tar`` (gzip-compressed layers, what a
  registry stores and a node pulls) and the uncompressed size of its layers (what the node
  unpacks), per layer too;
* start-to-ready: runc starts the container as the Deployment does (read-only root, uid 65532,
  no capabilities; ``image.run``) against the API emulator, timed from the runtime's start to
  the first ``/readyz`` 200, ``--runs`` times (the root filesystem is prepared before the clock
  starts: on a node it is unpacked once per pull, not per start).

Targets (issue 17): < 150 MB compressed, ready < 3 s.
Usage: ``python -m bench image [--runs 3]``
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from cre.testing.procs import Stack, wait_until

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from image.build import archive_path, build_image, ensure_tools  # noqa: E402
from image.run import KUBECONFIG, PodContainer, deployment_args  # noqa: E402

COMPRESSED_TARGET_MB = 150.0
READY_TARGET_S = 3.0
MB = 1_000_000


def layer_sizes(archive: Path) -> list[dict[str, int]]:
    """Compressed and uncompressed size of each layer of an OCI archive (gzip layers)."""
    out = []
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        digest = index["manifests"][0]["digest"].split(":")[1]
        manifest = json.load(tar.extractfile(f"blobs/sha256/{digest}"))  # type: ignore[arg-type]
        for layer in manifest["layers"]:
            blob = tar.extractfile(f"blobs/sha256/{layer['digest'].split(':')[1]}")
            assert blob is not None
            size = 0
            with gzip.GzipFile(fileobj=blob) as stream:
                while chunk := stream.read(1 << 20):
                    size += len(chunk)
            out.append({"compressed": int(layer["size"]), "uncompressed": size})
    return out


def start_to_ready(ref: str, stack: Stack) -> float:
    pod = PodContainer(ref, workdir=stack.workdir, args=deployment_args(),
                       field_refs={"metadata.namespace": "cre-system",
                                   "metadata.name": "cre-manager-bench"},
                       files={KUBECONFIG: stack.kubeconfig})
    try:
        proc = pod.manager()
        wait_until(proc.ready, timeout=60, interval=0.01, what="the container to be ready",
                   alive=proc.check_alive)
        seconds = time.monotonic() - pod.started_at
        pod.kill("TERM")
        proc.wait(60)
        return seconds
    finally:
        pod.close()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench image")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    ensure_tools()
    started = time.monotonic()
    ref = build_image()
    archive = archive_path()
    layers = layer_sizes(archive)
    result: dict[str, Any] = {
        "benchmark": "image", "image": ref,
        "build_or_check_seconds": round(time.monotonic() - started, 1),
        "archive": str(archive.relative_to(REPO)),
        "compressed_mb": round(archive.stat().st_size / MB, 1),
        "uncompressed_mb": round(sum(x["uncompressed"] for x in layers) / MB, 1),
        "layers_mb": [{k: round(v / MB, 1) for k, v in x.items()} for x in layers],
    }
    with Stack() as stack:
        stack.start_emulator()
        stack.kubectl("apply", "-f", "-", stdin="apiVersion: v1\nkind: Namespace\n"
                      "metadata: {name: cre-system}\n")
        runs = [start_to_ready(ref, stack) for _ in range(args.runs)]
    result["ready_seconds"] = [round(s, 3) for s in runs]
    result["ready_seconds_median"] = round(statistics.median(runs), 3)
    result["targets"] = {"compressed_mb": COMPRESSED_TARGET_MB, "ready_seconds": READY_TARGET_S}
    result["meets_targets"] = (result["compressed_mb"] < COMPRESSED_TARGET_MB
                               and result["ready_seconds_median"] < READY_TARGET_S)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
