"""``python -m cre.testing.clusterd``: the process behind ``cre cluster up``, kept running.

``cre cluster up`` must return to the shell while the cluster keeps running, as
``kind create cluster`` does, and ``cre cluster down`` must stop exactly what was started. The
``cre`` command may not import the test kit (import-linter layers), so it starts this module as
a detached process in a state directory; this module owns the stack there:

1. the API server: the emulator with every CRD the stack needs (JobSet, Trainer, CRE's own), or
   with ``--real`` a real etcd + kube-apiserver built from the Go modules
   (:mod:`cre.testing.controlplane`) with the same CRDs;
2. the simulated cluster (``--nodes`` nodes of ``--profile``), which also plays the JobSet and
   Trainer controllers, the scheduler and the kubelets;
3. optionally ``cre-manager`` (``--manager``).

It waits until every node is Ready, then writes ``state.json`` (the kubeconfig, what runs and
the pids) and waits for SIGTERM or SIGINT; on either it stops the processes in reverse order,
removes ``state.json`` and exits 0. When start-up fails it writes ``error.txt`` and exits 1;
``cre cluster up`` prints that file.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from ruamel.yaml import YAML

from cre.api import labels as L
from cre.kube.client import NODES, ApiError, KubeClient, Resource
from cre.testing.cluster.profiles import PROFILES
from cre.testing.procs import REPO, Stack, StackError, wait_until

LOGPROFILES = REPO / "deploy" / "logprofiles"
LOGPROFILE = Resource(L.GROUP, L.VERSION, "logprofiles", namespaced=False, kind="LogProfile")
STATE = "state.json"
ERROR = "error.txt"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m cre.testing.clusterd",
                                description="A detached emulated cluster (cre cluster up).")
    p.add_argument("--state-dir", type=Path, required=True)
    p.add_argument("--name", default="cre")
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--profile", default="aws-h100", choices=sorted(PROFILES))
    p.add_argument("--manager", action="store_true", help="also run cre-manager")
    p.add_argument("--real", action="store_true",
                   help="a real etcd + kube-apiserver instead of the emulator")
    p.add_argument("--time-scale", type=float, default=1.0)
    p.add_argument("--timeout", type=float, default=180.0)
    return p.parse_args(argv)


async def _ready_nodes(kubeconfig: Path) -> int:
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    try:
        raw = await client.list(NODES)
    except ApiError:
        return 0
    finally:
        await client.close()
    ready = 0
    for node in raw.get("items", []):
        conds = (node.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
            ready += 1
    return ready


async def _apply_logprofiles(kubeconfig: Path) -> list[str]:
    """The shipped LogProfiles (``kubectl apply -k deploy/logprofiles``): without them no
    bandwidth is measured and a threshold never passes."""
    names = []
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    try:
        for path in sorted(LOGPROFILES.glob("*.yaml")):
            if path.name == "kustomization.yaml":
                continue
            for doc in YAML(typ="safe", pure=True).load_all(path.read_text(encoding="utf-8")):
                if doc and doc.get("kind") == "LogProfile":
                    await client.create(LOGPROFILE, doc)
                    names.append(doc["metadata"]["name"])
    finally:
        await client.close()
    return names


def _start(args: argparse.Namespace, stack: Stack) -> tuple[dict[str, Any], Any]:
    plane = None
    if args.real:
        from cre.testing.controlplane import plane as real
        from cre.testing.controlplane.build import locate

        binaries = locate()
        if binaries is None:  # never compile Go behind `cre cluster up`'s back (minutes)
            raise StackError("the real control plane is not built here; build it once with "
                             "`python -m cre.testing.controlplane build` (or `make "
                             "controlplane`), then run `cre cluster up --real` again")
        plane = real.start(workdir=args.state_dir / "plane", binaries=binaries,
                           timeout=args.timeout)
        stack.kubeconfig = plane.kubeconfig
        processes = {c.name: c.popen.pid for c in plane.components}
        server = "kube-apiserver + etcd (real, built from the Go modules)"
    else:
        api = stack.start_emulator(timeout=args.timeout)
        processes = {"apiserver": api.pid}
        server = "API emulator (cre.testing.apiserver)"
    logprofiles = anyio.run(_apply_logprofiles, stack.kubeconfig)
    sim = stack.start_cluster(profile=args.profile, nodes=args.nodes,
                              time_scale=args.time_scale)
    processes["cluster"] = sim.pid
    wait_until(lambda: anyio.run(_ready_nodes, stack.kubeconfig) >= args.nodes,
               timeout=args.timeout, interval=0.5, what=f"{args.nodes} Ready nodes",
               alive=sim.check_alive)
    state: dict[str, Any] = {
        "name": args.name, "kubeconfig": str(stack.kubeconfig), "server": server,
        "real": bool(args.real), "profile": args.profile, "nodes": args.nodes,
        "timeScale": args.time_scale, "pid": os.getpid(), "processes": processes,
        "manager": None, "logProfiles": logprofiles,
    }
    if args.manager:
        mgr = stack.start_manager(timeout=args.timeout)
        processes["manager"] = mgr.pid
        state["manager"] = {"health": mgr.health_url, "metrics": mgr.metrics_url}
    return state, plane


class _Stop(Exception):
    """SIGTERM or SIGINT arrived: stop the stack."""


def _on_signal(signum: int, frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    stack = Stack(args.state_dir, keep=True)
    plane = None
    try:
        try:
            state, plane = _start(args, stack)
        except _Stop:
            return 0
        except Exception as exc:
            (args.state_dir / ERROR).write_text(f"{type(exc).__name__}: {exc}\n",
                                                encoding="utf-8")
            return 1
        (args.state_dir / STATE).write_text(json.dumps(state, indent=2), encoding="utf-8")
        while True:
            time.sleep(1.0)
            for proc in stack.procs:
                code = proc.returncode()
                if code is not None:
                    print(f"{proc.name} exited ({code}); see {proc.log_path}", flush=True)
                    (args.state_dir / ERROR).write_text(
                        f"{proc.name} exited ({code}); its log: {proc.log_path}\n",
                        encoding="utf-8")
                    return 1
    except _Stop:
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stack.close()
        if plane is not None:
            plane.stop()
        (args.state_dir / STATE).unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
