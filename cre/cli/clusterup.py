"""``cre cluster up|down|info``: a local cluster in one command, and what any cluster offers CRE.

``up`` starts ``python -m cre.testing.clusterd`` as a detached process (the test kit is a higher
layer than the CLI, so it is run, never imported) in a state directory,
``$XDG_CACHE_HOME/cre/cluster/<name>`` (``~/.cache/...``), waits until it wrote ``state.json``
(every node Ready) or failed, and prints how to use the kubeconfig. ``down`` sends that process
SIGTERM (it stops what it started, in reverse order) and removes the directory. ``info`` reads
the nodes of any cluster and says what CRE would find there: platform, GPU architecture, GPU
nodes and why some are not eligible, topology labels, and the catalog entries it can run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cre.api.common import TargetSpec
from cre.api.conditions import WorkflowReason
from cre.api.labels import GPU_PRESENT, GPU_PRODUCT
from cre.catalog import Catalog
from cre.cli.cluster import Connection, api_failure, connect
from cre.cli.exitcodes import CliError, ExitCode
from cre.core.common.projections import node_view
from cre.core.workflow.discovery import DiscoveryFailure, discover, waiting_detail
from cre.kube.client import NODES, ApiError

STATE = "state.json"
ERROR = "error.txt"
LOG = "supervisor.log"
#: Node labels that describe where a node sits; ``info`` counts their values.
TOPOLOGY_LABELS = ("topology.kubernetes.io/region", "topology.kubernetes.io/zone",
                   "nvidia.com/gpu.clique", "topology.k8s.aws/network-node-layer-1",
                   "cre.dev/sim-rack")


def state_root() -> Path:
    """Where local clusters keep their state: ``$XDG_CACHE_HOME/cre/cluster``."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(cache) / "cre" / "cluster"


def state_dir(name: str) -> Path:
    return state_root() / name


def read_state(name: str) -> dict[str, Any] | None:
    """The ``state.json`` of cluster ``name``; None when it is not up."""
    path = state_dir(name) / STATE
    try:
        state: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def up(*, name: str, nodes: int, profile: str, manager: bool, real: bool, time_scale: float,
       timeout: float) -> list[str]:
    """Start cluster ``name`` and wait until it is up; returns the lines to print."""
    if nodes < 1:
        raise CliError(ExitCode.USAGE, f"--nodes {nodes}: must be at least 1")
    where = state_dir(name)
    existing = read_state(name)
    if existing is not None and _alive(int(existing.get("pid", 0))):
        raise CliError(ExitCode.USAGE, f'cluster "{name}" is already up (kubeconfig '
                       f'{existing["kubeconfig"]}); stop it with: cre cluster down --name {name}')
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    argv = [sys.executable, "-m", "cre.testing.clusterd", "--state-dir", str(where),
            "--name", name, "--nodes", str(nodes), "--profile", profile,
            "--time-scale", str(time_scale), "--timeout", str(timeout)]
    if manager:
        argv.append("--manager")
    if real:
        argv.append("--real")
    with (where / LOG).open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout + 30
    state = None
    while state is None:
        state = read_state(name)
        if state is not None:
            break
        code = proc.poll()
        if code is not None or time.monotonic() > deadline:
            if code is None:
                proc.terminate()
                proc.wait(30)
            why = _failure(where)
            if code == 2:  # the supervisor's own usage error (e.g. an unknown --profile)
                raise CliError(ExitCode.USAGE, why.split(": error: ", 1)[-1])
            raise CliError(ExitCode.UNREACHABLE, f'cluster "{name}" did not come up: {why} '
                           f"(logs in {where})")
        time.sleep(0.2)
    kubeconfig = state["kubeconfig"]
    lines = [
        f'Cluster "{name}" is up: {state["nodes"]} {state["profile"]} nodes Ready, '
        f'{state["server"]}' + (", cre-manager" if state.get("manager") else "") + ".",
        f"kubeconfig: {kubeconfig}",
        "",
        "Use it:",
        f"  export KUBECONFIG={kubeconfig}",
        "  kubectl get nodes",
        "  cre cluster info",
        "  cre run certification.yaml --wait",
    ]
    if not state.get("manager"):
        lines.append(f"  cre-manager --kubeconfig {kubeconfig}   # no manager runs "
                     "(cre cluster up --manager starts one)")
    lines += ["Stop it:", f"  cre cluster down --name {name}" if name != "cre"
              else "  cre cluster down"]
    return lines


