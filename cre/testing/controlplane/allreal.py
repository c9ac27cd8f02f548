"""CRE's Job tier on an all-real stack: no simulator anywhere between CRE and the API server.

The oracle tier already runs each upstream piece on its own (the Job controller and scheduler
on KWOK nodes, the real JobSet and Trainer on hand-played pods). This module puts them all
together under CRE: etcd + kube-apiserver + kube-controller-manager (Job, GC, namespace, pod
GC, node lifecycle) + kube-scheduler + KWOK (fake GPU nodes whose pods run and exit as their
annotations say) + the real JobSet v0.11.1 and Trainer v2.2.0 controllers. CRE's Job
controller then creates a TrainJob that the real Trainer turns into a JobSet, the real JobSet
into batch Jobs, the real Job controller into pods, the scheduler binds them to KWOK's nodes
and KWOK runs them.

KWOK pods have no processes and so no logs. The fake nodes therefore carry ``InternalIP
127.0.0.1`` and the port of a :class:`~cre.testing.cluster.kubelet_logs.KubeletLogs` server
in ``status.daemonEndpoints`` (KWOK's node stages here only patch conditions, nodeInfo and phase,
so both fields stay), and :class:`LauncherLogs` writes a launcher's output into that server the
moment its pod appears, long before KWOK terminates it: kube-apiserver's pod-log proxy then
serves it to CRE exactly as a kubelet would.

:class:`Timeline` watches the objects of one run (pods, batch Jobs, JobSets, TrainJobs, CRE
Jobs) and records each visible change with its time, for tests and ``python -m bench
capture --backend allreal``.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Final

import anyio
import attrs

from cre.api import labels
from cre.kube.client import (
    BATCH_JOBS,
    JOBSETS,
    NODES,
    PODS,
    TRAINJOBS,
    ApiError,
    KubeClient,
    Resource,
)
from cre.testing.cluster.kubelet_logs import KubeletLogs
from cre.testing.cluster.profiles import get_profile

from . import kwok as K
from .backend import RealBackend
from .plane import ControlPlane, ControlPlaneError, start
from .workloads import WorkloadControllers
from .workloads import start as start_workloads

CONTROLLERS: Final = "job,garbagecollector,namespace,podgc,nodelifecycle"
LAUNCHER_RJOB: Final = "launcher"
RJOB_LABEL: Final = labels.REPLICATED_JOB_NAME
JOBSET_LABEL: Final = labels.JOBSET_NAME


@attrs.define
class Stack:
    """The running processes of the all-real stack (stopped with :meth:`stop`)."""

    plane: ControlPlane
    workloads: WorkloadControllers

    def stop(self) -> None:
        self.workloads.stop()
        self.plane.stop()


def start_stack(*, crds: Sequence[Any], kwok_binary: Any = None, plane_binaries: Any = None,
                workload_binaries: Any = None, timeout: float = 180.0) -> Stack:
    """Start every process of the stack; raises :class:`~.build.Unavailable` when a binary
    cannot be built here. ``crds``: the CRD sources (the pinned JobSet/Trainer and CRE's)."""
    plane = start(binaries=plane_binaries, crds=list(crds), timeout=timeout)
    try:
        plane.start_controller_manager(controllers=CONTROLLERS)
        plane.start_scheduler()
        K.start_kwok(plane, kwok=kwok_binary)
        workloads = start_workloads(plane, binaries=workload_binaries, timeout=timeout)
    except BaseException:
        plane.stop()
        raise
    return Stack(plane=plane, workloads=workloads)


def log_node(profile: str, index: int, *, name: str, logs: KubeletLogs) -> dict[str, Any]:
    """A KWOK GPU node of ``profile`` named ``name`` whose status sends kube-apiserver's log
    requests to ``logs`` (InternalIP 127.0.0.1, the server's port as the kubelet endpoint)."""
    node = K.gpu_node(get_profile(profile), index)
    node["metadata"]["name"] = name
    node["metadata"]["labels"]["kubernetes.io/hostname"] = name
    node["status"].update(copy.deepcopy(logs.node_status()))
    node["status"]["addresses"].append({"type": "Hostname", "address": name})
    return node


async def register_log_nodes(client: KubeClient, logs: KubeletLogs, names: Sequence[str], *,
                             profile: str = "aws-h100") -> None:
    """Create the KWOK nodes ``names`` pointing at ``logs`` (KWOK then makes them Ready); nodes
    that exist already are pointed at ``logs`` (a new server has a new port)."""
    for index, name in enumerate(names):
        node = log_node(profile, index, name=name, logs=logs)
        status = node.pop("status")
        try:
            await client.create(NODES, node)
        except ApiError as exc:
            if not exc.already_exists:
                raise
            status = copy.deepcopy(logs.node_status())
        # the status is written through its subresource, as a kubelet registers
        await client.patch(NODES, name, {"status": status}, subresource="status")


def node_log_fields(node: dict[str, Any]) -> tuple[list[str], int | None]:
    """The InternalIP addresses and kubelet port a node's status shows now."""
    status = node.get("status") or {}
    ips = [a.get("address", "") for a in status.get("addresses") or []
           if a.get("type") == "InternalIP"]
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    return ips, port


def node_is_ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


@attrs.define
class LauncherLogs:
    """Writes a launcher's container output into the kubelet log server when its pod first
    appears (a pod informer handler): ``text_for(pod)`` gives the text, ``None`` for none."""

    logs: KubeletLogs
    text_for: Callable[[dict[str, Any]], str | None]
    container: str = "node"
    written: dict[str, float] = attrs.field(factory=dict)

    def handler(self, etype: Any, old: dict[str, Any] | None,
                new: dict[str, Any] | None) -> None:
        del etype, old
        if new is None:
            return
        meta = new["metadata"]
        if (meta.get("labels") or {}).get(RJOB_LABEL) != LAUNCHER_RJOB:
            return
        key = f"{meta['namespace']}/{meta['name']}"
        if key in self.written:
            return
        text = self.text_for(new)
        if text is None:
            return
        self.logs.append_log(meta["namespace"], meta["name"], self.container, text)
        self.written[key] = time.monotonic()


@attrs.frozen
class NodeScript:
    """Scripts every pod of a namespace by the node it was bound to, for runs whose pods CRE
    renders itself (a Certification): the first time a pod labelled ``selector`` shows a
    ``spec.nodeName``, ``log_text(node)`` is written into the kubelet log server for its
    ``container`` and the pod is annotated for KWOK to exit ``exit_code(node)`` after
    ``run_seconds`` (KWOK re-reads the annotations on the update). :meth:`run` polls (a
    scoped list) until cancelled."""

    logs: KubeletLogs
    exit_code: Callable[[str], int]
    log_text: Callable[[str], str]
    run_seconds: float = 2.0
    container: str = "node"
    selector: str = labels.JOB
    scripted: dict[str, str] = attrs.field(factory=dict)
    """``namespace/pod`` -> the node it was scripted on."""

    async def run(self, client: KubeClient, namespace: str, *, interval: float = 0.3) -> None:
        while True:
            page = await client.list(PODS, namespace=namespace,
                                     query={"labelSelector": self.selector})
            for pod in page.get("items") or []:
                await self._script(client, pod)
            await anyio.sleep(interval)

    async def _script(self, client: KubeClient, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        node = (pod.get("spec") or {}).get("nodeName")
        key = f"{meta['namespace']}/{meta['name']}"
        if not node or key in self.scripted or meta.get("deletionTimestamp"):
            return
        self.logs.append_log(meta["namespace"], meta["name"], self.container,
                             self.log_text(node))
        patch = {"metadata": {"annotations": K.pod_annotations(
            exit_code=self.exit_code(node), run_seconds=self.run_seconds)}}
        await client.patch(PODS, meta["name"], patch, namespace=meta["namespace"])
        self.scripted[key] = node


@attrs.frozen
class Change:
    """One visible change of one object: ``at`` seconds on the monotonic clock."""

    at: float
    kind: str
    name: str
    state: str


def _true_conditions(obj: dict[str, Any], wanted: Sequence[str]) -> list[str]:
    return [str(c["type"]) for c in (obj.get("status") or {}).get("conditions") or []
            if c.get("status") == "True" and c.get("type") in wanted]


def summary(kind: str, obj: dict[str, Any]) -> str:
    """What of ``obj`` the timeline tracks: phases, terminal conditions, deletion, and for a
    CRE Job whether its failureLog is recorded."""
    parts: list[str] = []
    status = obj.get("status") or {}
    if kind == "Pod":
        parts.append(str(status.get("phase") or "-"))
        if obj.get("spec", {}).get("nodeName"):
            parts.append("bound")
    elif kind == "CREJob":
        parts += _true_conditions(obj, ("Succeeded", "Failed", "Complete"))
        if status.get("failureLog"):
            parts.append("failureLog")
    else:
        parts += _true_conditions(obj, ("Complete", "Completed", "Failed", "Suspended"))
    if obj["metadata"].get("deletionTimestamp"):
        parts.append("deleting")
    return ",".join(parts) or "-"


@attrs.define
class Timeline:
    """Every tracked change of the watched objects, in the order seen (informer handlers)."""

    changes: list[Change] = attrs.field(factory=list)
    _last: dict[tuple[str, str], str] = attrs.field(factory=dict)
    _changed: anyio.Event | None = None

    async def wait_for(self, check: Callable[[Timeline], bool]) -> None:
        """Wait (through the watches) until ``check(self)`` holds."""
        while not check(self):
            self._changed = self._changed or anyio.Event()
            await self._changed.wait()

    def handler(self, kind: str) -> Callable[[Any, dict[str, Any] | None,
                                              dict[str, Any] | None], None]:
        def handle(etype: Any, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
            del etype
            obj = new if new is not None else old
            if obj is None:
                return
            name = f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
            state = "deleted" if new is None else summary(kind, new)
            if self._last.get((kind, name)) != state:
                self._last[(kind, name)] = state
                self.changes.append(Change(at=time.monotonic(), kind=kind, name=name,
                                           state=state))
                if self._changed is not None:
                    self._changed.set()
                    self._changed = None
        return handle

    def first(self, kind: str, test: Callable[[Change], bool]) -> Change | None:
        return next((c for c in self.changes if c.kind == kind and test(c)), None)

    def render(self, since: float) -> list[str]:
        """``+12.345s Kind ns/name: state`` lines relative to ``since``."""
        return [f"+{c.at - since:7.3f}s {c.kind} {c.name}: {c.state}" for c in self.changes]


WATCHED: Final[tuple[tuple[str, str | None], ...]] = (
    ("Pod", JOBSET_LABEL), ("BatchJob", JOBSET_LABEL), ("JobSet", None), ("TrainJob", None),
    ("CREJob", None))


def resource_of(kind: str, *, cre_jobs: Resource) -> Resource:
    table = {"Pod": PODS, "BatchJob": BATCH_JOBS, "JobSet": JOBSETS, "TrainJob": TRAINJOBS,
             "CREJob": cre_jobs}
    if kind not in table:
        raise ControlPlaneError(f"timeline: unknown kind {kind!r}")
    return table[kind]


@contextlib.asynccontextmanager
async def logging_nodes(plane: ControlPlane, names: Sequence[str], *,
                        profile: str = "aws-h100", limit: float = 180.0
                        ) -> AsyncIterator[RealBackend]:
    """Serve kubelet logs for ``plane``, register (or re-point) the KWOK nodes ``names`` at
    them and wait until KWOK made them Ready; yields what the Job harness needs."""
    cert, key = plane.serving_cert
    logs = KubeletLogs(cert=cert, key=key)
    await logs.start()
    client = await KubeClient.from_kubeconfig(str(plane.kubeconfig))
    try:
        await register_log_nodes(client, logs, names, profile=profile)
        last: list[dict[str, Any]] = []
        with anyio.move_on_after(limit):
            while True:
                last = [await client.get(NODES, n) for n in names]
                if all(node_is_ready(n) and node_log_fields(n) == (["127.0.0.1"], logs.port)
                       for n in last):
                    break
                await anyio.sleep(0.2)
        bad = [n["metadata"]["name"] for n in last
               if not (node_is_ready(n) and node_log_fields(n) == (["127.0.0.1"], logs.port))]
        if bad or not last:
            raise ControlPlaneError(
                f"nodes {bad or list(names)}: not Ready with InternalIP 127.0.0.1 and kubelet "
                f"port {logs.port} within {limit:g}s: "
                f"{[node_log_fields(n) for n in last]}")
        yield RealBackend(plane=plane, logs=logs)
    finally:
        await client.close()
        await logs.close()