def _failure(where: Path) -> str:
    for path in (where / ERROR, where / LOG):
        try:
            text = path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if text:
            return text.splitlines()[-1]
    return "the supervisor exited without saying why"


def down(*, name: str, timeout: float = 60.0) -> str:
    """Stop cluster ``name`` and remove its state directory; returns the line to print."""
    where = state_dir(name)
    if not where.is_dir():
        known = sorted(p.name for p in state_root().iterdir()) if state_root().is_dir() else []
        raise CliError(ExitCode.NOT_FOUND, f'no cluster "{name}" (known: '
                       f'{", ".join(known) or "none"})')
    state = read_state(name)
    stopped: Sequence[str] = ()
    if state is not None:
        pid = int(state["pid"])
        if _alive(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        stopped = list(state.get("processes", {}))
    shutil.rmtree(where, ignore_errors=True)
    what = f" ({', '.join(stopped)})" if stopped else ""
    return f'Cluster "{name}" deleted{what}.'


async def read_nodes(conn: Connection) -> tuple[str, list[dict[str, Any]]]:
    """The API server's address and every Node."""
    client = await connect(conn)
    try:
        raw = await client.list(NODES)
    except ApiError as exc:
        raise api_failure(exc, host=client.host, what="list nodes") from None
    finally:
        await client.close()
    items: list[dict[str, Any]] = raw.get("items", [])
    return client.host, items


def _counted(values: Sequence[str]) -> str:
    counts = Counter(values)
    return ", ".join(f"{v} ({n})" for v, n in sorted(counts.items()))


def cluster_facts(*, host: str, nodes: Sequence[Mapping[str, Any]],
                  catalog: Catalog) -> list[tuple[str, str]]:
    """What ``cre cluster info`` prints, as (label, value) rows."""
    views = [node_view(dict(n)) for n in nodes]
    gpu = [v for v in views if v.label(GPU_PRESENT) == "true"]
    rows = [("API server", host),
            ("Nodes", f"{len(views)} ({len(gpu)} with {GPU_PRESENT}=true)")]
    if not gpu:
        rows.append(("CRE would run", "nothing: no GPU node (CRE certifies nodes labelled "
                     f"{GPU_PRESENT}=true by GPU Feature Discovery)"))
        return rows
    ready = sum(1 for v in gpu if v.ready == "True")
    cordoned = sum(1 for v in gpu if v.unschedulable)
    rows.append(("GPU nodes", f"{ready} Ready, {len(gpu) - ready} not Ready, "
                 f"{cordoned} cordoned"))
    rows.append(("GPU products", _counted([v.label(GPU_PRODUCT) or "(unlabelled)"
                                           for v in gpu])))
    rows.append(("GPUs per node", _counted([str(v.allocatable_gpus) for v in gpu])))
    topology = [f"{key}: {_counted(values)}" for key in TOPOLOGY_LABELS
                if (values := [value for v in gpu if (value := v.label(key))])]
    rows.append(("Topology", "; ".join(topology) or "no topology labels"))
    target = TargetSpec(node_selector={GPU_PRESENT: "true"})
    found = discover(target=target, nodes=gpu)
    if isinstance(found, DiscoveryFailure):
        if found.reason == WorkflowReason.NODE_DISCOVERY_ERROR:  # no eligible node (yet)
            why = waiting_detail(found, target=target, nodes=gpu)
            rows.append(("CRE would run", f"nothing yet: {why}"))
        else:  # e.g. nodes of several platforms
            rows.append(("CRE would run", f"nothing: {found.message}"))
        return rows
    rows.append(("Platform", found.platform))
    rows.append(("Architecture", found.architecture))
    rows.append(("Eligible nodes", f"{len(found.nodes)}"
                 + (f" ({found.summary})" if found.excluded else "")))
    platform = catalog.platforms.get(found.platform)
    if platform is None or found.architecture not in platform.architectures:
        rows.append(("CRE would run", f"nothing: the catalog does not support "
                     f"{found.platform}/{found.architecture}"))
        return rows
    entries = [e.name for e in catalog.entries.values()
               if e.platforms is None or found.platform in e.platforms]
    rows.append(("CRE would run", f"{len(entries)} catalog entries on {found.platform}/"
                 f"{found.architecture}: {', '.join(sorted(entries))}"))
    return rows
